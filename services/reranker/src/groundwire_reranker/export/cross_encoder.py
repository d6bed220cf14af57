"""Export a ``*ForSequenceClassification`` cross-encoder (one label) to a served ONNX folder.

Any checkpoint transformers loads with ``AutoModelForSequenceClassification`` works:
XLM-RoBERTa (BAAI/bge-reranker-v2-m3), BERT (the ms-marco MiniLM cross-encoders) and
their relatives. The checkpoint comes from a local folder (``source``) or, where the
internet is reachable, from the hub. The graph is traced with the TorchScript exporter
(``dynamo=False``: no onnxscript needed, and faster in ONNX Runtime here) with dynamic
batch and sequence axes, and it takes exactly the inputs the model's tokenizer produces
(``token_type_ids`` for BERT, not for XLM-RoBERTa). The build compares the ONNX logits
with PyTorch's on sample pairs and refuses a graph that drifts; int8 builds print what
quantization costs the scores. torch and transformers are imported inside the builder
only: importing this module stays cheap and torch-free.

The ``nli`` profile exports an entailment model the same way: three labels, named by the
checkpoint's ``id2label`` (entailment / neutral / contradiction, any case and order,
recorded in the manifest's ``labels``); the parity check compares all three logits.
"""

from __future__ import annotations

import functools
import inspect
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from groundwire_core.errors import BackendFailure, InvalidInput, NotFound, Unavailable
from groundwire_core.onnx_models import export_traced, quantize_in_place, save_onnx
from groundwire_reranker.export import BuildReport, staging_dir
from groundwire_reranker.export.cost_model import (
    COST_SHAPES,
    CrossEncoderShape,
    random_checkpoint,
)
from groundwire_reranker.export.quantize import score_drift
from groundwire_reranker.models.cross_encoder import LOGITS_OUTPUT, OnnxCrossEncoder, sigmoid
from groundwire_reranker.models.manifest import KNOWN_INPUTS, NLI_LABELS, CrossEncoderManifest
from groundwire_reranker.models.nli import OnnxNliModel, softmax

OPSET = 17
# A build whose fp32 logits drift further than this from PyTorch is refused.
MAX_ABS_DIFF_LIMIT = 1e-3
# An int8 build whose scores drift further than this (mean over the sample pairs) from
# fp32 is refused: it would reorder candidates the fp32 model tells apart.
INT8_MAX_MEAN_SCORE_DIFF = 0.05
# FlagEmbedding's reranker lets the query take at most 3/4 of the pair.
QUERY_SHARE = 0.75
# An NLI hypothesis (one claim) may take half the pair; the premise gets the rest.
HYPOTHESIS_SHARE = 0.5
# id2label names of the NLI labels, lower-cased, by prefix (MNLI heads spell them
# "ENTAILMENT", "entailment", "Entailment"; a few "contradict").
_LABEL_PREFIXES = {"entail": "entailment", "neutral": "neutral", "contradict": "contradiction"}


@dataclass(frozen=True)
class ProfileSpec:
    """A named cross-encoder: where it comes from and how long its pairs may be."""

    name: str
    hub_id: str
    max_tokens: int
    about: str
    nli: bool = False  # three labels (entailment/neutral/contradiction), not one
    cost_model: bool = False  # a random-weight build of the real sizes (cost_model.py)

    def builder(self) -> Callable[..., BuildReport]:
        return functools.partial(build_cross_encoder, self)


PROFILE_SPECS: dict[str, ProfileSpec] = {
    spec.name: spec
    for spec in (
        ProfileSpec(
            name="bge-reranker-v2-m3",
            hub_id="BAAI/bge-reranker-v2-m3",
            # FlagEmbedding's default; the model takes up to 8192 at much higher cost.
            max_tokens=512,
            about="multilingual XLM-RoBERTa cross-encoder",
        ),
        ProfileSpec(
            name="cross-encoder",
            hub_id="cross-encoder/ms-marco-MiniLM-L6-v2",
            max_tokens=512,
            about="any *ForSequenceClassification with one label (default: ms-marco MiniLM)",
        ),
        ProfileSpec(
            name="nli",
            hub_id="cross-encoder/nli-deberta-v3-xsmall",
            max_tokens=512,
            about="any *ForSequenceClassification with entailment/neutral/contradiction "
            "labels (default: a DeBERTa-v3 NLI cross-encoder)",
            nli=True,
        ),
    )
}

