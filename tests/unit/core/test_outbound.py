"""The guarded outbound client against real sockets on 127.0.0.1: addresses refused
after resolution (a name resolving to loopback included) and on every redirect, the
connection made to the address that was checked, the host allow-list, the byte cap
while streaming, one message for every way of not getting an HTTP answer, and
credentials used on their own origin only and never shown."""

from __future__ import annotations

import gzip
import ipaddress
from collections.abc import Sequence

import pytest

from groundwire_core.outbound import (
    NO_ANSWER,
    NoAnswer,
    OutboundClient,
    OutboundPolicy,
    OutboundRefused,
    RedirectRefused,
    TooLarge,
    credentials_of,
    is_public,
    strip_credentials,
)
from tests.raw_server import (
    Answer,
    Recorder,
    banner,
    closed_port,
    endless,
    http,
    raw_server,
    silent,
)

LOOPBACK = OutboundPolicy.from_lists(networks="127.0.0.1/32")


class Names:
    """A resolver answering from ``names``, recording what it was asked."""

    def __init__(self, names: dict[str, list[str]]) -> None:
        self.names = names
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.calls.append(host)
        if host not in self.names:
            raise OSError("no such name")
        return self.names[host]


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.9", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),  # cloud metadata
        ("100.64.0.1", False),  # carrier-grade NAT
        ("0.0.0.0", False),
        ("224.0.0.251", False),  # multicast
        ("240.0.0.1", False),  # reserved
        ("::1", False),
        ("fe80::1", False),
        ("fd00::1", False),
        ("::ffff:127.0.0.1", False),  # IPv4-mapped loopback
        ("64:ff9b::a00:1", False),  # NAT64 of 10.0.0.1
        ("93.184.215.14", True),
        ("2606:2800:21f:cb07:6820:80da:af6b:8b2c", True),
    ],
)
def test_only_public_unicast_addresses_count_as_public(address: str, public: bool) -> None:
    assert is_public(ipaddress.ip_address(address)) is public


async def test_loopback_is_refused_by_literal_and_by_a_name_that_resolves_to_it() -> None:
    seen = Recorder()
    async with raw_server(http({"/metrics": Answer(body=b"secret_metric 1")}, seen)) as port:
        names = Names(
            {
                "docs.example.test": ["127.0.0.1"],
                "mixed.example.test": [
                    "93.184.215.14",
                    "127.0.0.1",
                ],
            }
        )
        async with OutboundClient(resolver=names) as client:
            for url in (
                f"http://127.0.0.1:{port}/metrics",
                f"http://docs.example.test:{port}/metrics",
                f"http://mixed.example.test:{port}/metrics",  # one private answer is enough
                f"http://[::ffff:127.0.0.1]:{port}/metrics",
            ):
                with pytest.raises(OutboundRefused, match="private, loopback") as refused:
                    await client.fetch(url)
                assert "secret_metric" not in refused.value.message
        async with OutboundClient() as client:  # the system resolver: localhost
            with pytest.raises(OutboundRefused):
                await client.fetch(f"http://localhost:{port}/metrics")
    assert seen.requests == [], "nothing was sent to a refused address"


async def test_an_allowed_network_is_reached_at_the_checked_address_with_its_host_name() -> None:
    seen = Recorder()
    async with raw_server(http({"/a": Answer(body=b"page a")}, seen)) as port:
        names = Names({"docs.example.test": ["127.0.0.1"]})
        async with OutboundClient(LOOPBACK, resolver=names) as client:
            response, body = await client.fetch(f"http://docs.example.test:{port}/a")
    assert (response.status_code, body) == (200, b"page a")
    assert response.url == f"http://docs.example.test:{port}/a"
    assert seen.requests[0].headers["host"] == f"docs.example.test:{port}"
    assert names.calls == ["docs.example.test"], "resolved once, and connected to that answer"


async def test_every_redirect_hop_is_checked_against_addresses_hosts_and_the_callers_rule() -> None:
    seen, inner = Recorder(), Recorder()
    async with raw_server(http({"/": Answer(body=b"internal")}, inner)) as inner_port:
        pages = {
            "/to-internal": Answer(
                302, headers={"location": f"http://internal.test:{inner_port}/"}
            ),
            "/to-ten": Answer(301, headers={"location": "http://ten.test/"}),
            "/to-other": Answer(302, headers={"location": f"http://other.test:{inner_port}/"}),
            "/loop": Answer(302, headers={"location": "/loop"}),
        }
        async with raw_server(http(pages, seen)) as port:
            names = Names(
                {
                    "site.test": ["127.0.0.1"],
                    "internal.test": ["127.0.0.2"],  # loopback, outside the allowed /32
                    "ten.test": ["10.0.0.1"],
                    "other.test": ["127.0.0.1"],
                }
            )
            site = f"http://site.test:{port}"
            async with OutboundClient(LOOPBACK, resolver=names) as client:
                for path in ("/to-internal", "/to-ten"):
                    with pytest.raises(OutboundRefused, match="private, loopback"):
                        await client.fetch(site + path)
                with pytest.raises(RedirectRefused, match="more than 5 redirects"):
                    await client.fetch(site + "/loop")
                with pytest.raises(RedirectRefused, match="not mine") as ruled:
                    await client.fetch(site + "/to-other", redirect_rule=lambda url: "not mine")
                assert ruled.value.target == f"http://other.test:{inner_port}/"
            allow_list = OutboundPolicy(
                allowed_hosts=("site.test",), allowed_networks=LOOPBACK.allowed_networks
            )
            async with OutboundClient(allow_list, resolver=names) as client:
                with pytest.raises(OutboundRefused, match="not on the outbound allow-list"):
                    await client.fetch(site + "/to-other")
    assert inner.requests == [], "no refused hop was ever connected to"
    assert "ten.test" in names.calls and "internal.test" in names.calls


