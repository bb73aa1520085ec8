"""The chapters' English lives in the notebooks' Markdown: ``gtalib/book/chapters`` returns
tables, numbers and verdict words, and holds at most :data:`LIMIT` lines of English string
literals (485 when they wrote the pages' paragraphs; 20 since the pages' English moved into the
notebooks' Markdown and the methods chapter)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

CHAPTERS = Path(__file__).resolve().parents[3] / "gtalib" / "book" / "chapters"
#: the most lines of English string literals the chapters' modules may hold together
LIMIT = 25
#: three or more words of two or more letters in a row: a phrase, not a column key or a unit
PHRASE = re.compile(r"[A-Za-z]{2,}(?:[ ,;:'’-]+[A-Za-z]{2,}){2,}")


def english_lines(source: str) -> set[int]:
    """Line numbers of ``source`` that hold a string literal with a phrase of English in it (an
    f-string's text parts included), docstrings, bare string statements and the messages of
    ``raise`` left out: error messages are not the pages' English."""
    tree = ast.parse(source)
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skip.add(id(node.value))  # docstrings and bare strings
        elif isinstance(node, ast.Raise):
            skip.update(id(sub) for sub in ast.walk(node))
    return {line for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in skip and PHRASE.search(node.value)
            for line in range(node.lineno, node.end_lineno + 1)}


def counts() -> dict[str, int]:
    """Lines of English string literals per chapters module."""
    return {p.name: len(english_lines(p.read_text())) for p in sorted(CHAPTERS.glob("*.py"))}


def test_counter_finds_phrases_not_keys_docstrings_or_errors():
    source = '''
def f(x):
    """A docstring of several words."""
    if x:
        raise ValueError("x must be one of a, b or c")
    label = "ΔL"
    return (f"the window starts at {x} "
            "and ends later")
'''
    assert english_lines(source) == {7, 8}


def test_chapters_hold_little_english():
    c = counts()
    assert sum(c.values()) <= LIMIT, c


if __name__ == "__main__":
    for name, n in counts().items():
        print(f"{n:5d} {name}")
    print(f"{sum(counts().values()):5d} in all (limit {LIMIT})")
