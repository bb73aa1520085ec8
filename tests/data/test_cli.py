"""`gtalib data` hooks: argument parsing, help, and `data info` on a built corpus."""
import argparse

import pytest

from gtalib.data.build import SourceDocs, build_from_documents, corpus_dir
from gtalib.data.cli import add_cli
from gtalib.data.tokenizers import get_tokenizer


def _parser():
    p = argparse.ArgumentParser(prog="gtalib")
    add_cli(p.add_subparsers(dest="command", required=True))
    return p


def test_build_arguments():
    a = _parser().parse_args(["data", "build", "--tokenizer", "gpt2", "--dir", "/x", "--with-npm"])
    assert (a.tokenizer, a.data_dir, a.with_npm, a.corpus) == ("gpt2", "/x", True, "default")
    assert a.func.__name__ == "cmd_build"


def test_bad_tokenizer_is_rejected(capsys):
    with pytest.raises(SystemExit):
        _parser().parse_args(["data", "build", "--tokenizer", "gpt3"])
    assert "invalid choice: 'gpt3'" in capsys.readouterr().err


def test_info(tmp_path, capsys):
    p = _parser()
    a = p.parse_args(["data", "info", "--dir", str(tmp_path)])
    assert a.func(a) == 1 and "gtalib data build" in capsys.readouterr().out
    build_from_documents([SourceDocs("s", [("1", "one"), ("2", "two")], {"package": "pkg"})], get_tokenizer("bytes"),
                         corpus_dir("default", "bytes", tmp_path), "default")
    assert a.func(a) == 0
    assert "| s | pkg |" in capsys.readouterr().out
