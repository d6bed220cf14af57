"""Admin routes (an admin API key required): collections, document ingest (JSON or
multipart files), the sources a collection holds and delete by source, through the
retriever's gRPC API."""

import re
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from starlette.datastructures import UploadFile

from groundwire_core.errors import InvalidInput
from groundwire_gateway import models
from groundwire_gateway.auth import Principal
from groundwire_gateway.routes import ADMIN_ERRORS
from groundwire_gateway.routes.security import admin_caller
from groundwire_gateway.state import GatewayState

CollectionPath = Annotated[
    str, Path(pattern=models.COLLECTION_PATTERN, description="Collection name.")
]
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


def router(state: GatewayState) -> APIRouter:
    api = APIRouter(prefix="/v1/admin", tags=["admin"], responses=ADMIN_ERRORS)
    caller = admin_caller(state)

    @api.post(
        "/collections",
        status_code=201,
        response_model=models.CollectionOut,
        summary="Create a collection.",
    )
    async def create_collection(
        body: models.CollectionCreate, admin: Annotated[Principal, Depends(caller)]
    ) -> models.CollectionOut:
        created = await state.upstream.create_collection(body)
        state.catalog.invalidate()
        return created

    @api.get("/collections", response_model=models.CollectionList, summary="List the collections.")
    async def list_collections(
        admin: Annotated[Principal, Depends(caller)],
    ) -> models.CollectionList:
        return models.CollectionList(collections=await state.upstream.list_collections(counts=True))

    @api.get(
        "/collections/{name}",
        response_model=models.CollectionOut,
        summary="Describe one collection (fields, counts).",
    )
    async def describe_collection(
        name: CollectionPath, admin: Annotated[Principal, Depends(caller)]
    ) -> models.CollectionOut:
        return await state.upstream.describe_collection(name)

    @api.delete(
        "/collections/{name}",
        response_model=models.CollectionDropped,
        summary="Drop a collection and all its chunks.",
    )
    async def drop_collection(
        name: CollectionPath, admin: Annotated[Principal, Depends(caller)]
    ) -> models.CollectionDropped:
        await state.upstream.drop_collection(name)
        state.catalog.invalidate()
        return models.CollectionDropped(collection=name)

    @api.post(
        "/collections/{name}/documents",
        response_model=models.IngestReportOut,
        summary="Ingest JSON documents (re-ingesting a source replaces it).",
    )
    async def ingest_documents(
        name: CollectionPath, body: models.IngestBody, admin: Annotated[Principal, Depends(caller)]
    ) -> models.IngestReportOut:
        report = await state.upstream.ingest(name, body, [])
        if body.create_collection:
            state.catalog.invalidate()
        return report

    @api.post(
        "/collections/{name}/files",
        response_model=models.IngestReportOut,
        summary="Ingest uploaded files (Markdown, text, HTML, PDF); each file's relative path "
        "is its source id.",
        description="Send each file with its path relative to the site or folder it comes "
        'from as the name (`filename="guide/index.html"`); that path is the source id, so '
        "files of one name in different folders stay apart. Two files with one id in one "
        "request are refused (422). A file whose id is already stored replaces that source "
        "(status `updated` in the report).",
        openapi_extra=_FILES_BODY,
    )
    async def ingest_files(
        name: CollectionPath, request: Request, admin: Annotated[Principal, Depends(caller)]
    ) -> models.IngestReportOut:
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
        body = models.IngestBody.model_construct(
            documents=[], create_collection=create, full_reindex=False
        )
        report = await state.upstream.ingest(name, body, uploads)
        if create:
            state.catalog.invalidate()
        return report

    @api.get(
        "/collections/{name}/sources",
        response_model=models.SourceList,
        summary="List the sources a collection holds (paginated, sorted by source id).",
        description="Each source with its title, URL, type, chunk count, content hash and "
        "when it was ingested. Counts every chunk of the page's sources: an admin call.",
    )
    async def list_sources(
        name: CollectionPath,
        admin: Annotated[Principal, Depends(caller)],
        page_token: Annotated[
            str, Query(max_length=MAX_SOURCE_ID, description="next_page_token of the last page.")
        ] = "",
        limit: Annotated[int, Query(ge=1, le=1000, description="Sources per page.")] = 100,
    ) -> models.SourceList:
        return await state.upstream.list_sources(name, page_token, limit)

    @api.delete(
        "/collections/{name}/documents",
        response_model=models.SourceDeleted,
        summary="Delete every chunk of one source.",
    )
    async def delete_source(
        name: CollectionPath,
        source_id: Annotated[str, Query(min_length=1, max_length=512)],
        admin: Annotated[Principal, Depends(caller)],
    ) -> models.SourceDeleted:
        deleted = await state.upstream.delete_source(name, source_id)
        return models.SourceDeleted(collection=name, source_id=source_id, deleted=deleted)

    return api
