"""The one guarded HTTP client for every fetch of a URL that a caller named.

A website sync (its pages, robots.txt, sitemaps) and any live fetch the services make
go through :class:`OutboundClient`, never through a bare ``httpx`` client: the URL
comes from a caller, and an unguarded fetch is a server-side request forgery into
whatever the service's network reaches (metrics ports, cloud metadata, the cluster's
own services), and its error messages a port scanner.

Each hop, the first and every redirect, is checked the same way before anything is
sent:

- the scheme is on the allow-list (http, https) and the host on the host allow-list
  when the operator set one;
- the host is resolved, and every address it resolves to must be public: loopback,
  private, link-local, multicast, reserved and other non-global addresses (IPv4-mapped
  and NAT64 forms included) are refused unless one of the operator's allowed networks
  holds them;
- the request is sent to the address that was checked (the URL's host kept in the
  Host header and as the TLS server name, so certificates are still verified against
  it), so a name that resolves differently a moment later (DNS rebinding) cannot
  move the connection.

Redirects are followed by hand, one hop at a time, each hop checked as above and by
the caller's own rule (a crawl's scope and robots.txt). Bodies are streamed and
reading stops at a hard byte cap (a compressed body's cap counts inflated bytes); no
body is held beyond it. Every failure to get an HTTP answer (connection refused or
reset, a port that does not speak HTTP, a TLS failure, a timeout, a name that does not
resolve) is reported with one message, so a caller cannot tell a closed port from an
open one. Credentials in a URL are used for the request (as HTTP basic auth, only on
the URL's own origin) and never kept: :func:`strip_credentials` gives the URL to store
and show.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import socket
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx

from groundwire_core.errors import InvalidInput, Unavailable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""``(host, port) -> addresses``; the default asks the system (getaddrinfo)."""
RedirectRule = Callable[[str], str]
"""A caller's own check of a redirect's target: "" to follow it, else why not."""

DEFAULT_MAX_BYTES = 20 * 1024 * 1024
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_TOTAL_TIMEOUT_S = 120.0
MAX_REDIRECTS = 5
USER_AGENT = "groundwire"
NO_ANSWER = "no HTTP answer (the host did not answer, refused, or does not speak HTTP)"
"""The one message for every way of not getting an HTTP answer."""
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class OutboundRefused(InvalidInput):
    """The URL, or a redirect's target, is not allowed: its scheme, its host, an
    address it resolves to, or the caller's redirect rule. Nothing was sent to it."""

    def __init__(self, message: str, *, target: str = "") -> None:
        super().__init__(message)
        self.target = target
        """The refused URL (credentials stripped)."""


class RedirectRefused(OutboundRefused):
    """A redirect the caller's rule (or the redirect limit) did not follow."""


class NoAnswer(Unavailable):
    """No HTTP answer came: the one error for refused, reset, timed-out, non-HTTP and
    unresolvable, whose message never tells them apart."""