async def test_the_byte_cap_holds_while_streaming_and_before_a_declared_length() -> None:
    stream = Recorder()
    async with raw_server(endless(stream)) as port:
        policy = OutboundPolicy.from_lists(networks="127.0.0.1/32", max_bytes=1 << 20)
        async with OutboundClient(policy) as client:
            with pytest.raises(TooLarge, match="over the limit of 1048576 bytes"):
                await client.fetch(f"http://127.0.0.1:{port}/", max_bytes=1 << 40)
    assert stream.sent < 32 << 20, f"the client hung up at the cap (server sent {stream.sent})"

    declared = Recorder()
    big = Answer(body=b"x" * 50_000)
    async with raw_server(http({"/": big}, declared)) as port:
        async with OutboundClient(LOOPBACK) as client:
            async with client.stream(f"http://127.0.0.1:{port}/") as response:
                with pytest.raises(TooLarge, match="the body is 50000 bytes; the limit is 1000"):
                    await response.read(1000)
            async with client.stream(f"http://127.0.0.1:{port}/") as response:  # robots.txt's way
                assert await response.read(1000, truncate=True) == b"x" * 1000


async def test_a_compressed_body_is_capped_by_its_inflated_size() -> None:
    bomb = gzip.compress(b"\0" * (64 << 20))  # ~64 KiB that inflate to 64 MiB
    pages = {
        "/bomb": Answer(body=bomb, headers={"content-encoding": "gzip"}),
        "/small": Answer(body=gzip.compress(b"zebra " * 100), headers={"content-encoding": "gzip"}),
        "/br": Answer(body=b"\x0b\x02\x80", headers={"content-encoding": "br"}),
    }
    async with raw_server(http(pages, Recorder())) as port:
        base = f"http://127.0.0.1:{port}"
        async with OutboundClient(LOOPBACK) as client:
            assert len(bomb) < 1 << 20, "under the cap as sent"
            with pytest.raises(TooLarge, match="over the limit of 1048576 bytes"):
                await client.fetch(f"{base}/bomb", max_bytes=1 << 20)
            _, small = await client.fetch(f"{base}/small")
            assert small == b"zebra " * 100
            with pytest.raises(OutboundRefused, match="content encoding 'br'"):
                await client.fetch(f"{base}/br")


async def test_closed_open_non_http_and_silent_ports_give_one_message() -> None:
    quick = OutboundPolicy.from_lists(networks="127.0.0.1/32")
    quick = OutboundPolicy(allowed_networks=quick.allowed_networks, timeout_s=0.5)
    names = Names({})
    messages = []
    async with raw_server(banner) as open_port, raw_server(silent) as silent_port:
        async with OutboundClient(quick, resolver=names) as client:
            for url in (
                f"http://127.0.0.1:{closed_port()}/",
                f"http://127.0.0.1:{open_port}/",
                f"http://127.0.0.1:{silent_port}/",
                "http://no-such-host.test/",
            ):
                with pytest.raises(NoAnswer) as failed:
                    await client.fetch(url)
                assert failed.value.message.startswith(url)
                messages.append(failed.value.message.removeprefix(url))
    assert messages == [f": {NO_ANSWER}"] * 4


async def test_credentials_go_to_their_origin_only_and_are_never_shown() -> None:
    url = "https://reader:s3cret@Docs.Example.com:8443/guide/?q=1"
    assert strip_credentials(url) == "https://Docs.Example.com:8443/guide/?q=1"
    assert strip_credentials("http://docs.example.com/a@b") == "http://docs.example.com/a@b"
    creds = credentials_of(url)
    assert creds is not None and creds.origin == ("https", "docs.example.com", 8443)
    assert "s3cret" not in repr(creds)

    other = Recorder()
    async with raw_server(http({"/": Answer(body=b"elsewhere")}, other)) as other_port:
        seen = Recorder()
        pages = {
            "/": Answer(body=b"home"),
            "/away": Answer(302, headers={"location": f"http://127.0.0.1:{other_port}/"}),
        }
        async with raw_server(http(pages, seen)) as port:
            start = f"http://reader:s3cret@127.0.0.1:{port}/"
            async with OutboundClient(LOOPBACK, credentials=credentials_of(start)) as client:
                response, _ = await client.fetch(start)
                away, body = await client.fetch(f"http://127.0.0.1:{port}/away")
    assert response.url == f"http://127.0.0.1:{port}/" and "s3cret" not in away.url
    assert seen.requests[0].headers["authorization"] == "Basic cmVhZGVyOnMzY3JldA=="
    assert body == b"elsewhere" and "authorization" not in other.requests[0].headers
