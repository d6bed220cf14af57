"""Grounded answer stage: the strong LLM writes the answer from the numbered excerpts,
streamed; with a step budget it may first call the agent's tools.

Deltas pass through the citation filter as they come (a marker pointing at no source
never reaches the reader). The answer is what the last step wrote: in a step that may
still call tools, the text is held back until the step ends, and dropped unsent when
the model called a tool after writing it. Clients that cannot take text back (OpenAI
streaming clients ignore Groundwire's ``reset``) so never receive text the answer
discards; the price is that such a step's text arrives in one piece at its end. A
step with no tools left (or no agent) streams as it comes. A provider failure ends
the stage with ``AnswerFailed`` (the pipeline falls back to the extractive answer,
after a reset if text was sent).

Shape: the one stage that does not return ``(output, StageReport)``: its text must
reach the reader as it is written, so ``run(AnswerInput)`` is an async iterator of
events. It ends with exactly one ``AnswerFinished`` (the output and the
``StageReport``: the common shape, as the last event) or ``AnswerFailed``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from groundwire_core.errors import GroundwireError
from groundwire_orchestrator.agent import AgentToolbox
from groundwire_orchestrator.domain import (
    AnswerDelta,
    AnswerReset,
    RetrievalDone,
    StageReport,
    Turn,
)
from groundwire_orchestrator.llm.base import (
    ChatMessage,
    LLMProvider,
    LLMRequest,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolResult,
    WebSearch,
    close_stream,
    served_by,
)
from groundwire_orchestrator.llm.base import Turn as LLMTurn
from groundwire_orchestrator.llm.failures import ToolsUnsupported
from groundwire_orchestrator.text.ledger import CitationFilter, SourceLedger
from groundwire_orchestrator.text.prompting import (
    BUDGET_SPENT,
    READ_DOCUMENT_TOOL,
    SEARCH_TOOL,
    AnswerPrompt,
    answer_prompt,
)


@dataclass(frozen=True)
class AnswerInput:
    question: str
    history: Sequence[Turn]
    ledger: SourceLedger
    """Numbers the excerpts; the tools append to it."""
    max_steps: int = 0
    """Tool rounds allowed (0 = no tools)."""
    toolbox: AgentToolbox | None = None
    instructions: str = ""
    """The operator's extra instructions (see prompting.operator_block)."""
    web_search: WebSearch | None = None
    """The provider's own web search to offer (stages.live_docs)."""


@dataclass(frozen=True)
class AnswerFinished:
    text: str
    """The final answer, as streamed (markers pointing nowhere removed)."""
    report: StageReport
    dropped_citations: tuple[int, ...] = ()


@dataclass(frozen=True)
class AnswerFailed:
    error: GroundwireError
    streamed: bool
    """Whether text of the failed step reached the reader (it needs a reset)."""
    details: dict[str, str] = field(default_factory=dict)


AnswerEvent = AnswerDelta | AnswerReset | RetrievalDone | AnswerFinished | AnswerFailed


