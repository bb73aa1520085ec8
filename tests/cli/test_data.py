"""`gtalib data` hooks: argument parsing, help, and `data info` on a built corpus."""
import argparse

import pytest

from gtalib.cli.data import add_cli
from gtalib.data.build import SourceDocs, build_from_documents, corpus_dir
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
    assert a.func(a) == 1 and f"gtalib data build --dir {tmp_path} --tokenizer bytes" in \
        capsys.readouterr().out
    b = p.parse_args(["data", "info", "--corpus", "fineweb-edu", "--dir", str(tmp_path)])
    assert b.func(b) == 1  # the hint builds the corpus asked about, not the default one
    assert f"`gtalib data build --corpus fineweb-edu --dir {tmp_path} --tokenizer bytes`" in \
        capsys.readouterr().out
    build_from_documents([SourceDocs("s", [("1", "one"), ("2", "two")], {"package": "pkg"})], get_tokenizer("bytes"),
                         corpus_dir("default", "bytes", tmp_path), "default")
    assert a.func(a) == 0
    assert "| s | pkg |" in capsys.readouterr().out


@pytest.mark.parametrize("argv, flag, corpus", [
    (["data", "build", "--config", "sample-100BT"], "--config", "fineweb-edu"),
    (["data", "info", "--config", "sample-100BT"], "--config", "fineweb-edu"),
    (["data", "build", "--path", "/x"], "--path", "fineweb-edu"),
    (["data", "build", "--max-tokens", "5"], "--max-tokens", "fineweb-edu"),
    (["data", "build", "--corpus", "fineweb-edu", "--with-npm"], "--with-npm", "default"),
])
def test_an_option_of_the_other_corpus_is_refused(argv, flag, corpus, tmp_path, capsys):
    from gtalib.cli import main

    assert main([*argv, "--dir", str(tmp_path / "data")]) == 2
    other = "fineweb-edu" if corpus == "default" else "default"
    assert capsys.readouterr().err == (
        f"gtalib data {argv[1]}: error: {flag} applies to --corpus {corpus} only, and --corpus is "
        f"'{other}'; add --corpus {corpus} or leave out {flag}\n")
    assert not (tmp_path / "data").exists()  # refused before anything is fetched or built


def test_max_tokens_must_be_positive(capsys):
    with pytest.raises(SystemExit):
        _parser().parse_args(["data", "build", "--corpus", "fineweb-edu", "--max-tokens", "0"])
    assert "argument --max-tokens: expected a positive integer, got 0" in capsys.readouterr().err


def test_a_reader_that_stops_early_ends_any_command_quietly():
    """`gtalib tables kv | head -0`: exit 0 and no BrokenPipeError traceback (every command goes
    through one handler, gtalib.cli.core.run_reporting_errors). The pipe's reading end is closed
    before the command starts, so its first write fails, as when `head` has gone."""
    import os
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, "-m", "gtalib", "tables", "kv"], stdout=write_end,
                              stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(write_end)
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"Traceback" not in proc.stderr and b"BrokenPipe" not in proc.stderr
