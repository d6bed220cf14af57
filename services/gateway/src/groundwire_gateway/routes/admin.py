"""Admin routes: collections (an admin key), document ingest (JSON or multipart
files), the sources a collection holds and delete by source (a write key), through
the retriever's gRPC API.

Tenants (#24): a tenant's key sees its own tenant's collections and the ``public``
ones, and changes only its own; the operator's static admin keys see and change all.
A collection another tenant owns answers exactly as one that does not exist."""

import re
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse
from starlette.datastructures import UploadFile

from groundwire_core.errors import InvalidInput
from groundwire_gateway import job_models, models
from groundwire_gateway.auth import PUBLIC_TENANT, Principal
from groundwire_gateway.errors import PermissionDenied
from groundwire_gateway.routes import ADMIN_ERRORS
from groundwire_gateway.routes.jobs import accepted, interrupted
from groundwire_gateway.routes.security import admin_caller, writable
from groundwire_gateway.state import GatewayState
from groundwire_gateway.upstream_jobs import IngestInterrupted

CollectionPath = Annotated[
    str, Path(pattern=models.COLLECTION_PATTERN, description="Collection name.")
]
Wait = Annotated[
    bool,
    Query(
        description="Ingest before answering, with the report (200), as before jobs; "
        "otherwise the ingest is queued as a job and the answer is 202 at once."
    ),
]
# Both answers of an ingest route: the job queued (202), or with wait=true the report.
_INGEST_ANSWERS: dict[int | str, dict[str, Any]] = {
    200: {"model": models.IngestReportOut, "description": "wait=true: the ingest's report."},
    202: {"model": job_models.JobAccepted, "description": "The ingest job, queued."},
}
MAX_FILES = 100
MAX_SOURCE_ID = 512
_DRIVE = re.compile(r"^[A-Za-z]:")
# The multipart body, described by hand: the route reads it itself, after the key check.
_FILES_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["files"],
                    "properties": {
                        "files": {
                            "type": "array",
                            "items": {"type": "string", "format": "binary"},
                            "minItems": 1,
                            "maxItems": MAX_FILES,
                            "description": "The documents. Each file's name, a relative path "
                            "such as guide/index.html, is its source id.",
                        },
                        "create_collection": {
                            "type": "string",
                            "enum": ["true", "false"],
                            "default": "false",
                            "description": "Create the collection when missing.",
                        },
                    },
                }
            }
        },
    }
}


