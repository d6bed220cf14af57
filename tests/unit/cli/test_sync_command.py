"""`groundwire sync`'s definitions (command line and [sync.NAME] tables), report lines
and a finished sync job read as a report, without a retriever
(tests/integration/retriever/test_sync.py and test_sync_job_cli.py run it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundwire.retriever.v1 import retriever_pb2
from groundwire_cli import config as config_cli
from groundwire_cli import sync as sync_cli
from groundwire_cli.__main__ import build_parser
from groundwire_core.errors import InvalidInput


def test_a_url_is_a_crawl_and_a_folder_is_sent_absolute(tmp_path: Path) -> None:
    web = sync_cli.definition({"source": "https://docs.example.com/guide/", "delay_s": 0})
    assert (web.kind, web.location) == (retriever_pb2.SYNC_SOURCE_KIND_WEB, web.location)
    assert web.HasField("delay_s") and web.delay_s == 0, "0 s is kept, not the default"
    folder = sync_cli.definition({"source": "docs", "git": True}, base=tmp_path)
    assert folder.kind == retriever_pb2.SYNC_SOURCE_KIND_GIT
    assert folder.location == str((tmp_path / "docs").resolve())
    assert not folder.HasField("delay_s")
    with pytest.raises(InvalidInput, match="unknown sync option"):
        sync_cli.definition({"source": "docs", "page_limt": 3})
    with pytest.raises(InvalidInput, match="needs a source"):
        sync_cli.definition({})


def test_settings_file_tables_with_command_line_overrides(tmp_path: Path) -> None:
    config = tmp_path / "groundwire.toml"
    config.write_text(
        "[retriever]\nchunk_max_tokens = 64\n\n"
        '[sync.docs]\nsource = "site"\ninclude = ["*.md"]\n\n'
        '[sync.web]\nsource = "https://example.com/docs/sitemap.xml"\npage_limit = 50\n',
        encoding="utf-8",
    )
    # the services' settings reader leaves the sync tables to `groundwire sync`
    assert config_cli.load_file(config).for_service("retriever") == {"CHUNK_MAX_TOKENS": "64"}
    found = sync_cli.file_definitions(config, {"include": ["*.rst"]})
    assert list(found) == ["docs", "web"]
    assert found["docs"].location == str((tmp_path / "site").resolve())
    assert list(found["docs"].include) == ["*.rst"], "the command line wins"
    assert found["web"].page_limit == 50
    args = build_parser().parse_args(["sync", "--config", str(config), "--collection", "nope"])
    with pytest.raises(InvalidInput, match=r"no \[sync.nope\] table"):
        sync_cli.run_command(args)
    config.write_text('[sync.docs]\nsource = "site"\nmax_bytes = 5\ncolour = "red"\n')
    with pytest.raises(InvalidInput, match=r"\[sync.docs\]: unknown sync option"):
        sync_cli.file_definitions(config)


def test_summary_lists_what_changed() -> None:
    report = retriever_pb2.SyncReport(
        collection="docs",
        delta=retriever_pb2.JobDelta(
            new=["a.md"],
            unchanged=3,
            deleted=["gone.md"],
            renamed=[retriever_pb2.JobRename(from_id="old.md", to_id="new.md")],
        ),
        sources=[
            retriever_pb2.SyncSource(source_id="a.md", outcome="new", chunks=2),
            retriever_pb2.SyncSource(source_id="new.md", outcome="renamed", reason="from old.md"),
            retriever_pb2.SyncSource(source_id="d.md", outcome="skipped", reason="draft"),
            retriever_pb2.SyncSource(source_id="gone.md", outcome="deleted"),
            retriever_pb2.SyncSource(source_id="same.md", outcome="unchanged"),
        ],
        chunks_written=2,
        dry_run=True,
        complete=False,
        seconds=1.25,
    )
    assert sync_cli.summary(report) == [
        "dry run (nothing written): sync docs: 1 new, 0 changed, 3 unchanged, 1 deleted, "
        "1 renamed; 2 chunks written in 1.2 s",
        "  the crawl was cut short (page limit or an error): unseen pages were kept",
        "  new      a.md",
        "  renamed  new.md  (from old.md)",
        "  deleted  gone.md",
        "  skipped  d.md  (draft)",
    ]
    assert sync_cli.as_json(report)["delta"]["renamed"] == [{"from": "old.md", "to": "new.md"}]


def test_a_finished_sync_job_reads_as_the_sync_report() -> None:
    delta = retriever_pb2.JobDelta(
        new=["a.md"],
        changed=["b.md"],
        unchanged=1,
        deleted=["gone.md"],
        renamed=[retriever_pb2.JobRename(from_id="old.md", to_id="new.md")],
    )
    job = retriever_pb2.Job(
        id="f" * 32,
        collection="docs",
        kind=retriever_pb2.JOB_KIND_SYNC,
        state=retriever_pb2.JOB_STATE_SUCCEEDED,
        started_at=100.0,
        finished_at=102.5,
        counts=retriever_pb2.JobCounts(total=5, done=5, ingested=2, updated=1, chunks_written=7),
        documents=[
            retriever_pb2.JobDocument(source_id="same.md", outcome="unchanged", chunks=2),
            retriever_pb2.JobDocument(source_id="a.md", outcome="ingested", chunks=3),
            retriever_pb2.JobDocument(source_id="b.md", outcome="updated", chunks=2),
            retriever_pb2.JobDocument(
                source_id="new.md", outcome="ingested", chunks=2, error="from old.md"
            ),
            retriever_pb2.JobDocument(source_id="old.md", outcome="deleted"),
            retriever_pb2.JobDocument(source_id="gone.md", outcome="deleted"),
        ],
        delta=delta,
    )
    report = sync_cli.job_report(job)
    assert [(s.source_id, s.outcome, s.chunks, s.reason) for s in report.sources] == [
        ("same.md", "unchanged", 2, ""),
        ("a.md", "new", 3, ""),
        ("b.md", "changed", 2, ""),
        ("new.md", "renamed", 2, "from old.md"),
        ("gone.md", "deleted", 0, ""),  # the rename's old id is its "from", not a deletion
    ]
    assert (report.collection, report.chunks_written, report.seconds) == ("docs", 7, 2.5)
    assert report.delta == delta and report.complete and not report.cancelled
    assert not report.dry_run
    assert sync_cli.summary(report)[0] == (
        "sync docs: 1 new, 1 changed, 1 unchanged, 1 deleted, 1 renamed; 7 chunks written in 2.5 s"
    )
    assert sync_cli.as_json(report, job.id)["job"] == job.id

    # a crawl cut short succeeds with a note: the report is not complete
    job.error = "the crawl stopped early (its page limit, or a transient error)"
    assert not sync_cli.job_report(job).complete
    job.state, job.error = retriever_pb2.JOB_STATE_CANCELLED, "cancelled: ..."
    cancelled = sync_cli.job_report(job)
    assert cancelled.cancelled and cancelled.complete
