"""Recorded runs (gtalib.training.records): bundles, lookup by spec, the re-train check, and the book's
fallback from the local store to the record."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from gtalib.training import machine, record_costs, records, runs
from gtalib.training.train import ensure_run
from gtalib.book.design.run_specs import RunRef
from gtalib.book.design.plan import make_plan


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A real, tiny finished run (ci preset, 6 steps) in a temporary store."""
    store = tmp_path_factory.mktemp("store")
    ref = RunRef("gqa", "rec", (), 0, train=(("max_steps", 6), ("eval_every", 3),
                                                    ("checkpoint_every", 3)))
    spec = make_plan("ci", 1).spec(ref)
    return ref, spec, ensure_run(spec, store, accelerator="cpu")


def test_bundle_holds_the_run_and_where_it_was_recorded(finished_run, tmp_path):
    _, spec, path = finished_run
    folder = records.record_run(path, tmp_path)
    assert folder == tmp_path / spec.run_id
    assert sorted(p.name for p in folder.iterdir()) == ["card.json", "metrics.csv", "probes.json",
                                                       "record.json", "spec.json"]
    assert json.loads((folder / "probes.json").read_text()) == \
        json.loads((path / "probes.json").read_text())
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


def test_a_bit_identical_retraining_completes_an_older_bundle(finished_run, tmp_path):
    """A bundle recorded before probes and machine kinds gains both from a re-training with
    equal metrics, keeping its date; a re-training with other metrics
    replaces it only when asked to."""
    _, spec, path = finished_run
    folder = records.record_run(path, tmp_path)
    (folder / "probes.json").unlink()
    info = json.loads((folder / "record.json").read_text())
    info["machine_kind"] = None
    (folder / "record.json").write_text(json.dumps(info))
    records.record_run(path, tmp_path)
    done = json.loads((folder / "record.json").read_text())
    assert done["recorded_utc"] == info["recorded_utc"]
    assert done["machine_kind"] == runs.load_card(path)["machine_kind"]
    assert done["machine_kind_source"].startswith("bit-identical re-training finished ")
    assert (folder / "probes.json").read_bytes() == (path / "probes.json").read_bytes()
    assert records.record_machine_kind(folder) == done["machine_kind"]
    # a known kind is never overwritten
    done["machine_kind"] = {"cpu_vendor": "elsewhere"}
    (folder / "record.json").write_text(json.dumps(done))
    records.record_run(path, tmp_path)
    assert json.loads((folder / "record.json").read_text())["machine_kind"] == {
        "cpu_vendor": "elsewhere"}
    assert not list(folder.glob(".*.tmp"))


def test_a_bit_identical_retraining_on_another_kind_is_kept_once(finished_run, tmp_path):
    """A re-training with equal metrics on a kind other than the record's adds that kind to the
    kinds known to give the record bit for bit, once; other metrics replace the bundle only when
    asked to."""
    _, _, path = finished_run
    here = runs.load_card(path)["machine_kind"]
    folder = records.record_run(path, tmp_path)
    assert records.bit_identical_kinds(folder) == [here]
    info = json.loads((folder / "record.json").read_text())
    # a kind no machine has, so that it differs from this one whichever CPU runs the test
    elsewhere = dict(here, cpu_family="999", cpu_model="0")
    info["machine_kind"] = elsewhere
    (folder / "record.json").write_text(json.dumps(info))
    for _ in range(2):  # a second equal re-training on this kind adds nothing
        records.record_run(path, tmp_path)
        done = json.loads((folder / "record.json").read_text())
        assert done["machine_kind"] == elsewhere and done["recorded_utc"] == info["recorded_utc"]
        assert [r["machine_kind"] for r in done["reproduced_on"]] == [here]
        assert done["reproduced_on"][0]["source"].startswith("bit-identical re-training finished ")
    assert records.bit_identical_kinds(folder) == [elsewhere, here]
    info["machine_kind"] = None  # unknown: no kind at all is known to give it
    (folder / "record.json").write_text(json.dumps(info))
    (folder / "card.json").write_text(json.dumps(
        {k: v for k, v in runs.load_card(path).items() if k != "machine_kind"}))
    assert records.bit_identical_kinds(folder) == []
    # other metrics: kept unless replace=True; then replaced whole, only the new run's kind known
    other = tmp_path / "other" / path.name
    shutil.copytree(path, other)
    df = runs.load_metrics(other)
    df.loc[df.index[-1], "train_loss"] += 1e-3
    df.to_csv(other / "metrics.csv", index=False)
    with pytest.raises(FileExistsError, match="other metrics.*--replace"):
        records.record_run(other, tmp_path)
    assert records.bit_identical_kinds(folder) == []  # kept as it was
    folder = records.record_run(other, tmp_path, replace=True)
    assert records.bit_identical_kinds(folder) == [here]
    assert "reproduced_on" not in records.load_record_info(folder)


