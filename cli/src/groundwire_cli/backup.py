"""``groundwire db upgrade``, ``groundwire backup`` and ``groundwire restore``.

A backup is a folder: ``manifest.json`` (when, which schema revisions, which
collections, row counts), ``records/<service>/<table>.jsonl`` (the system of record,
dumped logically by ``records``) and ``qdrant/`` (a copy of the embedded engine's data
folder: every collection's shards, segments and WAL). The engine's files are consistent
only while no process has them open, so a backup of the embedded default is taken with
the cluster stopped (`groundwire down`); a deployment on a Qdrant server snapshots its
collections with Qdrant's own snapshot API and backs up the records here with
``--records-only`` (docs/state.md, "Backups").

Restoring needs an empty target: a data folder that is missing or empty, and databases
holding none of the services' rows (their tables are created by the migrations).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import time
from pathlib import Path
from typing import Any

from groundwire_cli import lifecycle
from groundwire_cli.cluster import LocalCluster
from groundwire_cli.records import OWNERS, dump, load, upgrade_all
from groundwire_core.errors import InvalidInput

FORMAT = 1
URL_ENV = {
    "gateway": "GROUNDWIRE_GATEWAY_DATABASE_URL",
    "retriever": "GROUNDWIRE_RETRIEVER_DATABASE_URL",
}


def database_urls(args: argparse.Namespace) -> dict[str, str]:
    """Each service's database URL: the flag, else what `groundwire up` gives it.
    Raises InvalidInput when neither names one."""
    cluster = LocalCluster(args.run_dir, args.model_dir, args.data_path, file=args.file_settings)
    urls: dict[str, str] = {}
    for owner in OWNERS:
        url = getattr(args, f"{owner.name}_db") or cluster.env_for(owner.name).get(
            URL_ENV[owner.name], ""
        )
        if not url:
            raise InvalidInput(f"no database URL for the {owner.name}: pass --{owner.name}-db")
        urls[owner.name] = url
    return urls


def _collections(data_path: Path) -> list[str]:
    folder = data_path / "collections"
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if (p / "collection.json").exists())


def _refuse_while_running(args: argparse.Namespace) -> None:
    running = lifecycle.running(args.run_dir)
    if running is not None:
        raise InvalidInput(
            f"Groundwire is running (pid {running.pid}): the embedded engine's files are "
            "consistent only while it is stopped; run `groundwire down` first (or "
            "--records-only on a deployment with a Qdrant server)"
        )


def _backup(args: argparse.Namespace, urls: dict[str, str]) -> dict[str, Any]:
    out: Path = args.out
    if out.exists() and any(out.iterdir()):
        raise InvalidInput(f"{out} is not empty: back up into a new folder")
    manifest: dict[str, Any] = {"format": FORMAT, "created_at": time.time(), "records": {}}
    for owner in OWNERS:
        folder = out / "records" / owner.name
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        manifest["records"][owner.name] = asyncio.run(dump(owner, urls[owner.name], folder))
    if not args.records_only:
        data_path: Path = args.data_path
        manifest["collections"] = _collections(data_path)
        if data_path.exists():
            shutil.copytree(data_path, out / "qdrant", symlinks=False)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return manifest


def _restore(args: argparse.Namespace, urls: dict[str, str]) -> dict[str, Any]:
    source: Path = args.source
    manifest_path = source / "manifest.json"
    if not manifest_path.exists():
        raise InvalidInput(f"{source} holds no manifest.json: not a Groundwire backup")
    manifest: dict[str, Any] = json.loads(manifest_path.read_text())
    if manifest.get("format") != FORMAT:
        raise InvalidInput(f"backup format {manifest.get('format')!r} is not {FORMAT}")
    data_path: Path = args.data_path
    copy_data = (source / "qdrant").is_dir() and not args.records_only
    if copy_data and data_path.exists() and any(data_path.iterdir()):
        raise InvalidInput(f"{data_path} is not empty: restore into a new data folder")
    restored: dict[str, Any] = {}
    for owner in OWNERS:
        revision = manifest["records"].get(owner.name, {}).get("revision")
        restored[owner.name] = asyncio.run(
            load(owner, urls[owner.name], source / "records" / owner.name, revision)
        )
    if copy_data:
        data_path.parent.mkdir(parents=True, exist_ok=True)
        if data_path.exists():
            data_path.rmdir()
        shutil.copytree(source / "qdrant", data_path, symlinks=False)
    restored["collections"] = _collections(data_path) if copy_data else []
    return restored


def cmd_db(args: argparse.Namespace) -> int:
    for line in asyncio.run(upgrade_all(database_urls(args))):
        print(line)
    return 0


def cmd_backup(args: argparse.Namespace) -> int:
    urls = database_urls(args)
    if not args.records_only:
        _refuse_while_running(args)
    manifest = _backup(args, urls)
    for owner, part in manifest["records"].items():
        rows = ", ".join(f"{t} {n}" for t, n in part["rows"].items() if n) or "no rows"
        print(f"{owner}: revision {part['revision']}: {rows}")
    if not args.records_only:
        print(f"collections: {', '.join(manifest['collections']) or 'none'}")
    print(f"backup written to {args.out}")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    urls = database_urls(args)
    if not args.records_only:
        _refuse_while_running(args)
    restored = _restore(args, urls)
    for owner in OWNERS:
        rows = ", ".join(f"{t} {n}" for t, n in restored[owner.name].items() if n) or "no rows"
        print(f"{owner.name}: {rows}")
    print(f"collections: {', '.join(restored['collections']) or 'none'}")
    print("restored: start it with `groundwire up`")
    return 0


def _db_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gateway-db", default="", help="the gateway's database URL (default: `up`'s)")
    p.add_argument(
        "--retriever-db", default="", help="the retriever's database URL (default: `up`'s)"
    )


def add_parsers(sub: Any, cluster_args: Any) -> None:
    """Registers ``db``, ``backup`` and ``restore`` on the top-level subparsers."""
    db = sub.add_parser("db", help="the system of record: run its migrations")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    up = db_sub.add_parser("upgrade", help="upgrade every service's tables (once per deploy)")
    cluster_args(up)
    _db_flags(up)
    up.set_defaults(func=cmd_db)

    backup = sub.add_parser(
        "backup", help="copy the collections and the system of record into a folder"
    )
    cluster_args(backup)
    _db_flags(backup)
    backup.add_argument("--out", type=Path, required=True, help="a new, empty folder")
    backup.add_argument(
        "--records-only", action="store_true", help="only the system of record (Qdrant server)"
    )
    backup.set_defaults(func=cmd_backup)

    restore = sub.add_parser("restore", help="restore a backup into an empty deployment")
    cluster_args(restore)
    _db_flags(restore)
    restore.add_argument("--from", dest="source", type=Path, required=True, help="backup folder")
    restore.add_argument(
        "--records-only", action="store_true", help="only the system of record (Qdrant server)"
    )
    restore.set_defaults(func=cmd_restore)
