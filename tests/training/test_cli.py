"""``gtalib`` CLI: help, argument errors, and ``gtalib train`` end to end on a tiny built corpus
(two sources of generated English sentences, byte tokenizer, built by gtalib.data's builder)."""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from gtalib.cli import main
from gtalib.cli.core import expected_error
from gtalib.model.presets import model_config
from gtalib.training.config import train_config
from gtalib.training.runs import RunSpec, data_spec, default_datamodule, load_metrics

WORDS = ("the cat dog sat ran on a mat log hill red big small old new and then over under "
         "quick brown lazy fox jumps").split()


def _docs(seed, n=40):
    import random

    rng = random.Random(seed)
    return [(f"doc{i}", " ".join(" ".join(rng.choices(WORDS, k=12)).capitalize() + "." for _ in range(4)))
            for i in range(n)]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    from gtalib.data import get_tokenizer
    from gtalib.data.build import SourceDocs, build_from_documents, corpus_dir

    d = tmp_path_factory.mktemp("data")
    meta = dict(registry=None, package=None, version=None, archive=None, sha256=None,
                licence="test fixture", description="generated sentences")
    build_from_documents([SourceDocs("alpha", _docs(0), meta), SourceDocs("beta", _docs(1), meta)],
                         get_tokenizer("bytes", d), corpus_dir("default", "bytes", d), "default")
    return d


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for cmd in ("train", "data", "tables", "book"):
        assert cmd in out
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    for opt in ("--variant", "--no-latent-scale", "--strategy", "--num-nodes", "--double-heads"):
        assert opt in out