# Our own (query, passage) pairs: the parity and quantization checks. Varied lengths, and
# one passage longer than any model's pair budget, so truncation is in the checked path.
SAMPLE_PAIRS: tuple[tuple[str, str], ...] = (
    ("how do I reset my password", "Open Settings, choose Security and click Reset password."),
    ("how do I reset my password", "The cafeteria serves soup on Tuesdays and Thursdays."),
    ("how do I reset my password", "Passwords expire every ninety days unless SSO is enabled."),
    ("what limits requests per user", "Each API key may send sixty requests per minute."),
    ("what limits requests per user", "Rate limits are enforced in Redis with a token bucket."),
    ("what limits requests per user", "The mitochondria produce most of the cell's energy."),
    ("why did the search fall back", "When the reranker is down the fused order is returned."),
    ("why did the search fall back", "Bake the bread at two hundred degrees for forty minutes."),
    ("how are documents chunked", "Markdown is split on headings, then into 800-token chunks."),
    ("how are documents chunked", "Chunks overlap by fifty tokens so no sentence is orphaned."),
    ("how are documents chunked", "The treaty was signed in 1648, ending decades of war."),
    ("where are traces exported", "Set OTEL_EXPORTER to otlp and point it at a collector."),
    ("where are traces exported", "Hi!"),
    ("where are traces exported", ""),
    ("Quelle est la capitale de la France ?", "Paris est la capitale de la France."),
    ("Quelle est la capitale de la France ?", "Berlin is the capital of Germany."),
    (
        "which port does the reranker listen on",
        "The reranker listens on port 50052 unless GROUNDWIRE_RERANKER_PORT says otherwise. "
        * 80,
    ),
    (
        "a deliberately long query that goes on about ports, services, limits, queues "
        "and every other knob the cluster has, " * 12,
        "The embedder listens on port 50051.",
    ),
)


