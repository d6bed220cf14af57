"""Looks a question up live on the documentation sites a collection was synced from.

The orchestrator asks for this only when its coverage stage found that the collection
does not cover an in-domain question (see the orchestrator's ``stages/live_docs.py``).
One lookup:

1. **Allowed domains**: the collection's entry in ``LIVE_DOMAINS`` when the operator
   set one, else the hosts of the collection's web sources (the pages its website
   syncs stored). A caller may narrow the list, never widen it; the operator's
   ``OUTBOUND_ALLOWED_HOSTS`` applies on top.
2. **Candidates**: each allowed site's robots.txt is read (its ``Sitemap:`` lines, and
   what it disallows for the ``groundwire-sync`` agent), then its sitemaps (those
   robots.txt names, else ``/sitemap.xml``; one level of sitemap index). The pages the
   collection already holds are left out (their stored text was just searched), and
   the rest are ranked by the question's words (stemmed, stop words out, with the
   BM25 analyzer of the collections) found in their URL path; a URL sharing none is
   not fetched.
3. **Fetches**: at most ``max_lookups`` pages, each through the guarded outbound
   client (``groundwire_core.outbound``): addresses checked after DNS (private and
   loopback refused unless ``OUTBOUND_ALLOWED_NETWORKS`` allows them), every redirect
   hop checked against the allowed domains and robots.txt, the body read no further
   than ``LIVE_MAX_PAGE_BYTES``, each fetch under ``LIVE_FETCH_TIMEOUT_S`` and the whole
   lookup under its total deadline. A page refused or failed is reported with its
   reason and still counts as a lookup: the bound is on what the lookup tries.
4. **Sections**: each page is parsed and chunked in the ingest's parse sandbox with the
   collection's chunking policy (``RetrieverCore.preparer``), and every section ranked
   against the question by the embedder (cosine) and BM25 (IDF over the fetched
   sections), fused by reciprocal rank (k = 60, as searches fuse by default).

Nothing is written into the collection. Live pages are unreviewed (an operator chose
what the collection syncs; nobody chose these), a stored copy would outlive its page
because the sync deletes only what its own source set no longer lists, and it would
answer later questions as if it were curated. The sections are returned marked
``live`` with the page's URL and fetch time, and the orchestrator cites them as such.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from urllib.robotparser import RobotFileParser

import httpx
from lxml import etree

from groundwire_core.clients.embedder import EmbedderClient
from groundwire_core.errors import InvalidInput
from groundwire_core.outbound import (
    NoAnswer,
    OutboundClient,
    OutboundPolicy,
    OutboundRefused,
    Resolver,
    TooLarge,
    system_resolver,
)
from groundwire_core.urls import is_web_url
from groundwire_retriever.domain import Chunk, Hit, SearchPath
from groundwire_retriever.ingest.pipeline import DocumentInput
from groundwire_retriever.service import RetrieverCore
from groundwire_retriever.store.bm25 import Bm25Settings, bm25_document_text
from groundwire_retriever.sync.crawler import normalize

USER_AGENT = "groundwire-sync"
"""The agent robots.txt rules are read for: the same as the website sync's, so a site
that keeps the sync out keeps the lookup out too."""
MAX_ROBOTS_BYTES = 512 * 1024
MAX_SITEMAPS = 5
"""Sitemaps read per site and lookup (an index's children included)."""
MAX_SITEMAP_BYTES = 10 * 1024 * 1024
MAX_CANDIDATES_PER_LOOKUP = 10
"""Ranked candidate URLs considered per allowed lookup (robots.txt-disallowed ones are
skipped and reported, without a fetch)."""
MAX_SOURCES_LISTED = 2_000
"""Sources of the collection read to find its hosts and the pages it already holds."""
RRF_K = 60
_PAGE_TYPES = {
    "text/html": "html",
    "application/xhtml+xml": "html",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/plain": "text",
}
_NON_WORD = re.compile(r"[^A-Za-z0-9]+")


@dataclass(frozen=True)
class LivePolicy:
    """The operator's bounds on a live lookup (settings ``LIVE_*``)."""

    max_lookups: int = 3
    """Pages fetched (or tried) at most per question."""
    max_page_bytes: int = 2 * 1024 * 1024
    fetch_timeout_s: float = 10.0
    total_timeout_s: float = 30.0
    domains: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Per collection: its allowed domains (``docs.example.com`` or an origin such as
    ``http://127.0.0.1:8080``), instead of the hosts of its web sources."""


@dataclass(frozen=True)
class LiveFetch:
    """One page the lookup tried."""

    url: str
    outcome: str
    """``fetched``, ``refused`` (not allowed: domain, robots.txt, size, type) or
    ``failed`` (no answer, HTTP error, unparseable, deadline)."""
    reason: str = ""
    fetched_at: float = 0.0


@dataclass(frozen=True)
class LiveResult:
    hits: tuple[Hit, ...]
    """Sections of the fetched pages, best first; ``chunk.metadata["live"] == "true"``,
    ``chunk.created_at`` the fetch time."""
    fetches: tuple[LiveFetch, ...]
    lookups: int
    allowed_domains: tuple[str, ...]
    candidates: int
    """Page URLs the sitemaps listed on the allowed domains."""
    seconds: float


@dataclass
class _Site:
    origin: str
    """``scheme://host[:port]``."""
    robots: RobotFileParser


class LiveLookup:
    """Live lookups for the retriever's collections (see the module docstring)."""

    def __init__(
        self,
        core: RetrieverCore,
        embedder: EmbedderClient,
        *,
        outbound: OutboundPolicy | None = None,
        policy: LivePolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        resolver: Resolver = system_resolver,
    ) -> None:
        """``outbound``: the operator's policy (networks, hosts) that every fetch
        obeys; ``transport`` and ``resolver`` are for tests."""
        self._core = core
        self._embedder = embedder
        self._outbound = outbound or OutboundPolicy()
        self._policy = policy or LivePolicy()
        self._transport = transport
        self._resolver = resolver
        self._bm25 = Bm25Settings().model()

    async def lookup(
        self,
        collection: str,
        query: str,
        *,
        max_lookups: int = 0,
        allowed_domains: Sequence[str] = (),
        limit: int = 5,
        timeout_s: float = 0.0,
        domains_only: bool = False,
    ) -> LiveResult:
        """The best sections of live pages for ``query``. Raises InvalidInput for an
        empty query or a collection with no allowed domain, NotFound and
        PermissionDenied for the collection (the caller's access applies), Unavailable
        when the embedder does not answer. Pages that cannot be had are reported in
        ``fetches``, not raised. ``domains_only``: the allowed domains, nothing fetched."""
        started = time.perf_counter()
        if not query.strip():
            raise InvalidInput("the query is empty")
        p = self._policy
        lookups = min(max_lookups or p.max_lookups, p.max_lookups)
        total = min(timeout_s or p.total_timeout_s, p.total_timeout_s)
        known, origins = await self._collection_pages(collection)
        configured = p.domains.get(collection)
        if configured:
            origins = [_origin_of(d) for d in configured]
        if allowed_domains:
            narrowed = {d.lower().strip() for d in allowed_domains}
            origins = [o for o in origins if _host(o) in narrowed or o in narrowed]
        origins = [o for o in dict.fromkeys(origins) if self._outbound.host_allowed(_host(o))]
        if not origins:
            raise InvalidInput(
                f"collection {collection!r} has no allowed domain for a live lookup (it "
                "holds no web pages and LIVE_DOMAINS names none for it)"
            )
        hosts = tuple(dict.fromkeys(_host(o) for o in origins))
        if domains_only:
            return LiveResult((), (), 0, hosts, 0, time.perf_counter() - started)
        fetch_policy = replace(
            self._outbound,
            allowed_hosts=hosts,
            max_bytes=min(p.max_page_bytes, self._outbound.max_bytes),
            timeout_s=min(p.fetch_timeout_s, self._outbound.timeout_s),
            total_timeout_s=p.fetch_timeout_s,
        )
        fetches: list[LiveFetch] = []
        chunks: list[Chunk] = []
        listed = tried = 0
        # robots.txt and sitemaps are larger than pages may be (a sitemap: up to 50 MB)
        site_policy = replace(
            fetch_policy, max_bytes=min(MAX_SITEMAP_BYTES, self._outbound.max_bytes)
        )
        client_options: dict[str, Any] = {
            "user_agent": USER_AGENT,
            "transport": self._transport,
            "resolver": self._resolver,
        }
        async with (
            OutboundClient(site_policy, **client_options) as site_client,
            OutboundClient(fetch_policy, **client_options) as client,
        ):
            try:
                async with asyncio.timeout(total):
                    sites = [await self._site(site_client, o) for o in origins]
                    pages: list[str] = []
                    for site in sites:
                        pages.extend(await self._sitemap_pages(site_client, site, fetches))
                    robots = {s.origin: s.robots for s in sites}
                    # only the sites whose robots.txt was read (a sitemap may list others)
                    pages = [u for u in dict.fromkeys(pages) if _origin_of(u) in robots]
                    listed = len(pages)
                    ranked = self._ranked(query, [u for u in pages if u not in known])
                    for url in ranked[: MAX_CANDIDATES_PER_LOOKUP * lookups]:
                        if tried >= lookups:
                            break
                        if not _allowed(robots, url):
                            fetches.append(LiveFetch(url, "refused", "robots.txt disallows it"))
                            continue
                        tried += 1
                        outcome, found = await self._page(client, collection, url, robots, hosts)
                        fetches.append(outcome)
                        chunks.extend(found)
            except TimeoutError:
                fetches.append(
                    LiveFetch("", "failed", f"the lookup's deadline of {total:g} s passed")
                )
        hits = await self._rank(query, chunks, limit) if chunks else ()
        return LiveResult(
            tuple(hits),
            tuple(fetches),
            tried,
            hosts,
            listed,
            time.perf_counter() - started,
        )

    async def _collection_pages(self, collection: str) -> tuple[set[str], list[str]]:
        """The page URLs the collection holds and their origins (first seen first)."""
        known: set[str] = set()
        origins: dict[str, None] = {}
        token, seen = "", 0
        while seen < MAX_SOURCES_LISTED:
            page = await self._core.list_sources(collection, page_token=token, limit=100)
            for source in page.sources:
                url = source.url or source.source_id
                if is_web_url(url):
                    url = normalize(url)
                    known.add(url)
                    origins.setdefault(_origin_of(url), None)
            seen += len(page.sources)
            token = page.next_page_token
            if not token:
                break
        return known, list(origins)

    async def _site(self, client: OutboundClient, origin: str) -> _Site:
        """The site's robots.txt as urllib.robotparser reads it (401/403 disallow all;
        another 4xx, no answer or a refusal allow all: the sitemap fetch then says
        why)."""
        robots = RobotFileParser()
        try:
            async with client.stream(
                origin + "/robots.txt", redirect_rule=lambda t: _same_origin(origin, t)
            ) as response:
                if response.status_code in (401, 403):
                    robots.parse(["User-agent: *", "Disallow: /"])
                elif response.status_code >= 400:
                    robots.parse([])
                else:
                    body = await response.read(MAX_ROBOTS_BYTES)
                    robots.parse(body.decode("utf-8", "replace").splitlines())
        except (OutboundRefused, NoAnswer, TooLarge):
            robots.parse([])
        return _Site(origin, robots)

    async def _sitemap_pages(
        self, client: OutboundClient, site: _Site, fetches: list[LiveFetch]
    ) -> list[str]:
        """The page URLs the site's sitemaps list (robots.txt's, else /sitemap.xml;
        one level of index). A sitemap that cannot be had lists nothing, and is
        reported in ``fetches`` (not counted as a lookup)."""
        pending = [normalize(u) for u in (site.robots.site_maps() or [])] or [
            site.origin + "/sitemap.xml"
        ]
        pages: list[str] = []
        read = 0
        while pending and read < MAX_SITEMAPS:
            url = pending.pop(0)
            read += 1
            try:
                async with client.stream(
                    url, redirect_rule=lambda t: _same_origin(site.origin, t)
                ) as response:
                    if response.status_code >= 400:
                        why = f"sitemap: HTTP {response.status_code}"
                        fetches.append(LiveFetch(url, "failed", why))
                        continue
                    body = await response.read()
            except (OutboundRefused, TooLarge) as error:
                fetches.append(LiveFetch(url, "refused", f"sitemap: {error.message}"))
                continue
            except NoAnswer:
                fetches.append(LiveFetch(url, "failed", "sitemap: no HTTP answer"))
                continue
            is_index, locations = _sitemap(body, url)
            if is_index:
                pending.extend(loc for loc in locations if _origin_of(loc) == site.origin)
            else:
                pages.extend(locations)
        return pages

    def _ranked(self, query: str, urls: Sequence[str]) -> list[str]:
        """URLs sharing at least one of the question's words in their path, most
        shared first (the sitemap's order among equals)."""
        wanted = set(self._bm25.embed_query(query).indices)
        scored = []
        for order, url in enumerate(urls):
            words = _NON_WORD.sub(" ", urlsplit(url).path)
            shared = len(wanted & set(self._bm25.embed_query(words).indices))
            if shared:
                scored.append((-shared, order, url))
        return [url for _, _, url in sorted(scored)]

    async def _page(
        self,
        client: OutboundClient,
        collection: str,
        url: str,
        robots: Mapping[str, RobotFileParser],
        hosts: Sequence[str],
    ) -> tuple[LiveFetch, list[Chunk]]:
        """One page fetched and cut into sections, or why not."""

        def rule(target: str) -> str:
            target = normalize(target)
            if _host(target) not in hosts:
                return f"redirects off the allowed domains to {target}"
            if not _allowed(robots, target):
                return f"redirects to {target}, which robots.txt disallows"
            return ""

        limit = client.policy.max_bytes
        try:
            async with client.stream(url, redirect_rule=rule) as response:
                if response.status_code >= 400:
                    return LiveFetch(url, "failed", f"HTTP {response.status_code}"), []
                kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
                fmt = _PAGE_TYPES.get(kind, "")
                if not fmt:
                    return LiveFetch(
                        url, "refused", f"content type {kind or 'none'} is not a page"
                    ), []
                body = await response.read()
                final = normalize(response.url)
        except TooLarge:
            return LiveFetch(url, "refused", f"the page is over the limit of {limit} bytes"), []
        except OutboundRefused as error:
            return LiveFetch(url, "refused", error.message), []
        except NoAnswer:
            return LiveFetch(url, "failed", "no HTTP answer"), []
        fetched_at = time.time()
        name = urlsplit(final).path.rsplit("/", 1)[-1] or "index"
        doc = DocumentInput(source_id=final, content=body, format=fmt, url=final, filename=name)
        try:
            chunks = await self._core.preparer(collection)(doc)
        except InvalidInput as error:
            return LiveFetch(final, "failed", f"could not be parsed: {error.message}"), []
        marked = [
            replace(c, metadata={**c.metadata, "live": "true"}, created_at=fetched_at)
            for c in chunks
        ]
        return LiveFetch(final, "fetched", "", fetched_at), marked

    async def _rank(self, query: str, chunks: Sequence[Chunk], limit: int) -> list[Hit]:
        """The sections fused by reciprocal rank over cosine and BM25. Raises
        GroundwireError when the embedder does not answer."""
        texts = [bm25_document_text(c) for c in chunks]
        dense = await self._cosines(query, [c.text for c in chunks])
        bm25 = self._bm25_scores(query, texts)
        paths = {SearchPath.DENSE: dense, SearchPath.BM25: bm25}
        ranks: dict[SearchPath, dict[int, int]] = {}
        for path, scores in paths.items():
            # BM25 ranks only the sections sharing a word with the question
            found = [(-s, i) for i, s in enumerate(scores) if path is SearchPath.DENSE or s > 0]
            ranks[path] = {i: r for r, (_, i) in enumerate(sorted(found), start=1)}
        fused = []
        for i, chunk in enumerate(chunks):
            score = sum(1.0 / (RRF_K + r[i]) for r in ranks.values() if i in r)
            fused.append(
                Hit(
                    chunk=chunk,
                    score=score,
                    path_ranks={p: r[i] for p, r in ranks.items() if i in r},
                    path_scores={p: paths[p][i] for p, r in ranks.items() if i in r},
                )
            )
        fused.sort(key=lambda h: -h.score)
        return fused[: max(1, limit)]

    async def _cosines(self, query: str, texts: Sequence[str]) -> list[float]:
        [q] = await self._embedder.embed([query], query=True)
        vectors = []
        for start in range(0, len(texts), 32):
            vectors.extend(await self._embedder.embed(texts[start : start + 32], query=False))
        return [_cosine(q.dense or (), v.dense or ()) for v in vectors]

    def _bm25_scores(self, query: str, texts: Sequence[str]) -> list[float]:
        """BM25 of each text with IDF over ``texts`` (the lookup's own small corpus)."""
        wanted = set(self._bm25.embed_query(query).indices)
        docs = [self._bm25.embed_document(t) for t in texts]
        weights = [dict(zip(d.indices, d.values, strict=True)) for d in docs]
        n = len(docs)
        scores = []
        for w in weights:
            score = 0.0
            for term in wanted & w.keys():
                having = sum(term in other for other in weights)
                score += math.log((n - having + 0.5) / (having + 0.5) + 1.0) * w[term]
            scores.append(score)
        return scores


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def _host(url_or_origin: str) -> str:
    return (urlsplit(url_or_origin).hostname or "").lower()


def _origin_of(value: str) -> str:
    """``scheme://netloc`` of a URL, or ``https://host`` for a bare host name."""
    if "://" not in value:
        return f"https://{value.strip().lower().rstrip('/')}"
    parts = urlsplit(normalize(value))
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def _same_origin(origin: str, target: str) -> str:
    """A redirect rule for robots.txt and sitemaps: the site's own origin only."""
    if _origin_of(target) == origin:
        return ""
    return f"redirects off the site to {normalize(target)}"


def _allowed(robots: Mapping[str, RobotFileParser], url: str) -> bool:
    parser = robots.get(_origin_of(url))
    return parser is None or parser.can_fetch(USER_AGENT, url)


def _sitemap(content: bytes, url: str) -> tuple[bool, list[str]]:
    """Whether the document is a sitemap index, and the URLs it lists (none for a
    document that is not a sitemap). Entities are not resolved, nothing fetched."""
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)
    try:
        root = etree.fromstring(content, parser=parser)
    except etree.XMLSyntaxError:
        return False, []
    if root is None:
        return False, []
    tag = etree.QName(root).localname
    if tag not in ("urlset", "sitemapindex"):
        return False, []
    locations = [
        normalize((element.text or "").strip())
        for element in root.iter()
        if isinstance(element.tag, str)
        and etree.QName(element).localname == "loc"
        and is_web_url((element.text or "").strip())
    ]
    return tag == "sitemapindex", locations
