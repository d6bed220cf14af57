"""Admin routes of the ingest and sync jobs: list, read, follow (server-sent events)
and cancel. The jobs live in the retriever (the writer), so they outlive a gateway
restart; any gateway replica answers for any job."""

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse, ServerSentEvent

from groundwire_core.errors import GroundwireError, NotFound
from groundwire_gateway import job_models, models
from groundwire_gateway.auth import Principal
from groundwire_gateway.chat_session import SSE_PING_S, SSE_SEPARATOR, error_event, internal_error
from groundwire_gateway.errors import error_body, error_headers, http_status
from groundwire_gateway.routes import ADMIN_ERRORS
from groundwire_gateway.routes.chat import _sse_events_schema
from groundwire_gateway.routes.security import admin_caller
from groundwire_gateway.state import GatewayState
from groundwire_gateway.upstream_jobs import IngestInterrupted

JobId = Annotated[str, Path(pattern=job_models.JOB_ID_PATTERN, description="Job id.")]
FINAL = ("succeeded", "failed", "cancelled")
JOB_STREAM_SCHEMA = _sse_events_schema(
    {"progress": "JobOut", "done": "JobOut", "error": "ErrorEvent"}
)


def job_url(job_id: str) -> str:
    return f"/v1/admin/jobs/{job_id}"


def accepted(job: job_models.JobOut) -> JSONResponse:
    """The 202 answer of a route that queued ``job`` (an ingest, a sync)."""
    body = job_models.JobAccepted(job=job, url=job_url(job.id))
    return JSONResponse(body.model_dump(mode="json", by_alias=True), status_code=202)


def interrupted(partial: IngestInterrupted) -> JSONResponse:
    """The answer of a ``wait=true`` ingest that failed after writing some documents:
    the error's status and body, with the report of what was written as its
    ``details`` (a 507 names the documents that are in, so a client resends the rest)."""
    error = partial.error
    body = error_body(
        error.code,
        error.message,
        dependency=error.dependency,
        details=partial.report.model_dump(mode="json"),
    )
    return JSONResponse(body, status_code=http_status(error), headers=error_headers(error))


def router(state: GatewayState) -> APIRouter:
    api = APIRouter(prefix="/v1/admin/jobs", tags=["admin"], responses=ADMIN_ERRORS)
    caller = admin_caller(state, "write")  # a write key runs its jobs and syncs

    async def mine(admin: Principal, job_id: str) -> job_models.JobOut:
        """The job when ``admin``'s tenant owns it (the operator: any) and, for a key
        limited to some collections, its collection is one of them; else NotFound, as
        an unknown id. Ownership, never the collection's name or visibility: a name
        reused by another tenant, or a ``public`` collection, shows no one else's jobs."""
        job = await state.upstream.jobs.get(job_id, owner(admin))
        if admin.collections is not None and job.collection not in admin.collections:
            raise NotFound(f"job {job_id!r} does not exist")
        return job

    @api.get("", response_model=job_models.JobList, summary="List ingest and sync jobs.")
    async def list_jobs(
        admin: Annotated[Principal, Depends(caller)],
        collection: Annotated[
            str | None, Query(pattern=models.COLLECTION_PATTERN, description="Only its jobs.")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=1000, description="At most this many.")] = 100,
    ) -> job_models.JobList:
        jobs = await state.upstream.jobs.recent(collection or "", limit, owner(admin))
        if admin.collections is not None:
            jobs = [j for j in jobs if j.collection in admin.collections]
        return job_models.JobList(jobs=jobs)

    @api.get(
        "/{job_id}",
        response_model=job_models.JobOut,
        summary="A job: its state, counts and per-document report.",
    )
    async def get_job(
        job_id: JobId, admin: Annotated[Principal, Depends(caller)]
    ) -> job_models.JobOut:
        return _seen(state, await mine(admin, job_id))

    @api.get(
        "/{job_id}/events",
        response_class=EventSourceResponse,
        responses={
            200: {
                "description": "Server-sent events: `progress` (the job, without its "
                "per-document report) at each change, then exactly one `done` (the job in "
                "a final state, with its report) or `error`.",
                "content": {"text/event-stream": {"schema": JOB_STREAM_SCHEMA}},
            }
        },
        summary="Follow a job's progress as server-sent events.",
    )
    async def job_events(
        job_id: JobId, admin: Annotated[Principal, Depends(caller)]
    ) -> EventSourceResponse:
        await mine(admin, job_id)  # unknown: 404, not an event
        events = _job_events(state, job_id, owner(admin))
        return EventSourceResponse(events, sep=SSE_SEPARATOR, ping=SSE_PING_S)

    @api.post(
        "/{job_id}/cancel",
        response_model=job_models.JobOut,
        responses={202: {"model": job_models.JobOut, "description": "Still stopping."}},
        summary="Cancel a job.",
        description="A queued job is cancelled at once (200). A running one stops before "
        "its next document (202, `cancel_requested`): the sources it already switched "
        "stay, the one in flight is dropped unwritten. A finished job is returned as it is.",
    )
    async def cancel_job(job_id: JobId, admin: Annotated[Principal, Depends(caller)]) -> Any:
        await mine(admin, job_id)  # a key limited to other collections: 404 before it acts
        job = _seen(state, await state.upstream.jobs.cancel(job_id, owner(admin)))
        if job.state in FINAL:
            return job
        return JSONResponse(job.model_dump(mode="json", by_alias=True), status_code=202)

    return api


def owner(admin: Principal) -> str:
    """The tenant whose jobs ``admin`` may read and cancel; "" (any) for the operator."""
    return "" if admin.operator else admin.tenant


def _seen(state: GatewayState, job: job_models.JobOut) -> job_models.JobOut:
    """``job``; a finished ingest may have created its collection: the catalog is
    refreshed so searches find it at once."""
    if job.state in FINAL:
        state.catalog.invalidate()
    return job


async def _job_events(
    state: GatewayState, job_id: str, tenant: str
) -> AsyncIterator[ServerSentEvent]:
    try:
        async for job in state.upstream.jobs.watch(job_id, tenant):
            final = job.state in FINAL
            data = _seen(state, job).model_dump_json(by_alias=True)
            yield ServerSentEvent(data=data, event="done" if final else "progress")
            if final:
                return
    except GroundwireError as error:
        yield ServerSentEvent(data=error_event(error).model_dump_json(), event="error")
    except Exception:
        yield ServerSentEvent(data=error_event(internal_error()).model_dump_json(), event="error")
