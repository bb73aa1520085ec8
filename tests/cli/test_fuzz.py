"""Every ``gtalib`` subcommand fuzzed from its own argparse parser (Hypothesis): each option the
parser declares (so a new one is fuzzed without editing this file) gets valid, empty, negative,
huge, non-numeric and non-UTF-8 values, paths under a file, in ``/proc``, absent or fine, and
addresses of a port out of range, refused, or of a service that is not Dask (a tiny HTTP
server); ``GTALIB_RUN_DIR`` and ``GTALIB_DATA_DIR`` are set the same ways. Every draw must end
in a documented outcome: exit 0, exit 2 with one line on stderr naming what was typed, or the
start of legitimate work (the corpus, the cluster, the calibration, training, notebooks: here
stubbed to stop at once, and the first two such draws run again for real as processes and
stopped with SIGINT and SIGTERM: one line each, 130 and 143). No draw may print a traceback,
leave a temporary folder, or write anywhere but the run store, the data cache or the record
folder it names (the repository and a sentinel folder are compared before and after).

Reproducible: a fixed number of examples from the seed ``GTALIB_FUZZ_SEED`` (default below),
printed on failure; ``GTALIB_FUZZ_EXAMPLES`` sets the number per command.
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import io
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from gtalib.cli import build_parser, main

REPO = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("GTALIB_FUZZ_SEED", "6606"))
EXAMPLES = int(os.environ.get("GTALIB_FUZZ_EXAMPLES", "8"))  # per command
#: Commands the fuzz must reach (the issue's list); any other leaf of the parser is fuzzed too.
COMMANDS = {"book", "train", "record", "data", "decode", "probe", "tables"}
#: Commands whose documented exit status 1 means "found something" (not an error).
STATUS_1 = {("runs",), ("data", "info"), ("record", "check")}
#: Folders of the repository not compared (environments, caches, build outputs, run stores).
UNCOMPARED = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", ".cache", "_build",
              "generated", "runs", "data_cache", "node_modules"}
#: A draw's options whose folder the command may write (a store it was given).
WRITABLE_DESTS = {"run_dir", "data_dir", "record_dir", "keep"}
ENV_VARS = ("GTALIB_RUN_DIR", "GTALIB_DATA_DIR")
HANG_S = 120  # a draw not answered by then hangs (a generous bound on a loaded 2-core machine)


class WorkStarted(BaseException):
    """Raised by the stubs where a draw would start legitimate work (not an outcome to judge)."""


def leaves(parser, path=()):
    """``(command words, parser)`` of every leaf of the ``gtalib`` parser."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, sub in subs[0].choices.items():
        yield from leaves(sub, (*path, name))


LEAVES = dict(leaves(build_parser()))


def _snapshot(root: Path, skip=frozenset()) -> dict:
    """Every path under ``root`` (but folders named in ``skip``): a file's size and mtime, a
    folder's existence (its mtime changes with its entries, which are compared themselves)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in skip]
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            with contextlib.suppress(OSError):
                st_ = p.lstat()
                out[p] = "folder" if p.is_dir() and not p.is_symlink() else (
                    st_.st_size, st_.st_mtime_ns)
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The fuzz's paths (a sentinel folder holding a file, a fine store, ...) and its ports:
    one refused, one of a tiny HTTP server (a service that is not Dask)."""
    root = tmp_path_factory.mktemp("fuzz")
    sentinel = root / "sentinel"
    sentinel.mkdir()
    (sentinel / "a-file").write_text("not a folder\n")
    (sentinel / "kept.txt").write_text("must stay as it is\n")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        refused = s.getsockname()[1]  # closed when the block ends: nothing listens there
    systmp = root / "systmp"
    systmp.mkdir()
    yield {"sentinel": sentinel, "http": server.server_address[1], "refused": refused,
           "systmp": systmp}
    server.shutdown()


def _values(w) -> list[str]:
    s = w["sentinel"]
    return ["", "-5", "0", "1", "2", "-1", "9" * 21, "1e309", "nan", "inf", "abc", " 3", "0x10",
            "\udcff\udcfe", "é", "-", "none", "ci", "mha", "mlra-4", "os:path", "no_module:X",
            "gtalib.model.attention.dense:DenseAttention",
            str(s / "a-file"), str(s / "a-file" / "under"), "/proc/gtalib-fuzz", "/proc/1/runs",
            str(s / "absent" / "deeper"), str(s / "store"), str(s),
            "tcp://127.0.0.1:0", "tcp://127.0.0.1:70000", f"tcp://127.0.0.1:{w['refused']}",
            f"tcp://127.0.0.1:{w['http']}", "tcp://", "tcp://nohost.invalid:8786", "slurm",
            "01:00:00", "4GB"]


