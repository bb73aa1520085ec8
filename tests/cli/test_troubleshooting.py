"""docs/troubleshooting.md quotes the commands' own lines: each command of the page (a line
that is only a command in backticks, its line indented below it) is run here from a folder
holding ``a-file``, and must print that line, exit 2, numbers aside (memory, cores)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from gtalib.cli import main

REPO = Path(__file__).resolve().parents[2]
PAGE = (REPO / "docs" / "troubleshooting.md").read_text()
CASES = re.findall(r"^`((?:[A-Z_]+=\S+ )?gtalib [^`]+)`\n\n    (.+)$", PAGE, re.M)


def _numbers_aside(text: str) -> str:
    return re.sub(r"\d+(\.\d+)?", "N", text)


def test_the_page_is_linked_from_the_readme_and_quotes_commands():
    assert "docs/troubleshooting.md" in (REPO / "README.md").read_text()
    assert len(CASES) >= 12, CASES


@pytest.mark.parametrize("command, line", CASES, ids=[c for c, _ in CASES])
def test_each_command_of_the_page_prints_its_line(command, line, tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("not a folder\n")
    monkeypatch.chdir(tmp_path)
    words = command.split()
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        monkeypatch.setenv(name, value)
    assert words[0] == "gtalib"
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            status = main(words[1:])
        except SystemExit as exc:
            status = exc.code
    got = err.getvalue().strip().replace(f"{tmp_path}/", "")
    assert status == 2
    assert _numbers_aside(got) == _numbers_aside(line)
