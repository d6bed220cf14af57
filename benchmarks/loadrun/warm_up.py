"""One search and one chat before the sweep: the stack answers and the LLM is the fake."""

from __future__ import annotations

import json
import time
from typing import Any


def parse_sse(raw: str) -> list[tuple[str, Any]]:
    """The (event name, JSON data) pairs of a server-sent event stream. (The locustfile
    has its twin: importing it here would let gevent patch this process.)"""
    out: list[tuple[str, Any]] = []
    for block in raw.replace("\r\n", "\n").split("\n\n"):
        lines = [ln for ln in block.split("\n") if ln and not ln.startswith(":")]
        name = next((ln[6:].strip() for ln in lines if ln.startswith("event:")), "message")
        data = [ln[5:].strip() for ln in lines if ln.startswith("data:")]
        if data:
            out.append((name, json.loads("\n".join(data))))
    return out


def warm_up(httpx: Any, url: str) -> dict[str, Any]:
    """One search and one chat before the sweep: the stack answers, the LLM is the fake."""
    with httpx.Client(base_url=url, timeout=120) as client:
        t0 = time.perf_counter()
        search = client.post("/v1/search", json={"query": "how are citations checked"})
        search_ms = (time.perf_counter() - t0) * 1e3
        if search.status_code != 200:
            raise RuntimeError(f"warm-up search answered {search.status_code}: {search.text}")
        t0 = time.perf_counter()
        chat = client.post(
            "/v1/chat",
            json={
                "messages": [
                    {"role": "user", "content": "how are citations checked against the sources"}
                ]
            },
        )
        chat_ms = (time.perf_counter() - t0) * 1e3
        if chat.status_code != 200:
            raise RuntimeError(f"warm-up chat answered {chat.status_code}: {chat.text}")
    events = parse_sse(chat.text)
    done = [d for n, d in events if n == "done"]
    if not done:
        raise RuntimeError(f"warm-up chat ended without done: {[n for n, _ in events]}")
    stages = {s["name"]: s for n, d in events if n == "stages" for s in d["stages"]}
    if stages.get("analysis", {}).get("fallback"):
        raise RuntimeError(f"the fake LLM did not serve the analysis: {stages['analysis']}")
    return {
        "search_ms": round(search_ms, 1),
        "chat_ms": round(chat_ms, 1),
        "chat_mode": done[0]["mode"],
        "search_results": len(search.json()["results"]),
        "chat_stages": {
            n: {"ms": round(s["ms"], 1), "fallback": s["fallback"], "reason": s.get("reason", "")}
            for n, s in stages.items()
        },
    }
