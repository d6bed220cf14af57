"""The Qdrant-server store built from the retriever's settings: the cluster layout of
new collections and, with several replicas, their coordination."""

from __future__ import annotations

from dataclasses import replace

from qdrant_client import QdrantClient, models

from groundwire_retriever.settings import RetrieverSettings
from groundwire_retriever.store.qdrant import ClusterLayout, QdrantServerStore
from groundwire_retriever.store.replicas import ReplicaPolicy

_READ_CONSISTENCY: dict[str, models.ReadConsistencyType | int] = {
    "1": 1,
    "majority": models.ReadConsistencyType.MAJORITY,
    "quorum": models.ReadConsistencyType.QUORUM,
    "all": models.ReadConsistencyType.ALL,
}


def cluster_layout(settings: RetrieverSettings) -> ClusterLayout:
    """Shards, replication and consistency of the collections this retriever creates."""
    return ClusterLayout(
        shard_number=settings.qdrant_shards,
        replication_factor=settings.qdrant_replication_factor,
        write_consistency_factor=settings.qdrant_write_consistency,
        read_consistency=_READ_CONSISTENCY[settings.qdrant_read_consistency],
    )


def replica_policy(settings: RetrieverSettings, *, holder: str | None = None) -> ReplicaPolicy:
    """The replicas' timings; ValueError unless refresh < stale-after < grace.

    ``holder`` names this replica in the lease (default: host, pid and a random tag)."""
    policy = ReplicaPolicy(
        refresh_s=settings.replica_refresh_s,
        stale_after_s=settings.replica_stale_after_s,
        grace_s=settings.replica_grace_s,
        lease_s=settings.replica_lease_s,
    )
    return replace(policy, holder=holder) if holder else policy


def qdrant_store(
    settings: RetrieverSettings,
    location: str,
    *,
    client: QdrantClient | None = None,
    holder: str | None = None,
) -> QdrantServerStore:
    """The store on the Qdrant server (or local mode) at ``location``; ``client``
    shares an already built client (replicas in one test process)."""
    api_key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
    return QdrantServerStore(
        location,
        api_key=api_key,
        timeout_s=settings.qdrant_timeout_s,
        cluster=cluster_layout(settings),
        replicas=replica_policy(settings, holder=holder) if settings.replicas else None,
        client=client,
    )