def _seed_copy(bundle, dest, seed, card):
    """A copy of ``bundle`` at ``dest`` as the run of another ``seed``, with the card ``card``."""
    shutil.copytree(bundle, dest)
    d = json.loads((dest / "spec.json").read_text())
    d["seed"] = seed
    (dest / "spec.json").write_text(json.dumps(d))
    (dest / "card.json").write_text(json.dumps(card))


def test_cost_table_sums_core_seconds_per_configuration(finished_run, tmp_path):
    """Two seeds of one configuration are one row; a resumed run counts at the median."""
    _, spec, path = finished_run
    a = records.record_run(path, tmp_path)
    card = runs.load_card(path)
    for name, seed, wall, resumed in (("s1", 1, 30.0, False), ("s2", 2, 5.0, True)):
        _seed_copy(a, tmp_path / name, seed, {**card, "wall_time_s": wall, "threads": 2,
                                                "resumed": resumed})
    t = record_costs.cost_table(tmp_path)
    assert len(t) == 1
    row = t.iloc[0]
    own = card["wall_time_s"] * card["threads"]
    median = (own + 60.0) / 2
    assert row["seeds"] == (0, 1, 2) and row["runs"] == 3 and row["resumed"] == 1
    assert row["core_s_median"] == pytest.approx(median)
    assert (row["core_s_min"], row["core_s_max"]) == (pytest.approx(own), 60.0)
    assert row["core_s_total"] == pytest.approx(own + 60.0 + median)
    assert row["steps"] == spec.train.max_steps and row["n_layer"] == spec.model.n_layer
    assert row["cpu"] == "{cpu_model_name} (family {cpu_family}, model {cpu_model})".format(
        **card["machine_kind"])
    assert not row["lower_bound"]
    md = record_costs.costs_markdown(tmp_path)
    assert "3 recorded runs in 1 configuration," in md and "| 0, 1, 2 |" in md
    # a configuration whose every run was resumed: its last-start time, a marked lower bound
    for name in ("s1", "s2"):
        shutil.rmtree(tmp_path / name)
    folder = next(f for f in records.list_records(tmp_path))
    (folder / "card.json").write_text(json.dumps({**card, "wall_time_s": 7.0, "threads": 1,
                                                  "resumed": True}))
    row = record_costs.cost_table(tmp_path).iloc[0]
    assert row["lower_bound"] and row["core_s_total"] == 7.0
    md = record_costs.costs_markdown(tmp_path)
    assert "| — (all resumed) | 1 | ≥ 7 |" in md and "**at least 7 core-seconds**" in md


