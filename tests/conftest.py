"""Shared test setup: single-threaded torch, Triton's CPU interpreter when there is no GPU, and a
private run store and data cache for the whole session, shared by its pytest-xdist workers.

``TRITON_INTERPRET`` must be set before any module decorates a function with ``@triton.jit``, so it
is set here at import time (pytest imports conftest before collecting test modules). Importing
torch does not import triton.

Tests never touch the user's data: :func:`_private_stores` points ``$GTALIB_RUN_DIR`` and
``$GTALIB_DATA_DIR`` at temporary folders before any test runs (subprocesses inherit them), shares
the user's built corpora, archives and tokenizer files read-only (symlinks, so tests do not
download or rebuild them), and at the end of the session fails if anything in the user's run store
or data cache was added, removed or modified.

A test that re-trains a recorded run reports the check's outcome with the ``record_check_report``
fixture; :func:`pytest_terminal_summary` prints those lines at the end of the run (also under
``-q``), so the output says which outcome the check had on this machine (bit-identical, within
the cross-machine envelope, or mismatch; :mod:`gtalib.training.records`). The tests that use a
real Slurm or a real browser report, with ``real_parts_report``, what they ran on or why they
were skipped. Under pytest-xdist (``scripts/test.sh`` runs two workers) the workers share the
private stores (a run is content-addressed and trained under its lock, so a ``ci`` run trained by
one worker is read by the other) and each hands its lines to the controller at the end.

So that every test file passes when run alone on a fresh clone (no corpus built yet), the
session then builds the default byte corpus (about 5 s, fetching its pinned archives) into the
private cache when the user has none to share (``store_guard.ensure_default_corpus``). To check,
point the user's cache at an empty folder::

    GTALIB_DATA_DIR=/tmp/empty-xyz python -m pytest -q tests/training/test_records.py -k bundle
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
torch.set_num_threads(1)

from gtalib.data.archives import ENV_DATA_DIR, default_data_dir  # noqa: E402  (after TRITON_INTERPRET)
from gtalib.training.runs import ENV_RUN_DIR, default_run_dir  # noqa: E402
from store_guard import (changes, ensure_default_corpus, session_folder,  # noqa: E402
                         share_read_only, snapshot)


@pytest.fixture(scope="session", autouse=True)
def _private_stores(tmp_path_factory):
    user_runs, user_data = default_run_dir().resolve(), default_data_dir()
    before = {user_runs: snapshot(user_runs), user_data: snapshot(user_data)}
    with session_folder(tmp_path_factory, "stores") as root:
        if not (root / "data_cache").exists():
            share_read_only(user_data, root / "data_cache")
            ensure_default_corpus(root / "data_cache")
    saved = {k: os.environ.get(k) for k in (ENV_RUN_DIR, ENV_DATA_DIR)}
    os.environ[ENV_RUN_DIR] = str(root / "runs")
    os.environ[ENV_DATA_DIR] = str(root / "data_cache")
    yield root
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    touched = {str(p): changes(b, snapshot(p)) for p, b in before.items()}
    touched = {p: c for p, c in touched.items() if c}
    assert not touched, f"the tests changed the user's data: {touched}"


#: The lines reported with ``record_check_report`` and ``real_parts_report`` during the session.
_RECORD_CHECKS = pytest.StashKey[list]()
_REAL_PARTS = pytest.StashKey[list]()


def pytest_collection_modifyitems(session, config, items):
    """The order in which ``scripts/test.sh``'s two pytest-xdist workers take the files, each
    the next file when its last one is done (``--dist loadfile --no-loadscope-reorder``, which
    keeps this order): first the file that builds the ci book (the first to ask for the
    ``built`` fixture, tests/book/conftest.py), then the other files with tests marked
    ``slow`` (the one with the most of them first), then the other files that read the built
    book, then the rest as collected. A file of minutes taken last would run alone at the end
    while the other worker idles, and a file that reads the book, taken while the other worker
    builds it, would wait for it."""
    file_of = lambda item: item.nodeid.split("::")[0]  # noqa: E731
    slow: dict[str, int] = {}
    reads_book: list[str] = []
    for item in items:
        slow[file_of(item)] = slow.get(file_of(item), 0) + (item.get_closest_marker("slow") is not None)
        if "built" in getattr(item, "fixturenames", ()) and file_of(item) not in reads_book:
            reads_book.append(file_of(item))

    def group(f):
        if reads_book and f == reads_book[0]:
            return 0
        return 2 if f in reads_book else 1 if slow[f] else 3

    rank = {f: i for i, f in enumerate(sorted(slow, key=lambda f: (group(f), -slow[f])))}
    items.sort(key=lambda item: rank[file_of(item)])


def pytest_configure(config):
    config.stash[_RECORD_CHECKS] = []
    config.stash[_REAL_PARTS] = []


@pytest.fixture
def record_check_report(request):
    """A function ``report(line)`` that keeps a record check's message for the summary at the end
    of the run (:func:`pytest_terminal_summary`)."""
    return request.config.stash[_RECORD_CHECKS].append


@pytest.fixture(scope="session")
def real_parts_report(request):
    """A function ``report(line)`` for the tests that use a real outside part (a Slurm, a
    browser): what they ran on, or why they were skipped, printed at the end of the run (also
    under ``-q``), so that CI's output says whether they ran."""
    return request.config.stash[_REAL_PARTS].append


def pytest_sessionfinish(session):
    """Under pytest-xdist, a worker hands its reported lines to the controller, which prints
    them (:func:`pytest_testnodedown`)."""
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        out["gtalib_reports"] = {"record": session.config.stash[_RECORD_CHECKS],
                                 "real": session.config.stash[_REAL_PARTS]}


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, called on the controller
def pytest_testnodedown(node, error):
    reports = getattr(node, "workeroutput", {}).get("gtalib_reports", {})
    node.config.stash[_RECORD_CHECKS] += reports.get("record", [])
    node.config.stash[_REAL_PARTS] += reports.get("real", [])


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for title, prefix, key in (("recorded-run checks", "record check", _RECORD_CHECKS),
                               ("real parts", "real part", _REAL_PARTS)):
        lines = config.stash.get(key, [])
        if lines:
            terminalreporter.section(title)
            for line in dict.fromkeys(lines):
                terminalreporter.write_line(f"{prefix}: {line}")
