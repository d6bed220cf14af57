"""The pages of a website source set: crawled from a start URL, or listed by a sitemap,
within one origin and URL path prefix, as robots.txt allows.

Every fetch (pages, robots.txt, sitemaps) goes through the guarded outbound client
(``groundwire_core.outbound``): only the addresses the operator's policy allows, a
hard byte cap while streaming, one message for every way of not getting an answer.
Redirects are followed one hop at a time and only within the site: a page's within
the crawl's scope, robots.txt's and a sitemap's within its origin. Requests are spaced
by the politeness delay (robots.txt's Crawl-delay when longer). Credentials in the
start URL are sent to its origin only and never kept in a page's id or URL.

A page that is gone (404, 410), outside the scope or disallowed is not part of the
set: a stored copy is deleted. A page that failed for a reason that may pass (5xx,
429, no answer) keeps its stored copy, and marks the crawl incomplete: pages it would
have linked to were not seen, so nothing else is deleted either. The pages' text goes
through the ingest's parsers like any document; only links are read here (the
standard library's HTMLParser, a tokenizer with no backtracking patterns, on at most
``max_bytes``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from html.parser import HTMLParser
from posixpath import dirname
from urllib.parse import urljoin, urlsplit, urlunsplit
from urllib.robotparser import RobotFileParser

import httpx
from lxml import etree

from groundwire_core.errors import InvalidInput, Unavailable
from groundwire_core.outbound import (
    NoAnswer,
    OutboundClient,
    OutboundPolicy,
    OutboundRefused,
    OutboundResponse,
    RedirectRefused,
    Resolver,
    TooLarge,
    credentials_of,
    strip_credentials,
    system_resolver,
)
from groundwire_retriever.ingest.html_parser import decode_html
from groundwire_retriever.ingest.pipeline import DocumentInput
from groundwire_retriever.sync.definition import Found, SyncDefinition

USER_AGENT = "groundwire-sync"
MAX_LINKS_PER_PAGE = 5_000
MAX_SITEMAPS = 50
MAX_ROBOTS_BYTES = 512 * 1024
_CONTENT_TYPES = {
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/pdf": "pdf",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/plain": "text",
}
_GONE = (404, 410)
_TRANSIENT = 429


@dataclass(frozen=True)
class _Page:
    url: str
    """The final URL, after redirects: the page's source id."""
    format: str
    content: bytes


def normalize(url: str) -> str:
    """The URL as a page id: scheme and host lower case, no credentials, no fragment,
    "/" for an empty path."""
    parts = urlsplit(strip_credentials(url))
    return urlunsplit(
        (parts.scheme.lower(), parts.netloc.lower(), parts.path or "/", parts.query, "")
    )


