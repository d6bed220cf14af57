"""Request and response bodies of the HTTP API (pydantic; the OpenAPI schema comes
from here)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

COLLECTION_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"


class FieldFilter(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    field: str = Field(min_length=1, max_length=64, description="A filterable payload field.")
    any_of: list[str] = Field(min_length=1, max_length=64, description="Accepted values.")


class SearchBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    query: str = Field(min_length=1, max_length=4000, description="What to search for.")
    collection: str | None = Field(
        None, pattern=COLLECTION_PATTERN, description="Collection; the server default when absent."
    )
    limit: int = Field(10, ge=1, le=50, description="Results to return.")
    filters: list[FieldFilter] = Field(default_factory=list, max_length=16)
    rerank: bool = Field(True, description="Rerank with the cross-encoder when available.")

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the query is blank")
        return value


class StageOut(BaseModel):
    name: str
    ms: float
    fallback: bool
    reason: str = ""
    dependency: str = ""
    details: dict[str, str] = Field(default_factory=dict)


class SearchResult(BaseModel):
    rank: int
    score: float
    chunk_id: str
    source_id: str
    title: str
    heading_path: list[str]
    url: str
    text: str
    match_reason: str = ""
    injection_flagged: bool = False


class SearchResponse(BaseModel):
    collection: str
    results: list[SearchResult]
    stages: list[StageOut]
    request_id: str


class DependencyOut(BaseModel):
    status: Literal["serving", "not_serving", "disabled"]
    target: str = ""
    latency_ms: float = 0.0
    message: str = ""


class HealthResponse(BaseModel):
    status: Literal["ok", "degraded", "down"]
    dependencies: dict[str, DependencyOut]


class ErrorDetail(BaseModel):
    code: str
    message: str
    request_id: str
    dependency: str | None = None
    details: object | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail
