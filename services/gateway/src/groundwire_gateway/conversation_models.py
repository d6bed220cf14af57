"""HTTP bodies of the stored conversations, the feedback on answers and the admin report
(``/v1/conversations``, ``/v1/feedback``, ``/v1/admin/report``); declarations only.

Apart from ``models`` (already at its size), as ``job_models`` is.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from groundwire_gateway import models

MAX_COMMENT_CHARS = 2000


class ConversationSummary(BaseModel):
    id: str
    collection: str
    title: str = Field(description="The first question, shortened.")
    turns: int = Field(description="Answers stored in it.")
    created_at: float = Field(description="Unix seconds.")
    updated_at: float = Field(description="Unix seconds of its latest answer.")


class ConversationList(BaseModel):
    conversations: list[ConversationSummary]


class StoredAnswer(BaseModel):
    id: str = Field(description="The answer id (rate it with POST /v1/feedback).")
    question: str
    answer: str
    mode: models.AnswerMode
    via: str = Field(description="chat, completions or mcp.")
    sources: list[models.Source]
    citations: list[models.Citation]
    withheld: list[models.WithheldSentence]
    stages: list[models.StageOut]
    low_evidence: bool = Field(
        description="Answered (not declined) with no supported or quoted citation, or with "
        "a sentence withheld."
    )
    latency_ms: float
    created_at: float = Field(description="Unix seconds.")
    rating: Literal["up", "down"] | None = Field(
        None, description="Your own rating of it, if you gave one."
    )


class ConversationOut(ConversationSummary):
    answers: list[StoredAnswer]


class FeedbackBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer_id: str = Field(
        pattern=models.STORED_ID_PATTERN,
        description="The `answer_id` of the chat's `done` event (or `groundwire.answer_id`).",
    )
    rating: Literal["up", "down"]
    comment: str = Field("", max_length=MAX_COMMENT_CHARS, description="What was wrong, or right.")


class FeedbackOut(BaseModel):
    answer_id: str
    rating: Literal["up", "down"]
    comment: str
    created_at: float = Field(description="Unix seconds.")


class ReportEntryOut(BaseModel):
    question: str = Field(description="One wording of the question (grouped ignoring case).")
    count: int = Field(description="Times asked (marked_wrong: down-ratings).")
    last_at: float = Field(description="Unix seconds of the latest.")
    answer_ids: list[str] = Field(default_factory=list, description="marked_wrong: the answers.")
    comments: list[str] = Field(default_factory=list, description="marked_wrong: newest first.")


class ReportOut(BaseModel):
    collection: str
    tenant: str | None = Field(description="The tenant reported on; null = every tenant.")
    answers: int = Field(description="Answers stored for the collection.")
    rated_up: int
    rated_down: int
    most_asked: list[ReportEntryOut]
    declined: list[ReportEntryOut] = Field(description="Questions the documents did not answer.")
    low_evidence: list[ReportEntryOut] = Field(
        description="Answered, but with no supported or quoted citation, or a sentence withheld."
    )
    marked_wrong: list[ReportEntryOut] = Field(description="Answers rated down by their readers.")
    retention_days: int = Field(description="How long answers are kept; 0 = none stored.")
