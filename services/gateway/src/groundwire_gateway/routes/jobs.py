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
from groundwire_gateway.routes import ADMIN_ERRORS
from groundwire_gateway.routes.chat import _sse_events_schema
from groundwire_gateway.routes.security import admin_caller
from groundwire_gateway.state import GatewayState

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


def router(state: GatewayState) -> APIRouter:
    api = APIRouter(prefix="/v1/admin/jobs", tags=["admin"], responses=ADMIN_ERRORS)
    caller = admin_caller(state, "write")  # a write key runs its jobs and syncs

    async def mine(admin: Principal, job: job_models.JobOut) -> job_models.JobOut:
        """``job`` when its collection is one ``admin`` sees; else NotFound, as an
        unknown id (another tenant's jobs do not exist for it)."""
        if not admin.operator and job.collection not in await state.catalog.names(admin):
            raise NotFound(f"no job '{job.id}'")
        return job

    @api.get("", response_model=job_models.JobList, summary="List ingest and sync jobs.")
    async def list_jobs(
        admin: Annotated[Principal, Depends(caller)],
        collection: Annotated[
            str | None, Query(pattern=models.COLLECTION_PATTERN, description="Only its jobs.")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=1000, description="At most this many.")] = 100,
    ) -> job_models.JobList:
        jobs = await state.upstream.jobs.recent(collection or "", limit)
        if not admin.operator:
            seen = await state.catalog.names(admin)
            jobs = [j for j in jobs if j.collection in seen]
        return job_models.JobList(jobs=jobs)

    @api.get(
        "/{job_id}",
        response_model=job_models.JobOut,
        summary="A job: its state, counts and per-document report.",
    )
    async def get_job(
        job_id: JobId, admin: Annotated[Principal, Depends(caller)]
    ) -> job_models.JobOut:
        return _seen(state, await mine(admin, await state.upstream.jobs.get(job_id)))

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
        await mine(admin, await state.upstream.jobs.get(job_id))  # unknown: 404, not an event
        return EventSourceResponse(_job_events(state, job_id), sep=SSE_SEPARATOR, ping=SSE_PING_S)

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
        await mine(admin, await state.upstream.jobs.get(job_id))  # checked before it acts
        job = _seen(state, await state.upstream.jobs.cancel(job_id))
        if job.state in FINAL:
            return job
        return JSONResponse(job.model_dump(mode="json", by_alias=True), status_code=202)

    return api


def _seen(state: GatewayState, job: job_models.JobOut) -> job_models.JobOut:
    """``job``; a finished ingest may have created its collection: the catalog is
    refreshed so searches find it at once."""
    if job.state in FINAL:
        state.catalog.invalidate()
    return job


async def _job_events(state: GatewayState, job_id: str) -> AsyncIterator[ServerSentEvent]:
    try:
        async for job in state.upstream.jobs.watch(job_id):
            final = job.state in FINAL
            data = _seen(state, job).model_dump_json(by_alias=True)
            yield ServerSentEvent(data=data, event="done" if final else "progress")
            if final:
                return
    except GroundwireError as error:
        yield ServerSentEvent(data=error_event(error).model_dump_json(), event="error")
    except Exception:
        yield ServerSentEvent(data=error_event(internal_error()).model_dump_json(), event="error")