class WebSource:
    """Crawls a website source set; after ``sources`` is exhausted, ``complete`` says
    whether every page in scope was seen (no page limit reached, no transient error)."""

    def __init__(
        self,
        definition: SyncDefinition,
        *,
        policy: OutboundPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        resolver: Resolver = system_resolver,
    ) -> None:
        """``policy``: what the crawl may reach (default: public hosts only);
        ``transport`` and ``resolver`` are for tests."""
        self._definition = definition
        self._policy = policy or OutboundPolicy()
        self._transport = transport
        self._resolver = resolver
        self._credentials = credentials_of(definition.location)
        start = urlsplit(normalize(definition.location))
        self._origin = (start.scheme, start.netloc)
        self._sitemap = start.path.endswith(".xml")
        self._prefix = definition.prefix or (
            start.path if start.path.endswith("/") else dirname(start.path).rstrip("/") + "/"
        )
        self._robots = RobotFileParser()
        self.complete = True

    def in_scope(self, url: str) -> bool:
        """Same scheme and host as the start URL, path under the prefix."""
        parts = urlsplit(url)
        return (parts.scheme, parts.netloc) == self._origin and parts.path.startswith(self._prefix)

    def _same_origin(self, url: str) -> str:
        """A redirect rule: "" for a URL of the start URL's origin, else why not."""
        parts = urlsplit(normalize(url))
        if (parts.scheme, parts.netloc) == self._origin:
            return ""
        return f"redirects off the site to {normalize(url)}"

    def _allowed(self, url: str) -> bool:
        return self._robots.can_fetch(USER_AGENT, url)

    def _selected(self, url: str) -> bool:
        parts = urlsplit(url)
        relative = parts.path[len(self._prefix) :] + (f"?{parts.query}" if parts.query else "")
        return self._definition.selects(relative)

    async def sources(self) -> AsyncIterator[Found]:
        """Every page in scope, fetched. Raises Unavailable when robots.txt, the
        sitemap or the start page cannot be fetched (a sync must not read an outage
        as every page deleted)."""
        d = self._definition
        start = normalize(d.location)
        async with OutboundClient(
            self._policy,
            credentials=self._credentials,
            user_agent=USER_AGENT,
            transport=self._transport,
            resolver=self._resolver,
        ) as client:
            await self._read_robots(client)
            delay = max(d.delay_s, float(self._robots.crawl_delay(USER_AGENT) or 0))
            queue: deque[str] = deque()
            if self._sitemap:
                queue.extend(await self._sitemap_pages(client, start))
            else:
                queue.append(start)
            queued = set(queue)
            done: set[str] = set()
            fetched = 0
            while queue:
                url = queue.popleft()
                if not self._selected(url):
                    continue
                if not self._allowed(url):
                    yield Found(url, reason="robots.txt disallows it", present=False)
                    continue
                if fetched >= d.page_limit:
                    self.complete = False  # the rest were not seen: none is deleted
                    break
                if fetched:
                    await asyncio.sleep(delay)
                fetched += 1
                outcome = await self._fetch(client, url)
                if isinstance(outcome, Found):
                    if url == start and outcome.present:
                        raise Unavailable(f"{url}: {outcome.reason}", dependency="website")
                    if outcome.present:
                        self.complete = False
                    yield outcome
                    continue
                if outcome.url in done:  # a second URL redirecting to a page already read
                    continue
                done.add(outcome.url)
                if outcome.format == "html" and not self._sitemap:
                    for link in await asyncio.to_thread(_links, outcome.url, outcome.content):
                        if link not in queued and self.in_scope(link):
                            queued.add(link)
                            queue.append(link)
                name = urlsplit(outcome.url).path.rsplit("/", 1)[-1] or "index"
                yield Found(
                    outcome.url,
                    DocumentInput(
                        source_id=outcome.url,
                        content=outcome.content,
                        format=outcome.format,
                        url=outcome.url,
                        filename=name,
                    ),
                )

    async def _read_robots(self, client: OutboundClient) -> None:
        """robots.txt as urllib.robotparser reads it: 401/403 disallow everything,
        another 4xx (or a redirect off the site, never followed) allows everything.
        Raises Unavailable for 5xx or no answer, OutboundRefused when the site itself
        may not be reached."""
        url = urlunsplit((*self._origin, "/robots.txt", "", ""))
        try:
            async with client.stream(url, redirect_rule=self._same_origin) as response:
                status = response.status_code
                if status in (401, 403):
                    self._robots.parse(["User-agent: *", "Disallow: /"])
                elif 400 <= status < 500:
                    self._robots.parse([])
                elif status >= 500:
                    raise Unavailable(f"{url}: HTTP {status}", dependency="website")
                else:  # past its size limit a robots.txt is read no further (as Google's)
                    body = await response.read(MAX_ROBOTS_BYTES, truncate=True)
                    self._robots.parse(body.decode("utf-8", "replace").splitlines())
        except RedirectRefused:
            self._robots.parse([])
        except NoAnswer as error:
            raise Unavailable(error.message, dependency="website") from None

    async def _sitemap_pages(self, client: OutboundClient, url: str) -> list[str]:
        """The in-scope page URLs a sitemap lists (one level of sitemap index followed,
        redirects only within the site's origin). Raises Unavailable when a sitemap
        cannot be fetched, InvalidInput when one is not a sitemap or redirects off the
        site (what it redirects to is never read)."""
        pending, pages, read = [url], list[str](), 0
        while pending and read < MAX_SITEMAPS:
            current = pending.pop(0)
            read += 1
            try:
                outcome = await self._fetch(client, current, sitemap=True)
            except OutboundRefused as error:  # off the site, or an address refused
                raise InvalidInput(f"sitemap {current}: {error.message}") from None
            if isinstance(outcome, Found):
                raise Unavailable(f"sitemap {current}: {outcome.reason}", dependency="website")
            is_index, locations = _sitemap(outcome.content, current)
            if is_index:
                if current == url:  # an index at the top: its sitemaps, not deeper
                    pending.extend(
                        loc for loc in locations if urlsplit(loc).netloc == self._origin[1]
                    )
                continue
            pages.extend(loc for loc in locations if self.in_scope(loc))
        return list(dict.fromkeys(pages))

    async def _fetch(
        self, client: OutboundClient, url: str, *, sitemap: bool = False
    ) -> _Page | Found:
        """The page at ``url`` after redirects, or why it is not a document. A
        sitemap may redirect anywhere on the site's origin and have any content type."""

        def rule(target: str) -> str:
            target = normalize(target)
            if sitemap:
                return self._same_origin(target)
            if not self.in_scope(target):
                return f"redirects out of the crawl to {target}"
            if not self._allowed(target):
                return f"redirects to {target}, disallowed by robots.txt"
            return ""

        try:
            async with client.stream(url, redirect_rule=rule) as response:
                return await self._read(url, response, sitemap=sitemap)
        except OutboundRefused as error:  # a redirect not followed, or an address refused
            start = normalize(self._definition.location)
            if sitemap or (url == start and not isinstance(error, RedirectRefused)):
                raise  # the start URL or a sitemap may not be fetched: the definition cannot run
            return Found(url, reason=error.message, present=False)
        except NoAnswer:
            return Found(url, reason="could not be fetched (no HTTP answer)")

    async def _read(self, url: str, response: OutboundResponse, *, sitemap: bool) -> _Page | Found:
        status = response.status_code
        if status >= 400:
            transient = status >= 500 or status == _TRANSIENT
            gone = "gone" if status in _GONE else "refused"
            return Found(url, reason=f"HTTP {status} ({gone})", present=transient)
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        fmt = "xml" if sitemap else _CONTENT_TYPES.get(kind, "")
        if not fmt:
            return Found(
                url, reason=f"content type {kind or 'none'} is not a document", present=False
            )
        limit = min(self._definition.max_bytes, self._policy.max_bytes)
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return Found(
                url,
                reason=f"the page is {declared} bytes; the sync's limit is {limit}",
                present=False,
            )
        try:
            body = await response.read(limit)
        except TooLarge:
            return Found(
                url, reason=f"the page is over the sync's limit of {limit} bytes", present=False
            )
        except NoAnswer:
            return Found(url, reason="could not be fetched (no HTTP answer)")
        return _Page(normalize(response.url), fmt, body)


