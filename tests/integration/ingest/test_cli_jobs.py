"""``groundwire ingest`` runs as retriever jobs and ``groundwire jobs`` reads them,
against the real MiniLM embedder and retriever (in this process, on port 0); the
commands run as processes, as from a shell."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path


async def groundwire(*args: str) -> tuple[int, str, str]:
    """``groundwire ARGS``: exit code, stdout, stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "groundwire_cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_ingest_is_a_job_that_jobs_lists_shows_and_cancels(
    retriever_addr: str, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("a", "b"):
        (docs / f"{name}.md").write_text(f"# {name}\n\nOtters {name} hold hands asleep.\n")
    (docs / "empty.md").write_text("")
    code, out, err = await groundwire(
        "ingest", str(docs), "--collection", "otters", "--retriever", retriever_addr
    )
    assert code == 0, err
    assert "ingested 2" in out and "skipped empty.md" in out
    assert "3/3" in err, "the job's progress bar reached the end"

    code, out, _ = await groundwire(
        "jobs", "list", "--json", "--collection", "otters", "--retriever", retriever_addr
    )
    listed = json.loads(out)
    assert code == 0 and [(j["kind"], j["state"]) for j in listed] == [("ingest", "succeeded")]
    job_id = listed[0]["id"]
    assert listed[0]["counts"]["ingested"] == 2 and listed[0]["counts"]["skipped"] == 1

    code, out, _ = await groundwire("jobs", "show", job_id, "--retriever", retriever_addr)
    shown = out.splitlines()
    assert code == 0
    assert shown[0] == f"job {job_id}: ingest into otters, succeeded"
    assert any(line.startswith("  skipped empty.md: ") for line in shown)

    code, out, _ = await groundwire(
        "jobs", "cancel", job_id, "--json", "--retriever", retriever_addr
    )
    assert code == 0 and json.loads(out)["state"] == "succeeded"

    code, _, err = await groundwire("jobs", "show", "f" * 32, "--retriever", retriever_addr)
    assert code == 1 and "does not exist" in err