def build_cross_encoder(
    spec: ProfileSpec,
    out_dir: Path,
    *,
    int8: bool = False,
    source: Path | None = None,
    log: Callable[[str], None] = print,
    model_id: str | None = None,
    max_tokens: int | None = None,
    random_weights: bool = False,
    cost_shape: CrossEncoderShape | None = None,
) -> BuildReport:
    """Export ``spec``'s checkpoint (fp32, or int8 served as ``model.onnx``), atomically.

    ``random_weights`` builds a cost model instead: ``spec``'s real architecture and
    sizes (``cost_model.COST_SHAPES``, or ``cost_shape``) with random weights, no
    download, marked ``cost_model`` in the manifest; int8 drift is printed, not gated.

    Raises InvalidInput (not a one-label sequence classifier, no fast tokenizer),
    NotFound (incomplete source folder), Unavailable (hub download failed) and
    BackendFailure (the graph disagrees with PyTorch, or int8 drifts too far).
    """
    started = time.perf_counter()
    try:
        import torch
        from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer
        from transformers.utils import logging as hf_logging
    except ImportError as exc:
        raise InvalidInput(
            "building models needs the export extra: "
            "pip install -c constraints.txt -e 'services/reranker[export]'"
        ) from exc

    if random_weights:
        if source is not None:
            raise InvalidInput("--random-weights builds its own checkpoint: drop --source")
        shape = cost_shape or COST_SHAPES[spec.name]
        head: tuple[str, ...] = NLI_LABELS if spec.nli else ()
        sentences = [text for pair in SAMPLE_PAIRS for text in pair if text] * 20
        with random_checkpoint(shape, sentences, head) as checkpoint:
            log(f"building a random-weight {spec.name} checkpoint ({shape})")
            return build_cross_encoder(
                replace(spec, cost_model=True),
                out_dir,
                int8=int8,
                source=checkpoint,
                log=log,
                model_id=f"cost-model:{spec.hub_id}",
                max_tokens=max_tokens,
            )
    src, downloaded = _resolve_source(spec, source)
    recorded_id = model_id or (spec.hub_id if downloaded else src.name)
    out_dir = Path(out_dir).absolute()
    suffix = " (int8)" if int8 else ""
    log(f"building {spec.name} ({recorded_id}) from {src} into {out_dir}{suffix}")

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call,unused-ignore]
    config = AutoConfig.from_pretrained(str(src))
    labels = _check_classifier(config, src, nli=spec.nli)
    try:
        hf_tokenizer = AutoTokenizer.from_pretrained(str(src))
    except Exception as exc:  # transformers raises many types for a broken tokenizer
        raise InvalidInput(f"{src} has no loadable tokenizer ({type(exc).__name__})") from exc
    if not getattr(hf_tokenizer, "is_fast", False):
        raise InvalidInput(
            f"{src}: the reranker serves a fast (tokenizers) tokenizer, and none could be "
            "built for this checkpoint"
        )
    # Eager attention traces to plain MatMul/Softmax; transformers' default SDPA path
    # adds mask ops (IsNaN, Where) that ORT runs slower: ~10 % on 256-token fp32 batches
    # and ~25 % int8 (MiniLM, measured on 2 cores).
    model = AutoModelForSequenceClassification.from_pretrained(
        str(src), dtype=torch.float32, attn_implementation="eager"
    )
    model.eval()

    pair_tokens = _max_tokens(spec, config, hf_tokenizer, max_tokens)
    input_names = _input_names(model, hf_tokenizer)
    pad_id = _pad_id(hf_tokenizer, config)

    with (
        staging_dir(out_dir) as stage,
        tempfile.TemporaryDirectory(
            prefix=f".{out_dir.name}.scratch-", dir=out_dir.parent
        ) as scratch,
    ):
        tokenizer = Tokenizer.from_str(hf_tokenizer.backend_tokenizer.to_str())
        tokenizer.no_padding()
        tokenizer.no_truncation()  # the server sets its own (query cap, only_second)
        tokenizer.save(str(stage / "tokenizer.json"))

        t0 = time.perf_counter()
        exported = Path(scratch) / "export" / "model.onnx"
        exported.parent.mkdir()
        _export(torch, model, tokenizer, input_names, pad_id, exported)
        # one weights file beside the graph when it is over ~1.5 GB (XLM-R large in fp32
        # is 2.2 GB, past protobuf's 2 GiB; the exporter scatters it over a file a tensor)
        save_onnx(exported, stage / "model.onnx")
        shutil.rmtree(exported.parent)
        input_names = _graph_inputs(stage / "model.onnx", input_names)
        log(
            f"exported ONNX (opset {OPSET}, inputs {', '.join(input_names)}) "
            f"in {time.perf_counter() - t0:.1f}s"
        )

        manifest = CrossEncoderManifest(
            profile=spec.name,
            model_id=recorded_id,
            max_tokens=pair_tokens,
            query_max_tokens=int(pair_tokens * (HYPOTHESIS_SHARE if spec.nli else QUERY_SHARE)),
            pad_token_id=pad_id,
            input_names=input_names,
            labels=labels,
            cost_model=spec.cost_model,
        )
        manifest.save(stage)
        for extra in ("config.json", "README.md"):
            if (src / extra).is_file():  # provenance, not read at run time
                shutil.copy2(src / extra, stage / f"source-{extra}")

        model_class = OnnxNliModel if spec.nli else OnnxCrossEncoder
        fp32 = model_class(stage, serve_cost_model=spec.cost_model)
        fp32.load()
        # NLI: the passage is the premise, the query the hypothesis (never empty)
        pairs = [(p, q) for q, p in SAMPLE_PAIRS] if spec.nli else list(SAMPLE_PAIRS)
        batch = fp32.tokenize(pairs)
        onnx_logits = fp32.logits(batch)
        torch_logits = _torch_logits(torch, model, batch, onnx_logits.shape[1])
        max_abs_diff = float(np.abs(onnx_logits - torch_logits).max())
        log(f"fp32 ONNX vs PyTorch logits on {len(pairs)} pairs: max abs diff {max_abs_diff:.2e}")
        if not max_abs_diff <= MAX_ABS_DIFF_LIMIT:
            raise BackendFailure(
                f"the exported {spec.name} graph disagrees with PyTorch "
                f"(max abs diff {max_abs_diff:.2e} > {MAX_ABS_DIFF_LIMIT:.0e}); not installed"
            )

        drift_max: float | None = None
        drift_mean: float | None = None
        if int8:
            fp32_scores = _scores(onnx_logits, spec.nli)
            del fp32  # release the session before the file moves
            t0 = time.perf_counter()
            quantize_in_place(stage / "model.onnx", Path(scratch))
            replace(manifest, quantized=True).save(stage)
            log(f"quantized to int8 (per-channel MatMul) in {time.perf_counter() - t0:.1f}s")
            int8_encoder = model_class(stage, serve_cost_model=spec.cost_model)
            int8_encoder.load()
            int8_batch = int8_encoder.tokenize(pairs)
            int8_scores = _scores(int8_encoder.logits(int8_batch), spec.nli)
            drift_max, drift_mean = score_drift(int8_scores, fp32_scores)
            log(
                f"int8 vs fp32 scores on {len(pairs)} pairs: max abs diff {drift_max:.4f}, "
                f"mean {drift_mean:.4f}"
            )
            if not spec.cost_model and not drift_mean <= INT8_MAX_MEAN_SCORE_DIFF:
                raise BackendFailure(
                    f"the int8 {spec.name} model drifts too far from fp32 (mean score diff "
                    f"{drift_mean:.4f} > {INT8_MAX_MEAN_SCORE_DIFF}); not installed"
                )

    seconds = time.perf_counter() - started
    log(f"built {spec.name} into {out_dir} in {seconds:.1f}s")
    return BuildReport(
        profile=spec.name,
        out_dir=out_dir,
        seconds=seconds,
        model_id=recorded_id,
        max_tokens=pair_tokens,
        max_abs_diff_vs_torch=max_abs_diff,
        int8=int8,
        int8_score_max_abs_diff=drift_max,
        int8_score_mean_abs_diff=drift_mean,
    )


