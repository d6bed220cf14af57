"""Admin routes (an admin API key required): collections, document ingest (JSON or
multipart files) and delete by source, through the retriever's gRPC API."""

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, File, Form, Path, Query, UploadFile

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
        return models.CollectionList(collections=await state.upstream.list_collections())

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
        summary="Ingest uploaded files (Markdown, text, HTML, PDF); the file name is the "
        "source id.",
    )
    async def ingest_files(
        name: CollectionPath,
        files: Annotated[
            list[UploadFile], File(min_length=1, max_length=MAX_FILES, description="The documents.")
        ],
        admin: Annotated[Principal, Depends(caller)],
        create_collection: Annotated[
            Literal["true", "false"], Form(description="Create the collection when missing.")
        ] = "false",
    ) -> models.IngestReportOut:
        if not files or len(files) > MAX_FILES:
            raise InvalidInput(f"files: send 1 to {MAX_FILES} files")
        uploads: list[tuple[str, bytes]] = []
        for upload in files:
            filename = (upload.filename or "").strip()
            if not filename or len(filename) > 512:
                raise InvalidInput("files: every file needs a name of 1 to 512 characters")
            uploads.append((filename, await upload.read()))
        if len({n for n, _ in uploads}) != len(uploads):
            raise InvalidInput("files: two files have the same name")
        create = create_collection == "true"
        body = models.IngestBody.model_construct(
            documents=[], create_collection=create, full_reindex=False
        )
        report = await state.upstream.ingest(name, body, uploads)
        if create:
            state.catalog.invalidate()
        return report

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