def _env_values(w) -> list[str | None]:
    s = w["sentinel"]
    return [None, None, None, "", str(s / "a-file"), str(s / "a-file" / "under"),
            "/proc/gtalib-fuzz", str(s / "env-store"), "\udcff"]


@st.composite
def draws(draw, w, path):
    """``(argv, environment)`` of the command ``path``: some of its options with values, its
    positionals, and the folder variables (``None``: as the test runs)."""
    parser = LEAVES[path]
    pool = _values(w)
    argv = list(path)
    actions = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]
    for action in draw(st.lists(st.sampled_from(actions), max_size=5, unique_by=id)) if actions else []:
        if not action.option_strings:  # a positional
            n = draw(st.integers(0, 2))
            argv += [draw(st.sampled_from(pool)) for _ in range(n)]
            continue
        argv.append(draw(st.sampled_from(action.option_strings)))
        if action.nargs == 0:  # a flag
            continue
        if action.choices and draw(st.booleans()):
            argv.append(str(draw(st.sampled_from(list(action.choices)))))
        elif draw(st.integers(0, 3)) == 0:
            argv.append(str(draw(st.integers(-10**21, 10**21))))
        else:
            argv.append(draw(st.sampled_from(pool)))
    env = {name: draw(st.sampled_from(_env_values(w))) for name in ENV_VARS}
    return argv, env


def _stubs(monkeypatch):
    """Where legitimate work starts, raise :class:`WorkStarted` instead (the corpus when it is
    missing, the embedded cluster, the calibration, training, notebooks, ranks); Dask's
    connection limits shortened (the real ones:
    :func:`test_a_service_that_is_not_dask_is_answered_in_one_line_within_seconds`)."""
    from gtalib.book.pipeline import connect, job, schedule
    from gtalib.cli import record as record_cli
    from gtalib.data import build, fineweb
    from gtalib.decode import tp
    from gtalib.training import runs, train

    make_datamodule = runs.make_datamodule

    def work(what):
        def stub(*_a, **_k):
            raise WorkStarted(what)
        return stub

    def needs_corpus(*a, **k):
        dm = make_datamodule(*a, **{k_: v for k_, v in k.items() if k_ != "build"})
        if not (dm.path / "manifest.json").is_file():
            raise WorkStarted("corpus build")
        return dm

    def ensure_corpus(plan, log=print):
        needs_corpus("default", plan.tokenizer, plan.train)

    monkeypatch.setattr(runs, "make_datamodule", needs_corpus)
    monkeypatch.setattr(job, "ensure_corpus", ensure_corpus)
    for module, name in ((schedule, "LocalCluster"), (job, "runs_to_train"),
                         (job, "ablation_results"), (job, "execute_notebooks"),
                         (train, "ensure_run"), (record_cli, "train_all"),
                         (build, "build_default"), (fineweb, "build_fineweb"),
                         (tp, "spawn_decode"), (schedule, "batch_cluster")):
        monkeypatch.setattr(module, name, work(f"{module.__name__}.{name}"))
    monkeypatch.setattr(connect, "CONNECT_TIMEOUT_S", 1.0)
    monkeypatch.setattr(connect, "CONNECT_PROBE_S", 1.0)


def _hang(signum, frame):
    raise TimeoutError(f"no answer within {HANG_S} s")


def _run_in_process(argv, env):
    """``(status, stdout, stderr)`` of ``gtalib argv`` under ``env``, or status ``"work"``."""
    out, err = io.StringIO(), io.StringIO()
    env = {k: v for k, v in env.items() if v is not None}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    alarm = threading.current_thread() is threading.main_thread()
    if alarm:
        previous = signal.signal(signal.SIGALRM, _hang)
        signal.setitimer(signal.ITIMER_REAL, HANG_S)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(list(argv))
            except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
                status = exc.code if isinstance(exc.code, int) else 2
            except WorkStarted as exc:
                status = f"work: {exc}"
    finally:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return status, out.getvalue(), err.getvalue()


