"""Request and response bodies of the HTTP API (pydantic; the OpenAPI schema comes
from here). One idea at ~600 lines: the HTTP contract, kept in one module as the
committed openapi.json is one document; it holds declarations only, no logic.

Hard bounds that clients should see in the schema (messages per chat, characters
per text part) are fixed here; the input token budget is a setting, checked by the
routes (see :func:`approx_tokens`).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from groundwire.orchestrator.v1 import orchestrator_pb2
from groundwire_core.urls import WEB_URL_PATTERN, is_web_url

COLLECTION_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
TENANT_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
FIELD_PATTERN = r"^[a-z_][a-z0-9_]{0,63}$"
# The id after ``user:``/``group:`` starts with a character that is no space to Python
# (\s, \x1c-\x1f, \x85) nor to JSON Schema's ECMA regex (\s, \ufeff), and goes on
# without line breaks in either: the documented schema and the check then agree.
_ID_START = r"[^\s\x1c-\x1f\x85\ufeff]"
_ID_REST = r"[^\n\r\u2028\u2029]{0,127}"
ACCESS_PATTERN = rf"^(public|user:{_ID_START}{_ID_REST}|group:{_ID_START}{_ID_REST})$"
AccessList = list[Annotated[str, Field(pattern=ACCESS_PATTERN)]]
"""Who may see a document: ``public``, ``user:<id>``, ``group:<name>`` (docs/security.md)."""
MODEL_PATTERN = r"^groundwire(:[a-z0-9][a-z0-9_-]{0,63})?$"
STORED_ID_PATTERN = r"^[0-9a-f]{32}$"
"""Conversation and answer ids (made by the gateway)."""
MAX_MESSAGES = 20
MAX_PART_CHARS = 4000
TOKENS_PER_MESSAGE = 4
CHARS_PER_TOKEN = 4


def approx_tokens(text: str) -> int:
    """Approximate token count: one token per 4 characters (no tokenizer at the edge)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class FieldFilter(_Strict):
    field: str = Field(min_length=1, max_length=64, description="A filterable payload field.")
    any_of: list[Annotated[str, Field(max_length=256)]] = Field(
        min_length=1, max_length=64, description="Accepted values."
    )


Filters = Annotated[
    list[FieldFilter],
    Field(max_length=16, description="All must hold; fields the collection declares filterable."),
]
CollectionName = Annotated[
    str,
    Field(pattern=COLLECTION_PATTERN, description="Collection; the server default when absent."),
]


# In the schema only: the validators below say "blank" in words people understand.
NOT_BLANK: dict[str, Any] = {"pattern": r"\S"}


FUSION_METHODS = tuple(
    name.removeprefix("FUSION_").lower()
    for name, value in orchestrator_pb2.Fusion.items()
    if value != orchestrator_pb2.FUSION_UNSPECIFIED
)
"""The fusion methods, named after the orchestrator's ``Fusion`` enum: a method added
there is accepted here with no change."""


def _known_fusion(name: str) -> str:
    if name not in FUSION_METHODS:
        raise ValueError(f"unknown fusion method {name!r}; use one of {', '.join(FUSION_METHODS)}")
    return name


FusionMethod = Annotated[
    str,
    AfterValidator(_known_fusion),
    WithJsonSchema({"type": "string", "enum": list(FUSION_METHODS)}),
]
FusionWeights = dict[
    Literal["dense", "sparse", "bm25"], Annotated[float, Field(ge=0, allow_inf_nan=False)]
]


class SearchBody(_Strict):
    query: str = Field(
        min_length=1,
        max_length=4000,
        description="What to search for.",
        json_schema_extra=NOT_BLANK,
    )
    collection: CollectionName | None = None
    limit: int = Field(10, ge=1, le=50, description="Results to return.")
    filters: Filters = Field(default_factory=list)
    rerank: bool = Field(True, description="Rerank with the cross-encoder when available.")
    reasons: bool = Field(False, description="Ask the LLM for a match reason per top result.")
    fusion: FusionMethod | None = Field(
        None,
        description="How the retrieval paths' rankings are merged (rrf: reciprocal rank; "
        "weighted: weighted min-max-normalised scores; the methods are the orchestrator's "
        "Fusion enum); absent: the server's setting (weighted by default).",
    )
    fusion_weights: FusionWeights | None = Field(
        None,
        description="Per-path weights of weighted fusion (a path left out weighs 1.0); "
        "absent: the server's setting (dense 0.4, bm25 0.6, sparse 0.3 by default).",
    )
    group_by: Literal["chunk", "document"] = Field(
        "chunk",
        description="chunk: one result per matching chunk (several may be of one document); "
        "document: one result per document (source), its best chunk, with matching_chunks "
        "and other_headings; limit then counts documents.",
    )

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the query is blank")
        return value


