"""Per-document access: which access lists are valid and what a caller may see.

A document's access list names who may see it: ``public`` (everyone), ``user:<id>``
(one end user) or ``group:<name>`` (members of a group), set at ingest from the
request, from the document's front matter (``access:``) or from the collection's
``default_access``. A caller sees a chunk when its list shares an entry with the
caller's (``Identity.access``). One rule decides who is not bound by the lists: the
operator, and the collection's own tenant's admin (``Identity.sees_all`` with the
owner the collection's stored spec names) — a tenant's admin reading another tenant's
or the operator's ``public`` collections is bound like any caller. The store applies
it as a mandatory payload filter inside every path and count.
"""

from __future__ import annotations

from collections.abc import Iterable

from groundwire_core.errors import InvalidInput, PermissionDenied
from groundwire_core.identity import PUBLIC, Identity
from groundwire_retriever.domain import CollectionSpec

_KINDS = ("user:", "group:")
MAX_ENTRIES = 256


def parse_access(entries: Iterable[str], where: str) -> tuple[str, ...]:
    """A normalised access list (stripped, deduplicated, in order). Raises
    InvalidInput for an entry that is not ``public``, ``user:<id>`` or ``group:<name>``."""
    out: list[str] = []
    for raw in entries:
        entry = raw.strip()
        if not entry:
            continue
        kind = next((k for k in _KINDS if entry.startswith(k)), None)
        if entry != PUBLIC and (kind is None or not entry[len(kind) :].strip()):
            raise InvalidInput(
                f"{where}: access entry {entry!r} is not 'public', 'user:<id>' or 'group:<name>'"
            )
        if entry not in out:
            out.append(entry)
    if len(out) > MAX_ENTRIES:
        raise InvalidInput(f"{where}: at most {MAX_ENTRIES} access entries, got {len(out)}")
    return tuple(out)


def caller_access(spec: CollectionSpec, identity: Identity | None) -> tuple[str, ...] | None:
    """The access entries the caller holds in this collection (None: sees everything).

    A call without any identity (not from the gateway on a user's behalf) sees the
    public documents only; in a ``restricted`` collection it is refused with
    PermissionDenied, as is an identity without an end user, before anything is read.
    The message names no document.
    """
    if identity is not None and identity.sees_all(spec.tenant):
        return None
    if spec.restricted and (identity is None or not identity.user):
        raise PermissionDenied("this collection is restricted: a signed-in end user is required")
    return (PUBLIC,) if identity is None else identity.access(spec.tenant)