class _LinkParser(HTMLParser):
    def __init__(self, base: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base = base
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if len(self.links) >= MAX_LINKS_PER_PAGE:
            return
        values = dict(attrs)
        if tag == "base" and values.get("href"):
            self.base = urljoin(self.base, values["href"] or "")
        elif tag == "a" and values.get("href") and "nofollow" not in (values.get("rel") or ""):
            target = urljoin(self.base, (values["href"] or "").strip())
            if urlsplit(target).scheme in ("http", "https"):
                self.links.append(normalize(target))


def _links(url: str, content: bytes) -> list[str]:
    """The http(s) links of an HTML page, resolved, without fragments."""
    try:
        text = decode_html(content)
    except InvalidInput:
        return []  # the ingest reports the page; it links nowhere
    parser = _LinkParser(url)
    parser.feed(text)
    parser.close()
    return parser.links


def _sitemap(content: bytes, url: str) -> tuple[bool, list[str]]:
    """Whether the document is a sitemap index, and the URLs it lists. Entities are
    not resolved and nothing is fetched by the XML parser. Raises InvalidInput."""
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)
    try:
        root = etree.fromstring(content, parser=parser)
    except etree.XMLSyntaxError:
        raise InvalidInput(f"{url} is not a sitemap (invalid XML)") from None
    tag = etree.QName(root).localname
    if tag not in ("urlset", "sitemapindex"):
        raise InvalidInput(f"{url} is not a sitemap (its root is <{tag}>)")
    locations = [
        normalize(urljoin(url, (element.text or "").strip()))
        for element in root.iter()
        if isinstance(element.tag, str) and etree.QName(element).localname == "loc"
    ]
    return tag == "sitemapindex", locations