class StageOut(BaseModel):
    name: str
    ms: float
    fallback: bool
    reason: str = ""
    dependency: str = ""
    details: dict[str, str] = Field(default_factory=dict)


class SearchResult(BaseModel):
    rank: int
    score: float
    chunk_id: str
    source_id: str
    title: str
    heading_path: list[str]
    url: str
    text: str
    match_reason: str = ""
    injection_flagged: bool = False
    matching_chunks: int = Field(
        0,
        description='group_by "document": how many of the document\'s chunks matched (this '
        "one included); 0 for a chunk-level search.",
    )
    other_headings: list[str] = Field(
        default_factory=list,
        description='group_by "document": the headings (" > "-joined) of the document\'s '
        "other matching chunks, best first, each once.",
    )


class SearchResponse(BaseModel):
    collection: str
    results: list[SearchResult]
    stages: list[StageOut]
    request_id: str


# --- chat ------------------------------------------------------------------------------


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("the text is blank")
    return value


Text = Annotated[
    str,
    Field(min_length=1, max_length=MAX_PART_CHARS, json_schema_extra=NOT_BLANK),
    AfterValidator(_not_blank),
]


class TextPart(_Strict):
    type: Literal["text"]
    text: Text


MessageContent = Text | Annotated[list[TextPart], Field(min_length=1, max_length=16)]


def content_text(content: str | list[TextPart]) -> str:
    return content if isinstance(content, str) else "\n".join(p.text for p in content)


class ChatMessage(_Strict):
    role: Literal["user", "assistant"] = Field(
        description="Who wrote it. Groundwire sets its own instructions: no system role."
    )
    content: MessageContent = Field(
        description=f"Text, or text parts; at most {MAX_PART_CHARS} characters per part."
    )

    @property
    def text(self) -> str:
        return content_text(self.content)


def _check_conversation(messages: list[ChatMessage]) -> None:
    if messages[-1].role != "user":
        raise ValueError("the last message must be from the user")


def conversation_tokens(messages: list[ChatMessage]) -> int:
    """Approximate input tokens of a conversation (see :func:`approx_tokens`)."""
    return sum(approx_tokens(m.text) + TOKENS_PER_MESSAGE for m in messages)


Messages = Annotated[list[ChatMessage], Field(min_length=1, max_length=MAX_MESSAGES)]


class ChatBody(_Strict):
    messages: Messages = Field(description="The conversation; the last message is the user's.")
    collection: CollectionName | None = None
    filters: Filters = Field(default_factory=list)
    listwise_rerank: bool = Field(
        False, description="Let the LLM reorder candidates against the whole intent."
    )
    max_agent_steps: int = Field(0, ge=0, le=16, description="Agent steps; 0 = server default.")
    conversation_id: str | None = Field(
        None,
        pattern=STORED_ID_PATTERN,
        description="Continue a stored conversation (the `conversation_id` of an earlier "
        "`done` event); absent = a new one.",
    )

    @model_validator(mode="after")
    def _conversation(self) -> ChatBody:
        _check_conversation(self.messages)
        return self


class Source(BaseModel):
    number: int = Field(description="Citation number, stable for the whole answer ([n]).")
    chunk_id: str
    source_id: str
    title: str
    heading_path: list[str]
    url: str
    text: str
    score: float
    match_reason: str = ""
    injection_flagged: bool = False
    live: bool = Field(
        False,
        description="Looked up live on the collection's documentation site because the "
        "collection did not cover the question: not part of the collection, unreviewed "
        "(docs/live-docs.md). `url` is the page.",
    )
    fetched_at: float = Field(0.0, description="Live only: Unix seconds of the page's fetch.")


VerificationStatus = Literal[
    "supported",
    "unsupported",
    "contradicted",
    "unchecked",
    "quoted",
    "similar",
    "unrelated",
    "unspecified",
]
"""supported, unsupported and contradicted come only from a method that reads meaning
(nli, llm); the similarity score says quoted (verbatim, nothing judged), similar or
unrelated, and its `support` is a relevance score."""


