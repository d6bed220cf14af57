"""The optional LLM judge of a golden case: a language model asked whether the answer
meets the case's ``judge`` criterion. Reported beside the deterministic checks and
never counted: a model's opinion is not a regression test, and without a model
configured the run must mean the same thing.

The judge speaks the OpenAI-compatible chat-completions API (any provider or local
server with that route), one non-streamed request per case, and must reply with the
JSON object ``{"verdict": "pass" | "fail", "reason": "..."}``. A transport failure, an
HTTP error or a reply that is not that object is reported as the judge's ``n/a``
with the reason, never as a verdict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx

from groundwire_cli.golden.checks import CheckResult

NO_JUDGE = "no LLM judge is configured (--judge-url); reported only, never counted"

PROMPT = """You grade one answer of a documentation assistant.

Question: {question}

Answer (citations look like [1]):
<answer>
{answer}
</answer>

Criterion: {criterion}

Reply with only a JSON object: {{"verdict": "pass" or "fail", "reason": "one sentence"}}."""


@dataclass(frozen=True)
class JudgeConfig:
    base_url: str
    """The API's base URL, up to ``/v1`` (``{base_url}/chat/completions`` is called)."""
    model: str
    api_key: str = ""
    timeout_s: float = 60.0


class LlmJudge:
    """Asks the configured model about one answer at a time."""

    def __init__(self, config: JudgeConfig, *, transport: httpx.BaseTransport | None = None):
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self._config = config
        self._client = httpx.Client(
            base_url=config.base_url.rstrip("/"),
            timeout=config.timeout_s,
            headers=headers,
            transport=transport,
        )

    def close(self) -> None:
        self._client.close()

    def judge(self, question: str, answer: str, criterion: str) -> CheckResult:
        """The judge's verdict as a ``judge`` check result; ``n/a`` when the model
        could not be asked or its reply is not a verdict. Never raises for the model."""
        body = {
            "model": self._config.model,
            "temperature": 0,
            "max_tokens": 300,
            "messages": [
                {
                    "role": "user",
                    "content": PROMPT.format(
                        question=question, answer=answer or "(no answer)", criterion=criterion
                    ),
                }
            ],
        }
        try:
            reply = self._client.post("/chat/completions", json=body)
            reply.raise_for_status()
            content = reply.json()["choices"][0]["message"]["content"]
        except httpx.HTTPStatusError as error:
            status = error.response.status_code
            return CheckResult("judge", "n/a", f"the judge failed: HTTP {status}")
        except httpx.HTTPError as error:
            return CheckResult("judge", "n/a", f"the judge failed: {type(error).__name__}")
        except (ValueError, KeyError, IndexError, TypeError):
            return CheckResult("judge", "n/a", "the judge's reply is not a chat completion")
        return parse_verdict(str(content))


def parse_verdict(content: str) -> CheckResult:
    """The verdict in the model's reply (a JSON object, possibly in a code fence)."""
    text = content.strip().removeprefix("```json").removeprefix("```").removesuffix("```")
    try:
        raw = json.loads(text)
        verdict, reason = raw["verdict"], str(raw.get("reason", ""))
    except (ValueError, KeyError, TypeError):
        return CheckResult("judge", "n/a", f"the judge's reply is not a verdict: {content[:120]!r}")
    if verdict not in ("pass", "fail"):
        return CheckResult("judge", "n/a", f"the judge's verdict is {verdict!r}")
    return CheckResult("judge", "pass" if verdict == "pass" else "fail", reason)