class GroundedAnswerStage:
    def __init__(
        self,
        llm: LLMProvider,
        *,
        timeout_s: float,
        max_tokens: int,
        context_tokens: int,
        history_tokens: int,
    ) -> None:
        self._llm = llm
        self._timeout_s = timeout_s
        self._max_tokens = max_tokens
        self._context_tokens = context_tokens
        self._history_tokens = history_tokens

    @property
    def provider(self) -> str:
        return self._llm.name

    def _prompt(self, inp: AnswerInput, *, tools: bool) -> AnswerPrompt:
        return answer_prompt(
            inp.question,
            inp.history,
            inp.ledger.sources,
            context_tokens=self._context_tokens,
            history_tokens=self._history_tokens,
            tools=tools,
            instructions=inp.instructions,
        )

    async def run(self, inp: AnswerInput) -> AsyncIterator[AnswerEvent]:
        """Streams the answer; ends with exactly one AnswerFinished or AnswerFailed."""
        started = time.perf_counter()
        agentic = inp.toolbox is not None and inp.max_steps > 0
        prompt = self._prompt(inp, tools=agentic)
        messages: list[LLMTurn] = list(prompt.messages)
        tools = (SEARCH_TOOL, READ_DOCUMENT_TOOL) if agentic else ()
        web_search = inp.web_search
        traces: list[str] = []
        steps = 0
        thought = 0
        details = {"provider": self._llm.name, "sources": str(len(inp.ledger))}
        while True:
            spent = agentic and steps >= inp.max_steps
            request = LLMRequest(
                system=prompt.system + (BUDGET_SPENT if spent else "") + prompt.operator,
                messages=tuple(messages),
                role="strong",
                max_tokens=self._max_tokens,
                tools=tools,
                web_search=web_search,
            )
            flt = CitationFilter(lambda n: n in inp.ledger)
            raw: list[str] = []
            shown: list[str] = []
            calls: list[ToolCall] = []
            may_call_tools = agentic and not spent and inp.toolbox is not None
            stream = self._llm.stream(request, timeout_s=self._timeout_s)
            try:
                async for event in stream:
                    if isinstance(event, TextDelta):
                        raw.append(event.text)
                        text = flt.feed(event.text)
                        if text:
                            shown.append(text)
                            if not may_call_tools:
                                yield AnswerDelta(text)
                    elif isinstance(event, ToolCall):
                        calls.append(event)
                    elif isinstance(event, ReasoningDelta):  # never shown nor checked
                        thought += len(event.text)
            except GroundwireError as error:
                offered = agentic or web_search is not None
                sent = bool(shown) and not may_call_tools
                if isinstance(error, ToolsUnsupported) and offered and steps == 0 and not sent:
                    # The first tool-calling request (agent tools, or the provider's web
                    # search of a live lookup), refused for its tools: once more without
                    # them (the request max_agent_steps=0 sends), answering from the
                    # seeded excerpts. None of it reached the reader (a step that may
                    # call tools holds its text back; a refusal comes before any text).
                    agentic, tools, web_search = False, (), None
                    prompt = self._prompt(inp, tools=False)
                    messages = list(prompt.messages)
                    details["tools_retry"] = f"retried without tools: {error.message}"
                    continue
                details.update(steps=str(steps), tools="; ".join(traces))
                yield AnswerFailed(error, streamed=sent, details=details)
                return
            finally:
                # a cancelled request must close the provider's HTTP stream now
                await close_stream(stream)
            details["provider"] = served_by(stream, self._llm)
            tail = flt.flush()
            if tail:
                shown.append(tail)
            if calls and may_call_tools and inp.toolbox is not None:
                if shown:  # held back, never sent: dropped without a reset
                    details["discarded_steps"] = str(int(details.get("discarded_steps", "0")) + 1)
                messages.append(ChatMessage("assistant", "".join(raw), tool_calls=tuple(calls)))
                for call in calls:
                    outcome = await inp.toolbox.execute(call)
                    traces.append(outcome.trace)
                    if outcome.new_sources:
                        yield RetrievalDone(outcome.new_sources)
                    messages.append(ToolResult(call.id, call.name, outcome.content))
                steps += 1
                continue
            if may_call_tools and shown:
                yield AnswerDelta("".join(shown))
            elif tail:
                yield AnswerDelta(tail)
            if calls:
                details["ignored_tool_calls"] = str(len(calls))
            details.update(steps=str(steps), sources=str(len(inp.ledger)))
            if traces:
                details["tools"] = "; ".join(traces)
            if thought:
                details["reasoning_chars"] = str(thought)
            ms = (time.perf_counter() - started) * 1e3
            yield AnswerFinished(
                "".join(shown).strip(),
                StageReport("answer", ms, details=details),
                tuple(flt.dropped),
            )
            return
