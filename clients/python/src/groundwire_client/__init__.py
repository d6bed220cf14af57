"""Python client of the Groundwire HTTP API: search, streamed cited answers with typed
events, collections, sources, ingest and sync jobs with progress.

::

    from groundwire_client import Client

    with Client("http://127.0.0.1:8080", api_key="…") as gw:
        answer = gw.ask("How do I limit requests per client?")
        print(answer.answer, answer.verified)
"""

from groundwire_client.async_client import AsyncClient
from groundwire_client.client import Client
from groundwire_client.errors import (
    APIConnectionError,
    APIError,
    AuthenticationError,
    BackendError,
    ConflictError,
    DeadlineExceededError,
    GroundwireError,
    InsufficientStorageError,
    InternalServerError,
    InvalidRequestError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    ProtocolError,
    RateLimitError,
    UnavailableError,
)
from groundwire_client.models import (
    Answer,
    ChatEvent,
    Citation,
    CitationsEvent,
    Collection,
    DeltaEvent,
    Document,
    DoneEvent,
    ErrorEvent,
    Job,
    Message,
    ResetEvent,
    RetrievalEvent,
    SearchResponse,
    SearchResult,
    Source,
    Stage,
    StagesEvent,
)

__all__ = [
    "APIConnectionError",
    "APIError",
    "Answer",
    "AsyncClient",
    "AuthenticationError",
    "BackendError",
    "ChatEvent",
    "Citation",
    "CitationsEvent",
    "Client",
    "Collection",
    "ConflictError",
    "DeadlineExceededError",
    "DeltaEvent",
    "Document",
    "DoneEvent",
    "ErrorEvent",
    "GroundwireError",
    "InsufficientStorageError",
    "InternalServerError",
    "InvalidRequestError",
    "Job",
    "Message",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "ProtocolError",
    "RateLimitError",
    "ResetEvent",
    "RetrievalEvent",
    "SearchResponse",
    "SearchResult",
    "Source",
    "Stage",
    "StagesEvent",
    "UnavailableError",
]