def upload_source_id(filename: str) -> str:
    """The source id of an uploaded file: the relative path the client sent, with
    ``\\`` read as ``/`` and empty and ``.`` segments dropped. Raises InvalidInput for
    an empty or over-long name, an absolute path, a ``..`` segment or a control
    character: an id is a name inside the collection, never a path out of it."""
    name = filename.strip().replace("\\", "/")
    if not name or len(name) > MAX_SOURCE_ID:
        raise InvalidInput(f"files: every file needs a name of 1 to {MAX_SOURCE_ID} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise InvalidInput(f"files: the name {name!r} has a control character")
    if name.startswith("/") or _DRIVE.match(name):
        raise InvalidInput(f"files: {name!r} is an absolute path; send a relative one")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise InvalidInput(f"files: {name!r} has a '..' segment")
    if not parts:
        raise InvalidInput(f"files: {name!r} names no file")
    return "/".join(parts)


def tenant_prefix(tenant: str) -> str:
    """The names a tenant's admin may create start with this: the tenant lowercased,
    other characters than a collection name's as ``-``, then ``-`` (``Acme.EU`` ->
    ``acme-eu-``). Tenants whose names map alike share it: name tenants apart."""
    return re.sub(r"[^a-z0-9_-]", "-", tenant.lower()) + "-"


def router(state: GatewayState) -> APIRouter:
    api = APIRouter(prefix="/v1/admin", tags=["admin"], responses=ADMIN_ERRORS)
    caller = admin_caller(state)
    writer = admin_caller(state, "write")
    audit = state.auth.audit

    async def visible(admin: Principal, name: str) -> str:
        """The owner of ``name``; NotFound when ``admin`` does not see it."""
        return await state.catalog.check(name, caller=None if admin.operator else admin)

    @api.post(
        "/collections",
        status_code=201,
        response_model=models.CollectionOut,
        summary="Create a collection.",
    )
    async def create_collection(
        body: models.CollectionCreate, admin: Annotated[Principal, Depends(caller)]
    ) -> models.CollectionOut:
        if admin.operator:
            tenant = body.tenant or PUBLIC_TENANT
        elif body.tenant not in (None, admin.tenant):
            raise PermissionDenied("a tenant's admin key creates its own tenant's collections")
        elif not body.name.startswith(prefix := tenant_prefix(admin.tenant)):
            # Names outside the tenant's own prefix may be another tenant's: refused
            # whether or not they exist, so a 409 never says another tenant has one
            raise PermissionDenied(f"a tenant's admin key creates collections named {prefix}<name>")
        elif admin.collections is not None and body.name not in admin.collections:
            # else it would make a collection it could then neither see nor drop
            raise PermissionDenied(
                "a key limited to some collections creates only collections of its list"
            )
        else:
            tenant = admin.tenant
        created = await state.upstream.create_collection(body.model_copy(update={"tenant": tenant}))
        state.catalog.invalidate()
        audit.record(
            "collection.create",
            tenant=admin.tenant,
            key_id=admin.key_id,
            route="/v1/admin/collections",
            outcome="ok",
            detail=f"{body.name} (tenant {tenant})",
        )
        return created

    @api.get("/collections", response_model=models.CollectionList, summary="List the collections.")
    async def list_collections(
        admin: Annotated[Principal, Depends(caller)],
    ) -> models.CollectionList:
        listing = await state.upstream.list_collections(counts=True)
        mine = [c for c in listing if admin.sees(c.name, c.tenant)]
        return models.CollectionList(collections=mine)

    @api.get(
        "/collections/{name}",
        response_model=models.CollectionOut,
        summary="Describe one collection (fields, counts).",
    )
    async def describe_collection(
        name: CollectionPath, admin: Annotated[Principal, Depends(caller)]
    ) -> models.CollectionOut:
        await visible(admin, name)
        return await state.upstream.describe_collection(name)

    @api.delete(
        "/collections/{name}",
        response_model=models.CollectionDropped,
        summary="Drop a collection and all its chunks.",
    )
    async def drop_collection(
        name: CollectionPath, admin: Annotated[Principal, Depends(caller)]
    ) -> models.CollectionDropped:
        await writable(state, admin, name)
        await state.upstream.drop_collection(name)
        state.catalog.invalidate()
        audit.record(
            "collection.drop",
            tenant=admin.tenant,
            key_id=admin.key_id,
            route="/v1/admin/collections/{name}",
            outcome="ok",
            detail=name,
        )
        return models.CollectionDropped(collection=name)

    async def ingest(
        name: str, body: models.IngestBody, files: list[tuple[str, bytes]], wait: bool
    ) -> Any:
        """A job queued (202), or with ``wait`` the ingest done now and its report (200)."""
        if wait:
            try:
                report = await state.upstream.ingest(name, body, files)
            except IngestInterrupted as partial:  # its error, with what was written
                return interrupted(partial)
            if body.create_collection:
                state.catalog.invalidate()
            return JSONResponse(report.model_dump(mode="json"), status_code=200)
        return accepted(await state.upstream.jobs.start_ingest(name, body, files))

    @api.post(
        "/collections/{name}/documents",
        status_code=202,
        response_model=job_models.JobAccepted,
        responses=_INGEST_ANSWERS,
        summary="Ingest JSON documents as a job (re-ingesting a source replaces it).",
        description="Answers 202 at once with the queued job; follow it at its `url` "
        "(GET, or GET `/events` for server-sent progress). Jobs of one collection run one "
        "at a time in order; searches go on meanwhile. `wait=true` ingests before "
        "answering with the report (200), for scripts.",
    )
    async def ingest_documents(
        name: CollectionPath,
        body: models.IngestBody,
        admin: Annotated[Principal, Depends(writer)],
        wait: Wait = False,
    ) -> Any:
        await writable(state, admin, name, create=body.create_collection)
        return await ingest(name, body, [], wait)

    @api.post(
        "/collections/{name}/files",
        status_code=202,
        response_model=job_models.JobAccepted,
        responses=_INGEST_ANSWERS,
        summary="Ingest uploaded files (Markdown, text, HTML, PDF) as a job; each file's "
        "relative path is its source id.",
        description="Send each file with its path relative to the site or folder it comes "
        'from as the name (`filename="guide/index.html"`); that path is the source id, so '
        "files of one name in different folders stay apart. Two files with one id in one "
        "request are refused (422). A file whose id is already stored replaces that source "
        "(status `updated` in the report). Answers 202 with the queued job, or with "
        "`wait=true` the report (200), as the JSON route.",
        openapi_extra=_FILES_BODY,
    )
    async def ingest_files(
        name: CollectionPath,
        request: Request,
        admin: Annotated[Principal, Depends(writer)],
        wait: Wait = False,
    ) -> Any:
        # The body is read here, after the admin key was checked (the dependency above):
        # a File() parameter would make FastAPI parse the whole multipart body first.
        uploads: list[tuple[str, bytes]] = []
        async with request.form(max_files=MAX_FILES, max_fields=8) as form:
            create_field = form.get("create_collection", "false")
            if create_field not in ("true", "false"):
                raise InvalidInput("create_collection: send 'true' or 'false'")
            files = form.getlist("files")
            if not files or len(files) > MAX_FILES:
                raise InvalidInput(f"files: send 1 to {MAX_FILES} files")
            seen: set[str] = set()
            for upload in files:
                if not isinstance(upload, UploadFile):
                    raise InvalidInput("files: every part named 'files' must be a file")
                source_id = upload_source_id(upload.filename or "")
                if source_id in seen:
                    raise InvalidInput(
                        f"files: two files have the source id {source_id!r}; send each once"
                    )
                seen.add(source_id)
                uploads.append((source_id, await upload.read()))
        create = create_field == "true"
        await writable(state, admin, name, create=create)
        body = models.IngestBody.model_construct(
            documents=[], create_collection=create, full_reindex=False
        )
        return await ingest(name, body, uploads, wait)

    @api.get(
        "/collections/{name}/sources",
        response_model=models.SourceList,
        summary="List the sources a collection holds (paginated, sorted by source id).",
        description="Each source with its title, URL, type, chunk count, content hash and "
        "when it was ingested. Counts every chunk of the page's sources: an admin call.",
    )
    async def list_sources(
        name: CollectionPath,
        admin: Annotated[Principal, Depends(writer)],
        page_token: Annotated[
            str, Query(max_length=MAX_SOURCE_ID, description="next_page_token of the last page.")
        ] = "",
        limit: Annotated[int, Query(ge=1, le=1000, description="Sources per page.")] = 100,
    ) -> models.SourceList:
        await visible(admin, name)
        return await state.upstream.list_sources(name, page_token, limit)

    @api.delete(
        "/collections/{name}/documents",
        response_model=models.SourceDeleted,
        summary="Delete every chunk of one source.",
    )
    async def delete_source(
        name: CollectionPath,
        source_id: Annotated[str, Query(min_length=1, max_length=512)],
        admin: Annotated[Principal, Depends(writer)],
    ) -> models.SourceDeleted:
        await writable(state, admin, name)
        deleted = await state.upstream.delete_source(name, source_id)
        return models.SourceDeleted(collection=name, source_id=source_id, deleted=deleted)

    return api
