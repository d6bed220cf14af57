"""The golden-set format: cases, their checks as written, parsing and loading."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

CHECKS = (
    "cites",
    "cites_any",
    "refuses",
    "declines",
    "uses_tool",
    "forbids",
    "contains",
    "min_supported",
    "no_unsupported",
    "spans_valid",
    "flags_injection",
)
"""The checks that count; ``judge`` (the optional LLM judge) is reported apart."""

class GoldenError(Exception):
    """The golden file cannot be used; the message names the file and the case."""


class GoldenCase(BaseModel):
    """One question and the checks its answer must pass."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    question: str = Field(min_length=1, max_length=4000)
    collection: str | None = None
    note: str = ""
    llm_only: bool = False
    max_agent_steps: int = Field(0, ge=0, le=16)
    cites: list[str] | None = Field(None, min_length=1)
    """Every one of these sources is cited."""
    cites_any: list[str] | None = Field(None, min_length=1)
    """At least one of these sources is cited."""
    refuses: bool | None = None
    declines: bool | None = None
    uses_tool: str | None = Field(None, min_length=1)
    forbids: list[str] | None = Field(None, min_length=1)
    contains: list[str] | None = Field(None, min_length=1)
    min_supported: bool | float | None = None
    no_unsupported: bool | None = None
    spans_valid: bool | None = None
    flags_injection: bool | None = None
    judge: str | None = Field(None, min_length=1)
    """What the LLM judge is asked about the answer; reported apart, never counted."""

    @model_validator(mode="after")
    def _checks_make_sense(self) -> GoldenCase:
        if not self.question.strip():
            raise ValueError("the question is blank")
        if not any(getattr(self, name) is not None for name in CHECKS):
            raise ValueError(f"no check: give at least one of {', '.join(CHECKS)}")
        answers = (
            self.cites or self.cites_any or self.contains or self.spans_valid
            or self.min_supported not in (None, False)
        )
        if (self.refuses or self.declines) and answers:
            which = "refuses" if self.refuses else "declines"
            raise ValueError(f"a decline cites nothing: '{which}: true' contradicts 'cites', "
                             "'cites_any', 'contains', 'spans_valid' and 'min_supported'")
        strings = (*(self.cites or ()), *(self.cites_any or ()), *(self.forbids or ()),
                   *(self.contains or ()))
        if any(not s.strip() for s in strings):
            raise ValueError("'cites', 'cites_any', 'forbids' and 'contains' take non-empty "
                             "strings")
        if self.no_unsupported is False or self.spans_valid is False:
            raise ValueError("'no_unsupported' and 'spans_valid' are true or left out")
        if isinstance(self.min_supported, float) and not 0.0 <= self.min_supported <= 1.0:
            raise ValueError("'min_supported' is true or a share between 0 and 1")
        return self

    @property
    def required_share(self) -> float | None:
        """The share of citations that must verify (None: not checked)."""
        if self.min_supported is None or self.min_supported is False:
            return None
        return 1.0 if self.min_supported is True else float(self.min_supported)

    def expected(self) -> dict[str, Any]:
        """The case's checks, as written."""
        return {
            name: value
            for name in CHECKS
            if (value := getattr(self, name)) is not None
        }


class GoldenSet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str = Field("", pattern=r"^[A-Za-z0-9._-]*$")
    description: str = ""
    collection: str | None = None
    cases: list[GoldenCase] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> GoldenSet:
        seen: set[str] = set()
        for case in self.cases:
            if case.id in seen:
                raise ValueError(f"two cases have the id {case.id!r}")
            seen.add(case.id)
        return self


def _where(loc: Sequence[int | str], raw: Any) -> str:
    """A pydantic error location, with the case's id where there is one."""
    parts: list[str] = []
    for i, key in enumerate(loc):
        if isinstance(key, int) and i and loc[i - 1] == "cases":
            label = f"case {key + 1}"
            try:
                label += f" ({raw['cases'][key]['id']!r})"
            except (KeyError, IndexError, TypeError):
                pass
            parts.append(label)
        elif not (key == "cases" and i + 1 < len(loc) and isinstance(loc[i + 1], int)):
            parts.append(str(key))
    return ": ".join(parts) or "top level"


def parse_golden(text: str, *, source: str = "<golden>", default_name: str = "golden") -> GoldenSet:
    """The golden set in YAML ``text``. Raises GoldenError naming what is wrong."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise GoldenError(f"{source}: not YAML: {error}") from error
    if not isinstance(raw, dict):
        raise GoldenError(f"{source}: expected a mapping with 'cases'")
    # top-level "x-" keys hold YAML anchors shared by cases (as in docker-compose)
    raw = {k: v for k, v in raw.items() if not (isinstance(k, str) and k.startswith("x-"))}
    try:
        golden = GoldenSet.model_validate(raw)
    except ValidationError as error:
        problems = "; ".join(
            f"{_where(e['loc'], raw)}: {e['msg']}" for e in error.errors(include_url=False)
        )
        raise GoldenError(f"{source}: {problems}") from None
    if not golden.name:
        golden = golden.model_copy(update={"name": default_name})
    return golden


def load_golden(path: Path) -> GoldenSet:
    """The golden set in the YAML file ``path`` (its name defaults to the file's stem).
    Raises GoldenError."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise GoldenError(f"{path}: {error.strerror or error}") from error
    return parse_golden(text, source=str(path), default_name=path.stem)

