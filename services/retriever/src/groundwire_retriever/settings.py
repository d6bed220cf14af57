"""Retriever settings: environment variables prefixed GROUNDWIRE_RETRIEVER_."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

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
    embedder_addr: str = Field("127.0.0.1:50051", description="gRPC address of the embedder.")
    embed_batch: int = Field(32, ge=1, le=256, description="Chunks embedded per embedder call.")
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
    parse_workers: int = Field(
        1,
        ge=1,
        le=64,
        description="Worker processes that parse and chunk documents, each document "
        "under the budgets below (ingest/sandbox.py); started at the first ingest, ~45 MB "
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
