"""Gateway settings: environment variables prefixed GROUNDWIRE_GATEWAY_."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from groundwire_core.settings import ServiceSettings

RedisFailurePolicy = Literal["open", "closed"]

_TENANT = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MIN_KEY_CHARS = 8


def parse_tenant_keys(raw: str) -> list[tuple[str, str]]:
    """``"tenant:key,tenant2:key2"`` as (tenant, key) pairs; ValueError when malformed.

    A tenant may hold several keys (key rotation); the same key twice is an error.
    """
    pairs: list[tuple[str, str]] = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        tenant, sep, key = item.partition(":")
        if not sep or not _TENANT.match(tenant):
            raise ValueError("expected 'tenant:key' items (tenant: letters, digits, . _ -)")
        if len(key) < MIN_KEY_CHARS or any(c.isspace() for c in key):
            raise ValueError(f"an API key needs {MIN_KEY_CHARS}+ characters and no spaces")
        pairs.append((tenant, key))
    keys = [k for _, k in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("the same API key is listed twice")
    return pairs


def parse_tenant_numbers(raw: str) -> dict[str, int]:
    """``"tenant:100000,other:0"`` as {tenant: n}; ValueError when malformed."""
    out: dict[str, int] = {}
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        tenant, sep, number = item.partition(":")
        if not sep or not _TENANT.match(tenant) or not number.strip().isdigit():
            raise ValueError("expected 'tenant:number' items")
        out[tenant] = int(number)
    return out


class GatewaySettings(ServiceSettings):
    # hide_input_in_errors: a malformed key list must not print the keys in the error
    model_config = SettingsConfigDict(
        frozen=True, extra="ignore", env_prefix="GROUNDWIRE_GATEWAY_", hide_input_in_errors=True
    )

    port: int = Field(8080, ge=0, le=65535, description="HTTP port; 0 picks a free one.")
    orchestrator_addr: str = Field(
        "127.0.0.1:50054", description="gRPC address of the orchestrator."
    )
    retriever_addr: str = Field("127.0.0.1:50053", description="gRPC address of the retriever.")
    request_timeout_s: float = Field(
        15.0, gt=0, description="Deadline of one request, propagated to every service it reaches."
    )
    chat_timeout_s: float = Field(
        60.0, gt=0, description="Deadline of one chat (the whole streamed answer)."
    )
    admin_timeout_s: float = Field(
        300.0, gt=0, description="Deadline of one admin request (ingest embeds documents)."
    )
    max_body_bytes: int = Field(1_048_576, ge=1024, description="Larger request bodies get 413.")
    max_upload_bytes: int = Field(
        20 * 1_048_576, ge=1024, description="Larger multipart uploads (admin) get 413."
    )
    default_collection: str = Field(
        "docs", description="Collection used when a request names none."
    )
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        description="A connection must send a request's complete headers this long after "
        "it opens (or after its first byte, between keep-alive requests), or it is closed.",
    )
    body_timeout_s: float = Field(
        30.0,
        gt=0,
        description="The whole request body must arrive this long after the headers, or "
        "the request gets 408.",
    )
    health_cache_s: float = Field(
        1.0,
        ge=0,
        description="/v1/health answers from a result this fresh; concurrent callers share "
        "one round of dependency checks.",
    )
    forwarded_allow_ips: str = Field(
        "",
        description="Proxies whose X-Forwarded-For is trusted for the client address "
        "(comma-separated IPs, '*' for any); empty trusts none.",
    )

    # --- validation at the edge -------------------------------------------------------
    max_input_tokens: int = Field(
        6000,
        ge=1,
        description="Approximate input tokens of one chat (4 characters ~ 1 token, "
        "plus 4 per message).",
    )
    collection_cache_s: float = Field(
        5.0, ge=0, description="How long the known collections and their fields are cached."
    )

    # --- the system of record ------------------------------------------------------------
    database_url: SecretStr = Field(
        SecretStr(""),
        description="The system of record of tenants, API keys, audit events, conversations "
        "and feedback: postgresql://user:password@host/db (compose, Kubernetes) or "
        "sqlite:///path (the embedded default); empty = a throw-away SQLite file, removed at stop. "
        "`groundwire up` sets sqlite:///GROUNDWIRE_HOME/state/gateway.sqlite3.",
    )
    migrate_on_start: bool = Field(
        True,
        description="Upgrade the gateway's tables when it starts (replicas take a lock, so "
        "they never race); false = refuse to start until `groundwire db upgrade` (or the "
        "deployment's migrate job) has run.",
    )
    conversation_retention_days: int = Field(
        90,
        ge=0,
        le=36_500,
        description="How long conversations, their answers and feedback are kept (days; "
        "older ones are deleted, checked at most hourly); 0 = never stored (no answer ids, "
        "no feedback, an empty report).",
    )

    # --- API keys ------------------------------------------------------------------------
    admin_api_keys: SecretStr = Field(
        SecretStr(""),
        description="'tenant:key,…' allowed on admin routes; empty disables the admin routes.",
    )
    api_keys: SecretStr = Field(
        SecretStr(""), description="'tenant:key,…' identifying tenants on the public routes."
    )
    key_cache_s: float = Field(
        2.0,
        ge=0,
        le=60,
        description="How long a replica answers a created API key from memory before "
        "reading the system of record again: a key revoked through one replica is refused "
        "by every other within this bound (at once by the one revoking it); 0 = no cache.",
    )
    require_api_key: bool = Field(
        False, description="Reject public-route requests without a valid key (401)."
    )

    # --- abuse and cost controls -----------------------------------------------------
    redis_url: str | None = Field(
        None, description="Redis for limits shared by all replicas; unset = in process."
    )
    redis_failure_policy: RedisFailurePolicy = Field(
        "open",
        description="Redis unreachable: 'open' keeps serving with per-replica limits in "
        "process (health says degraded), 'closed' answers 503 naming redis.",
    )
    redis_timeout_s: float = Field(0.5, gt=0, description="Connect and command timeout.")
    redis_retry_s: float = Field(
        0.25,
        gt=0,
        description="While Redis is unreachable it is probed this often; the first answer "
        "puts the replica back on the shared limits.",
    )
    redis_health_check_s: float = Field(
        1.0,
        ge=0,
        description="A pooled Redis connection idle this long is PINGed before use (0 = never).",
    )
    redis_max_connections: int = Field(
        64, ge=1, description="Connection pool size per replica (callers wait for a free one)."
    )
    redis_key_prefix: str = Field("gw", min_length=1, description="Prefix of every Redis key.")
    rate_limit_per_min: int = Field(
        15, ge=0, description="Chats per client (IP or API key) per window; 0 = off."
    )
    search_rate_limit_per_min: int = Field(
        60, ge=0, description="Searches per client (IP or API key) per window; 0 = off."
    )
    rate_limit_window_s: float = Field(60.0, gt=0, description="Sliding window length.")
    daily_quota: int = Field(
        10_000, ge=0, description="Chats and searches per tenant (API key) per UTC day; 0 = off."
    )
    anonymous_daily_quota: int = Field(
        1_000,
        ge=0,
        description="Chats and searches per UTC day shared by all callers without an API key "
        "(their own bucket: it never spends a tenant's quota); 0 = off.",
    )
    token_budget_per_day: int = Field(
        2_000_000,
        ge=0,
        description="Tokens per tenant per UTC day: chat input (approximate) and answer, "
        "search queries and the LLM tokens of their analysis and listwise calls; 0 = off.",
    )
    chat_token_reserve: int = Field(
        4000,
        ge=0,
        description="Tokens a chat reserves from its tenant's budget at admission beyond "
        "its input: an estimate of its LLM calls (analysis, listwise, answer, judge), "
        "settled to what they used when it ends. Concurrent chats pass a budget by at most "
        "what one spends beyond this; 0 = charge the input at admission only.",
    )
    tenant_token_budgets: str = Field(
        "", description="Per-tenant overrides 'tenant:tokens,…' of token_budget_per_day."
    )
    max_inflight_chats: int = Field(
        32, ge=0, description="Chats in flight across all replicas; 0 = off."
    )
    user_token_secret: SecretStr = Field(
        SecretStr(""),
        description="Shared secret of HS256 end-user tokens (X-Groundwire-User-Token); "
        "empty = no HS256.",
    )
    user_token_key_file: str = Field(
        "",
        description="PEM public key or JWKS JSON file of RS256/ES256 end-user tokens; "
        "empty = none. With neither this nor the secret, user tokens are refused.",
    )
    user_token_audience: str = Field(
        "groundwire", min_length=1, description="The 'aud' an end-user token must carry."
    )
    user_token_issuer: str = Field(
        "", description="The 'iss' an end-user token must carry; empty = not checked."
    )
    user_token_user_claim: str = Field(
        "sub", min_length=1, description="The end-user token claim holding the user id."
    )
    user_token_groups_claim: str = Field(
        "groups", min_length=1, description="The claim holding the user's groups (a list)."
    )
    user_token_leeway_s: float = Field(
        30.0, ge=0, le=600, description="Clock skew allowed on 'exp' and 'nbf'."
    )

    @field_validator("admin_api_keys", "api_keys")
    @classmethod
    def _keys_parse(cls, value: SecretStr) -> SecretStr:
        parse_tenant_keys(value.get_secret_value())
        return value

    @field_validator("tenant_token_budgets")
    @classmethod
    def _budgets_parse(cls, value: str) -> str:
        parse_tenant_numbers(value)
        return value

    @field_validator("redis_url")
    @classmethod
    def _empty_is_none(cls, value: str | None) -> str | None:
        return value or None
