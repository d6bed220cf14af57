"""Who a request is for, carried down every gRPC hop as trusted metadata.

The gateway is the only place that decides a caller's identity (API key → tenant and
role, signed end-user token → user and groups). It binds an :class:`Identity` to the
request (:func:`identity_scope`); the client interceptor writes it into every outgoing
call's metadata, and the server interceptor reads it back and binds it again, so the
orchestrator's calls to the retriever (the agent's search and read tools included)
carry the caller without any handler passing it along — exactly as the request id
travels. The retriever turns it into a mandatory access filter.

The metadata is trusted because only peers holding the service token can call a
service; the gateway never copies a client's own ``groundwire-*`` headers onward.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import quote, unquote

TENANT_KEY = "groundwire-tenant"
USER_KEY = "groundwire-user"
GROUPS_KEY = "groundwire-groups"
UNRESTRICTED_KEY = "groundwire-unrestricted"
"""``1`` for the operator: no access filter in any collection (it manages all data)."""
ADMIN_KEY = "groundwire-admin"
"""``1`` for a tenant's admin: no access filter in its own tenant's collections only."""
METADATA_KEYS = frozenset({TENANT_KEY, USER_KEY, GROUPS_KEY, UNRESTRICTED_KEY, ADMIN_KEY})

PUBLIC = "public"
"""The access entry every caller holds."""


@dataclass(frozen=True)
class Identity:
    """The caller of one request as the services see it."""

    tenant: str = ""
    user: str = ""
    """The end user's id from a verified token; "" without one."""
    groups: frozenset[str] = frozenset()
    unrestricted: bool = False
    """The operator: sees every document of every collection, so the retriever applies
    no access filter."""
    admin: bool = False
    """A tenant's admin: sees every document of its own tenant's collections; in any
    other collection (another tenant's, the operator's ``public`` ones) the documents'
    access lists bind it as they bind any caller (see :meth:`sees_all`)."""

    def sees_all(self, owner: str) -> bool:
        """Whether document access lists do not bind this caller in a collection of
        tenant ``owner``: the one rule — they bind every caller except the operator and
        the collection's own tenant's admin (never the ``public`` tenant's: those
        collections are the operator's)."""
        if self.unrestricted:
            return True
        return self.admin and bool(self.tenant) and owner == self.tenant and owner != PUBLIC

    def access(self, owner: str | None = None) -> tuple[str, ...] | None:
        """The access-list entries this caller holds in a collection of tenant
        ``owner`` (a document is visible when its list shares one), or None for no
        filter at all (:meth:`sees_all`; without ``owner``, the operator only)."""
        if self.unrestricted or (owner is not None and self.sees_all(owner)):
            return None
        entries = [PUBLIC]
        if self.user:
            entries.append(f"user:{self.user}")
        entries.extend(f"group:{group}" for group in sorted(self.groups))
        return tuple(entries)

    def to_metadata(self) -> tuple[tuple[str, str], ...]:
        """gRPC metadata pairs (values url-quoted: ids may hold any character)."""
        pairs = [(TENANT_KEY, quote(self.tenant, safe=""))]
        if self.user:
            pairs.append((USER_KEY, quote(self.user, safe="")))
        if self.groups:
            joined = ",".join(quote(g, safe="") for g in sorted(self.groups))
            pairs.append((GROUPS_KEY, joined))
        if self.unrestricted:
            pairs.append((UNRESTRICTED_KEY, "1"))
        if self.admin:
            pairs.append((ADMIN_KEY, "1"))
        return tuple(pairs)

    @classmethod
    def from_metadata(cls, metadata: Iterable[tuple[str, str | bytes]] | None) -> Identity | None:
        """The identity in a call's metadata, or None when it carries none (a caller
        outside any user request: the retriever then shows public documents only)."""
        found: dict[str, str] = {}
        for key, value in metadata or ():
            if key in METADATA_KEYS and isinstance(value, str) and key not in found:
                found[key] = value
        if not found:
            return None
        groups = frozenset(unquote(g) for g in found.get(GROUPS_KEY, "").split(",") if g.strip())
        return cls(
            tenant=unquote(found.get(TENANT_KEY, "")),
            user=unquote(found.get(USER_KEY, "")),
            groups=groups,
            unrestricted=found.get(UNRESTRICTED_KEY) == "1",
            admin=found.get(ADMIN_KEY) == "1",
        )


_identity: contextvars.ContextVar[Identity | None] = contextvars.ContextVar(
    "identity", default=None
)


def current_identity() -> Identity | None:
    """The identity bound to the request being served, or None."""
    return _identity.get()


def bind_identity(identity: Identity | None) -> None:
    """Bind ``identity`` for the rest of the current request; an enclosing
    :func:`identity_scope` undoes it when the request ends. For the gateway's route
    dependencies, which cannot wrap the handler themselves."""
    _identity.set(identity)


@contextmanager
def identity_scope(identity: Identity | None) -> Iterator[None]:
    """Binds ``identity`` to the current task until the block ends (and undoes any
    :func:`bind_identity` made inside it)."""
    token = _identity.set(identity)
    try:
        yield
    finally:
        _identity.reset(token)
