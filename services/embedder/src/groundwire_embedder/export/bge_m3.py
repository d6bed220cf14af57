"""Export BAAI/bge-m3 (dense + learned sparse + ColBERT) to one served ONNX graph.

The source is a folder in FlagEmbedding's layout: an XLM-RoBERTa checkpoint
(``config.json``, ``*.safetensors`` or ``pytorch_model.bin``), the tokenizer files and the
two heads FlagEmbedding saves beside it, ``colbert_linear.pt`` and ``sparse_linear.pt``.
Without ``source`` the checkpoint is downloaded from the Hugging Face hub (where the
internet is reachable; nothing in the tests or the offline profile relies on that).

The graph runs the encoder once and computes the three heads the way FlagEmbedding's
``EncoderOnlyEmbedderM3ModelForInference.forward`` does with ``normalize_embeddings``:

* ``dense``: the CLS state, L2-normalised, [batch, hidden];
* ``sparse_weights``: ``relu(sparse_linear(last_hidden))``, one weight per token,
  [batch, sequence];
* ``colbert_vectors``: ``colbert_linear(last_hidden[:, 1:])`` masked by the attention mask,
  then L2-normalised, [batch, sequence - 1, colbert_dim].

Batch and sequence axes are dynamic (the upstream ONNX export fixes the batch size). The
per-text post-processing FlagEmbedding does in Python (highest weight per token id,
special tokens dropped; ColBERT rows of the real tokens) runs in the server, in numpy
(``groundwire_embedder.models.onnx_backend``). torch and transformers are imported inside
``build_bge_m3`` only.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from groundwire_core.errors import BackendFailure, InvalidInput, NotFound, Unavailable
from groundwire_core.onnx_models import export_traced
from groundwire_embedder.export import BuildReport, staging_dir
from groundwire_embedder.export.cost_model import BGE_M3, COST_MODEL_ID, EncoderShape, random_bge_m3
from groundwire_embedder.export.quantize import cosine_stats, quantize_checked, save_onnx
from groundwire_embedder.export.sample_text import SAMPLE_SENTENCES
from groundwire_embedder.models.manifest import ModelManifest
from groundwire_embedder.models.onnx_backend import (
    COLBERT_OUTPUT,
    DENSE_OUTPUT,
    SPARSE_OUTPUT,
    EncodedBatch,
    OnnxEncoder,
)

PROFILE = "bge-m3"
HUB_ID = "BAAI/bge-m3"
OPSET = 17
INPUT_NAMES = ("input_ids", "attention_mask")
OUTPUT_NAMES = (DENSE_OUTPUT, SPARSE_OUTPUT, COLBERT_OUTPUT)
HEAD_FILES = ("colbert_linear.pt", "sparse_linear.pt")
# A build whose fp32 graph drifts further than this from PyTorch is refused.
MAX_ABS_DIFF_LIMIT = 1e-3
# An int8 build whose dense vectors drift further than this from fp32 is refused.
INT8_MIN_COSINE_MEAN = 0.98
# Graphs larger than this keep their weights in one external file (``model.onnx.data``):
# a protobuf file cannot exceed 2 GiB, and bge-m3 in fp32 is ~2.2 GB.
EXTERNAL_DATA_BYTES = 1_500_000_000
# The tokens FlagEmbedding leaves out of the lexical weights.
SPARSE_IGNORED_TOKENS = ("cls_token", "eos_token", "pad_token", "unk_token")
PARITY_COUNT = 16


def build_bge_m3(
    out_dir: Path,
    *,
    int8: bool = False,
    source: Path | None = None,
    log: Callable[[str], None] = print,
    external_data: bool | None = None,
    int8_min_cosine: float = INT8_MIN_COSINE_MEAN,
    max_tokens: int | None = None,
    random_weights: bool = False,
    cost_shape: EncoderShape = BGE_M3,
    cost_model_id: str = "",
) -> BuildReport:
    """Export a BGE-M3 checkpoint into ``out_dir`` (atomically), fp32 or int8.

    ``external_data`` forces (True) or forbids (False) a separate weights file; by default
    only graphs over ~1.5 GB get one. ``max_tokens`` caps the served input length below
    the model's own limit (8192 for bge-m3: attention over 8192 tokens needs GBs of memory
    per text on CPU). Raises NotFound (source folder or files missing),
    Unavailable (no source given and the hub cannot be reached), InvalidInput (the export
    extra is missing, the files do not load) and BackendFailure (the graph disagrees with
    PyTorch, or int8 drifts further than ``int8_min_cosine`` from fp32).

    ``random_weights`` builds a cost model instead (``cost_model``: the real sizes of
    ``cost_shape``, random weights, no download; its int8 drift is printed, not gated,
    since random weights have no quality to keep).
    """
    started = time.perf_counter()
    try:
        import torch
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging
    except ImportError as exc:
        raise InvalidInput(
            "building models needs the export extra: pip install 'groundwire-embedder[export]'"
        ) from exc

    if random_weights:
        if source is not None:
            raise InvalidInput("--random-weights builds its own checkpoint: drop --source")
        with tempfile.TemporaryDirectory(prefix="groundwire-cost-model-") as checkpoint:
            log(f"building a random-weight {PROFILE} checkpoint ({cost_shape})")
            return build_bge_m3(
                out_dir,
                int8=int8,
                source=random_bge_m3(Path(checkpoint), cost_shape),
                log=log,
                external_data=external_data,
                int8_min_cosine=-1.0,
                max_tokens=max_tokens,
                cost_model_id=COST_MODEL_ID,
            )
    src, model_id = _resolve_source(source)
    if cost_model_id:
        model_id = cost_model_id
    out_dir = Path(out_dir).absolute()
    log(f"building {PROFILE} from {src} into {out_dir}{' (int8)' if int8 else ''}")

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call,unused-ignore]
    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call,unused-ignore]
    # Eager attention traces to plain MatMul/Softmax; transformers' default SDPA path
    # adds mask ops (IsNaN, Where) that ORT runs slower: ~10 % on 256-token fp32 batches
    # and ~25 % int8 (MiniLM, measured on 2 cores).
    model = AutoModel.from_pretrained(
        str(src), dtype=torch.float32, attn_implementation="eager"
    ).eval()
    hidden = int(model.config.hidden_size)
    colbert, sparse = _load_heads(torch, src, hidden)
    hf_tokenizer = AutoTokenizer.from_pretrained(str(src))
    limit = _max_tokens(model.config, hf_tokenizer)
    if max_tokens is not None and not 2 < max_tokens:
        raise InvalidInput(f"max_tokens must be above 2, not {max_tokens}")
    max_tokens = min(limit, max_tokens) if max_tokens is not None else limit
    ignored_ids = _sparse_ignored_ids(hf_tokenizer)

    with (
        staging_dir(out_dir) as stage,
        tempfile.TemporaryDirectory(
            prefix=f".{out_dir.name}.scratch-", dir=out_dir.parent
        ) as scratch_name,
    ):
        scratch = Path(scratch_name)
        tokenizer = _served_tokenizer(src, hf_tokenizer, max_tokens)
        tokenizer.save(str(stage / "tokenizer.json"))
        _check_tokenizers_agree(tokenizer, hf_tokenizer, max_tokens)

        wrapper = _heads_module(torch, model, colbert, sparse)
        t0 = time.perf_counter()
        exported = scratch / "export" / "model.onnx"
        exported.parent.mkdir()
        _export(torch, wrapper, tokenizer, exported)
        size = save_onnx(
            exported,
            stage / "model.onnx",
            external_data=external_data,
            external_data_bytes=EXTERNAL_DATA_BYTES,
        )
        shutil.rmtree(exported.parent)
        log(
            f"exported ONNX (opset {OPSET}, {size / 1e6:.1f} MB) in {time.perf_counter() - t0:.1f}s"
        )

        manifest = ModelManifest(
            profile=PROFILE,
            model_id=model_id,
            pooling="cls",
            normalize=True,
            dense_dims=hidden,
            max_tokens=max_tokens,
            outputs=("dense", "sparse", "multi_vector"),
            input_names=INPUT_NAMES,
            multi_vector_dims=int(colbert.out_features),
            sparse_ignored_ids=ignored_ids,
            cost_model=bool(cost_model_id),
        )
        manifest.save(stage)
        for extra in ("config.json", "README.md"):
            if (src / extra).is_file():  # provenance, not read at run time
                shutil.copy2(src / extra, stage / f"source-{extra}")

        fp32 = OnnxEncoder(stage, serve_cost_model=manifest.cost_model)
        fp32.load()
        parity = list(SAMPLE_SENTENCES[:PARITY_COUNT])
        batch = fp32.tokenize(parity)
        diffs = _compare_with_torch(torch, wrapper, fp32, batch)
        max_abs_diff = max(diffs.values())
        log(
            f"fp32 ONNX vs PyTorch on {len(parity)} sentences: max abs diff "
            + ", ".join(f"{k} {v:.2e}" for k, v in diffs.items())
        )
        if not max_abs_diff <= MAX_ABS_DIFF_LIMIT:
            raise BackendFailure(
                f"the exported {PROFILE} graph disagrees with PyTorch "
                f"(max abs diff {max_abs_diff:.2e} > {MAX_ABS_DIFF_LIMIT:.0e}); not installed"
            )

        cos_mean: float | None = None
        cos_min: float | None = None
        if int8:
            texts = list(SAMPLE_SENTENCES)
            reference = fp32.encode(texts)
            del fp32  # release the session before the file moves
            quantized, cos_mean, cos_min = quantize_checked(
                stage,
                scratch,
                manifest,
                texts,
                reference.dense,
                min_cosine_mean=int8_min_cosine,
                log=log,
            )
            assert quantized.multi_vector is not None and reference.multi_vector is not None
            colbert_mean, colbert_min = cosine_stats(
                np.concatenate(quantized.multi_vector), np.concatenate(reference.multi_vector)
            )
            log(f"int8 vs fp32 ColBERT cosine: mean {colbert_mean:.4f}, min {colbert_min:.4f}")

    return BuildReport.finished(
        PROFILE,
        out_dir,
        started,
        log,
        max_abs_diff=max_abs_diff,
        int8=int8,
        cosine=(cos_mean, cos_min),
    )


# -- the source --------------------------------------------------------------------------


def _resolve_source(source: Path | None) -> tuple[Path, str]:
    """The checkpoint folder and the model id to report; downloads when ``source`` is None."""
    if source is None:
        return _download(), HUB_ID
    src = Path(source)
    if not src.is_dir():
        raise NotFound(f"{PROFILE} source directory {src} does not exist")
    missing = [name for name in ("config.json", *HEAD_FILES) if not (src / name).is_file()]
    if not any(src.glob("*.safetensors")) and not (src / "pytorch_model.bin").is_file():
        missing.append("model weights (*.safetensors or pytorch_model.bin)")
    if not (src / "tokenizer.json").is_file() and not (src / "sentencepiece.bpe.model").is_file():
        missing.append("a tokenizer (tokenizer.json or sentencepiece.bpe.model)")
    if missing:
        raise NotFound(
            f"{PROFILE} source directory {src} lacks {', '.join(missing)} "
            "(expected FlagEmbedding's layout, as in the BAAI/bge-m3 repository)"
        )
    return src, src.name


def _download() -> Path:
    """BAAI/bge-m3 from the Hugging Face hub (the weights, heads and tokenizer only)."""
    try:
        from huggingface_hub import snapshot_download

        path = snapshot_download(
            repo_id=HUB_ID,
            allow_patterns=["*.json", "*.safetensors", "pytorch_model.bin", "*.pt", "*.model"],
            ignore_patterns=["onnx/*", "imgs/*"],
        )
    except Exception as exc:  # network, auth and hub errors alike
        raise Unavailable(
            f"could not download {HUB_ID} from the Hugging Face hub ({type(exc).__name__}); "
            "pass --source DIR with a local copy in FlagEmbedding's layout"
        ) from exc
    return Path(path)


def _load_heads(torch: Any, src: Path, hidden: int) -> tuple[Any, Any]:
    """FlagEmbedding's ColBERT and sparse heads (``torch.nn.Linear``) from their .pt files."""
    heads = []
    for name in HEAD_FILES:
        try:
            state = torch.load(src / name, map_location="cpu", weights_only=True)
            weight = state["weight"]
            linear = torch.nn.Linear(hidden, int(weight.shape[0]))
            linear.load_state_dict(state)
        except Exception as exc:  # pickle, key and shape errors alike
            raise InvalidInput(
                f"{src / name} is not a Linear head over {hidden}-dim states ({type(exc).__name__})"
            ) from exc
        heads.append(linear.eval())
    colbert, sparse = heads
    if sparse.out_features != 1:
        raise InvalidInput(f"{src / 'sparse_linear.pt'} must map states to one weight")
    return colbert, sparse