def _mentions_input(line: str, path, argv, env) -> bool:
    """Whether an error line names something the user gave: an option or value of ``argv``,
    an option or positional of the command, or a variable of ``env``."""
    text = line.split(": error: ", 1)[-1]
    parser = LEAVES[path]
    given = argv[len(path):]
    names = {a for a in given if a.strip()} | {repr(a) for a in given}
    for action in parser._actions:
        names |= set(action.option_strings) | {str(action.dest), str(action.metavar or "")}
    names |= {k for k, v in env.items() if v is not None}
    return any(n and n in text for n in names - {""})


def _allowed_roots(path, argv, env) -> list[Path]:
    """The folders this draw may write: those it gives as stores (options of
    :data:`WRITABLE_DESTS`, the folder variables)."""
    parser = LEAVES[path]
    flags = {s for a in parser._actions if a.dest in WRITABLE_DESTS for s in a.option_strings}
    given = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in flags]
    given += [v for v in env.values() if v]
    out = []
    for g in given:
        with contextlib.suppress(OSError, ValueError):
            out.append(Path(g).expanduser().resolve())
    return out


#: Draws of the fuzz that started work, for :func:`test_draws_that_start_work_stop_...`.
STARTED: list = []


def test_the_fuzz_reaches_every_command_of_the_issue():
    assert COMMANDS <= {p[0] for p in LEAVES}, sorted(LEAVES)


@pytest.mark.parametrize("path", sorted(LEAVES), ids=" ".join)
def test_every_draw_is_answered_as_documented(path, world, monkeypatch):
    _stubs(monkeypatch)
    systmp, sentinel = world["systmp"], world["sentinel"]
    monkeypatch.setattr(tempfile, "tempdir", str(systmp))
    monkeypatch.delenv("GTALIB_SYSTEM_TMPDIR", raising=False)
    monkeypatch.delenv("GTALIB_RECORD_DIR", raising=False)
    cwd = sentinel / "cwd"  # relative paths of a draw land here, under the sentinel's eye
    cwd.mkdir(exist_ok=True)
    monkeypatch.chdir(cwd)
    repo_before = _snapshot(REPO, UNCOMPARED)

    @seed(SEED)
    @settings(max_examples=EXAMPLES, deadline=None, database=None, print_blob=True,
              suppress_health_check=list(HealthCheck))
    @given(draws(world, path))
    def check(drawn):
        argv, env = drawn
        sentinel_before = _snapshot(sentinel)
        fixed = [p.resolve() for p in (cwd, sentinel / "a-file", sentinel / "kept.txt")]
        t0 = time.perf_counter()
        status, out, err = _run_in_process(argv, env)
        if os.environ.get("GTALIB_FUZZ_VERBOSE"):
            print(f"{time.perf_counter() - t0:6.2f} s {status!s:.40} {argv} {env}", file=sys.__stderr__)
        where = f"gtalib {' '.join(map(repr, argv))} with {env}: status {status}, stderr {err!r}"
        assert "Traceback" not in err + out, where
        if isinstance(status, str):  # legitimate work started (stubbed here)
            STARTED.append((argv, env))
        elif status == 2:  # one line; one per run given where each is reported (probe, record add)
            lines = err.strip().splitlines()
            assert 1 <= len(lines) <= max(1, len(argv) - len(path)), where
            for line in lines:
                assert line.startswith("gtalib") and " error: " in line, where
                assert _mentions_input(line, path, argv, env), where
        else:
            assert status == 0 or (status == 1 and path in STATUS_1), where
        assert list(systmp.iterdir()) == [], f"{where}: left {list(systmp.iterdir())}"
        roots = _allowed_roots(path, argv, env)
        after = _snapshot(sentinel)
        changed = {p for p in set(after) | set(sentinel_before)
                   if after.get(p) != sentinel_before.get(p)}
        # a store it was given, and the folders above it that making it made
        stray = [p for p in changed if not any(
            p.resolve() == r or r in p.resolve().parents or (
                after.get(p) == "folder" and p.resolve() in r.parents) for r in roots)]
        assert not stray, f"{where}: wrote outside the stores it was given: {stray}"
        for r in roots:  # a store it made is removed for the next draw (never the fixture's)
            if sentinel in r.parents and not any(r == f or r in f.parents for f in fixed):
                with contextlib.suppress(OSError):
                    for p in sorted(r.rglob("*"), reverse=True):
                        p.rmdir() if p.is_dir() else p.unlink()
                    r.rmdir()

    try:
        check()
    except BaseException as exc:
        raise AssertionError(f"the CLI fuzz failed with GTALIB_FUZZ_SEED={SEED} "
                             f"(GTALIB_FUZZ_EXAMPLES={EXAMPLES}): {exc}") from exc
    repo_after = _snapshot(REPO, UNCOMPARED)
    assert repo_after == repo_before, [p for p in set(repo_after) ^ set(repo_before)] or [
        p for p in repo_after if repo_after[p] != repo_before.get(p)]


