"""The conversations a gateway answered, and the feedback on them (revision g0002).

A conversation belongs to one tenant, and within it to one end user (``end_user``, empty
without an end-user token), the API key that asked (``key_id``, empty without a key)
and, for a caller with neither, its client address (``client``): who may read it is
decided from these four (``db.conversations.Reader``). Every answer (a turn) keeps what
the page showed: the question, the answer text, its citations and withheld sentences,
the mode, the stage report and the latency. Times are Unix seconds (as the key store's).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from groundwire_gateway.db.base import Base


class ConversationRow(Base):
    __tablename__ = "gateway_conversations"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64))
    end_user: Mapped[str] = mapped_column(String(256), default="")
    key_id: Mapped[str] = mapped_column(String(64), default="")
    client: Mapped[str] = mapped_column(String(160), default="")
    collection: Mapped[str] = mapped_column(String(64))
    title: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)

    __table_args__ = (
        Index("ix_gateway_conversations_owner", "tenant", "end_user", "updated_at"),
        Index("ix_gateway_conversations_updated_at", "updated_at"),
    )


class AnswerRow(Base):
    __tablename__ = "gateway_answers"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    conversation_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("gateway_conversations.id", ondelete="CASCADE")
    )
    tenant: Mapped[str] = mapped_column(String(64))
    collection: Mapped[str] = mapped_column(String(64))
    via: Mapped[str] = mapped_column(String(16))
    question: Mapped[str] = mapped_column(Text)
    question_key: Mapped[str] = mapped_column(String(200))
    answer: Mapped[str] = mapped_column(Text)
    mode: Mapped[str] = mapped_column(String(16))
    sources: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    citations: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    withheld: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    stages: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    supported: Mapped[int] = mapped_column(Integer, default=0)
    low_evidence: Mapped[bool] = mapped_column(Boolean, default=False)
    latency_ms: Mapped[float] = mapped_column(Float)
    created_at: Mapped[float] = mapped_column(Float)

    __table_args__ = (
        Index("ix_gateway_answers_conversation", "conversation_id", "created_at"),
        Index("ix_gateway_answers_report", "tenant", "collection", "created_at"),
    )


class FeedbackRow(Base):
    __tablename__ = "gateway_feedback"

    # one rating per answer and rater (rating again replaces it); a natural key, so a
    # restored dump needs no sequence set (an autoincrement id would collide after it)
    answer_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("gateway_answers.id", ondelete="CASCADE"), primary_key=True
    )
    rater: Mapped[str] = mapped_column(String(512), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64))
    rating: Mapped[str] = mapped_column(String(8))
    comment: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[float] = mapped_column(Float)
