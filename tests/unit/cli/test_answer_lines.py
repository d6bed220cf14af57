"""The CLI prints an answer wrapped, its own line breaks kept: quoted list items and
code blocks stay on lines of their own, and code is never re-wrapped."""

from __future__ import annotations

from groundwire_cli.demo import answer_lines


def test_list_items_and_code_blocks_keep_their_lines() -> None:
    code = "make demo   # " + "x" * 80
    answer = (
        "Limits stop one caller from crowding out the others, so a burst waits [1].\n"
        "- **Each stage** can fail without failing the request [2].\n\n"
        f"```bash\n{code}\n```\n[3]\n"
    )
    lines = answer_lines(answer, width=40)
    assert lines[:2] == [
        "Limits stop one caller from crowding out",
        "the others, so a burst waits [1].",
    ]
    assert "- **Each stage** can fail without" in lines
    assert code in lines, "a line of a fenced block is never wrapped"
    assert lines[-1] == "[3]"


def test_plain_prose_wraps_as_before() -> None:
    assert answer_lines("one two three four", width=9) == ["one two", "three", "four"]
    assert answer_lines("", width=9) == []