def test_a_run_at_another_data_order_costs_as_its_configuration(finished_run, tmp_path):
    """The data order (``train.data_seed``, named and hashed in the data's identity too) picks
    which windows a step reads, not how many: a run at another order is a run of the same
    configuration in the cost table; another training length is not. The key leaves the spec
    itself (and its run id) as it was."""
    _, spec, path = finished_run
    run_id = spec.run_id
    key = record_costs.config_key(spec)
    assert spec.run_id == run_id and "hash" in spec.to_dict()["data"]["identity"]
    a = records.record_run(path, tmp_path)
    for name, change in (("order", {"data_seed": 3}), ("longer", {"max_steps": 99})):
        b = tmp_path / name
        shutil.copytree(a, b)
        d = json.loads((b / "spec.json").read_text())
        d["train"].update(change)
        if "data_seed" in change:
            d["data"]["identity"]["sampling"]["data_seed"] = 3
            d["data"]["identity"]["hash"] = "0" * 64
        (b / "spec.json").write_text(json.dumps(d))
    t = record_costs.cost_table(tmp_path)
    assert sorted(t["runs"]) == [1, 2] and key in set(t["key"])
    assert t.set_index("key").loc[key, "runs"] == 2
    assert "data_seed" not in t.set_index("key").loc[key, "run"]


def test_the_recorded_runs_page_is_current():
    """docs/recorded_runs.md is what `gtalib record costs` prints for the committed records."""
    from pathlib import Path

    page = Path(__file__).resolve().parents[2] / "docs" / "recorded_runs.md"
    assert page.read_text() == record_costs.costs_markdown(), (
        "docs/recorded_runs.md is stale: gtalib record costs > docs/recorded_runs.md")


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
    with pytest.raises(runs.RunIncompleteError, match="not finished.*gtalib train"):
        records.record_run(half, tmp_path / "rec")
    assert not (tmp_path / "rec").exists()
    with pytest.raises(runs.RunIncompleteError, match="no such folder"):
        records.record_run(tmp_path / "nowhere", tmp_path / "rec")
    with pytest.raises(runs.RunIncompleteError, match="not a run folder.*gtalib runs"):
        records.record_run(tmp_path, tmp_path / "rec")  # a store, not a run


