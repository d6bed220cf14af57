"""Checks on what callers hand the store: names, specs, queries, chunk ids, vectors.

Each raises ``InvalidInput`` with a message written for the caller, before any
engine sees the input, so both engines refuse exactly the same things.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Sequence

import numpy as np

from groundwire_core.errors import InvalidInput
from groundwire_retriever.domain import CollectionSpec, SearchQuery, SparseVec
from groundwire_retriever.store.payload import CHUNK_KEYWORD_FIELDS, REVISION_KEY

__all__ = [
    "COLLECTION_NAME_RE",
    "MAX_LIMIT",
    "canonical_id",
    "check_model",
    "dense_values",
    "sparse_values",
    "validate_collection_name",
    "validate_query",
    "validate_spec",
]

COLLECTION_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
FIELD_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_NOT_FILTERABLE = frozenset({"text", "chunk_index", "created_at", "metadata", REVISION_KEY})

MAX_DENSE_DIMS = 65_536
MAX_LIMIT = 10_000
_SPARSE_INDEX_MAX = 2**32


def validate_collection_name(name: str) -> None:
    if not isinstance(name, str) or not COLLECTION_NAME_RE.fullmatch(name):
        raise InvalidInput(
            f"collection name {name!r} is not valid: use 1-64 characters, lowercase "
            "letters, digits, '_' or '-', starting with a letter or digit"
        )


def validate_spec(spec: CollectionSpec) -> None:
    validate_collection_name(spec.name)
    if isinstance(spec.dense_dims, bool) or not isinstance(spec.dense_dims, int):
        raise InvalidInput("dense_dims must be an integer")
    if not 1 <= spec.dense_dims <= MAX_DENSE_DIMS:
        raise InvalidInput(
            f"dense_dims must be between 1 and {MAX_DENSE_DIMS}, got {spec.dense_dims}"
        )
    multi = spec.multi_vector_dims
    if isinstance(multi, bool) or not isinstance(multi, int) or not 0 <= multi <= MAX_DENSE_DIMS:
        raise InvalidInput(f"multi_vector_dims must be between 0 and {MAX_DENSE_DIMS}")
    seen: set[str] = set()
    for name in spec.filterable:
        if not isinstance(name, str) or not FIELD_NAME_RE.fullmatch(name):
            raise InvalidInput(
                f"filterable field {name!r} is not valid: use letters, digits and '_' "
                "(at most 64), not starting with a digit"
            )
        if name in _NOT_FILTERABLE:
            raise InvalidInput(
                f"field {name!r} cannot be filterable; filterable fields are keyword "
                f"chunk fields ({', '.join(sorted(CHUNK_KEYWORD_FIELDS))}) or metadata keys"
            )
        if name in seen:
            raise InvalidInput(f"filterable field {name!r} is listed twice")
        seen.add(name)


def validate_query(query: SearchQuery) -> None:
    """``InvalidInput`` for a query no engine can run."""
    if not query.paths:
        raise InvalidInput("a search needs at least one path (dense, sparse or bm25)")
    for label, value in (("limit", query.limit), ("path_limit", query.path_limit)):
        if not 1 <= value <= MAX_LIMIT:
            raise InvalidInput(f"{label} must be between 1 and {MAX_LIMIT}, got {value}")
    if query.rrf_k < 0:
        raise InvalidInput(f"rrf_k must not be negative, got {query.rrf_k}")
    for path, weight in query.weights.items():
        if not math.isfinite(weight) or weight < 0:
            raise InvalidInput(f"the weight of the {path.value} path must be a non-negative number")
    if not math.isfinite(query.dense_floor):
        raise InvalidInput("dense_floor must be a finite number")
    if query.drop_off is not None and not (
        math.isfinite(query.drop_off) and 0.0 <= query.drop_off <= 1.0
    ):
        raise InvalidInput(f"drop_off must be between 0 and 1, got {query.drop_off}")


def check_model(spec: CollectionSpec, model: str, what: str) -> None:
    """``InvalidInput`` when ``what`` (vectors) came from another embedder model than
    the one the collection was indexed with: vectors of two models are not comparable,
    and searching or storing them together gives wrong results, not an error. "" on
    either side is not checked (collections from before models were recorded, callers
    that do not say)."""
    if model and spec.embedder_model and model != spec.embedder_model:
        raise InvalidInput(
            f"collection {spec.name!r} was indexed with {spec.embedder_model}, but {what} "
            f"came from {model}: re-index the collection with the new model (`groundwire "
            f"ingest --full-reindex`, or full_reindex in the ingest API), or serve "
            f"{spec.embedder_model} again"
        )


def canonical_id(chunk_id: str, where: str) -> str:
    try:
        return str(uuid.UUID(chunk_id))
    except (ValueError, TypeError, AttributeError):
        raise InvalidInput(f"{where}: chunk_id {chunk_id!r} is not a UUID") from None


def dense_values(vec: Sequence[float], dims: int, what: str) -> list[float]:
    if len(vec) != dims:
        raise InvalidInput(f"{what} has {len(vec)} dimensions; the collection expects {dims}")
    try:
        arr = np.asarray(vec, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInput(f"{what} must contain only numbers") from None
    if not np.isfinite(arr).all():
        raise InvalidInput(f"{what} contains NaN or infinite values")
    if not arr.any():
        raise InvalidInput(f"{what} is all zeros; cosine similarity needs a non-zero vector")
    return [float(x) for x in arr]


def sparse_values(vec: SparseVec, what: str) -> SparseVec | None:
    """A checked copy with plain ints and floats, or None for an empty vector."""
    if len(vec.indices) != len(vec.values):
        raise InvalidInput(f"{what} has {len(vec.indices)} indices but {len(vec.values)} values")
    if not vec.indices:
        return None
    indices = tuple(int(i) for i in vec.indices)
    if min(indices) < 0 or max(indices) >= _SPARSE_INDEX_MAX:
        raise InvalidInput(f"{what} has an index outside 0..{_SPARSE_INDEX_MAX - 1}")
    if len(set(indices)) != len(indices):
        raise InvalidInput(f"{what} repeats an index")
    values = tuple(float(v) for v in vec.values)
    if not all(math.isfinite(v) for v in values):
        raise InvalidInput(f"{what} contains NaN or infinite values")
    return SparseVec(indices, values)
