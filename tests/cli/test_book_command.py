"""``gtalib book`` reports a failed build as every command reports its errors."""

from gtalib import cli
from gtalib.book.pipeline.paths import BookError
from gtalib.cli import book as book_cli


def test_a_failed_build_is_one_line_with_the_command_and_exit_status_2(monkeypatch, capsys):
    def failing(*_a, **_k):
        raise BookError("2 notebooks failed: init_ablation, claims (see book/generated/)")

    monkeypatch.setattr(book_cli, "build_book", failing)
    assert cli.main(["book", "--preset", "ci", "--no-train", "--no-html"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["gtalib book: error: 2 notebooks failed: init_ablation, claims (see book/generated/)"]


def test_ctrl_c_is_one_line_saying_where_the_finished_runs_are_and_exit_status_130(
        monkeypatch, capsys, tmp_path):
    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(book_cli, "build_book", interrupted)
    assert cli.main(["book", "--preset", "ci", "--no-html", "--run-dir", str(tmp_path)]) == 130
    assert capsys.readouterr().err.strip().splitlines() == [
        f"gtalib book: interrupted; the finished runs are kept in {tmp_path}: run the same "
        f"command again to train the rest"]


def test_bad_numbers_are_refused_by_flag_before_anything_runs(capsys):
    """A count or limit out of range is refused by argparse, naming the flag (exit 2)."""
    import pytest

    for argv, flag in ((["--seeds", "0"], "--seeds"), (["--max-steps", "-5"], "--max-steps"),
                       (["--cell-timeout", "-1"], "--cell-timeout"),
                       (["--batch-gpus", "-1"], "--batch-gpus")):
        with pytest.raises(SystemExit) as exc:
            cli.main(["book", *argv, "--predict"])
        assert exc.value.code == 2
        assert f"gtalib book: error: argument {flag}: expected a " in capsys.readouterr().err
    # --budget also takes 'none', and says so; a refused value is echoed as typed
    for bad in ("abc", "0", "inf", "nan"):
        with pytest.raises(SystemExit):
            cli.main(["book", "--budget", bad, "--predict"])
        assert (f"argument --budget: expected a positive number of minutes or 'none', got "
                f"'{bad}'") in capsys.readouterr().err


def test_an_argument_error_is_one_line_naming_the_command_and_its_help(capsys):
    import pytest

    for argv, head in ((["book", "--seeds", "0"], "gtalib book: error: argument --seeds: "),
                       (["record", "chek"], "gtalib record: error: argument ACTION: invalid "),
                       (["tables", "kv", "--nope"], "gtalib: error: unrecognized arguments: --nope")):
        with pytest.raises(SystemExit) as exc:
            cli.main(argv)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.count("\n") == 1 and err.startswith(head)
        assert "usage:" not in err and err.rstrip().endswith("--help`)")


def test_flags_that_contradict_each_other_or_name_no_cluster_are_refused_before_anything_runs(
        capsys):
    """Two flags that cannot both hold, or a --cluster that is none of the allowed forms: one
    argparse line, exit 2, before the corpus or a cluster is touched."""
    import pytest

    for argv, message in (
            (["--no-train", "--train-recorded"],
             "argument --train-recorded: not allowed with argument --no-train"),
            (["--cluster", "slurm", "--scheduler-file", "s.json"],
             "argument --scheduler-file: not allowed with argument --cluster"),
            (["--cluster", "bogus"],
             "argument --cluster: expected tcp://HOST:PORT or one of slurm, pbs, lsf, got "
             "'bogus'"),
            (["--cluster", "tcp://"], "argument --cluster: expected tcp://HOST:PORT"),
            (["--run-dir", __file__], f"argument --run-dir: expected a folder, got "
                                      f"'{__file__}': a file"),
            # under a file: it cannot be created, which the job would find only after its
            # calibration, as a store without space
            (["--run-dir", f"{__file__}/runs"],
             f"argument --run-dir: expected a folder that exists or can be created, got "
             f"'{__file__}/runs': {__file__} is a file")):
        with pytest.raises(SystemExit) as exc:
            cli.main(["book", *argv, "--predict"])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.count("\n") == 1, err
        assert err.startswith(f"gtalib book: error: {message}"), err
    for ok in ("tcp://10.0.0.1:8786", "slurm", "pbs", "lsf"):
        assert cli.build_parser().parse_args(["book", "--cluster", ok]).cluster == ok


def test_batch_flags_without_a_batch_cluster_are_refused_naming_them(monkeypatch, capsys):
    """--batch-* only shape dask-jobqueue's jobs: given with the embedded cluster or a tcp://
    scheduler they would be ignored, so the command stops (exit 2) before the corpus is read;
    with --cluster slurm they reach the cluster, the flags not given at their defaults."""
    seen = {}
    monkeypatch.setattr(book_cli, "build_book", lambda *a, **k: seen.update(k["batch"]))
    for argv, where in ((["--batch-cores", "4", "--batch-queue", "gpu"], "none: the embedded "
                                                                        "LocalCluster"),
                        (["--cluster", "tcp://h:8786", "--batch-gpus", "1"], "tcp://h:8786")):
        assert cli.main(["book", *argv, "--predict"]) == 2
        flags = ", ".join(a for a in argv if a.startswith("--batch-"))
        assert capsys.readouterr().err.strip() == (
            f"gtalib book: error: {flags} only appl{'y' if ',' in flags else 'ies'} with "
            f"--cluster slurm, pbs or lsf (got --cluster {where})")
    assert cli.main(["book", "--cluster", "slurm", "--batch-cores", "4", "--no-html"]) == 0
    assert seen == {"cores": 4, "memory": "4GB", "gpus": 0, "walltime": "02:00:00",
                    "account": None, "queue": None}


def test_predict_with_no_train_is_refused(capsys):
    assert cli.main(["book", "--predict", "--no-train"]) == 2
    assert capsys.readouterr().err.strip() == (
        "gtalib book: error: --predict: not allowed with --no-train (a build that trains "
        "nothing has no training to predict)")


def test_record_folders_that_are_files_are_refused_before_anything_runs(capsys):
    import pytest

    for argv in (["record", "check", "0040f8f350c6f053", "--keep", __file__],
                 ["record", "list", "--record-dir", __file__]):
        with pytest.raises(SystemExit) as exc:
            cli.main(argv)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and "expected a folder" in err and "Traceback" not in err


def test_an_empty_only_is_a_one_line_error():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "gtalib", "book", "--only", ","],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip().startswith("gtalib book: error: --only: name at least one notebook")
    assert "Traceback" not in out.stderr


def test_a_seed_count_past_the_maximum_or_a_port_out_of_range_is_refused_at_once(capsys):
    """``--seeds 1000000000`` and ``tcp://host:99999`` are one argparse line and exit 2, before
    any plan is enumerated or any connection tried (Dask alone waits 30 s on the bad port)."""
    import time

    import pytest

    from gtalib.book.design import seeds

    from gtalib.book.design.figures import by_preset

    assert seeds.MAX_SEEDS == 10 * max(n for c in by_preset("seeds").values() for n in c.values())
    for argv, message in (
            (["--seeds", "1000000000"],
             f"argument --seeds: expected a positive integer up to {seeds.MAX_SEEDS}, got 1000000000"),
            (["--seeds", str(seeds.MAX_SEEDS + 1)], "argument --seeds: expected a positive integer up to"),
            (["--cluster", "tcp://host:99999"],
             "argument --cluster: expected tcp://HOST:PORT with a PORT from 1 to 65535, got "
             "'tcp://host:99999'"),
            (["--cluster", "tcp://host:0"], "argument --cluster: expected tcp://HOST:PORT with"),
            (["--cluster", "tcp://host:x"], "argument --cluster: expected tcp://HOST:PORT with")):
        t0 = time.perf_counter()
        with pytest.raises(SystemExit) as exc:
            cli.main(["book", *argv, "--predict"])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.count("\n") == 1, err
        assert err.startswith(f"gtalib book: error: {message}"), err
        assert time.perf_counter() - t0 < 5
    parse = cli.build_parser().parse_args
    assert parse(["book", "--seeds", str(seeds.MAX_SEEDS)]).seeds == seeds.MAX_SEEDS
    for ok in ("tcp://h:65535", "tcp://h:1", "tcp://h"):  # no port: Dask's default
        assert parse(["book", "--cluster", ok]).cluster == ok
    # the library refuses it too, naming the flag
    from gtalib.book.pipeline.job import build_book

    with pytest.raises(ValueError, match=r"seeds \(--seeds\) must be an integer from 1 to 100, "
                                         r"got 1000000000"):
        build_book("ci", 10**9, train=False, html=False)
