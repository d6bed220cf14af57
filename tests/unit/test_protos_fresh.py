"""The committed stubs are exactly what scripts/gen_protos.sh makes of protos/.

Edit a .proto without regenerating and this fails; regenerate with
`scripts/gen_protos.sh`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_generated_stubs_match_protos(repo_root: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(repo_root / "scripts/gen_protos.sh"), str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert done.returncode == 0, f"gen_protos.sh failed:\n{done.stderr}"
    fresh = _tree(tmp_path / "groundwire")
    committed = _tree(repo_root / "libs/core/src/groundwire")
    assert fresh, "the generator produced nothing"
    stale = sorted(k for k in fresh.keys() | committed.keys() if fresh.get(k) != committed.get(k))
    assert not stale, f"stubs are stale; run scripts/gen_protos.sh (differs: {stale})"


def test_enum_zero_values_are_unspecified(repo_root: Path) -> None:
    import re

    for proto in (repo_root / "protos").rglob("*.proto"):
        text = proto.read_text()
        for enum, body in re.findall(r"enum (\w+) \{(.*?)\}", text, re.DOTALL):
            zero = re.search(r"(\w+)\s*=\s*0;", body)
            assert zero and zero.group(1).endswith("_UNSPECIFIED"), f"{proto.name}:{enum}"


def test_every_rpc_is_documented(repo_root: Path) -> None:
    for proto in (repo_root / "protos").rglob("*.proto"):
        lines = proto.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.strip().startswith("rpc "):
                assert lines[i - 1].strip().startswith("//"), f"{proto.name}: {line.strip()}"
