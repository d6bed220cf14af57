"""Retriever settings: environment variables prefixed GROUNDWIRE_RETRIEVER_."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from groundwire_core.outbound import OutboundPolicy
from groundwire_core.settings import ServiceSettings
from groundwire_retriever.store.disk import DEFAULT_MIN_FREE_MIB
from groundwire_retriever.store.edge import DEFAULT_SEARCH_THREADS


class RetrieverSettings(ServiceSettings):
    model_config = SettingsConfigDict(
        frozen=True, extra="ignore", env_prefix="GROUNDWIRE_RETRIEVER_"
    )

    port: int = Field(50053, ge=0, le=65535, description="gRPC port; 0 picks a free one.")
    data_path: Path = Field(
        Path("var/qdrant"), description="Folder of the embedded Qdrant engine (qdrant-edge)."
    )
    jobs_path: Path | None = Field(
        None,
        description="Folder of the jobs' SQLite database when DATABASE_URL is empty "
        "(JOBS_PATH/jobs.sqlite3; one machine); unset: DATA_PATH/.jobs.",
    )
    database_url: SecretStr = Field(
        SecretStr(""),
        description="The system of record of jobs, their documents and reports, and sync "
        "definitions: postgresql://user:password@host/db (compose, Kubernetes: every "
        "replica sees every job) or sqlite:///path; empty = sqlite:///JOBS_PATH/jobs.sqlite3 "
        "(one machine).",
    )
    job_poll_s: float = Field(
        1.0,
        gt=0,
        le=60,
        description="Seconds between a replica's looks for queued jobs to claim (and for "
        "stale ones to fail); also how often a job's watchers read its progress.",
    )
    job_heartbeat_s: float = Field(
        5.0,
        gt=0,
        le=300,
        description="Seconds between a running job's heartbeats (each document it "
        "records beats too).",
    )
    job_stale_after_s: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="A running job whose last heartbeat is older is failed by any "
        "replica's reaper (its worker died: killed, out of memory, machine lost), with "
        "what its report says was applied; at least 3x JOB_HEARTBEAT_S. A killed "
        "worker's job reads failed within JOB_STALE_AFTER_S + JOB_POLL_S.",
    )
    job_workers: int = Field(
        4, ge=1, le=64, description="Jobs (of different collections) one replica runs at once."
    )
    max_queued_jobs_per_tenant: int = Field(
        20,
        ge=1,
        description="Unfinished (queued or running) jobs a tenant may have; one more is "
        "refused (overloaded, HTTP 429) until some end.",
    )
    max_queued_job_bytes_per_tenant: int = Field(
        256 * 1024 * 1024,
        ge=1024,
        description="Bytes of documents a tenant's unfinished ingest jobs may hold in the "
        "system of record (each job is also bounded by the gateway's upload limit).",
    )
    migrate_on_start: bool = Field(
        True,
        description="Upgrade the retriever's tables when it starts (replicas take a lock, "
        "so they never race); false = refuse to start until `groundwire db upgrade` (or "
        "the deployment's migrate job) has run.",
    )
    min_free_disk_mib: int = Field(
        DEFAULT_MIN_FREE_MIB,
        ge=0,
        description="Embedded engine: free space (MiB) every write leaves on the data disk, "
        "on top of the write's own estimated size (each batch of an ingest is checked). "
        "Below it writes (ingest, upsert, delete, create) fail with insufficient_storage "
        "(gRPC RESOURCE_EXHAUSTED, HTTP 507) naming the data path, health reports LOW "
        "DISK, and searches go on; writes resume once space is freed. The engine writes "
        "through memory-mapped files and dies with SIGBUS on a full disk, so this is "
        "never 0 in production; the default is two of its 32 MiB allocation units (WAL "
        "segment, vector chunk, payload page).",
    )
    qdrant_url: str | None = Field(
        None,
        description=(
            "Qdrant server URL (http://host:6333); when set it is used instead of the "
            "embedded engine. ':memory:' or a folder runs qdrant-client's local mode "
            "(brute force: tests only)."
        ),
    )
    qdrant_api_key: SecretStr | None = Field(None, description="API key of the Qdrant server.")
    qdrant_timeout_s: int = Field(10, ge=1, le=600, description="Qdrant server request timeout.")
    qdrant_shards: int = Field(
        1,
        ge=1,
        le=1024,
        description="Qdrant server: shards of each collection (shard_number), spread over "
        "the cluster's nodes; set it at or above the node count to use them all. Applies "
        "to collections created (or fully re-indexed) from then on.",
    )
    qdrant_replication_factor: int = Field(
        1,
        ge=1,
        le=64,
        description="Qdrant server: copies of each shard on distinct nodes "
        "(replication_factor). 2 keeps every shard searchable while one node is down.",
    )
    qdrant_write_consistency: int = Field(
        1,
        ge=1,
        le=64,
        description="Qdrant server: replicas that must apply a write before it is "
        "acknowledged (write_consistency_factor); at most the replication factor. With "
        "1 a write succeeds while one replica of a shard is down.",
    )
    qdrant_read_consistency: Literal["1", "majority", "quorum", "all"] = Field(
        "1",
        description="Qdrant server: replicas of a shard a search and a payload read ask "
        "(read_consistency): 1 answers from any live replica (fastest, may lag a write "
        "by its replication delay); majority, quorum or all wait for more and fail "
        "while too few are up.",
    )
    replicas: bool = Field(
        False,
        description="Qdrant server: several retriever replicas share it (docs/replicas.md). "
        "Writes to a collection take its lease in the server (fencing token), and each "
        "replica re-reads the collections' revision state every REPLICA_REFRESH_S. Off: "
        "one retriever process writes and serves (the embedded engine always).",
    )
    replica_refresh_s: float = Field(
        1.0, gt=0, le=60, description="Replicas: seconds between re-reads of the shared state."
    )
    replica_stale_after_s: float = Field(
        5.0,
        gt=0,
        le=300,
        description="Replicas: a replica whose last successful re-read is older stops "
        "serving the collection (UNAVAILABLE) until it can read it again.",
    )
    replica_grace_s: float = Field(
        7.0,
        gt=0,
        le=600,
        description="Replicas: how long a writer waits after changing what is hidden "
        "before it writes under a hidden revision or deletes replaced chunks; above "
        "REPLICA_STALE_AFTER_S, and a read that outlasts it (from when its view was "
        "read) is refused with UNAVAILABLE (each re-ingest pays it twice).",
    )
    replica_lease_s: float = Field(
        15.0,
        gt=0,
        le=600,
        description="Replicas: the write lease's term; a writer that dies holds it this "
        "long (each state save renews it; a finished write releases it at once).",
    )
    embedder_addr: str = Field("127.0.0.1:50051", description="gRPC address of the embedder.")
    embed_batch: int = Field(32, ge=1, le=256, description="Chunks embedded per embedder call.")
    embed_timeout_s: float = Field(
        120.0,
        gt=0,
        description="Deadline of one embedder call during ingest (EMBED_BATCH chunks). "
        "BGE-M3 int8 embeds ~1,000 tokens/s on 2 cores, so 32 chunks of 800 tokens take "
        "~25 s there (docs/sizing.md); a shorter deadline fails ingest on small machines.",
    )
    keep_multi_vectors: bool = Field(
        False,
        description="Collections created or fully re-indexed while the embedder's model has "
        "ColBERT multi-vectors (BGE-M3) store them, for late interaction (the orchestrator's "
        "LATE_INTERACTION). Large: tokens x 1024 float32 per chunk (2 MiB at 512 tokens).",
    )
    chunk_min_tokens: int = Field(300, ge=16, description="Chunks are packed to at least this.")
    chunk_max_tokens: int = Field(800, ge=32, description="Chunks never exceed this.")
    chunk_overlap_tokens: int = Field(50, ge=0, description="Tokens repeated between chunks.")
    optimize_after_chunks: int = Field(
        10_000,
        ge=0,
        description="Embedded engine: build the search indexes (HNSW, int8 quantization) "
        "once this many chunks were written since the last build, and on start (in place, "
        "before SERVING); 0 = only on start. The later builds run in a child process on "
        "a copy of the collection "
        "(~30 s at 100k chunks on 2 cores; the disk holds both copies meanwhile): "
        "searches go on, writes to the collection wait for it; unindexed chunks are "
        "searched by brute force until it is done (a 100k-chunk hybrid search: 11 ms "
        "unindexed vs 4.8 ms; benchmarks/README.md).",
    )
    search_threads: int = Field(
        DEFAULT_SEARCH_THREADS,
        ge=0,
        le=256,
        description="Embedded engine: threads that search a collection's segments in "
        "parallel; 0 = the engine's default (derived from the CPUs). One was fastest on "
        "2 cores (100k chunks: 2.3 ms vs 3.0 with the default, eight threads there; "
        "benchmarks/README.md); raise it on many-core machines.",
    )
    max_document_bytes: int = Field(
        20 * 1024 * 1024, ge=1, description="Larger documents are skipped with a reason."
    )
    max_document_tokens: int = Field(
        500_000,
        ge=256,
        description="Embedding tokens one document may cost (its chunks times the "
        "chunk size the embedder reads); past it the document is skipped with the reason "
        "before it is embedded. MiniLM embeds ~6k tokens/s on 2 cores: the default is "
        "~80 s of the embedder (an 8 MB Markdown table needed over 9 minutes).",
    )
    parse_workers: int = Field(
        1,
        ge=1,
        le=64,
        description="Worker processes that parse and chunk documents, each document "
        "under the budgets below (ingest/sandbox.py); started at the first ingest, ~70 MB "
        "resident each. More let concurrent ingest requests parse in parallel.",
    )
    parse_time_budget_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="Seconds a worker may spend parsing and chunking one document "
        "(waiting for the embedder's token counts is not counted); past it the worker is "
        "killed and replaced and the document skipped with the reason. 9 MiB of plain "
        "text (19k chunks) took ~3 s on a 2-core machine.",
    )
    parse_memory_budget_mib: int = Field(
        1024,
        ge=256,
        description="Address space (RLIMIT_AS, MiB) of each parse worker, the interpreter "
        "and parsers (~60 MiB) included; a document that needs more is skipped with the "
        "reason. 9 MiB of plain text fit in 256 MiB; large HTML pages need the most "
        "(the parsed tree).",
    )
    sync_roots: tuple[Path, ...] = Field(
        (),
        description="Folders a folder or git sync may read (the folder given and every "
        "file in it must be under one); empty = any folder this process can read, for "
        "a single-user machine. Set it wherever the admin API is reachable by others "
        "(the Kubernetes manifests set it to the mounted sources volume). JSON list.",
    )
    outbound_allowed_hosts: str = Field(
        "",
        description="Hosts a website sync may fetch from, comma-separated (docs.example.com, "
        "or *.example.com for its subdomains); empty = any host with a public address. "
        "Every fetch (pages, robots.txt, sitemaps, each redirect) is checked, and a page "
        "is read no further than MAX_DOCUMENT_BYTES (a sync's max_bytes may not exceed it).",
    )
    outbound_allowed_networks: str = Field(
        "",
        description="Networks a website sync may reach although they are not public, "
        "comma-separated CIDRs (10.20.0.0/16 for an intranet docs site; 127.0.0.1/32 on "
        "a developer's machine). Empty = none: loopback, private, link-local, multicast "
        "and reserved addresses are refused after DNS resolution and on every redirect, "
        "so a caller cannot sync the cluster's own services (docs/security.md).",
    )

    live_max_lookups: int = Field(
        3,
        ge=0,
        le=20,
        description="Pages a live documentation lookup (LookupLive, docs/live-docs.md) "
        "fetches or tries at most per question; a request may ask for fewer. 0 turns "
        "live lookups off.",
    )
    live_max_page_bytes: int = Field(
        2 * 1024 * 1024,
        ge=1024,
        description="A live page is read no further than this (and MAX_DOCUMENT_BYTES): "
        "a larger one is refused with the reason.",
    )
    live_fetch_timeout_s: float = Field(
        10.0, gt=0, le=300, description="Seconds for one live page fetch, redirects included."
    )
    live_total_timeout_s: float = Field(
        30.0,
        gt=0,
        le=600,
        description="Seconds for a whole live lookup (robots.txt, sitemaps, pages); a "
        "request may ask for less.",
    )
    live_domains: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Per collection, the domains a live lookup may fetch from "
        '(JSON: {"docs": ["docs.example.com", "http://127.0.0.1:8080"]}); a collection '
        "not named uses the hosts of its web sources (what its website syncs stored). "
        "OUTBOUND_ALLOWED_HOSTS and OUTBOUND_ALLOWED_NETWORKS apply on top.",
    )

    @field_validator("outbound_allowed_networks")
    @classmethod
    def _networks_are_cidrs(cls, value: str) -> str:
        OutboundPolicy.from_lists(networks=value)  # ValueError names the bad network
        return value

    def outbound_policy(self) -> OutboundPolicy:
        """What website syncs may reach, and the byte cap of a page."""
        return OutboundPolicy.from_lists(
            self.outbound_allowed_hosts,
            self.outbound_allowed_networks,
            max_bytes=self.max_document_bytes,
        )

    @model_validator(mode="after")
    def _replicas_and_cluster_agree(self) -> RetrieverSettings:
        """Replicas need refresh < stale-after < grace (docs/replicas.md); a write
        cannot wait for more copies than a shard has."""
        if self.replicas and not (
            self.replica_refresh_s < self.replica_stale_after_s < self.replica_grace_s
        ):
            raise ValueError(
                "REPLICA_REFRESH_S < REPLICA_STALE_AFTER_S < REPLICA_GRACE_S must hold"
            )
        if self.job_stale_after_s < 3 * self.job_heartbeat_s:
            raise ValueError("JOB_STALE_AFTER_S must be at least 3x JOB_HEARTBEAT_S")
        if self.qdrant_write_consistency > self.qdrant_replication_factor:
            raise ValueError("QDRANT_WRITE_CONSISTENCY exceeds QDRANT_REPLICATION_FACTOR")
        return self