def _stopped_by(argv, env, signum, systmp: Path):
    """Run ``gtalib argv`` as its own process group; once its handlers are set (the command has
    started: SIGTERM is caught, ``/proc/PID/status``), wait a second and send ``signum``
    (SIGINT to the group, as a terminal's Ctrl-C). Returns ``(status, stderr)``."""
    full = {**os.environ, "TMPDIR": str(systmp), "OMP_NUM_THREADS": "1"}
    full.pop("GTALIB_SYSTEM_TMPDIR", None)
    full.update({k: v for k, v in env.items() if v is not None})
    for k in (k for k, v in env.items() if v is None):
        full.pop(k, None)
    job = subprocess.Popen([sys.executable, "-m", "gtalib", *argv], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, env={k: os.fsencode(v) for k, v in full.items()},
                           start_new_session=True, cwd=REPO,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + HANG_S
        while time.monotonic() < deadline and job.poll() is None:
            with contextlib.suppress(OSError):
                caught = next(int(line.split()[1], 16) for line in
                              open(f"/proc/{job.pid}/status") if line.startswith("SigCgt:"))
                if caught & (1 << (signal.SIGTERM - 1)):
                    break
            time.sleep(0.1)
        time.sleep(1.0)
        if job.poll() is None:
            if signum == signal.SIGINT:
                os.killpg(job.pid, signal.SIGINT)
            else:
                job.send_signal(signal.SIGTERM)
        err = job.communicate(timeout=HANG_S)[1].decode(errors="replace")
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    return job.returncode, err


def test_draws_that_start_work_stop_in_one_line_on_sigint_and_sigterm(world):
    """The first two draws of the fuzz that started work, run for real and stopped: one with
    Ctrl-C (130), one with SIGTERM (143), each one line on stderr, no traceback and no
    temporary folder left (the draws are the fuzz's, from its seed)."""
    if not STARTED:
        pytest.skip("runs after the fuzz tests of this file (their draws)")
    for (argv, env), signum in zip(STARTED, (signal.SIGINT, signal.SIGTERM)):
        status, err = _stopped_by(argv, env, signum, world["systmp"])
        where = f"gtalib {argv} with {env}, {signal.Signals(signum).name}: {status}, {err!r}"
        if os.environ.get("GTALIB_FUZZ_VERBOSE"):
            print(where, file=sys.__stderr__)
        lines = err.strip().splitlines()
        if status in (0, 2):  # it ended before the signal came: an answer, judged as above
            assert "Traceback" not in err and (status == 0 or len(lines) == 1), where
            continue
        assert status == 128 + signum, where
        assert len(lines) == 1 and "Traceback" not in err, where
        assert ("stopped by SIGTERM" if signum == signal.SIGTERM else "interrupted") in lines[0]
        assert list(world["systmp"].iterdir()) == [], where


def test_a_service_that_is_not_dask_is_answered_in_one_line_within_seconds(world, tmp_path):
    """``--cluster`` at a port where a web server listens (a Dask dashboard's, say), with Dask's
    real limits: exit 2 and one line saying no Dask scheduler answered, not a hang (Dask's
    client alone waits for the handshake without a time limit)."""
    address = f"tcp://127.0.0.1:{world['http']}"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("GTALIB_SYSTEM_TMPDIR", None)
    done = subprocess.run([sys.executable, "-m", "gtalib", "book", "--preset", "ci", "--seeds", "1",
                           "--predict", "--cluster", address, "--run-dir",
                           str(world["sentinel"] / "store-http")], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=HANG_S)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"gtalib book: error: cluster {address}: no Dask scheduler answered at {address} (nothing "
        "answered Dask's handshake within 5 s: is it a Dask scheduler's address, not its "
        "dashboard's or another service's?)"]
    assert list(tmp_path.iterdir()) == []