class Citation(BaseModel):
    number: int
    sentence: str
    status: VerificationStatus = Field(
        description="supported, unsupported, contradicted: judged by a method that reads "
        "meaning (nli, llm); quoted (verbatim from the source, nothing judged), similar, "
        "unrelated: by similarity only; unchecked: no check ran."
    )
    support: float = Field(
        description="Support in [0, 1]; a relevance score, not proof, when `method` is "
        "`similarity`."
    )
    method: Literal["nli", "llm", "similarity", "none"] = Field(
        "none", description="The verifier that judged it (`similarity` is never proof)."
    )
    contradiction: float = Field(
        0.0, description="Probability or confidence that the source contradicts the sentence."
    )
    answer_span: list[int] | None = Field(
        None,
        min_length=2,
        max_length=2,
        description="[start, end) of the sentence in the final answer text (`done.answer`).",
    )
    source_span: list[int] | None = Field(
        None,
        min_length=2,
        max_length=2,
        description="[start, end) of the best-supporting sentence in the cited source's `text`.",
    )
    reason: str = ""
    chunk_span: list[int] | None = Field(
        None,
        min_length=2,
        max_length=2,
        description=(
            "[start, end) of the cited source's `text` in its document: the stored chunks' "
            "texts joined by a blank line in chunk order (the MCP `read_document` text). "
            "Absent for chunks ingested before it was recorded."
        ),
    )


class WithheldSentence(BaseModel):
    """A sentence never sent as a delta: its citations failed the check."""

    sentence: str
    numbers: list[int] = Field(description="Citation numbers it carried (none: uncited).")
    status: VerificationStatus
    reason: str


class RetrievalEvent(BaseModel):
    event: ClassVar[str] = "retrieval"
    sources: list[Source]


class DeltaEvent(BaseModel):
    event: ClassVar[str] = "delta"
    text: str


class ResetEvent(BaseModel):
    event: ClassVar[str] = "reset"
    reason: str


class CitationsEvent(BaseModel):
    event: ClassVar[str] = "citations"
    sources: list[Source]
    citations: list[Citation]
    withheld: list[WithheldSentence] = Field(
        default_factory=list,
        description="Sentences withheld from the answer (verify before show), in order.",
    )


class StagesEvent(BaseModel):
    event: ClassVar[str] = "stages"
    stages: list[StageOut]


AnswerMode = Literal["generated", "extractive", "declined", "unspecified"]


class DoneEvent(BaseModel):
    event: ClassVar[str] = "done"
    mode: AnswerMode
    answer: str
    unsupported_citations: int = 0
    answer_id: str | None = Field(
        None,
        description="The stored answer (rate it: POST /v1/feedback); null when the "
        "gateway stores no conversations.",
    )
    conversation_id: str | None = Field(
        None, description="Send it back as `conversation_id` to continue this conversation."
    )


class ErrorEvent(BaseModel):
    event: ClassVar[str] = "error"
    code: str
    message: str
    dependency: str | None = None
    retry_after_s: float | None = None
    request_id: str = ""


AskEvent = RetrievalEvent | DeltaEvent | ResetEvent | CitationsEvent | StagesEvent | DoneEvent


class ChatStreamEvents(BaseModel):
    """The payloads of the SSE events of ``POST /v1/chat`` (one JSON object per
    ``data:`` line, named by the ``event:`` line)."""

    retrieval: RetrievalEvent
    delta: DeltaEvent
    reset: ResetEvent
    citations: CitationsEvent
    stages: StagesEvent
    done: DoneEvent
    error: ErrorEvent


# --- OpenAI-compatible chat completions --------------------------------------------------


class StreamOptions(_Strict):
    include_usage: bool = False


class CompletionRequestMessage(_Strict):
    """One message of an OpenAI chat completion request."""

    role: Literal["system", "developer", "user", "assistant"] = Field(
        description="system / developer: the operator's instructions, placed in the prompt "
        "below Groundwire's grounding and untrusted-data rules, which they cannot override."
    )
    content: MessageContent = Field(
        description=f"Text, or text parts; at most {MAX_PART_CHARS} characters per part."
    )
    name: str | None = Field(None, max_length=64, description="Accepted and ignored.")

    @property
    def text(self) -> str:
        return content_text(self.content)


OPERATOR_ROLES = frozenset({"system", "developer"})


