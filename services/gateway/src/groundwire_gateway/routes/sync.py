"""Admin route of a sync: keep a collection in step with a folder the retriever reads,
a git working tree or a website, deletions included (the retriever's Sync RPC)."""

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse

from groundwire_gateway import job_models
from groundwire_gateway.auth import Principal
from groundwire_gateway.routes import ADMIN_ERRORS
from groundwire_gateway.routes.admin import CollectionPath
from groundwire_gateway.routes.jobs import accepted
from groundwire_gateway.routes.security import admin_caller, writable
from groundwire_gateway.state import GatewayState
from groundwire_gateway.sync_models import SyncBody, SyncReportOut


def router(state: GatewayState) -> APIRouter:
    api = APIRouter(prefix="/v1/admin", tags=["admin"], responses=ADMIN_ERRORS)
    caller = admin_caller(state, "write")  # a write key runs its jobs and syncs

    @api.post(
        "/collections/{name}/sync",
        status_code=202,
        response_model=job_models.JobAccepted,
        responses={
            200: {"model": SyncReportOut, "description": "dry_run, or wait=true: the report."},
            202: {"model": job_models.JobAccepted, "description": "The sync job, queued."},
        },
        summary="Sync a collection with a folder, git working tree or website.",
        description="Computes the delta between the source set and the collection (new, "
        "changed, unchanged, deleted, renamed) and applies it: each new or changed source "
        "replaced atomically, deletions after they are in. `dry_run` answers with the "
        "delta and writes nothing. The folder is read by the retriever (it must be under "
        "its sync roots); a website is crawled within its origin and path prefix as "
        "robots.txt allows. Answers 202 at once with the queued sync job (follow it at its "
        "`url`, as an ingest job); `dry_run`, or `wait=true`, answers with the report (200) "
        "when done, within the admin deadline.",
    )
    async def sync(
        name: CollectionPath,
        body: SyncBody,
        admin: Annotated[Principal, Depends(caller)],
        wait: Annotated[
            bool, Query(description="Sync before answering, with the report (200).")
        ] = False,
    ) -> Any:
        await writable(state, admin, name, create=True)
        if not body.dry_run and not wait:
            return accepted(await state.upstream.jobs.start_sync(name, body))
        report = await state.upstream.sync.sync(name, body)
        if not body.dry_run:
            state.catalog.invalidate()  # the first source written may create the collection
        return JSONResponse(report.model_dump(mode="json", by_alias=True), status_code=200)

    return api
