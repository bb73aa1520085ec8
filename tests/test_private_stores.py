"""The tests run against a private run store and data cache (tests/conftest.py), never the user's."""

import subprocess
import sys
from pathlib import Path

from store_guard import changes, ensure_default_corpus, share_read_only, snapshot
from gtalib.data.archives import default_data_dir
from gtalib.training.runs import default_run_dir

REPO = Path(__file__).resolve().parents[1]


def test_default_stores_are_private(_private_stores):
    root = _private_stores.resolve()
    for path in (default_run_dir(), default_data_dir()):
        assert path.resolve().is_relative_to(root), path
        assert not path.resolve().is_relative_to(REPO)
    # subprocesses (multi-process tests, the CLI) inherit the private stores
    out = subprocess.run([sys.executable, "-c", "from gtalib.training.runs import default_run_dir; "
                          "print(default_run_dir())"], capture_output=True, text=True, check=True)
    assert Path(out.stdout.strip()).resolve().is_relative_to(root)


def test_snapshot_sees_added_removed_and_modified_files(tmp_path):
    (tmp_path / "a").write_text("1")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "b").write_text("2")
    before = snapshot(tmp_path)
    (tmp_path / "a").write_text("12")  # size changes
    (tmp_path / "d" / "b").unlink()
    (tmp_path / "c").write_text("3")
    got = changes(before, snapshot(tmp_path))
    assert "added c" in got and "removed d/b" in got and "modified a" in got
    assert changes(before, before) == []


def test_user_corpora_are_shared_read_only(tmp_path):
    user, private = tmp_path / "user", tmp_path / "private"
    (user / "corpora" / "default-bytes").mkdir(parents=True)
    (user / "corpora" / "default-bytes" / "manifest.json").write_text("{}")
    (user / "archives").mkdir()
    (user / "archives" / "pkg.tar.gz").write_text("x")
    share_read_only(user, private)
    assert (private / "corpora" / "default-bytes").is_symlink()
    assert (private / "corpora" / "default-bytes" / "manifest.json").read_text() == "{}"
    assert (private / "archives" / "pkg.tar.gz").is_symlink()
    assert not (private / "archives").is_symlink()  # a download lands in the private cache
    (private / "archives" / "new.whl").write_text("y")
    assert not (user / "archives" / "new.whl").exists()
    assert (private / "tokenizers").is_dir()


def test_the_default_corpus_is_always_there(_private_stores):
    """Shared from the user's cache, or built into the private one when the user has none (a
    fresh clone), so that every test file passes alone."""
    from gtalib.data.build import corpus_dir

    assert (corpus_dir("default", "bytes") / "manifest.json").is_file()


def test_a_shared_corpus_is_never_built_through(tmp_path):
    corpora = tmp_path / "corpora"
    corpora.mkdir()
    (corpora / "default-bytes").symlink_to(tmp_path / "user" / "missing")  # a broken share
    ensure_default_corpus(tmp_path)
    assert not (tmp_path / "user").exists() and sorted(p.name for p in corpora.iterdir()) == ["default-bytes"]