def test_record_add_reports_each_run_it_cannot_record_as_an_error(finished_run, tmp_path, capsys):
    from gtalib.cli import main

    _, spec, path = finished_run
    rec = tmp_path / "rec"
    # the missing run is an error; the finished one beside it is still recorded
    assert main(["record", "add", str(tmp_path / "nowhere"), str(path),
                 "--record-dir", str(rec)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"gtalib record add: error: not recorded: run folder {tmp_path / 'nowhere'}: "
                   "no such folder"]
    assert (rec / spec.run_id / "metrics.csv").is_file()


def _edit_cell(folder, step, column, delta):
    """Add ``delta`` to one cell of a bundle's metrics.csv (as a record off by ``delta``)."""
    df = pd.read_csv(folder / "metrics.csv")
    df.loc[df["step"] == step, column] += delta
    df.to_csv(folder / "metrics.csv", index=False)


def _set_record_kind(folder, **changes):
    """Make ``record.json`` say the run was trained on a machine of another kind."""
    info = json.loads((folder / "record.json").read_text())
    info["machine_kind"] = {**info["machine_kind"], **changes}
    (folder / "record.json").write_text(json.dumps(info))


def _other_than_this_machine(field: str, *candidates: str) -> str:
    """The first of ``candidates`` that differs from this machine's value of machine-kind
    ``field``, so a test's "other machine" differs on every CPU it runs on."""
    here = machine.machine_kind(1)[field]
    return next(c for c in candidates if c != here)


def test_check_retrains_bit_identically(finished_run, tmp_path):
    _, spec, path = finished_run
    folder = records.record_run(path, tmp_path)
    res = records.check_record(folder)  # a real re-training, on this machine, of the same kind
    assert res.outcome == "bit-identical" and res.ok and res.first_diff is None
    assert set(res.max_abs_diff) == {c for c in runs.load_metrics(path).columns if "loss" in c}
    assert set(res.max_abs_diff.values()) == {0.0}
    assert res.reason == "same machine kind, bit-identity required"
    assert res.message().startswith(f"{spec.run_id}: bit-identical")


def test_same_machine_kind_requires_bit_identity(finished_run, tmp_path):
    """A record 1e-6 nats off (far inside the envelope) on the same machine kind: a mismatch."""
    _, spec, path = finished_run
    folder = records.record_run(path, tmp_path)
    _edit_cell(folder, 4, "train_loss", 1e-6)
    recorded = pd.read_csv(folder / "metrics.csv")
    # work_dir: the store that trained the run, so the "re-trained" curve is the run itself
    res = records.check_record(folder, work_dir=path.parent)
    assert res.outcome == "mismatch" and not res.ok
    assert res.reason == "same machine kind, bit-identity required"
    step, col, rec, new, bound = res.first_diff
    assert (step, col, bound) == (4, "train_loss", 0.0)
    assert rec == recorded.loc[recorded["step"] == 4, "train_loss"].item()
    assert new == runs.load_metrics(path).loc[3, "train_loss"]
    assert res.max_abs_diff["train_loss"] == pytest.approx(1e-6, rel=1e-3)
    assert "MISMATCH (same machine kind, bit-identity required) at step 4, column train_loss" \
        in res.message()


def test_other_machine_kind_allows_the_envelope(finished_run, tmp_path):
    _, spec, path = finished_run
    env = records.CROSS_MACHINE_ENVELOPE
    folder = records.record_run(path, tmp_path)
    vendor = _other_than_this_machine("cpu_vendor", "GenuineIntel", "AuthenticAMD")
    capability = _other_than_this_machine("cpu_capability", "AVX2", "AVX512")
    _set_record_kind(folder, cpu_vendor=vendor, cpu_capability=capability)
    _edit_cell(folder, 4, "train_loss", 1e-6)
    res = records.check_record(folder, work_dir=path.parent)
    assert res.outcome == "within envelope" and res.ok
    assert f"cpu_capability: {capability} -> " in res.reason and f"cpu_vendor: {vendor} -> " in res.reason
    assert res.first_diff[:2] == (4, "train_loss") and res.first_diff.bound == env.early_tol
    assert "within the cross-machine envelope, not bit-identical" in res.message()
    # 1e-3 nats at step 4 is 100x the early bound: a mismatch that names step, column and bound
    _edit_cell(folder, 4, "train_loss", 1e-3)
    bad = records.check_record(folder, work_dir=path.parent)
    assert bad.outcome == "mismatch"
    assert bad.first_diff.step == 4 and bad.first_diff.column == "train_loss"
    assert bad.first_diff.bound == env.early_tol == 1e-5
    assert "at step 4, column train_loss" in bad.message() and "> bound 1e-05" in bad.message()
    # a val_loss off at the final evaluation, inside the early window (the rest as trained)
    shutil.copy(path / "metrics.csv", folder / "metrics.csv")
    _edit_cell(folder, 6, "val_loss/bbc", 2 * env.val_tol)
    val = records.check_record(folder, work_dir=path.parent)
    assert val.outcome == "mismatch" and val.first_diff[:2] == (6, "val_loss/bbc")
    assert val.first_diff.bound == env.bound(6, "val_loss/bbc") == env.early_tol
    # once this kind has reproduced the record, it is held to bit-identity like the record's own
    shutil.copy(path / "metrics.csv", folder / "metrics.csv")
    records.record_run(path, tmp_path)  # the equal re-training: this kind joins reproduced_on
    _edit_cell(folder, 4, "train_loss", 1e-6)
    res = records.check_record(folder, work_dir=path.parent)
    assert res.outcome == "mismatch"
    assert res.reason == "this machine kind reproduced the record before, bit-identity required"


def test_record_check_cli_counts_outcomes_and_fails_on_a_mismatch(finished_run, tmp_path, capsys):
    from gtalib.cli import main

    _, spec, path = finished_run
    folder = records.record_run(path, tmp_path)
    _edit_cell(folder, 5, "train_loss", 1e-3)
    assert main(["record", "check", spec.run_id, "--record-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-2].startswith(f"{spec.run_id}: MISMATCH (same machine kind, bit-identity "
                              f"required) at step 5, column train_loss")
    assert out[-1] == "recorded runs checked: 0 bit-identical, 0 within envelope, 1 mismatch"
    for action in (["list"], ["costs"], ["check", spec.run_id]):  # a folder that is not there
        assert main(["record", *action, "--record-dir", str(tmp_path / "nowhere")]) == 2
        assert capsys.readouterr().err == (f"gtalib record {action[0]}: error: --record-dir "
                                           f"{tmp_path / 'nowhere'}: no such folder\n")
    for bad in ("", "a/b"):  # not a run id: refused before the record folder is looked at
        assert main(["record", "check", bad, "--record-dir", str(tmp_path)]) == 2
        assert "each must be a run id as `gtalib record list` prints it" in \
            capsys.readouterr().err
    # --keep: the re-training stays in the given store, where record add can take it
    keep = tmp_path / "kept"
    shutil.copy(path / "metrics.csv", folder / "metrics.csv")
    assert main(["record", "check", spec.run_id, "--record-dir", str(tmp_path),
                 "--keep", str(keep), "--jobs", "1"]) == 0
    assert (keep / spec.run_id / "DONE").is_file()
    assert capsys.readouterr().out.splitlines()[-1] == (
        "recorded runs checked: 1 bit-identical, 0 within envelope, 0 mismatch")


def test_a_record_without_machine_kind_is_unknown_never_the_same(finished_run, tmp_path):
    _, _, path = finished_run
    folder = records.record_run(path, tmp_path)
    info = json.loads((folder / "record.json").read_text())
    info["machine_kind"] = None
    (folder / "record.json").write_text(json.dumps(info))
    card = json.loads((folder / "card.json").read_text())
    del card["machine_kind"]
    (folder / "card.json").write_text(json.dumps(card))
    assert records.record_machine_kind(folder) is None
    _edit_cell(folder, 2, "train_loss", 1e-6)
    res = records.check_record(folder, work_dir=path.parent)
    assert res.outcome == "within envelope" and res.reason == "machine kind of the record unknown"


def test_record_json_holds_the_training_machine_kind(finished_run, tmp_path):
    import torch

    _, _, path = finished_run
    card = runs.load_card(path)
    kind = card["machine_kind"]
    assert kind["threads"] == card["threads"] == 1  # tests run torch with one thread
    assert kind["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert kind["torch"] == torch.__version__ and kind["gpu"] is None
    assert set(kind["env"]) == set(machine.KERNEL_ENV_VARS)
    assert machine.same_kind(kind, machine.machine_kind(1))
    folder = records.record_run(path, tmp_path)
    assert records.load_record_info(folder)["machine_kind"] == kind
    # a run whose card has no kind is recorded with null, never with this machine's kind
    old = tmp_path / "old" / path.name
    shutil.copytree(path, old)
    del card["machine_kind"]
    (old / "card.json").write_text(json.dumps(card))
    folder = records.record_run(old, tmp_path / "rec")
    assert records.load_record_info(folder)["machine_kind"] is None


def test_compare_metrics_outcomes_and_bounds(finished_run):
    _, spec, path = finished_run
    df = runs.load_metrics(path)
    env = records.Envelope(early_steps=2, early_tol=1e-5, train_tol=0.1, val_tol=0.05)
    same = records.compare_metrics(spec.run_id, df, df.copy(), env)
    assert same.outcome == "bit-identical" and same.first_diff is None
    later = df.copy()
    later.loc[later["step"] == 5, "train_loss"] += 0.05  # after the early window: within 0.1
    res = records.compare_metrics(spec.run_id, df, later, env)
    assert res.outcome == "within envelope" and res.first_diff[:2] == (5, "train_loss")
    assert res.max_abs_diff["train_loss"] == pytest.approx(0.05, rel=1e-9)
    assert records.compare_metrics(spec.run_id, df, later).outcome == "mismatch"  # no envelope
    lr = df.copy()
    lr.loc[lr["step"] == 6, "lr"] *= 1 + 1e-12  # lr must match exactly, always
    res = records.compare_metrics(spec.run_id, df, lr, env)
    assert res.outcome == "mismatch" and res.first_diff[:2] == (6, "lr")
    assert res.first_diff.bound == 0
    gap = df.copy()
    gap.loc[gap["step"] == 3, "val_loss"] = float("nan")  # an evaluation missing
    res = records.compare_metrics(spec.run_id, df, gap, env)
    assert res.outcome == "mismatch" and res.first_diff[:2] == (3, "val_loss")
    short = records.compare_metrics(spec.run_id, df, df.iloc[:-1], env)
    assert short.outcome == "mismatch" and short.first_diff is None
    assert short.reason == f"rows differ: recorded {len(df)}, re-trained {len(df) - 1}"
    with pytest.raises(ValueError, match="envelope must be an Envelope"):
        records.compare_metrics(spec.run_id, df, df, 1e-3)


def test_envelope_bound_is_a_function_of_step_and_column():
    env = records.CROSS_MACHINE_ENVELOPE
    assert env.bound(1, "train_loss") == env.bound(env.early_steps, "train_loss") == env.early_tol
    assert env.bound(env.early_steps + 1, "train_loss") == env.train_tol
    assert env.bound(1, "val_loss") == env.bound(env.early_steps, "val_loss/bbc") == env.early_tol
    assert env.bound(env.early_steps + 1, "val_loss") == env.bound(10**6, "val_loss/bbc") \
        == env.val_tol
    assert env.bound(3, "step") == env.bound(3, "tokens") == env.bound(3, "lr") == 0.0
    with pytest.raises(ValueError, match="column must be one of step, tokens, lr"):
        env.bound(1, "grad_norm")
    with pytest.raises(ValueError, match="step must be a positive integer"):
        env.bound(0, "train_loss")
    with pytest.raises(ValueError, match="Envelope.val_tol"):
        records.Envelope(early_steps=10, early_tol=1e-5, train_tol=0.1, val_tol=float("nan"))
    with pytest.raises(ValueError, match="Envelope.early_steps"):
        records.Envelope(early_steps=-1, early_tol=1e-5, train_tol=0.1, val_tol=0.05)


# Real changes of a run: (name, model options, training overrides, seed). Each is re-trained
# and must fall outside the envelope within its early window, even across machine kinds.
_BASE_TRAIN = {"max_steps": 12, "eval_every": 6, "checkpoint_every": 6}
_CHANGES = {
    "init normal": ({"init": "normal"}, {}),
    "lr x2": ({}, {"lr": 2e-3}),
    "gate on": ({"gate": True}, {}),
    "data order (data_seed 1)": ({}, {"data_seed": 1}),
    "no latent scales": ({"latent_scale": False}, {}),
}


def _mla_spec(options=None, train=None):
    """A ``ci``-preset MLA run of 12 steps, with model ``options`` and training overrides."""
    from gtalib.model.presets import model_config
    from gtalib.training.config import train_config

    cfg = train_config("ci", **{**_BASE_TRAIN, **(train or {})})
    return runs.RunSpec(model_config("ci", "mla", **(options or {})), cfg,
                        runs.data_spec(cfg, "default", "bytes"), seed=0)


@pytest.fixture(scope="module")
def changed_runs(tmp_path_factory):
    """The base MLA run and each of :data:`_CHANGES`, trained once: name -> metrics."""
    store = tmp_path_factory.mktemp("changed")
    base = _mla_spec()
    assert base.model.init == "zero" and not base.model.gate and base.model.latent_scale
    assert base.train.lr == 1e-3 and base.train.data_seed == 0
    out = {"base": runs.load_metrics(ensure_run(base, store, accelerator="cpu"))}
    for name, (options, train) in _CHANGES.items():
        spec = _mla_spec(options, train)
        assert spec.run_id != base.run_id
        out[name] = runs.load_metrics(ensure_run(spec, store, accelerator="cpu"))
    return out


@pytest.mark.parametrize("change", list(_CHANGES))
def test_a_real_change_is_a_mismatch_in_the_early_window(changed_runs, change):
    import numpy as np

    env = records.CROSS_MACHINE_ENVELOPE
    base, changed = changed_runs["base"], changed_runs[change]
    res = records.compare_metrics("base", base, changed, env)
    assert res.outcome == "mismatch", res.message()
    assert res.first_diff.step <= env.early_steps, res.message()
    # independently of the lr column: the training loss itself leaves the early bound in the window
    early = (base["step"] <= env.early_steps).to_numpy()
    dloss = np.abs(base["train_loss"].to_numpy() - changed["train_loss"].to_numpy())[early]
    assert dloss.max() > env.early_tol


def test_an_emulated_other_cpu_kind_stays_within_the_envelope(finished_run, tmp_path):
    """Re-train a record in a process whose ATen kernels are the DEFAULT (non-vectorised) ones:
    another machine kind, with really different kernels."""
    import os
    import subprocess
    import sys

    import torch

    if torch.backends.cpu.get_cpu_capability() == "DEFAULT":
        pytest.skip("this CPU runs ATen's DEFAULT kernels already: no other kind to emulate")
    _, spec, path = finished_run
    records.record_run(path, tmp_path)
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    cmd = [sys.executable, "-m", "gtalib", "record", "check", spec.run_id, "--record-dir",
           str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    line = next(ln for ln in out.splitlines() if ln.startswith(f"{spec.run_id}: "))
    assert "MISMATCH" not in out
    assert line.startswith((f"{spec.run_id}: bit-identical", f"{spec.run_id}: within the "
                            f"cross-machine envelope")), line
    here = torch.backends.cpu.get_cpu_capability()
    assert "machine kind differs: " in line and f"cpu_capability: {here} -> DEFAULT" in line
    assert "env.ATEN_CPU_CAPABILITY: None -> default" in line
    summary = out.splitlines()[-1]
    assert summary.startswith("recorded runs checked: ") and summary.endswith(", 0 mismatch")


def test_book_reads_the_record_when_the_local_store_lacks_the_run(finished_run, tmp_path):
    from gtalib.book.analysis import collect

    ref, spec, path = finished_run
    rec_dir = tmp_path / "recorded"
    records.record_run(path, rec_dir)
    empty_store = tmp_path / "store"
    col = collect.collect_runs([ref], make_plan("ci", 1), empty_store, record_dir=rec_dir)
    st = col.status.iloc[0]
    assert st["state"] == "done" and st["source"].startswith("recorded ")
    assert not (empty_store / spec.run_id).exists()  # nothing trained
    assert col.runs["val_loss"].dropna().iloc[-1] == pytest.approx(
        runs.load_metrics(path)["val_loss"].dropna().iloc[-1], abs=0)
    # neither local nor recorded: missing
    col2 = collect.collect_runs([ref], make_plan("ci", 1), empty_store, record_dir=tmp_path / "none")
    assert col2.status.iloc[0]["state"] == "missing"


def test_committed_records_are_whole_and_named_by_their_spec():
    """Every bundle in the repository: folder name = spec hash, metrics complete, provenance. The
    hash is of plain data only (no module path enters it), so moving gtalib's modules keeps every
    run id."""
    folders = records.list_records()
    for folder in folders:
        spec = runs.load_spec(folder)
        assert folder.name == spec.run_id
        assert "gtalib" not in json.dumps(spec.hash_payload())
        records.load_record_metrics(folder)
        info = json.loads((folder / "record.json").read_text())
        assert info["run_id"] == spec.run_id and info["machine"]["cpu"]
        assert not (folder / "checkpoints").exists()


def test_a_committed_record_retrains_to_its_curve(record_check_report):
    """CI re-trains one recorded run of the repository (the cheapest) and checks it: bit-identical
    on the recording machine's kind, within the cross-machine envelope on any other (the
    committed records have no machine kind: unknown). The outcome is printed at the end of the
    pytest run (tests/conftest.py)."""
    folders = records.list_records()
    if not folders:
        pytest.fail("no recorded runs in the repository (book/recorded/)")
    cheapest = min(folders, key=lambda f: (runs.load_spec(f).train.max_steps
                                           * runs.load_spec(f).model.n_layer))
    res = records.check_record(cheapest)
    record_check_report(res.message())
    assert res.ok, res.message()


def _cross_cpu_benchmark():
    import sys

    sys.path.insert(0, str(records.REPO / "benchmarks"))
    import cross_cpu

    return cross_cpu


def test_the_envelope_is_the_one_the_cross_cpu_measurements_give():
    """CROSS_MACHINE_ENVELOPE is measured, not guessed: the committed re-trainings under other
    CPU kinds (benchmarks/cross_cpu/) give exactly its numbers by the documented rule."""
    xc = _cross_cpu_benchmark()
    measured = xc.load_kinds()
    assert measured["kind"].nunique() >= 2 and measured["run_id"].nunique() >= 30
    assert records.Envelope(**xc.derive_envelope(measured)) == records.CROSS_MACHINE_ENVELOPE


def test_every_measured_real_change_leaves_the_envelope_in_its_early_window():
    """Recorded pairs that differ in init, gate or seed, and the re-trained learning-rate, data-
    order and formula changes: each is outside the envelope by step ``early_steps``."""
    import pandas as pd

    xc = _cross_cpu_benchmark()
    env = records.CROSS_MACHINE_ENVELOPE
    changes = pd.concat([xc.recorded_changes(), pd.read_csv(xc.OUT / "changes.csv")])
    assert {"lr x1.1", "data order (data_seed 1)", "formula: latent scaling off",
            "init normal vs zero", "gate on vs off", "seed 1 vs 0"} <= set(changes["change"])
    for (name, rid), g in changes.groupby(["change", "run_id"]):
        early = g[g["step"] <= env.early_steps]
        assert (early["train_delta"].abs() > env.early_tol).any(), (name, rid)


def test_record_check_of_every_record_says_its_cost_first_and_sigterm_leaves_no_work_folder(
        finished_run, tmp_path, capsys, monkeypatch):
    """Without a run id, the first line is what it will re-train and the recorded core-hours
    (the cost table's total, in closed form); a SIGTERM while it trains ends it with status 143
    and deletes its temporary work store."""
    import os
    import signal
    import tempfile

    from gtalib.cli import main
    from gtalib.cli import record as record_cli
    from gtalib.training.record_costs import cost_table

    _, spec, path = finished_run
    record_dir = tmp_path / "rec"
    records.record_run(path, record_dir)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    seen = {}

    def killed(specs, work, *a, **k):
        seen["work"] = work
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not stop the command")

    monkeypatch.setattr(record_cli, "train_all", killed)
    assert main(["record", "check", "--record-dir", str(record_dir), "--jobs", "2"]) == \
        128 + signal.SIGTERM
    out, err = capsys.readouterr()
    assert err.strip().splitlines() == [
        "gtalib record check: stopped by SIGTERM; its temporary work store is deleted"]
    core_h = float(cost_table(record_dir)["core_s_total"].sum()) / 3600
    assert out.splitlines()[0] == (
        f"record check: re-training all 1 recorded run(s) of 1 configuration(s) in {record_dir}: "
        f"{core_h:,.1f} core-hours as recorded, ≈ {core_h / 2:,.1f} h on 2 one-thread worker(s) "
        "at the recorded pace (give run ids to check fewer)")
    assert seen["work"].startswith(str(tmp_path / "tmp")) and list((tmp_path / "tmp").iterdir()) == []
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_record_check_interrupted_is_one_line_and_leaves_no_work_folder(
        finished_run, tmp_path, capsys, monkeypatch):
    """Ctrl-C while it trains: one line on stderr, exit 130, no traceback, and its temporary
    work store deleted."""
    import tempfile

    from gtalib.cli import main
    from gtalib.cli import record as record_cli

    _, spec, path = finished_run
    record_dir = tmp_path / "rec"
    records.record_run(path, record_dir)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(record_cli, "train_all", interrupted)
    assert main(["record", "check", "--record-dir", str(record_dir)]) == 130
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "gtalib record check: interrupted; its temporary work store is deleted"]
    assert list((tmp_path / "tmp").iterdir()) == []