@pytest.mark.parametrize("argv, needle", [
    (["train", "--variant", "mlra9"], "allowed: mha, mqa, gqa"),
    (["train", "--variant", "mha", "--preset", "huge"], "invalid choice: 'huge'"),
    (["train", "--variant", "mha", "--max-steps", "0"], "expected a positive integer"),
    (["train", "--variant", "mha", "--strategy", "magic"], "invalid choice: 'magic'"),
    (["train", "--variant", "mha", "--devices", "two"], "expected a positive integer, got 'two'"),
    (["train", "--variant", "mha", "--seed", "-1"], "argument --seed: expected a non-negative integer, got -1"),
    (["train", "--variant", "mha", "--data-seed", "-3"],
     "argument --data-seed: expected a non-negative integer, got -3"),
    (["train", "--variant", "mha", "--warmup-steps", "-1"],
     "argument --warmup-steps: expected a non-negative integer, got -1"),
    (["runs", "--remove", "yes"], "unrecognized arguments: yes"),
])
def test_bad_arguments_are_clear(argv, needle, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and needle in capsys.readouterr().err


def test_option_the_variant_cannot_take_is_a_clear_error(data_dir, tmp_path, capsys):
    rc = main(["train", "--variant", "mha", "--preset", "ci", "--no-latent-scale", "--run-dir",
               str(tmp_path), "--data-dir", str(data_dir), "--quiet"])
    assert rc == 2 and "latent_scale" in capsys.readouterr().err


def test_train_end_to_end_then_skip(data_dir, tmp_path, capsys):
    argv = ["train", "--variant", "mlra-4", "--preset", "ci", "--max-steps", "20", "--seed", "0",
            "--run-dir", str(tmp_path), "--init", "normal", "--gate", "--no-latent-scale",
            "--data-dir", str(data_dir), "--threads", "1", "--quiet"]
    assert main(argv) == 0
    # the folder is the hash of the spec the Python API builds for the same settings
    train = train_config("ci", max_steps=20, warmup_steps=2)
    spec = RunSpec(model_config("ci", "mlra-4", init="normal", gate=True, latent_scale=False), train,
                   data_spec(train, "default", "bytes", data_dir), 0)
    path = tmp_path / spec.run_id
    df = pd.read_csv(path / "metrics.csv")
    assert {"step", "tokens", "train_loss", "val_loss", "val_loss/alpha", "val_loss/beta"} <= set(df.columns)
    assert df["step"].tolist() == list(range(1, 21))
    assert df["train_loss"].iloc[-1] < df["train_loss"].iloc[0]
    card = json.loads((path / "card.json").read_text())
    assert card["threads"] == 1 and card["tokens"] == 20 * 4 * 64
    assert str(path) in capsys.readouterr().out
    # the same command again is a no-op on the finished run
    mtime = (path / "DONE").stat().st_mtime_ns
    assert main(argv) == 0 and (path / "DONE").stat().st_mtime_ns == mtime
    assert load_metrics(path).equals(df)
    # a changed corpus is refused for an old spec
    assert default_datamodule(spec, data_dir).data_identity() == spec.data["identity"]
    bad = RunSpec(spec.model, spec.train, {**spec.data, "identity": {"hash": "x"}}, 0)
    with pytest.raises(ValueError, match="differs"):
        default_datamodule(bad, data_dir)


def _train(tmp_path, data_dir, *extra):
    return main(["train", "--variant", "mha", "--preset", "ci", "--max-steps", "4", "--run-dir",
                 str(tmp_path / "runs"), "--data-dir", str(data_dir), "--threads", "1", "--quiet",
                 *extra])


def test_gpu_without_cuda_is_a_clear_error(data_dir, tmp_path, capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _train(tmp_path, data_dir, "--accelerator", "gpu") == 2
    assert "--accelerator gpu: no CUDA device found; use --accelerator cpu or auto" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_tokenizer_too_big_for_preset_is_refused_before_building(tmp_path, capsys):
    empty = tmp_path / "nodata"  # no corpus here: the check must come before any build
    assert _train(tmp_path, empty, "--tokenizer", "gpt2") == 2
    err = capsys.readouterr().err
    assert "argument --tokenizer" in err and "allowed for --preset ci: bytes" in err
    assert not empty.exists()


def test_run_dir_that_is_a_file(data_dir, tmp_path, capsys):
    (tmp_path / "runs").write_text("x")
    with pytest.raises(SystemExit) as exc:  # refused as the options are read
        _train(tmp_path, data_dir)
    assert exc.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("gtalib train: error: argument --run-dir: expected a folder, got")


def test_unknown_corpus_lists_allowed(data_dir, tmp_path, capsys):
    assert _train(tmp_path, data_dir, "--corpus", "nope") == 2
    err = capsys.readouterr().err
    assert "--corpus 'nope'" in err and "'default'" in err and "fineweb-edu-<config>" in err


def test_config_errors_name_the_flag(data_dir, tmp_path, capsys):
    from gtalib.cli.train import name_flag as _name_flag

    assert _train(tmp_path, data_dir, "--no-latent-scale") == 2
    assert "error: --no-latent-scale: latent_scale" in capsys.readouterr().err
    # the longest field wins: micro_batch_size is not read as batch_size
    assert str(_name_flag(ValueError("micro_batch_size=3 must divide batch_size=4"))).startswith(
        "--micro-batch-size: ")
    assert str(_name_flag(ValueError("head_multiplier must be 1 or 2"))).startswith("--double-heads: ")
    # a value argparse lets through but the config refuses names its flag too
    assert _train(tmp_path, data_dir, "--lr", "inf") == 2
    assert "error: --lr: TrainConfig.lr must be a finite number in (0, inf), got inf" in capsys.readouterr().err
    assert _train(tmp_path, data_dir, "--warmup-steps", "30", "--max-steps", "30") == 2
    assert "error: --warmup-steps: TrainConfig.warmup_steps must be an integer in [0, max_steps=30)" \
        in capsys.readouterr().err


def test_skip_and_interrupt_messages(data_dir, tmp_path, capsys, monkeypatch):
    import signal
    import sys

    import gtalib.training.train

    before = signal.getsignal(signal.SIGINT)  # SIG_IGN when run in the background (CI)
    assert _train(tmp_path, data_dir) == 0
    out = capsys.readouterr().out
    assert "trained: final train loss" in out and "already done" not in out
    assert _train(tmp_path, data_dir) == 0
    out = capsys.readouterr().out
    assert "already done (skipped): " in out and "final train loss" in out
    card = json.loads(next((tmp_path / "runs").glob("*/card.json")).read_text())
    assert f"{card['final_train_loss']:.4f}" in out

    def lightning_like(*_a, **_k):  # Lightning catches Ctrl-C, cleans up, then sys.exit(1)
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            sys.exit(1)

    monkeypatch.setattr(gtalib.training.train, "ensure_run", lightning_like)
    assert _train(tmp_path, data_dir, "--seed", "1") == 130
    assert ("interrupted before the run finished; rerun the same command to resume from the "
            "last checkpoint" in capsys.readouterr().err)
    assert signal.getsignal(signal.SIGINT) is before  # the CLI restores the caller's handler

    def sigterm_like(*_a, **_k):  # Lightning on SIGTERM: checkpoint, then exit with status 0
        sys.exit(0)

    monkeypatch.setattr(gtalib.training.train, "ensure_run", sigterm_like)
    assert _train(tmp_path, data_dir, "--seed", "2") == 143  # never a success when unfinished
    assert "stopped by SIGTERM before the run finished" in capsys.readouterr().err


def test_help_texts(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    help_part = out.split("hardware", 1)[1]  # past the usage line
    assert "(default: auto)" in help_part.split("--accelerator", 1)[1].split("--devices")[0]
    assert "machines taking part" in out
    # defaults shown where there is one; none for required options, flags or later-decided ones
    assert "(default: None)" not in out and "(default: False)" not in out
    assert "(default" not in out.split("--variant VARIANT", 2)[2].split("--preset")[0]
    assert "(default: 0)" in out.split("--seed SEED", 2)[2].split("--run-dir")[0]
    for cmd in ("runs", "book", "data"):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        assert "(default: None)" not in capsys.readouterr().out


def _cli(*args):
    """``python -m gtalib ARGS`` in a fresh process: (exit status, stdout, stderr)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, "-m", "gtalib", *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def test_a_diverging_run_is_a_one_line_error(data_dir, tmp_path):
    rc, _, err = _cli("train", "--variant", "mha", "--preset", "ci", "--lr", "80", "--run-dir",
                      tmp_path, "--data-dir", data_dir, "--threads", "1")
    assert rc == 2 and "Traceback" not in err, err[-3000:]
    last = err.splitlines()[-1]
    assert last.startswith("gtalib train: error: run ") and "non-finite training loss (nan) at step" in last
    assert last.endswith("; stopping (lower the learning rate or check the data)")


def test_a_bad_variant_is_a_one_line_error(tmp_path):
    rc, _, err = _cli("train", "--variant", "mlra9", "--preset", "ci", "--run-dir", tmp_path)
    assert rc == 2 and "Traceback" not in err
    assert "gtalib train: error: argument --variant: unknown variant 'mlra9'" in err.splitlines()[-1]


def test_wrapped_expected_errors_are_found_and_bugs_are_not_hidden():
    from gtalib.training.runs import RunCorruptError, RunIncompleteError

    try:
        try:
            raise FloatingPointError("diverged")
        except FloatingPointError as exc:
            raise RuntimeError("a library's wrapper") from exc
    except RuntimeError as wrapped:
        assert str(expected_error(wrapped)) == "diverged"
    for exc in (RunIncompleteError("x"), RunCorruptError("x"), KeyError("x"), FileNotFoundError("x")):
        assert expected_error(exc) is exc
    try:
        try:
            raise ValueError("bad input")
        except ValueError:
            raise TypeError("a bug while handling it")  # implicit __context__: not looked through
    except TypeError as bug:
        assert expected_error(bug) is None


def test_training_output_has_no_advertisement(data_dir, tmp_path):
    rc, out, err = _cli("train", "--variant", "mha", "--preset", "ci", "--max-steps", "2",
                        "--run-dir", tmp_path, "--data-dir", data_dir, "--threads", "1")
    assert rc == 0, err[-3000:]
    for noise in ("litlogger", "Tip:", "TPU available"):
        assert noise not in out + err
    assert "GPU available: " in out + err  # Lightning's informative lines stay
