"""The retriever's outbound settings and a sync's byte limit: the policy a website sync
runs under comes from the settings (networks checked at start), and a definition's
max_bytes is bounded by the retriever's largest document."""

from __future__ import annotations

import ipaddress

import pytest
from pydantic import ValidationError

from groundwire_core.errors import InvalidInput
from groundwire_retriever.settings import RetrieverSettings
from groundwire_retriever.sync import SourceKind, SyncDefinition, check_definition
from groundwire_retriever.sync.definition import DEFAULT_MAX_BYTES, within_limit


def test_the_outbound_policy_comes_from_the_settings() -> None:
    settings = RetrieverSettings(
        outbound_allowed_hosts="docs.example.com, *.example.org",
        outbound_allowed_networks="10.20.0.0/16,::1",
        max_document_bytes=5 << 20,
    )
    policy = settings.outbound_policy()
    assert policy.allowed_hosts == ("docs.example.com", "*.example.org")
    assert policy.host_allowed("Docs.Example.com") and policy.host_allowed("a.example.org")
    assert not policy.host_allowed("example.org") and not policy.host_allowed("evil.com")
    assert policy.address_allowed(ipaddress.ip_address("10.20.3.4"))
    assert not policy.address_allowed(ipaddress.ip_address("10.21.0.1"))
    assert policy.max_bytes == 5 << 20
    default = RetrieverSettings().outbound_policy()
    assert default.allowed_hosts == () and default.allowed_networks == ()
    with pytest.raises(ValidationError, match="does not appear to be an IPv4 or IPv6 network"):
        RetrieverSettings(outbound_allowed_networks="10.0.0.0/8,intranet")


def test_max_bytes_above_the_retrievers_limit_is_refused_and_the_default_follows_it() -> None:
    web = SyncDefinition(SourceKind.WEB, "https://docs.example.com/", max_bytes=1 << 40)
    with pytest.raises(InvalidInput, match="max_bytes must be at most 1048576"):
        check_definition(web, max_bytes_limit=1 << 20)
    with pytest.raises(InvalidInput, match="max_bytes must be at most 20971520"):
        check_definition(web)  # the default limit: 20 MiB
    default = SyncDefinition(SourceKind.WEB, "https://docs.example.com/")
    assert default.max_bytes == DEFAULT_MAX_BYTES
    check_definition(default, max_bytes_limit=1 << 20)  # the default is not the caller's ask
    assert within_limit(default, 1 << 20).max_bytes == 1 << 20
    assert within_limit(default, 1 << 30) is default