class CompletionBody(_Strict):
    """OpenAI's chat completion request; sampling knobs are accepted for compatibility
    and ignored (the chain's own settings apply)."""

    model: str = Field(
        pattern=MODEL_PATTERN,
        description="'groundwire' (the default collection) or 'groundwire:<collection>'.",
    )
    messages: list[CompletionRequestMessage] = Field(
        min_length=1,
        max_length=MAX_MESSAGES,
        description="The conversation; the last user or assistant message is the user's. "
        "system (and developer) messages are the operator's instructions.",
    )
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    n: Literal[1] | None = None
    seed: int | None = None
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    stop: str | list[Annotated[str, Field(max_length=64)]] | None = None
    user: str | None = Field(None, max_length=256)
    collection: CollectionName | None = Field(
        None, description="Groundwire extension (extra_body); overrides the model's collection."
    )
    filters: Filters = Field(default_factory=list)
    conversation_id: str | None = Field(
        None,
        pattern=STORED_ID_PATTERN,
        description="Groundwire extension (extra_body): continue a stored conversation "
        "(`groundwire.conversation_id` of an earlier completion).",
    )

    @model_validator(mode="after")
    def _conversation(self) -> CompletionBody:
        turns = self.conversation()
        if not turns:
            raise ValueError("there is no user message")
        _check_conversation(turns)
        return self

    def conversation(self) -> list[ChatMessage]:
        """The user and assistant messages, in order."""
        return [
            ChatMessage(role="user" if m.role == "user" else "assistant", content=m.content)
            for m in self.messages
            if m.role not in OPERATOR_ROLES
        ]

    def instructions(self) -> str:
        """The system (and developer) messages' text, in order, one paragraph each."""
        return "\n\n".join(m.text for m in self.messages if m.role in OPERATOR_ROLES)


class CompletionMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class CompletionChoice(BaseModel):
    index: int = 0
    message: CompletionMessage
    finish_reason: Literal["stop"] = "stop"


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class GroundwireExtra(BaseModel):
    """What Groundwire adds to an OpenAI response."""

    mode: AnswerMode | None = None
    collection: str
    request_id: str
    answer_id: str | None = Field(
        None, description="The stored answer (POST /v1/feedback); null when none is stored."
    )
    conversation_id: str | None = Field(
        None, description="Send it back (extra_body) to continue the conversation."
    )
    stages: list[StageOut] = Field(default_factory=list)
    withheld: list[WithheldSentence] = Field(
        default_factory=list,
        description="Sentences withheld from the answer because their citations failed "
        "the check (verify before show).",
    )


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage
    citations: list[Source] = Field(description="The sources cited by the answer.")
    groundwire: GroundwireExtra


class ChunkDelta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChunkChoice(BaseModel):
    index: int = 0
    delta: ChunkDelta
    finish_reason: Literal["stop"] | None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | None = None
    citations: list[Source] | None = None
    groundwire: GroundwireExtra | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "groundwire"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


# --- admin -------------------------------------------------------------------------------


class CollectionCreate(_Strict):
    name: str = Field(pattern=COLLECTION_PATTERN, description="Name of the new collection.")
    filterable: list[Annotated[str, Field(pattern=FIELD_PATTERN)]] = Field(
        default_factory=list,
        max_length=32,
        description="Extra filterable payload fields beyond source_id, doc_type and title.",
    )
    tenant: str | None = Field(
        None,
        pattern=TENANT_PATTERN,
        description="The owning tenant. A tenant's admin key always creates its own "
        "tenant's; the operator's (static) admin keys may name one, default `public` "
        "(seen by every caller).",
    )
    default_access: AccessList = Field(
        default_factory=list,
        max_length=64,
        description="Access list of documents ingested without one: 'public', "
        "'user:<id>', 'group:<name>'; empty = ['public'].",
    )
    restricted: bool = Field(
        False,
        description="Refuse callers without an end-user token (403) instead of showing "
        "them the public documents only.",
    )


class CollectionOut(BaseModel):
    name: str
    dense_dims: int
    learned_sparse: bool
    bm25: bool
    filterable: list[str]
    embedder_model: str
    chunks: int
    sources: int
    tenant: str = Field("public", description="The owning tenant (`public`: every caller's).")
    default_access: list[str] = Field(
        default_factory=lambda: ["public"], description="Access list of unlabelled documents."
    )
    restricted: bool = Field(False, description="Callers without an end user are refused.")


class CollectionList(BaseModel):
    collections: list[CollectionOut]


class CollectionDropped(BaseModel):
    collection: str
    dropped: bool = True


# The text formats; binary ones (PDF, DOCX, PPTX, EPUB) and notebooks come as uploads.
DocumentFormat = Literal["markdown", "text", "html", "rst"]