def _resolve_source(spec: ProfileSpec, source: Path | None) -> tuple[Path, bool]:
    """The checkpoint folder, and whether it was downloaded from the hub."""
    if source is None:
        try:
            from huggingface_hub import snapshot_download

            path = snapshot_download(
                spec.hub_id,
                allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt"],
            )
        except Exception as exc:  # no network, no hub access, rate limits...
            raise Unavailable(
                f"could not download {spec.hub_id} ({type(exc).__name__}); without the "
                f"internet, pass a local checkpoint folder with --source DIR",
                dependency="huggingface-hub",
            ) from exc
        return Path(path), True
    src = Path(source)
    if not src.is_dir():
        raise NotFound(f"{spec.name} source directory {src} does not exist")
    missing = [] if (src / "config.json").is_file() else ["config.json"]
    if not any(src.glob("*.safetensors")) and not (src / "pytorch_model.bin").is_file():
        missing.append("model weights (*.safetensors or pytorch_model.bin)")
    if missing:
        raise NotFound(f"{spec.name} source directory {src} lacks {', '.join(missing)}")
    return src, False


def _check_classifier(config: Any, src: Path, *, nli: bool = False) -> tuple[str, ...]:
    """The manifest's ``labels``: () for a relevance model, the NLI labels in logit
    order for an entailment model. Raises InvalidInput for any other classifier."""
    architectures = list(getattr(config, "architectures", None) or [])
    if architectures and not any(a.endswith("ForSequenceClassification") for a in architectures):
        raise InvalidInput(
            f"{src} is a {', '.join(architectures)}, not a *ForSequenceClassification "
            "cross-encoder"
        )
    labels = int(getattr(config, "num_labels", 0))
    if nli:
        return _nli_labels(config, src, labels)
    if labels != 1:
        raise InvalidInput(
            f"{src} has num_labels={labels}; a reranker needs a cross-encoder with exactly "
            "one label (its logit is the relevance)"
        )
    return ()


def _nli_labels(config: Any, src: Path, count: int) -> tuple[str, ...]:
    """NLI_LABELS in the checkpoint's logit order, read from its ``id2label``."""
    id2label = dict(getattr(config, "id2label", None) or {})
    names = [str(id2label.get(i, "")) for i in range(count)]
    found = []
    for name in names:
        low = name.strip().lower()
        found.append(next((v for k, v in _LABEL_PREFIXES.items() if low.startswith(k)), low))
    if count != len(NLI_LABELS) or sorted(found) != sorted(NLI_LABELS):
        raise InvalidInput(
            f"{src} has num_labels={count} with labels {names}; an entailment model needs "
            f"exactly {', '.join(NLI_LABELS)} (any case or order) in its config's id2label"
        )
    return tuple(found)


