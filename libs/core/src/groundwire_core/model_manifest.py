"""Reading and writing the JSON manifest beside a built model folder.

Shared by the embedder's and the reranker's manifests (their fields differ; the
file handling and the checks of versions and field names do not).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import MISSING, fields, is_dataclass
from pathlib import Path
from typing import Any

from groundwire_core.errors import AlreadyExists, InvalidInput, NotFound

MANIFEST_FILE = "groundwire-model.json"
"""The manifest's file name in every built model folder (embedder and reranker)."""


COST_MODEL_NOTE = (
    "random weights of the real architecture, built by `groundwire models build PROFILE "
    "--random-weights`: it measures what the model costs and never serves answers"
)


def refuse_cost_model(model_dir: Path, *, cost_model: bool, serve_cost_model: bool) -> None:
    """Raises InvalidInput when ``model_dir`` holds a cost model and the service was not
    told to serve one (its ``SERVE_COST_MODEL`` setting: benchmarks only)."""
    if cost_model and not serve_cost_model:
        raise InvalidInput(
            f"{model_dir} is a cost model ({COST_MODEL_NOTE}); set the service's "
            "SERVE_COST_MODEL=true to serve it for a benchmark"
        )


def read_manifest_json(model_dir: Path, build_hint: str) -> tuple[Path, object]:
    """The manifest's path and its parsed JSON, not yet checked.

    Raises ``NotFound`` when the folder or the manifest is missing and ``InvalidInput``
    when it is not readable JSON; every message ends with ``build_hint`` (how to build
    or rebuild the model).
    """
    model_dir = Path(model_dir)
    path = model_dir / MANIFEST_FILE
    if not model_dir.is_dir():
        raise NotFound(f"model directory {model_dir} does not exist; to build it, {build_hint}")
    if not path.is_file():
        raise NotFound(
            f"model directory {model_dir} has no {MANIFEST_FILE} (not a built model); "
            f"to build it, {build_hint}"
        )
    try:
        return path, json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(
            f"model manifest {path} is not readable JSON ({type(exc).__name__}); "
            f"to rebuild it, {build_hint}"
        ) from exc


def write_manifest(model_dir: Path, filename: str, data: dict[str, Any]) -> None:
    """Writes ``data`` as ``model_dir/filename`` atomically (``model_dir`` must exist)."""
    text = json.dumps(data, indent=2) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{filename}.", dir=model_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600
        os.replace(tmp, Path(model_dir) / filename)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def manifest_fields(
    cls: type, raw: object, *, version: int, tuple_keys: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The constructor arguments of dataclass ``cls`` from a loaded manifest.

    Raises InvalidInput for a non-object, another manifest_version, missing or
    unknown fields, or a ``tuple_keys`` field that is not a list.
    """
    assert is_dataclass(cls)
    if not isinstance(raw, dict):
        raise InvalidInput("the top level must be a JSON object")
    data = dict(raw)
    found = data.pop("manifest_version", version)
    if found != version:
        raise InvalidInput(f"manifest_version {found!r} is not supported (expected {version})")
    names = {f.name for f in fields(cls)}
    required = {
        f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING
    }
    missing = sorted(required - data.keys())
    if missing:
        raise InvalidInput(f"missing field(s) {', '.join(missing)}")
    unknown = sorted(data.keys() - names)
    if unknown:
        raise InvalidInput(f"unknown field(s) {', '.join(unknown)}")
    for key in tuple_keys:
        if key in data:
            if not isinstance(data[key], list):
                raise InvalidInput(
                    f"{key} must be a list of strings"
                    if key == "input_names"
                    else f"{key} must be a list"
                )
            data[key] = tuple(data[key])
    return data


@contextmanager
def staging_dir(out_dir: Path) -> Iterator[Path]:
    """Yield an empty directory beside ``out_dir``; on success it replaces ``out_dir``.

    A failed build removes its staging directory and leaves ``out_dir`` as it was, so a
    half-written model is never served. An existing ``out_dir`` is replaced only if it is
    empty or a previously built model (has a manifest): never an unrelated directory.
    Raises AlreadyExists otherwise.
    """
    out_dir = Path(out_dir).absolute()
    if out_dir.exists():
        if not out_dir.is_dir():
            raise AlreadyExists(f"{out_dir} exists and is not a directory")
        if any(out_dir.iterdir()) and not (out_dir / MANIFEST_FILE).is_file():
            raise AlreadyExists(
                f"{out_dir} exists and is not a Groundwire model directory (no "
                f"{MANIFEST_FILE}); refusing to replace it: choose another directory"
            )
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.build-", dir=out_dir.parent))
    staging.chmod(0o755)  # mkdtemp makes it 0700; the served model must be readable
    try:
        yield staging
        _swap_in(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _swap_in(staging: Path, out_dir: Path) -> None:
    if not out_dir.exists():
        os.rename(staging, out_dir)
        return
    old = out_dir.with_name(f".{out_dir.name}.old-{uuid.uuid4().hex[:8]}")
    os.rename(out_dir, old)
    try:
        os.rename(staging, out_dir)
    except BaseException:
        os.rename(old, out_dir)
        raise
    shutil.rmtree(old, ignore_errors=True)
