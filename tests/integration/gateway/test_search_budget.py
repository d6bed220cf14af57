"""Acceptance: search is inside the cost controls over the real wire. A gateway
process charges each search the LLM tokens the orchestrator reports
(``SearchResponse.llm_usage``, here from the fake orchestrator: 250 tokens, 750 with
reasons) to the tenant's budget; once it is spent, search and chat both answer 429
``token_budget_exceeded`` before any orchestrator call, and another tenant is
unaffected."""

from __future__ import annotations

from typing import Any

import httpx

from tests.integration.gateway.conftest import TENANT_KEY

OTHER_KEY = "other-tenant-key-0123456789"
CHAT = {"messages": [{"role": "user", "content": "how do I install it"}]}


def test_search_spends_the_tenant_budget_then_both_routes_refuse(
    gateways: Any, fake_upstream: Any
) -> None:
    (gw,) = gateways.start(
        **fake_upstream.env(),
        API_KEYS=f"acme:{TENANT_KEY},other:{OTHER_KEY}",
        TOKEN_BUDGET_PER_DAY="1000",
    )
    acme = {"authorization": f"Bearer {TENANT_KEY}"}
    with httpx.Client(base_url=gw.url, timeout=10) as client:
        # 2 + 250, then 2 + 750 (reasons): 1004 spent, over the budget of 1000
        assert client.post("/v1/search", json={"query": "install"}, headers=acme).is_success
        reasoned = {"query": "install", "reasons": True}
        assert client.post("/v1/search", json=reasoned, headers=acme).is_success
        searches = fake_upstream.orchestrator.searches
        asks = len(fake_upstream.orchestrator.asks)
        for path, body in (("/v1/search", {"query": "q"}), ("/v1/chat", CHAT)):
            refused = client.post(path, json=body, headers=acme)
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["code"] == "token_budget_exceeded"
        assert fake_upstream.orchestrator.searches == searches
        assert len(fake_upstream.orchestrator.asks) == asks
        other = {"authorization": f"Bearer {OTHER_KEY}"}
        assert client.post("/v1/search", json={"query": "install"}, headers=other).is_success
