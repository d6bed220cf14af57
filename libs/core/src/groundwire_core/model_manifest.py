"""Reading and writing the JSON manifest beside a built model folder.

Shared by the embedder's and the reranker's manifests (their fields differ; the
file handling and the checks of versions and field names do not).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import MISSING, fields, is_dataclass
from pathlib import Path
from typing import Any

from groundwire_core.errors import InvalidInput


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