class TooLarge(InvalidInput):
    """The body is larger than the byte cap; reading stopped there."""

    def __init__(self, message: str, *, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


@dataclass(frozen=True)
class OutboundPolicy:
    """What outbound fetches may reach. The default reaches any public host over
    http(s) and nothing private."""

    allowed_hosts: tuple[str, ...] = ()
    """Host names that may be fetched (``docs.example.com``, or ``*.example.com`` for
    its subdomains); empty = any host."""
    allowed_networks: tuple[IPNetwork, ...] = ()
    """Networks reachable even though not public (``10.0.0.0/8`` for an intranet docs
    site, ``127.0.0.1/32`` on a developer's machine)."""
    schemes: frozenset[str] = frozenset({"http", "https"})
    max_bytes: int = DEFAULT_MAX_BYTES
    """The hard cap on a body, whatever a caller asks for."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    """Per step: connecting, and each wait for bytes."""
    total_timeout_s: float = DEFAULT_TOTAL_TIMEOUT_S
    """A whole fetch, redirects and body included (a server trickling bytes)."""
    max_redirects: int = MAX_REDIRECTS

    @classmethod
    def from_lists(
        cls, hosts: str = "", networks: str = "", *, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> OutboundPolicy:
        """A policy from comma-separated host patterns and CIDR networks (as settings
        spell them). Raises ValueError for a network that is not a CIDR."""
        return cls(
            allowed_hosts=tuple(h.strip().lower() for h in hosts.split(",") if h.strip()),
            allowed_networks=tuple(
                ipaddress.ip_network(n.strip(), strict=False)
                for n in networks.split(",")
                if n.strip()
            ),
            max_bytes=max_bytes,
        )

    def host_allowed(self, host: str) -> bool:
        """Whether ``host`` is on the host allow-list (always, with no list)."""
        if not self.allowed_hosts:
            return True
        host = host.lower().rstrip(".")
        for pattern in self.allowed_hosts:
            if pattern.startswith("*."):
                if host.endswith(pattern[1:]):
                    return True
            elif host == pattern:
                return True
        return False

    def address_allowed(self, address: IPAddress) -> bool:
        """Whether a connection may go to ``address``: a public one, or one in an
        allowed network."""
        if any(address in network for network in self.allowed_networks):
            return True
        return is_public(address)


def is_public(address: IPAddress) -> bool:
    """A globally routable unicast address (IPv4-mapped and NAT64 IPv6 forms judged by
    the IPv4 address they carry)."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return is_public(address.ipv4_mapped)
        if address in _NAT64:
            return is_public(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return address.is_global and not address.is_multicast


@dataclass(frozen=True)
class Credentials:
    """A URL's user and password, sent only to the URL's own origin."""

    origin: tuple[str, str, int]
    username: str
    password: str = field(repr=False)


def strip_credentials(url: str) -> str:
    """``url`` without a user or password (what is stored, shown and used as an id)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def credentials_of(url: str) -> Credentials | None:
    """The user and password in ``url``, or None."""
    parsed = httpx.URL(url)
    if not parsed.userinfo:
        return None
    return Credentials(_origin(parsed), parsed.username, parsed.password)


def _origin(url: httpx.URL) -> tuple[str, str, int]:
    default = 443 if url.scheme == "https" else 80
    return (url.scheme, url.host, url.port or default)


async def system_resolver(host: str, port: int) -> Sequence[str]:
    """Every address the system resolves ``host`` to."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass
class OutboundResponse:
    """An answer whose headers are in and whose body is not yet read."""

    url: str
    """The URL that answered, after redirects (credentials stripped)."""
    status_code: int
    headers: httpx.Headers
    _response: httpx.Response
    _cap: int
    _deadline: float

    async def read(self, limit: int | None = None, *, truncate: bool = False) -> bytes:
        """The body, at most ``limit`` bytes (never more than the policy's cap).
        Raises TooLarge as soon as the declared length or the bytes received pass it
        (nothing past the cap is kept; with ``truncate`` the first bytes up to the
        cap are the answer instead), NoAnswer when the body does not arrive."""
        cap = self._cap if limit is None else min(limit, self._cap)
        declared = self.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > cap and not truncate:
            raise TooLarge(
                f"{self.url}: the body is {declared} bytes; the limit is {cap}", limit=cap
            )
        inflate = _inflater(self.url, self.headers.get("content-encoding", ""))
        body = bytearray()
        try:
            async with asyncio.timeout_at(self._deadline):
                async for raw in self._response.aiter_raw():
                    room = cap - len(body)
                    piece = raw if inflate is None else inflate.decompress(raw, room + 1)
                    if len(piece) > room and truncate:
                        body.extend(piece[:room])
                        break
                    if len(piece) > room:
                        raise TooLarge(
                            f"{self.url}: the body is over the limit of {cap} bytes", limit=cap
                        )
                    body.extend(piece)
        except (httpx.HTTPError, TimeoutError, zlib.error):
            raise NoAnswer(f"{self.url}: {NO_ANSWER}", dependency="website") from None
        return bytes(body)


def _inflater(url: str, encoding: str) -> zlib._Decompress | None:
    """A decoder for a gzip or deflate body, None for an identity one. Inflated here
    with a bound on each step's output, not by httpx: its decoders inflate a whole
    network read at once (a compression bomb's 64 KiB is ~64 MiB). Raises
    OutboundRefused for another encoding (identity was asked for)."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip", "deflate"):
        return zlib.decompressobj(zlib.MAX_WBITS | 32)  # zlib or gzip header, detected
    raise OutboundRefused(f"{url}: the content encoding {encoding!r} is not supported", target=url)


class OutboundClient:
    """Fetches under an :class:`OutboundPolicy` (see the module). Open it with
    ``async with``; ``transport`` is for tests and proxies, ``resolver`` for tests."""

    def __init__(
        self,
        policy: OutboundPolicy | None = None,
        *,
        credentials: Credentials | None = None,
        user_agent: str = USER_AGENT,
        transport: httpx.AsyncBaseTransport | None = None,
        resolver: Resolver = system_resolver,
    ) -> None:
        self.policy = policy or OutboundPolicy()
        self._credentials = credentials
        self._resolver = resolver
        self._client = httpx.AsyncClient(
            transport=transport,
            timeout=self.policy.timeout_s,
            follow_redirects=False,
            trust_env=False,  # a proxy from the environment would bypass the address check
            # A connection is made to a checked address; kept alive, it could serve a
            # second host name on the same address under the first one's TLS name.
            limits=httpx.Limits(max_keepalive_connections=0),
            headers={"user-agent": user_agent, "accept-encoding": "identity"},
        )

    async def __aenter__(self) -> OutboundClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    @asynccontextmanager
    async def stream(
        self, url: str, *, redirect_rule: RedirectRule | None = None
    ) -> AsyncIterator[OutboundResponse]:
        """GET ``url``, following redirects hop by hop, each checked by the policy and
        by ``redirect_rule``; yields the final answer with its body unread. Raises
        OutboundRefused (RedirectRefused for a redirect not followed), NoAnswer."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.policy.total_timeout_s
        current = url
        for _ in range(self.policy.max_redirects + 1):
            target, headers, extensions = await self._checked(current)
            request = self._client.build_request(
                "GET", target, headers=headers, extensions=extensions
            )
            try:
                async with asyncio.timeout_at(deadline):
                    response = await self._client.send(request, stream=True)
            except (httpx.HTTPError, TimeoutError, OSError):
                raise NoAnswer(
                    f"{strip_credentials(current)}: {NO_ANSWER}", dependency="website"
                ) from None
            try:
                location = response.headers.get("location", "")
                if response.status_code in _REDIRECTS and location:
                    following = strip_credentials(urljoin(current, location.strip()))
                    why = redirect_rule(following) if redirect_rule is not None else ""
                    if why:
                        raise RedirectRefused(why, target=following)
                    current = following
                    continue
                yield OutboundResponse(
                    strip_credentials(current),
                    response.status_code,
                    response.headers,
                    response,
                    self.policy.max_bytes,
                    deadline,
                )
                return
            finally:
                await response.aclose()
        raise RedirectRefused(
            f"{strip_credentials(url)}: more than {self.policy.max_redirects} redirects"
        )

    async def fetch(
        self, url: str, *, max_bytes: int | None = None, redirect_rule: RedirectRule | None = None
    ) -> tuple[OutboundResponse, bytes]:
        """``stream`` with the body read (at most ``max_bytes``). Raises as ``stream``
        and ``OutboundResponse.read``."""
        async with self.stream(url, redirect_rule=redirect_rule) as response:
            return response, await response.read(max_bytes)

    async def _checked(self, url: str) -> tuple[httpx.URL, dict[str, str], dict[str, str]]:
        """The request to send for ``url``: to the checked address, with the Host
        header, TLS name and credentials of the URL. Raises OutboundRefused, NoAnswer."""
        shown = strip_credentials(url)
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL:
            raise OutboundRefused(f"{shown!r} is not a valid URL", target=shown) from None
        if parsed.scheme not in self.policy.schemes or not parsed.host:
            raise OutboundRefused(
                f"{shown}: only {'/'.join(sorted(self.policy.schemes))} URLs with a host "
                "may be fetched",
                target=shown,
            )
        host = parsed.host
        if not self.policy.host_allowed(host):
            raise OutboundRefused(
                f"{shown}: the host {host} is not on the outbound allow-list", target=shown
            )
        origin = _origin(parsed)
        address = await self._address(host, origin[2], shown)
        headers = {"host": parsed.netloc.decode("ascii")}
        if self._credentials is not None and self._credentials.origin == origin:
            pair = f"{self._credentials.username}:{self._credentials.password}".encode()
            headers["authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
        extensions = {"sni_hostname": host} if parsed.scheme == "https" else {}
        target = parsed.copy_with(host=str(address), username=None, password=None)
        return target, headers, extensions

    async def _address(self, host: str, port: int, shown: str) -> IPAddress:
        """The address to connect to: every address ``host`` resolves to must be
        allowed (one private answer among public ones is refused: the connection
        must not pick). Raises OutboundRefused, NoAnswer."""
        try:
            literal: IPAddress | None = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None:
            addresses: list[IPAddress] = [literal]
        else:
            try:
                async with asyncio.timeout(self.policy.timeout_s):
                    found = await self._resolver(host, port)
                addresses = [ipaddress.ip_address(a.split("%", 1)[0]) for a in found]
            except (OSError, TimeoutError, ValueError):
                raise NoAnswer(f"{shown}: {NO_ANSWER}", dependency="website") from None
            if not addresses:
                raise NoAnswer(f"{shown}: {NO_ANSWER}", dependency="website")
        if not all(self.policy.address_allowed(a) for a in addresses):
            raise OutboundRefused(
                f"{shown}: the host is a private, loopback, link-local or reserved address, "
                "which outbound fetches may not reach (an operator can allow a network: "
                "OUTBOUND_ALLOWED_NETWORKS)",
                target=shown,
            )
        return addresses[0]
