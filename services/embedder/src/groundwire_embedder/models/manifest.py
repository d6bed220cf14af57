"""The manifest written beside every exported model: what the serving code needs to know.

A model directory holds ``groundwire-model.json`` (this manifest), the ONNX graph and the
``tokenizer.json``. The embedder reads only this directory at run time: no Hugging Face
config, no torch. The manifest is the single place that says how to pool the encoder's
output, whether to normalise it, how many tokens to keep, which inputs the graph takes and,
for models with lexical and late-interaction heads (BGE-M3), the ColBERT width and the token
ids the sparse output leaves out.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from groundwire_core.errors import InvalidInput
from groundwire_core.model_manifest import MANIFEST_FILE as MANIFEST_FILE
from groundwire_core.model_manifest import manifest_fields, read_manifest_json, write_manifest

MANIFEST_VERSION = 1

POOLINGS = ("mean", "cls")
KNOWN_OUTPUTS = ("dense", "sparse", "multi_vector")
KNOWN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")

_BUILD_HINT = "run `groundwire models build minilm` (or the profile this model is for)"


@dataclass(frozen=True)
class ModelManifest:
    """Describes one exported encoder; written by the export step, read by the server."""

    profile: str
    model_id: str
    pooling: Literal["mean", "cls"]
    normalize: bool
    dense_dims: int
    max_tokens: int
    outputs: tuple[str, ...]
    onnx_file: str = "model.onnx"
    tokenizer_file: str = "tokenizer.json"
    quantized: bool = False
    input_names: tuple[str, ...] = ("input_ids", "attention_mask", "token_type_ids")
    # Width of each ColBERT vector; 0 for models without the multi_vector output.
    multi_vector_dims: int = 0
    # Token ids never reported in the sparse output (BGE-M3: cls, eos, pad, unk).
    sparse_ignored_ids: tuple[int, ...] = ()
    # Random weights of the real architecture (``--random-weights``): sizing only.
    cost_model: bool = False

    def __post_init__(self) -> None:
        # Validate on construction, so a bad manifest is never written nor served.
        _validate(self)

    @classmethod
    def load(cls, model_dir: Path) -> ModelManifest:
        """Read ``model_dir/groundwire-model.json``.

        Raises ``NotFound`` when the directory or the manifest is missing and
        ``InvalidInput`` when the manifest cannot be parsed or fails validation.
        """
        model_dir = Path(model_dir)
        path, raw = read_manifest_json(model_dir, _BUILD_HINT)
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
        data["outputs"] = list(self.outputs)
        data["input_names"] = list(self.input_names)
        data["sparse_ignored_ids"] = list(self.sparse_ignored_ids)
        write_manifest(model_dir, MANIFEST_FILE, data)

    @classmethod
    def _from_dict(cls, raw: object) -> ModelManifest:
        data = manifest_fields(
            cls,
            raw,
            version=MANIFEST_VERSION,
            tuple_keys=("outputs", "input_names", "sparse_ignored_ids"),
        )
        return cls(**data)


def _validate(m: ModelManifest) -> None:
    for name in ("profile", "model_id", "onnx_file", "tokenizer_file"):
        value = getattr(m, name)
        if not isinstance(value, str) or not value:
            raise InvalidInput(f"{name} must be a non-empty string")
    for name in ("onnx_file", "tokenizer_file"):
        value = getattr(m, name)
        if "/" in value or "\\" in value or value in (".", ".."):
            raise InvalidInput(f"{name} must be a plain file name inside the model directory")
    if m.pooling not in POOLINGS:
        raise InvalidInput(f"pooling must be one of {', '.join(POOLINGS)}, not {m.pooling!r}")
    for name in ("normalize", "quantized"):
        if not isinstance(getattr(m, name), bool):
            raise InvalidInput(f"{name} must be true or false")
    for name in ("dense_dims", "max_tokens"):
        value = getattr(m, name)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InvalidInput(f"{name} must be a positive integer")
    _check_names("outputs", m.outputs, KNOWN_OUTPUTS)
    _check_names("input_names", m.input_names, KNOWN_INPUTS)
    if "input_ids" not in m.input_names:
        raise InvalidInput("input_names must include input_ids")
    dims = m.multi_vector_dims
    if isinstance(dims, bool) or not isinstance(dims, int) or dims < 0:
        raise InvalidInput("multi_vector_dims must be a non-negative integer")
    if ("multi_vector" in m.outputs) != (dims > 0):
        raise InvalidInput(
            "multi_vector_dims must be positive exactly when outputs include multi_vector"
        )
    ignored = m.sparse_ignored_ids
    if not isinstance(ignored, tuple) or not all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ignored
    ):
        raise InvalidInput("sparse_ignored_ids must be a list of non-negative token ids")


def _check_names(field: str, values: object, known: tuple[str, ...]) -> None:
    if not isinstance(values, tuple) or not values:
        raise InvalidInput(f"{field} must be a non-empty list")
    for value in values:
        if not isinstance(value, str) or value not in known:
            raise InvalidInput(f"{field} entry {value!r} is not one of {', '.join(known)}")
    if len(set(values)) != len(values):
        raise InvalidInput(f"{field} has duplicates")