class DocumentIn(_Strict):
    source_id: str = Field(
        min_length=1, max_length=512, description="Stable id; re-ingesting it replaces it."
    )
    content: str = Field(
        min_length=1, description="UTF-8 Markdown, text, HTML or reStructuredText."
    )
    format: DocumentFormat | None = Field(
        None, description="Guessed from the suffix of filename (or source_id) when absent."
    )
    title: str = Field("", max_length=512)
    url: str = Field(
        "",
        max_length=2048,
        description="Canonical URL shown with citations: an absolute http(s) URL, or empty.",
        # documented for clients and schema-driven tests; the validator gives the message
        json_schema_extra={"pattern": f"(?:{WEB_URL_PATTERN})|^$"},
    )
    doc_type: str = Field("", max_length=64, description="Free-form type (filterable).")
    filename: str = Field("", max_length=512)
    metadata: dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=1024)]] = (
        Field(default_factory=dict, max_length=32)
    )
    access: AccessList = Field(
        default_factory=list,
        max_length=64,
        description="Who may see it: 'public', 'user:<id>', 'group:<name>'. Empty = the "
        "front matter's `access:` list, else the collection's default_access.",
    )

    @field_validator("url")
    @classmethod
    def _web_url(cls, value: str) -> str:
        # A citation renders this as a link: javascript:, data: and the like would run.
        if value and not is_web_url(value):
            raise ValueError("url must be an absolute http:// or https:// URL")
        return value


class IngestBody(_Strict):
    documents: list[DocumentIn] = Field(
        min_length=1,
        max_length=1000,
        description="At most 1000, within the body size limit; they are ingested as one "
        "job (see /v1/admin/jobs).",
    )
    create_collection: bool = Field(False, description="Create the collection when missing.")
    full_reindex: bool = Field(
        False, description="Replace the whole collection with exactly these documents."
    )


class DocumentResultOut(BaseModel):
    source_id: str
    status: Literal["ingested", "updated", "unchanged", "skipped", "unspecified"] = Field(
        description="ingested: a new source; updated: it replaced a stored source (its text, "
        "title, URL, type or metadata changed); unchanged: nothing to write; skipped: see reason."
    )
    chunks: int
    reason: str = ""


class IngestReportOut(BaseModel):
    collection: str
    documents: list[DocumentResultOut]
    ingested: int = Field(description="New sources written.")
    updated: int = Field(0, description="Stored sources replaced.")
    unchanged: int
    skipped: int
    chunks_written: int
    seconds: float


class SourceDeleted(BaseModel):
    collection: str
    source_id: str
    deleted: int = Field(description="Chunks removed.")


class SourceOut(BaseModel):
    source_id: str
    title: str
    url: str = Field(description="Canonical URL; empty when none was given.")
    doc_type: str
    chunks: int = Field(description="Chunks stored.")
    content_hash: str = Field(description="SHA-256 over its chunks' hashes (equal content).")
    ingested_at: float = Field(description="Unix seconds when its chunks were written.")


class SourceList(BaseModel):
    collection: str
    sources: list[SourceOut] = Field(description="Sorted by source_id.")
    next_page_token: str = Field(description="page_token of the next page; empty at the end.")
    total: int = Field(description="Sources in the whole collection.")


class StoredChunk(BaseModel):
    chunk_id: str
    chunk_index: int
    heading_path: list[str]
    text: str


class StoredDocument(BaseModel):
    """A source as stored: its chunks in document order (chunks overlap a little)."""

    collection: str
    source_id: str
    title: str
    url: str
    doc_type: str
    chunks: list[StoredChunk]
    total: int = Field(description="Chunks the source has in all.")


# --- health ------------------------------------------------------------------------------


class DependencyOut(BaseModel):
    status: Literal["serving", "not_serving", "disabled"]
    target: str = ""
    latency_ms: float = 0.0
    message: str = ""


class LimitsOut(BaseModel):
    backend: Literal["redis", "in_process"] = Field(
        description="Where the counters live when all is well."
    )
    policy: Literal["open", "closed"] = Field(description="What happens when Redis fails.")
    state: Literal["ok", "fail_open", "fail_closed"] = Field(
        description="fail_open: Redis is down and limits run per replica in process; "
        "fail_closed: Redis is down and limited routes answer 503."
    )
    message: str = ""


class HealthResponse(BaseModel):
    status: Literal["ok", "degraded", "down"]
    dependencies: dict[str, DependencyOut]
    limits: LimitsOut | None = None


class ErrorDetail(BaseModel):
    code: str = Field(description="Machine-readable, e.g. invalid_input, rate_limited.")
    message: str = Field(description="Why, for people.")
    request_id: str
    dependency: str | None = None
    details: object | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail
