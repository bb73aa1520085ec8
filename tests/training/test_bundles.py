"""A finished run handed from one store to another as files (gtalib.training.bundles)."""

import pandas as pd
import pytest

from gtalib.book.design.plan import make_plan
from gtalib.training import bundles
from gtalib.training.runs import RunCorruptError, RunIncompleteError, is_done, load_metrics
from gtalib.training.train import ensure_run


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    plan = make_plan("ci", 1)
    spec = plan.spec(plan.runs[0])
    return spec, ensure_run(spec, tmp_path_factory.mktemp("worker"), accelerator="cpu")


def test_a_bundle_lands_whole_and_checked_in_another_store(trained, tmp_path):
    spec, path = trained
    files = bundles.export_run(path)
    assert set(files) == {"spec.json", "metrics.csv", "card.json", "DONE", "probes.json"}
    dest = bundles.import_run(files, tmp_path)
    assert dest == tmp_path / spec.run_id and is_done(dest)
    pd.testing.assert_frame_equal(load_metrics(dest), load_metrics(path), check_exact=True)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".import")]
    assert bundles.import_run(files, tmp_path) == dest  # a run already done is kept


def test_a_bundle_that_does_not_check_out_leaves_nothing(trained, tmp_path):
    _, path = trained
    files = bundles.export_run(path)
    bad = dict(files, **{"metrics.csv": files["metrics.csv"].replace(b"\n2,", b"\nx,", 1)})
    with pytest.raises(RunCorruptError):
        bundles.import_run(bad, tmp_path)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="missing"):
        bundles.import_run({k: v for k, v in files.items() if k != "DONE"}, tmp_path)


def test_an_unfinished_run_is_not_exported(trained, tmp_path):
    _, path = trained
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "spec.json").write_bytes((path / "spec.json").read_bytes())
    with pytest.raises(RunIncompleteError):
        bundles.export_run(tmp_path / "r")