def _scores(logits: np.ndarray, nli: bool) -> np.ndarray:
    """What the served model returns, flat: sigmoid scores, or NLI probabilities."""
    return softmax(logits).reshape(-1) if nli else sigmoid(logits.reshape(-1))


def _max_tokens(spec: ProfileSpec, config: Any, tokenizer: Any, override: int | None) -> int:
    """The pair budget: the profile's (or the caller's), never beyond what the model takes."""
    limits = [override or spec.max_tokens]
    positions = getattr(config, "max_position_embeddings", None)
    if isinstance(positions, int):
        # RoBERTa-family position ids start after the padding index.
        offset = int(config.pad_token_id) + 1 if "roberta" in config.model_type else 0
        limits.append(positions - offset)
    tokenizer_limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(tokenizer_limit, int) and tokenizer_limit < 1_000_000:
        limits.append(tokenizer_limit)
    return min(limits)


def _input_names(model: Any, tokenizer: Any) -> tuple[str, ...]:
    """The inputs the graph declares: what the tokenizer produces and the model takes."""
    accepted = set(inspect.signature(model.forward).parameters)
    produced = set(getattr(tokenizer, "model_input_names", ())) | {"input_ids", "attention_mask"}
    names = tuple(n for n in KNOWN_INPUTS if n in produced and n in accepted)
    if "input_ids" not in names or "attention_mask" not in names:
        raise InvalidInput("the model does not take input_ids and attention_mask")
    return names


def _pad_id(tokenizer: Any, config: Any) -> int:
    for value in (tokenizer.pad_token_id, getattr(config, "pad_token_id", None)):
        if isinstance(value, int):
            return value
    return 0


def _export(
    torch: Any,
    model: Any,
    tokenizer: Tokenizer,
    input_names: Sequence[str],
    pad_id: int,
    path: Path,
) -> None:
    """Trace ``model`` to ONNX (TorchScript exporter) with dynamic batch and sequence axes."""

    class Logits(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *inputs: Any) -> Any:
            return self.inner(**dict(zip(input_names, inputs, strict=True))).logits

    # The dummy batch must contain padding and a second segment: traced mask and
    # position code must not be specialised to an all-ones mask or one segment.
    dummy = _pad_pairs(
        tokenizer,
        [("a short query", "a short passage."), ("another query", "a longer passage, with more")],
        pad_id,
    )
    args = tuple(torch.from_numpy(dummy[name]) for name in input_names)
    axes = {name: {0: "batch", 1: "sequence"} for name in input_names}
    axes[LOGITS_OUTPUT] = {0: "batch"}
    export_traced(
        Logits(model),
        args,
        path,
        input_names=input_names,
        output_names=[LOGITS_OUTPUT],
        dynamic_axes=axes,
        opset=OPSET,
    )


def _graph_inputs(path: Path, traced: Sequence[str]) -> tuple[str, ...]:
    """The inputs the exported graph kept: the tracer drops one the model never reads
    (DeBERTa-v3 has no segment embeddings, so its ``token_type_ids`` go)."""
    import onnx

    kept = {i.name for i in onnx.load(str(path), load_external_data=False).graph.input}
    return tuple(name for name in traced if name in kept)


def _pad_pairs(
    tokenizer: Tokenizer, pairs: Sequence[tuple[str, str]], pad_id: int
) -> dict[str, np.ndarray]:
    encodings = tokenizer.encode_batch(list(pairs))
    length = max(len(e.ids) for e in encodings)
    ids = np.full((len(pairs), length), pad_id, dtype=np.int64)
    mask = np.zeros_like(ids)
    types = np.zeros_like(ids)
    for row, enc in enumerate(encodings):
        ids[row, : len(enc.ids)] = enc.ids
        mask[row, : len(enc.ids)] = 1
        types[row, : len(enc.ids)] = enc.type_ids
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def _torch_logits(torch: Any, model: Any, batch: Any, width: int) -> np.ndarray:
    """The reference: the PyTorch model on the very token ids the ONNX graph saw, [n, width]."""
    logits = np.zeros((len(batch), width), dtype=np.float32)
    with torch.no_grad():
        for bucket in batch.buckets:
            feed = {name: torch.from_numpy(array) for name, array in bucket.feed.items()}
            out = model(**feed).logits.reshape(-1, width).numpy().astype(np.float32)
            logits[bucket.rows] = out
    return logits

