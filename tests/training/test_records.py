"""Recorded runs (gtalib.records): bundles, lookup by spec, the re-train check, and the book's
fallback from the local store to the record."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from gtalib import records, runs
from gtalib.book import figures
from gtalib.book.plan import make_plan


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A real, tiny finished run (ci preset, 6 steps) in a temporary store."""
    store = tmp_path_factory.mktemp("store")
    ref = figures.RunRef("gqa", "rec", (), 0, train=(("max_steps", 6), ("eval_every", 3),
                                                    ("checkpoint_every", 3)))
    spec = make_plan("ci", 1).spec(ref)
    return ref, spec, runs.ensure_run(spec, store, accelerator="cpu")


def test_bundle_holds_the_run_and_where_it_was_recorded(finished_run, tmp_path):
    _, spec, path = finished_run
    folder = records.record_run(path, tmp_path)
    assert folder == tmp_path / spec.run_id
    assert sorted(p.name for p in folder.iterdir()) == ["card.json", "metrics.csv", "record.json",
                                                       "spec.json"]
    info = records.load_record_info(folder)
    assert info["run_id"] == spec.run_id and info["machine"]["logical_cpus"] >= 1
    assert {"torch", "lightning", "gtalib", "python"} <= set(info["versions"])
    assert info["check_command"] == f"gtalib record check {spec.run_id}"
    assert records.record_label(info).startswith(f"recorded {info['recorded_utc'][:10]} on ")
    pd.testing.assert_frame_equal(records.load_record_metrics(folder), runs.load_metrics(path))
    assert records.find_record(spec, tmp_path) == folder
    assert records.list_records(tmp_path) == [folder]
    # recording it again keeps the first record (same metrics)
    stamp = (folder / "record.json").read_text()
    records.record_run(path, tmp_path)
    assert (folder / "record.json").read_text() == stamp


def test_record_list_has_a_header_and_survives_a_closed_pipe(finished_run, tmp_path):
    import subprocess
    import sys

    _, spec, path = finished_run
    records.record_run(path, tmp_path)
    cmd = [sys.executable, "-m", "gtalib", "record", "list", "--record-dir", str(tmp_path)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0].split()[:4] == ["run_id", "n_layer", "d_model", "run"]
    assert out[1].split()[:3] == [spec.run_id, str(spec.model.n_layer), str(spec.model.d_model)]
    assert spec.describe() in out[1] and "recorded " in out[1]
    # a reader that stops at once (as `| head -0` does): exit 0, no BrokenPipeError traceback
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    _, err = proc.communicate()
    assert proc.returncode == 0 and b"BrokenPipe" not in err, err


def test_unfinished_run_is_not_recorded(finished_run, tmp_path):
    _, _, path = finished_run
    half = tmp_path / "half"
    shutil.copytree(path, half)
    (half / "DONE").unlink()
    with pytest.raises(runs.RunIncompleteError):
        records.record_run(half, tmp_path / "rec")
    assert not (tmp_path / "rec").exists()


def test_check_retrains_bit_identically_and_reports_the_first_differing_step(finished_run, tmp_path):
    _, spec, path = finished_run
    folder = records.record_run(path, tmp_path)
    res = records.check_record(folder)
    assert res.ok and res.identical and res.max_abs_diff == 0.0
    assert "bit-identical" in res.message()
    # a record off by 1e-3 nats at step 4: reported with that step and column
    df = pd.read_csv(folder / "metrics.csv")
    df.loc[df["step"] == 4, "train_loss"] += 1e-3
    df.to_csv(folder / "metrics.csv", index=False)
    bad = records.compare_metrics(spec.run_id, records.load_record_metrics(folder),
                                  runs.load_metrics(path))
    assert not bad.ok and bad.first_diff[:2] == (4, "train_loss")
    assert bad.max_abs_diff == pytest.approx(1e-3, rel=1e-6)
    assert "MISMATCH from step 4, column train_loss" in bad.message()
    loose = records.compare_metrics(spec.run_id, records.load_record_metrics(folder),
                                    runs.load_metrics(path), tolerance=2e-3)
    assert loose.ok and not loose.identical and "within tolerance" in loose.message()
    with pytest.raises(ValueError, match="tolerance"):
        records.compare_metrics(spec.run_id, df, df, tolerance=-1)


def test_book_reads_the_record_when_the_local_store_lacks_the_run(finished_run, tmp_path):
    from gtalib.book import analysis

    ref, spec, path = finished_run
    rec_dir = tmp_path / "recorded"
    records.record_run(path, rec_dir)
    empty_store = tmp_path / "store"
    col = analysis.collect_runs([ref], make_plan("ci", 1), empty_store, record_dir=rec_dir)
    st = col.status.iloc[0]
    assert st["state"] == "done" and st["source"].startswith("recorded ")
    assert not (empty_store / spec.run_id).exists()  # nothing trained
    assert col.runs["val_loss"].dropna().iloc[-1] == pytest.approx(
        runs.load_metrics(path)["val_loss"].dropna().iloc[-1], abs=0)
    # neither local nor recorded: missing
    col2 = analysis.collect_runs([ref], make_plan("ci", 1), empty_store, record_dir=tmp_path / "none")
    assert col2.status.iloc[0]["state"] == "missing"


def test_committed_records_are_whole_and_named_by_their_spec():
    """Every bundle in the repository: folder name = spec hash, metrics complete, provenance."""
    folders = records.list_records()
    for folder in folders:
        spec = runs.load_spec(folder)
        assert folder.name == spec.run_id
        records.load_record_metrics(folder)
        info = json.loads((folder / "record.json").read_text())
        assert info["run_id"] == spec.run_id and info["machine"]["cpu"]
        assert not (folder / "checkpoints").exists()


def test_a_committed_record_retrains_to_its_curve():
    """CI re-trains one recorded run of the repository (the cheapest) and checks it."""
    folders = records.list_records()
    if not folders:
        pytest.fail("no recorded runs in the repository (book/recorded/)")
    cheapest = min(folders, key=lambda f: (runs.load_spec(f).train.max_steps
                                           * runs.load_spec(f).model.n_layer))
    res = records.check_record(cheapest)
    assert res.ok, res.message()
