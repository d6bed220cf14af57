"""Structured (JSON) replies from the fast LLM: one call, one timeout, one schema, and a
typed reason when any of it fails — so each stage can report its fallback."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from groundwire_core.errors import GroundwireError
from groundwire_orchestrator.llm.base import ChatMessage, LLMProvider, LLMRequest

M = TypeVar("M", bound=BaseModel)

_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


class StructuredReplyError(Exception):
    """Why a structured reply could not be used; ``reason`` is written for people."""

    def __init__(self, reason: str, *, dependency: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.dependency = dependency


def extract_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in ``text`` (models wrap JSON in fences or prose).
    Raises ValueError when there is none."""
    stripped = _FENCE.sub("", text.strip())
    start = stripped.find("{")
    if start < 0:
        raise ValueError("no JSON object in the reply")
    value, _ = json.JSONDecoder().raw_decode(stripped[start:])
    if not isinstance(value, dict):
        raise ValueError("the reply is not a JSON object")
    return value


def _first_error(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(root)"
    return f"{where}: {first['msg']}"


async def ask_json(
    llm: LLMProvider, system: str, user: str, schema: type[M], *, timeout_s: float,
    max_tokens: int = 800,
) -> M:
    """Asks the fast model for JSON matching ``schema``.

    Raises StructuredReplyError on a provider error, a timeout, a reply that is not
    JSON, or JSON that does not match the schema.
    """
    request = LLMRequest(
        system=system,
        messages=(ChatMessage("user", user),),
        role="fast",
        max_tokens=max_tokens,
        temperature=0.0,
    )
    try:
        async with asyncio.timeout(timeout_s):
            reply = await llm.complete(request, timeout_s=timeout_s)
    except TimeoutError:
        raise StructuredReplyError(
            f"the LLM did not answer within {timeout_s:g} s", dependency=f"llm:{llm.name}"
        ) from None
    except GroundwireError as error:
        raise StructuredReplyError(
            f"the LLM failed: {error.message}", dependency=error.dependency or f"llm:{llm.name}"
        ) from None
    try:
        data = extract_json_object(reply)
    except ValueError:
        raise StructuredReplyError("the LLM's reply was not valid JSON") from None
    try:
        return schema.model_validate(data)
    except ValidationError as error:
        raise StructuredReplyError(
            f"the LLM's JSON did not match the schema ({_first_error(error)})"
        ) from None
