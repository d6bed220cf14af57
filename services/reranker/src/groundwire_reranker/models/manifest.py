"""The manifest written beside every exported cross-encoder: what serving needs to know.

A model directory holds ``groundwire-model.json`` (this manifest), the ONNX graph and the
``tokenizer.json``. The reranker reads only this directory at run time: no Hugging Face
config, no torch. The manifest says how many tokens a (query, passage) pair may have,
how much of that the query may take, which id pads a batch and which inputs the graph
declares (``token_type_ids`` for BERT-style models, not for XLM-RoBERTa).

An entailment (NLI) model is a cross-encoder with three logits: its manifest's ``labels``
name them in the graph's output order (``entailment``, ``neutral``, ``contradiction`` in
whatever order the checkpoint's ``id2label`` has them). A relevance model's ``labels`` is
empty: one logit, the relevance.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from groundwire_core.errors import InvalidInput
from groundwire_core.model_manifest import MANIFEST_FILE as MANIFEST_FILE
from groundwire_core.model_manifest import manifest_fields, read_manifest_json, write_manifest

MANIFEST_VERSION = 1
KIND = "cross-encoder"

KNOWN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
REQUIRED_INPUTS = ("input_ids", "attention_mask")
NLI_LABELS = ("entailment", "neutral", "contradiction")
# Room for the query, the special tokens and at least a few passage tokens.
MIN_MAX_TOKENS = 16

_BUILD_HINT = "run `groundwire models build cross-encoder` (or the profile this model is for)"


@dataclass(frozen=True)
class CrossEncoderManifest:
    """Describes one exported cross-encoder; written by the export step, read by the server."""

    profile: str
    model_id: str
    max_tokens: int  # longest (query, passage) pair, special tokens included
    query_max_tokens: int  # the query is cut to this many tokens before pairing
    pad_token_id: int
    onnx_file: str = "model.onnx"
    tokenizer_file: str = "tokenizer.json"
    quantized: bool = False
    input_names: tuple[str, ...] = REQUIRED_INPUTS
    kind: str = KIND
    labels: tuple[str, ...] = ()  # NLI models: NLI_LABELS in the graph's logit order
    # Random weights of the real architecture (``--random-weights``): sizing only.
    cost_model: bool = False

    def __post_init__(self) -> None:
        # Validate on construction, so a bad manifest is never written nor served.
        _validate(self)

    @classmethod
    def load(cls, model_dir: Path) -> CrossEncoderManifest:
        """Read ``model_dir/groundwire-model.json``.

        Raises ``NotFound`` when the directory or the manifest is missing and
        ``InvalidInput`` when the manifest cannot be parsed, fails validation or
        describes another kind of model (an embedder's).
        """
        model_dir = Path(model_dir)
        path, raw = read_manifest_json(model_dir, _BUILD_HINT)
        if isinstance(raw, dict) and "kind" not in raw and "pooling" in raw:
            raise InvalidInput(
                f"model directory {model_dir} holds an embedder (bi-encoder) model, not a "
                f"cross-encoder; point the reranker at a cross-encoder: {_BUILD_HINT}"
            )
        try:
            return cls._from_dict(raw)
        except InvalidInput as exc:
            raise InvalidInput(
                f"model manifest {path} is malformed: {exc.message}; to rebuild it, {_BUILD_HINT}"
            ) from exc

    def save(self, model_dir: Path) -> None:
        """Write the manifest atomically into ``model_dir`` (which must exist)."""
        model_dir = Path(model_dir)
        data: dict[str, Any] = {"manifest_version": MANIFEST_VERSION, **asdict(self)}
        data["input_names"] = list(self.input_names)
        data["labels"] = list(self.labels)
        write_manifest(model_dir, MANIFEST_FILE, data)

    @classmethod
    def _from_dict(cls, raw: object) -> CrossEncoderManifest:
        data = manifest_fields(
            cls, raw, version=MANIFEST_VERSION, tuple_keys=("input_names", "labels")
        )
        return cls(**data)


def _validate(m: CrossEncoderManifest) -> None:
    if m.kind != KIND:
        raise InvalidInput(f"kind must be {KIND!r}, not {m.kind!r}")
    for name in ("profile", "model_id", "onnx_file", "tokenizer_file"):
        value = getattr(m, name)
        if not isinstance(value, str) or not value:
            raise InvalidInput(f"{name} must be a non-empty string")
    for name in ("onnx_file", "tokenizer_file"):
        value = getattr(m, name)
        if "/" in value or "\\" in value or value in (".", ".."):
            raise InvalidInput(f"{name} must be a plain file name inside the model directory")
    if not isinstance(m.quantized, bool):
        raise InvalidInput("quantized must be true or false")
    for name in ("max_tokens", "query_max_tokens", "pad_token_id"):
        value = getattr(m, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInput(f"{name} must be a non-negative integer")
    if m.max_tokens < MIN_MAX_TOKENS:
        raise InvalidInput(f"max_tokens must be at least {MIN_MAX_TOKENS}")
    if not 1 <= m.query_max_tokens <= m.max_tokens - 8:
        raise InvalidInput(
            f"query_max_tokens must be between 1 and max_tokens - 8 ({m.max_tokens - 8}), "
            "leaving room for special tokens and the passage"
        )
    values = m.input_names
    if not isinstance(values, tuple) or not values:
        raise InvalidInput("input_names must be a non-empty list")
    for value in values:
        if not isinstance(value, str) or value not in KNOWN_INPUTS:
            raise InvalidInput(
                f"input_names entry {value!r} is not one of {', '.join(KNOWN_INPUTS)}"
            )
    if len(set(values)) != len(values):
        raise InvalidInput("input_names has duplicates")
    for name in REQUIRED_INPUTS:
        if name not in values:
            raise InvalidInput(f"input_names must include {name}")
    if not isinstance(m.labels, tuple) or (m.labels and sorted(m.labels) != sorted(NLI_LABELS)):
        raise InvalidInput(
            f"labels must be empty (a relevance model) or name each of {', '.join(NLI_LABELS)} "
            "once, in the graph's logit order (an entailment model)"
        )
