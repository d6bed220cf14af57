"""Gateway settings: environment variables prefixed GROUNDWIRE_GATEWAY_."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from groundwire_core.settings import ServiceSettings


class GatewaySettings(ServiceSettings):
    model_config = SettingsConfigDict(frozen=True, extra="ignore", env_prefix="GROUNDWIRE_GATEWAY_")

    port: int = Field(8080, ge=0, le=65535, description="HTTP port; 0 picks a free one.")
    orchestrator_addr: str = Field(
        "127.0.0.1:50054", description="gRPC address of the orchestrator."
    )
    retriever_addr: str = Field("127.0.0.1:50053", description="gRPC address of the retriever.")
    redis_url: str | None = Field(None, description="Redis for rate limits; unset = in process.")
    request_timeout_s: float = Field(
        15.0, gt=0, description="Deadline of one request, propagated to every service it reaches."
    )
    max_body_bytes: int = Field(1_048_576, ge=1024, description="Larger request bodies get 413.")
    default_collection: str = Field(
        "docs", description="Collection used when a request names none."
    )