def _max_tokens(config: Any, hf_tokenizer: Any) -> int:
    """Longest input: XLM-R positions start after the padding index, so 8194 -> 8192."""
    positions = int(config.max_position_embeddings)
    offset = int(getattr(config, "pad_token_id", None) or 0) + 1
    limit = positions - offset if config.model_type in ("xlm-roberta", "roberta") else positions
    declared = getattr(hf_tokenizer, "model_max_length", None)
    if isinstance(declared, int) and 0 < declared < 1_000_000:
        limit = min(limit, declared)
    return limit


def _sparse_ignored_ids(hf_tokenizer: Any) -> tuple[int, ...]:
    """The ids FlagEmbedding drops from lexical weights (``_process_token_weights``)."""
    ids = set()
    for key in SPARSE_IGNORED_TOKENS:
        token = hf_tokenizer.special_tokens_map.get(key)
        if token is not None:
            ids.add(int(hf_tokenizer.convert_tokens_to_ids(token)))
    if not ids:
        raise InvalidInput("the tokenizer declares none of cls, eos, pad and unk tokens")
    return tuple(sorted(ids))


def _served_tokenizer(src: Path, hf_tokenizer: Any, max_tokens: int) -> Tokenizer:
    """The checkpoint's tokenizer.json (or one converted by transformers), unpadded."""
    path = src / "tokenizer.json"
    try:
        if path.is_file():
            tokenizer = Tokenizer.from_file(str(path))
        else:
            tokenizer = Tokenizer.from_str(hf_tokenizer.backend_tokenizer.to_str())
    except Exception as exc:  # tokenizers raises a bare Exception
        raise InvalidInput(f"{path} is not a loadable tokenizer") from exc
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_tokens)
    return tokenizer


def _check_tokenizers_agree(tokenizer: Tokenizer, hf_tokenizer: Any, max_tokens: int) -> None:
    """The served tokenizer must give FlagEmbedding's token ids, or nothing else can match."""
    texts = [*SAMPLE_SENTENCES[:PARITY_COUNT], "", "  spaced   out  ", "naïve café"]
    ours = [e.ids for e in tokenizer.encode_batch(texts)]
    theirs = hf_tokenizer(texts, truncation=True, max_length=max_tokens)["input_ids"]
    if ours != [list(t) for t in theirs]:
        raise BackendFailure(
            "the exported tokenizer.json tokenizes differently from the checkpoint's "
            "transformers tokenizer; not installed"
        )


# -- the graph ---------------------------------------------------------------------------


def _heads_module(torch: Any, model: Any, colbert: Any, sparse: Any) -> Any:
    """The encoder plus BGE-M3's three heads as one module (FlagEmbedding's forward)."""
    functional = torch.nn.functional

    class M3Heads(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model
            self.colbert_linear = colbert
            self.sparse_linear = sparse

        def forward(self, input_ids: Any, attention_mask: Any) -> tuple[Any, Any, Any]:
            hidden = self.model(
                input_ids=input_ids, attention_mask=attention_mask
            ).last_hidden_state
            dense = functional.normalize(hidden[:, 0], dim=-1)
            weights = torch.relu(self.sparse_linear(hidden)).squeeze(-1)
            vectors = self.colbert_linear(hidden[:, 1:])
            vectors = vectors * attention_mask[:, 1:, None].to(vectors.dtype)
            vectors = functional.normalize(vectors, dim=-1)
            return dense, weights, vectors

    return M3Heads().eval()


def _export(torch: Any, wrapper: Any, tokenizer: Tokenizer, path: Path) -> None:
    """Trace ``wrapper`` to ONNX (TorchScript exporter) with dynamic batch and sequence."""
    # The dummy batch must contain padding: traced mask code must not be specialised to
    # an all-ones mask.
    ids, mask = _pad(tokenizer, ["A short one.", "A somewhat longer sentence, with more tokens."])
    axes: dict[str, dict[int, str]] = {name: {0: "batch", 1: "sequence"} for name in INPUT_NAMES}
    axes[DENSE_OUTPUT] = {0: "batch"}
    axes[SPARSE_OUTPUT] = {0: "batch", 1: "sequence"}
    axes[COLBERT_OUTPUT] = {0: "batch", 1: "sequence_minus_cls"}
    export_traced(
        wrapper,
        (torch.from_numpy(ids), torch.from_numpy(mask)),
        path,
        input_names=INPUT_NAMES,
        output_names=OUTPUT_NAMES,
        dynamic_axes=axes,
        opset=OPSET,
    )


def _pad(tokenizer: Tokenizer, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    encodings = tokenizer.encode_batch(list(texts))
    length = max(len(e.ids) for e in encodings)
    pad_id = tokenizer.token_to_id("<pad>") or 0
    ids = np.full((len(texts), length), pad_id, dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, enc in enumerate(encodings):
        ids[row, : len(enc.ids)] = enc.ids
        mask[row, : len(enc.ids)] = 1
    return ids, mask


def _compare_with_torch(
    torch: Any, wrapper: Any, encoder: OnnxEncoder, batch: EncodedBatch
) -> dict[str, float]:
    """Max abs diff per head between the ONNX graph and PyTorch on the real positions."""
    onnx_out = encoder.infer(batch)
    with torch.no_grad():
        dense, weights, vectors = (
            t.numpy()
            for t in wrapper(
                torch.from_numpy(batch.input_ids), torch.from_numpy(batch.attention_mask)
            )
        )
    mask = batch.attention_mask.astype(bool)
    return {
        "dense": float(np.abs(onnx_out[DENSE_OUTPUT] - dense).max()),
        "sparse": float(np.abs(onnx_out[SPARSE_OUTPUT] - weights)[mask].max()),
        "colbert": float(np.abs(onnx_out[COLBERT_OUTPUT] - vectors)[mask[:, 1:]].max()),
    }
