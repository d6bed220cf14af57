"""docs/settings.md: generated from the settings classes, and the committed copy is what
the classes say today (a description changed without regenerating fails here)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings

from groundwire_cli.config import SERVICES, prefix, settings_class
from groundwire_cli.settings_doc import COMMITTED, is_current, main, render, table


def test_committed_copy_is_current(repo_root: Path) -> None:
    assert COMMITTED == repo_root / "docs" / "settings.md"
    assert COMMITTED.read_text(encoding="utf-8") == render(), (
        "a setting changed: run `python -m groundwire_cli.settings_doc` (make docs)"
    )
    assert main(["--check"]) == 0


def test_check_fails_on_a_stale_copy(tmp_path: Path) -> None:
    stale = tmp_path / "settings.md"
    assert not is_current(stale)  # missing
    assert main(["--check", "--out", str(stale)]) == 1
    stale.write_text(render().replace("Interface the server binds.", "Old words."))
    assert main(["--check", "--out", str(stale)]) == 1
    assert main(["--out", str(stale)]) == 0
    assert main(["--check", "--out", str(stale)]) == 0
    assert is_current(stale)


def test_every_setting_of_every_service_is_in_the_document() -> None:
    doc = render()
    for service in SERVICES:
        cls = settings_class(service)
        assert cls is not None, service
        for name, info in cls.model_fields.items():
            assert info.description, f"{service}.{name} has no description"
            words = " ".join(info.description.split()).replace("|", "\\|")
            assert words in doc, f"{service}.{name}"
        assert f"`{prefix(service)}PORT`" in doc, service


def test_secrets_show_no_default_and_a_missing_description_is_refused() -> None:
    class Example(BaseSettings):
        token: SecretStr = Field(SecretStr("s3cret-value"), description="A key.")
        limit: int = Field(3, ge=1, le=9, description="Most at once; 0 = off.")
        bare: str = "x"

    rows = table(Example, ["token", "limit"], "GROUNDWIRE_X_")
    assert rows[2] == "| `GROUNDWIRE_X_TOKEN` | secret | — | A key. |"
    assert rows[3] == "| `GROUNDWIRE_X_LIMIT` | int, ≥ 1, ≤ 9 | `3` | Most at once; 0 = off. |"
    assert "s3cret" not in "\n".join(rows)
    with pytest.raises(ValueError, match=r"Example\.bare has no description"):
        table(Example, ["bare"], "GROUNDWIRE_X_")
