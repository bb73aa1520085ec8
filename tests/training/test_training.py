"""Training and run store: schedule, decay groups, determinism, resume, skip, atomicity, NaN stop,
paired data order, gradient accumulation. Every run uses the ``ci`` presets on the synthetic
Markov corpus of ``synthetic.py`` (a few seconds per run, one thread)."""

import math
import time

import numpy as np
import pandas as pd
import pytest
import torch
from lightning.pytorch.callbacks import Callback

from gtalib.model.presets import model_config

from gtalib.training.config import train_config
from gtalib.training.runs import RunIncompleteError, RunSpec, is_done, load_metrics, load_spec
from gtalib.training.train import ensure_run, ensure_runs
from gtalib.training.loop import LitGPT, StepBatches, lr_factor, param_groups
from .synthetic import SyntheticData

DATA = {"name": "synthetic-markov", "version": 1}


def spec(variant="mlra-4", seed=0, **train):
    t = train_config("ci", **train)
    return RunSpec(model_config("ci", variant), t, DATA, seed)


def data_for(s: RunSpec):
    return SyntheticData(s.train.seq_len, s.train.batch_size, s.train.data_seed, s.train.eval_windows)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """The uninterrupted reference run (mlra-4, ci, seed 0)."""
    s = spec()
    path = ensure_run(s, tmp_path_factory.mktemp("base"), datamodule=data_for(s))
    return s, path, load_metrics(path)


# --------------------------------------------------------------------------------- schedule


def test_lr_factor_closed_form():
    cfg = train_config("ci", max_steps=102, warmup_steps=2, min_lr_ratio=0.1)
    assert lr_factor(0, cfg) == 0.5 and lr_factor(1, cfg) == 1.0  # linear warmup, (s+1)/warmup
    assert lr_factor(2, cfg) == pytest.approx(1.0)  # cosine starts at the peak
    assert lr_factor(52, cfg) == pytest.approx(0.55)  # half-way: 0.1 + 0.9 * (1 + cos(pi/2)) / 2
    assert lr_factor(102, cfg) == pytest.approx(0.1)  # ends at 0.1 x peak (paper: 1.6e-4 -> 1.6e-5)
    paper = train_config("paper")
    assert paper.lr * lr_factor(paper.max_steps, paper) == pytest.approx(1.6e-5)
    assert paper.batch_size * paper.seq_len == 983_040


class _LRProbe(Callback):
    def __init__(self):
        self.lrs = []

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        self.lrs.append(optimizer.param_groups[0]["lr"])


def test_applied_learning_rate_follows_schedule(tmp_path):
    """The LR AdamW actually used at update s (1-based) is lr * lr_factor(s - 1)."""
    s = spec(max_steps=8, warmup_steps=2, eval_every=8, checkpoint_every=8)
    probe = _LRProbe()
    path = ensure_run(s, tmp_path, datamodule=data_for(s), callbacks=[probe])
    want = [1e-3 * f for f in (0.5, 1.0)] + [
        1e-3 * (0.1 + 0.45 * (1 + math.cos(math.pi * k / 6))) for k in range(6)]
    np.testing.assert_allclose(probe.lrs, want, rtol=1e-12)
    np.testing.assert_allclose(load_metrics(path)["lr"], want, rtol=1e-12)


def test_weight_decay_only_on_matrices():
    """One AdamW step with all-zero gradients: Adam's update is 0, so decayed tensors shrink by
    exactly (1 - lr * wd) and RMSNorm gains stay 1."""
    m = LitGPT(model_config("ci", "mla"), train_config("ci", lr=0.5, weight_decay=0.1))
    groups = param_groups(m.model, 0.1)
    assert sum(p.numel() for g in groups for p in g["params"]) == m.model.num_params()
    assert all(p.ndim == 1 for p in groups[1]["params"]) and groups[1]["params"]
    before = {n: p.detach().clone() for n, p in m.model.named_parameters()}
    opt = m.configure_optimizers()["optimizer"]
    for p in m.model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    for n, p in m.model.named_parameters():
        # the first update runs at lr * lr_factor(0) = 0.5 * 1/2 (warmup of 2 steps)
        factor = 1 - 0.25 * 0.1 if p.ndim >= 2 else 1.0
        torch.testing.assert_close(p.detach(), before[n] * factor, rtol=1e-6, atol=0, msg=n)
    assert "wte.weight" in before  # the tied embedding is a decayed matrix


# --------------------------------------------------------------------------------- data order


def test_step_batches_split_global_batches_over_devices_and_micro_batches():
    """Optimizer step s trains on global batch s whatever the device count, micro-batch size or
    resume point: the concatenation over ranks and micro-batches gives back ``train_batch(s)``."""
    def train_batch(i):  # rows tagged with (step, row)
        x = torch.arange(8).repeat_interleave(3).view(8, 3) + 100 * i
        return x, x + 1

    full = [x for x, _ in StepBatches(train_batch, 8, start_step=0, max_steps=4)]
    assert [int(x[0, 0]) // 100 for x in full] == [0, 1, 2, 3]
    split = [list(StepBatches(train_batch, 8, 0, 4, rank=r, world_size=2, accumulate=2)) for r in (0, 1)]
    for step in range(4):
        parts = [split[r][2 * step + j][0] for r in (0, 1) for j in (0, 1)]
        assert all(p.shape == (2, 3) for p in parts)
        assert torch.equal(torch.cat(parts), full[step])
    assert all(torch.equal(a[0], b) for a, b in zip(StepBatches(train_batch, 8, 2, 4), full[2:]))
    with pytest.raises(ValueError, match="divisible"):
        StepBatches(train_batch, 6, 0, 2, world_size=4)


class _BatchRecorder(Callback):
    def __init__(self):
        self.batches = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.batches.append(batch[0].clone())


def test_paired_runs_share_batches_and_seed_changes_init(tmp_path):
    """Runs that differ in model seed, variant and options see identical batches in identical
    order; the model seed changes the initialisation (hence the losses)."""
    t = train_config("ci", max_steps=5)
    specs = [RunSpec(model_config("ci", "mha"), t, DATA, 0),
             RunSpec(model_config("ci", "mha"), t, DATA, 1),
             RunSpec(model_config("ci", "mlra-4", init="normal", gate=True), t, DATA, 1)]
    recs, losses = [], []
    for s in specs:
        recs.append(_BatchRecorder())
        path = ensure_run(s, tmp_path, datamodule=data_for(s), callbacks=[recs[-1]])
        losses.append(load_metrics(path)["train_loss"])
    assert len(recs[0].batches) == 5
    for r in recs[1:]:
        assert all(torch.equal(x, y) for x, y in zip(recs[0].batches, r.batches))
    assert not np.allclose(losses[0], losses[1], rtol=0, atol=1e-7)
    # a different data seed does change the batches
    other = RunSpec(specs[0].model, t.replace(data_seed=1), DATA, 0)
    rec = _BatchRecorder()
    ensure_run(other, tmp_path, datamodule=data_for(other), callbacks=[rec])
    assert not torch.equal(rec.batches[0], recs[0].batches[0])


# --------------------------------------------------------------------------------- the store


def test_run_id_covers_the_result_and_nothing_else():
    s = spec()
    assert s.run_id == spec().run_id and len(s.run_id) == 16
    assert spec(seed=1).run_id != s.run_id
    assert spec(data_seed=1).run_id != s.run_id
    assert spec(lr=2e-3).run_id != s.run_id
    assert RunSpec(s.model, s.train, {**DATA, "version": 2}, 0).run_id != s.run_id
    assert RunSpec(s.model.replace(gate=True), s.train, DATA, 0).run_id != s.run_id
    # checkpoint interval, loader workers and the attention implementation do not change results
    assert spec(checkpoint_every=5).run_id == s.run_id
    assert RunSpec(s.model.replace(attn_impl="torch"), s.train, DATA, 0).run_id == s.run_id
    with pytest.raises(ValueError, match="seed"):
        RunSpec(s.model, s.train, DATA, -1)


def test_determinism_and_outputs(baseline, tmp_path):
    s, path, df = baseline
    again = load_metrics(ensure_run(s, tmp_path, datamodule=data_for(s)))
    pd.testing.assert_frame_equal(df, again)  # bit-identical loss curve
    assert list(df.columns[:4]) == ["step", "tokens", "train_loss", "val_loss"]
    assert {"val_loss/a", "val_loss/b"} <= set(df.columns)
    assert df["step"].tolist() == list(range(1, 21))
    assert (df["tokens"] == df["step"] * 4 * 64).all()
    assert df["val_loss"].notna().tolist() == [st % 10 == 0 for st in range(1, 21)]
    # overall validation = window-weighted mean of the (equal-sized) sources
    ev = df.dropna(subset=["val_loss"])
    np.testing.assert_allclose(ev["val_loss"], (ev["val_loss/a"] + ev["val_loss/b"]) / 2, rtol=1e-12)
    # Step-1 loss in closed form: zero-init blocks are the identity, so logits are h . E_j with
    # h = RMSNorm(e_tok) (norm sqrt(d)) and E_j ~ N(0, s^2): logit variance d s^2 = 0.0512 for
    # j != tok, and d s = 2.56 for the current token itself; the target's logit is ~0, so
    # loss ~ ln(255 exp(d s^2 / 2) + exp(d s)) = 5.615 (vs ln 256 = 5.545)
    d, sd = 128, 0.02
    want = math.log(255 * math.exp(d * sd**2 / 2) + math.exp(d * sd))
    assert abs(df["train_loss"].iloc[0] - want) < 0.03
    # and the model learns the chain
    assert df["train_loss"].iloc[-1] < df["train_loss"].iloc[0] - 0.5
    assert load_spec(path) == s


def test_skip_completed_run(baseline):
    s, path, _ = baseline

    class Exploding:
        def setup(self, stage=None):
            raise AssertionError("a finished run must not touch its data")

    t0 = time.perf_counter()
    outcome = {}
    assert ensure_run(s, path.parent, datamodule=Exploding(), outcome=outcome) == path
    assert time.perf_counter() - t0 < 0.5
    assert outcome == {"trained_by": "already done"}
    lines = []
    assert ensure_runs([s, s], path.parent, progress=lines.append, datamodule=Exploding()) == [path, path]
    assert lines == [f"2 runs, 0 to train, in {path.parent}"]
    assert not (path / "checkpoints").exists()  # deleted once done (keep_checkpoint=False)


def test_ensure_runs_trains_each_new_spec_once_with_progress(tmp_path):
    specs = [spec(max_steps=3), spec(max_steps=3, seed=1), spec(max_steps=3)]
    lines = []
    paths = ensure_runs(specs, tmp_path, progress=lines.append, datamodule=data_for(specs[0]),
                        keep_checkpoint=True)
    assert paths == [tmp_path / s.run_id for s in specs] and all(is_done(p) for p in paths)
    assert (paths[0] / "checkpoints" / "last.ckpt").exists()
    assert lines[0] == f"3 runs, 2 to train, in {tmp_path}" and len(lines) == 3
    assert lines[1].startswith(f"[1/2] {specs[0].run_id} mlra-4 n_head=4 init=zero seed=0 steps=3: ")
    assert "1 left, ETA" in lines[1] and "0 left, ETA 0.0 min" in lines[2]


class Interrupted(RuntimeError):
    pass


class _Interrupt(Callback):
    def __init__(self, at_step):
        self.at_step = at_step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.at_step:
            raise Interrupted(f"test interrupt at step {self.at_step}")


def test_kill_and_resume_equals_uninterrupted(baseline, tmp_path):
    s, _, ref = baseline
    with pytest.raises(Interrupted, match="test interrupt"):
        ensure_run(s, tmp_path, datamodule=data_for(s), callbacks=[_Interrupt(13)])
    path = tmp_path / s.run_id
    assert not is_done(path) and not (path / "metrics.csv").exists()
    with pytest.raises(RunIncompleteError, match="not finished"):
        load_metrics(path)
    ck = torch.load(path / "checkpoints" / "last.ckpt", weights_only=True)  # plain data only
    assert ck["global_step"] == 10 and len(ck["gtalib_history"]) == 10
    done = ensure_run(s, tmp_path, datamodule=data_for(s))
    pd.testing.assert_frame_equal(load_metrics(done), ref)
    import json

    assert json.loads((done / "card.json").read_text())["resumed"] is True


def test_unreadable_checkpoint_restarts_the_run(baseline, tmp_path):
    s, _, ref = baseline
    ckpt = tmp_path / s.run_id / "checkpoints" / "last.ckpt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"truncated")
    with pytest.warns(UserWarning, match="unreadable checkpoint"):
        done = ensure_run(s, tmp_path, datamodule=data_for(s), keep_checkpoint=True)
    pd.testing.assert_frame_equal(load_metrics(done), ref)
    assert (ckpt.parent / "last.ckpt.corrupt").read_bytes() == b"truncated"


def test_nan_loss_stops_with_step_and_run(tmp_path):
    s = spec(max_steps=8)

    class Poison(Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if trainer.global_step == 4:  # the 5th update sees NaN weights
                with torch.no_grad():
                    pl_module.model.wte.weight.fill_(float("nan"))

    with pytest.raises(FloatingPointError, match=rf"run {s.run_id}: non-finite .* at step 5"):
        ensure_run(s, tmp_path, datamodule=data_for(s), callbacks=[Poison()])
    assert not is_done(tmp_path / s.run_id)


def test_gradient_accumulation_equals_full_batch(baseline, tmp_path):
    s, _, ref = baseline
    micro = RunSpec(s.model, s.train.replace(micro_batch_size=2), DATA, 0)
    df = load_metrics(ensure_run(micro, tmp_path, datamodule=data_for(micro)))
    np.testing.assert_allclose(df["train_loss"], ref["train_loss"], rtol=0, atol=2e-5)
    np.testing.assert_allclose(df["val_loss"], ref["val_loss"], rtol=0, atol=2e-5)


# --------------------------------------------------------------------------- corrupt run folders


def _copy_run(path, tmp_path):
    import shutil

    dst = tmp_path / path.name
    shutil.copytree(path, dst)
    return dst


@pytest.mark.parametrize("cut, needle", [
    (lambda df: df[df["step"] <= 10], "truncated: last step 10, the spec's max_steps is 20"),
    (lambda df: df[df["step"] != 5], "missing [5]"),
    (lambda df: df.assign(val_loss=df["val_loss"].where(df["step"] < df["step"].max())),
     "column 'val_loss', row 20 (step 20): empty val_loss on an eval step"),
])
def test_done_run_with_bad_metrics_is_refused(baseline, tmp_path, cut, needle):
    from gtalib.training.runs import RunCorruptError

    s, path, df = baseline
    assert s.train.max_steps == 20 and df["val_loss"].notna().iloc[-1]
    run = _copy_run(path, tmp_path)
    cut(df).to_csv(run / "metrics.csv", index=False)
    with pytest.raises(RunCorruptError, match=re_escape(needle)) as e:
        load_metrics(run)
    assert str(run) in str(e.value) and isinstance(e.value, RunIncompleteError)
    # ensure_run does not pass it off as finished either
    with pytest.raises(RunCorruptError):
        ensure_run(s, tmp_path, datamodule=data_for(s))


@pytest.mark.parametrize("column, row, text, needle", [
    ("train_loss", 7, "5.6x", "'5.6x' is not a number"),  # the case
    ("train_loss", 3, "", "empty cell (a number is required)"),
    ("train_loss", 12, "nan", "'nan' is not a finite number >= 0"),
    ("val_loss", 10, "inf", "'inf' is not a finite number >= 0"),
    ("val_loss/a", 20, "", "empty cell on an eval step"),
    ("val_loss", 10, "", "empty val_loss on an eval step"),
    ("lr", 5, "-0.001", "'-0.001' is not a finite number >= 0"),
    ("step", 4, "4.0", "'4.0' is not an integer"),
    ("tokens", 9, "", "empty cell (an integer is required)"),
])
def test_done_run_with_a_bad_cell_names_run_file_column_and_row(baseline, tmp_path, column, row,
                                                                 text, needle):
    from gtalib.training.runs import RunCorruptError

    s, path, _df = baseline
    run = _copy_run(path, tmp_path)
    cells = pd.read_csv(run / "metrics.csv", dtype=str, keep_default_na=False)
    cells.loc[row - 1, column] = text  # data row ``row`` (1-based, header not counted)
    cells.to_csv(run / "metrics.csv", index=False)
    step = "" if column == "step" else f" (step {row})"
    want = f"run {run.name}: {run / 'metrics.csv'}, column {column!r}, row {row}{step}: {needle}"
    with pytest.raises(RunCorruptError, match=re_escape(want)) as e:
        load_metrics(run)
    assert (e.value.run_id, e.value.file, e.value.column, e.value.row) == (
        run.name, run / "metrics.csv", column, row)
    # an untouched copy loads (the edit above is what is refused)
    pd.read_csv(path / "metrics.csv", dtype=str, keep_default_na=False).to_csv(run / "metrics.csv", index=False)
    pd.testing.assert_frame_equal(load_metrics(run), _df)


def re_escape(text):
    import re

    return re.escape(text)


@pytest.mark.parametrize("name", ["spec.json", "card.json"])
def test_corrupt_json_names_the_file(baseline, tmp_path, name):
    from gtalib.training.runs import RunCorruptError, load_card

    _s, path, _df = baseline
    run = _copy_run(path, tmp_path)
    (run / name).write_text('{"model": {')
    with pytest.raises(RunCorruptError, match=re_escape(str(run / name))):
        (load_spec if name == "spec.json" else load_card)(run)
    if name == "spec.json":
        with pytest.raises(RunCorruptError, match="spec.json"):
            load_metrics(run)


class _FailAtStart(Callback):
    def on_train_start(self, trainer, pl_module):
        raise RuntimeError("boom before the first checkpoint")


def test_failed_start_leaves_no_run_folder(tmp_path):
    s = spec(max_steps=4)
    with pytest.raises(RuntimeError, match="boom"):
        ensure_run(s, tmp_path, datamodule=data_for(s), callbacks=[_FailAtStart()])
    assert not (tmp_path / s.run_id).exists()
    # a config that fails to build never creates the folder
    with pytest.raises(ValueError):
        ensure_run(s, tmp_path, datamodule=None, data_dir=tmp_path)  # s.data has no corpus
    assert not (tmp_path / s.run_id).exists()


# ------------------------------------------------------------------ no code from a checkpoint


class _Payload:
    """Unpickling this object runs code that writes ``marker`` (what a crafted checkpoint does)."""

    def __init__(self, marker, kind):
        self.marker, self.kind = str(marker), kind

    def __reduce__(self):
        import os
        import pathlib

        if self.kind == "exec":
            return exec, (f"open({self.marker!r}, 'w').write('ran')",)
        if self.kind == "system":
            return os.system, (f"touch {self.marker}",)
        return pathlib.Path.touch, (pathlib.Path(self.marker),)


def _crafted_checkpoint(file, marker, kind, where):
    """A torch.save'd checkpoint-shaped dict with a payload at a top-level key, inside the metrics
    history, or inside the state dict."""
    ck = {"global_step": 10, "state_dict": {"w": torch.zeros(2)}, "gtalib_history": [{"step": 1}]}
    payload = _Payload(marker, kind)
    if where == "top":
        ck["extra"] = payload
    elif where == "history":
        ck["gtalib_history"].append(payload)
    else:
        ck["state_dict"]["w"] = payload
    file.parent.mkdir(parents=True, exist_ok=True)
    torch.save(ck, file)


CRAFTED = [("exec", "top"), ("system", "history"), ("touch", "state_dict")]


@pytest.mark.parametrize("kind, where", CRAFTED)
def test_resume_refuses_a_checkpoint_with_code(tmp_path, kind, where):
    from gtalib.training.runs import RunCorruptError

    s, marker = spec(max_steps=4), tmp_path / "marker"
    ckpt = tmp_path / "store" / s.run_id / "checkpoints" / "last.ckpt"
    _crafted_checkpoint(ckpt, marker, kind, where)
    with pytest.raises(RunCorruptError, match=r"weights-only loading refused it and nothing in it was run"):
        ensure_run(s, tmp_path / "store", datamodule=data_for(s))
    assert not marker.exists()
    assert ckpt.exists() and not is_done(ckpt.parent.parent)  # left for inspection, nothing trained


@pytest.mark.parametrize("kind, where", CRAFTED)
def test_lightning_resume_is_weights_only(tmp_path, kind, where):
    """Lightning's own restore (``fit(ckpt_path=...)``) refuses it too, before any of it runs."""
    import pickle

    from gtalib.training.loop import fit

    s, marker, ckpt = spec(max_steps=4), tmp_path / "marker", tmp_path / "crafted.ckpt"
    _crafted_checkpoint(ckpt, marker, kind, where)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        fit(LitGPT(s.model, s.train), data_for(s), tmp_path / "run", ckpt_path=ckpt)
    assert not marker.exists()


def test_no_weights_only_message_when_saving(tmp_path, caplog):
    """Lightning logs "`weights_only` was not set" when a checkpoint is saved without saying
    which kind; ours are full checkpoints, said explicitly."""
    import logging

    s = spec(max_steps=2)
    caplog.set_level(logging.INFO)
    ensure_run(s, tmp_path, datamodule=data_for(s), progress=True, keep_checkpoint=True)
    assert "GPU available" in caplog.text  # Lightning's INFO lines are seen (else this could not fail)
    assert "weights_only" not in caplog.text
    torch.load(tmp_path / s.run_id / "checkpoints" / "last.ckpt", weights_only=True)


def test_runs_command_lists_and_removes_corrupt_and_incomplete_runs(baseline, tmp_path, capsys):
    """`gtalib runs` names the bad runs (exit 1); --remove deletes them (and nothing that is not
    a run folder) and the next ensure_run retrains the corrupt one to the same metrics."""

    from gtalib.cli import main

    s, path, ref = baseline

    def store_with(name, damage):
        """A store holding the real run (its own id), damaged by ``damage(folder)``."""
        folder = _copy_run(path, tmp_path / name)
        damage(folder)
        return tmp_path / name, folder

    def bad_cell(folder, row=6, value="5.6x"):
        cells = pd.read_csv(folder / "metrics.csv", dtype=str, keep_default_na=False)
        cells.loc[row, "train_loss"] = value
        cells.to_csv(folder / "metrics.csv", index=False)

    cases = {
        "cell": (bad_cell, "corrupt: run {id}: {folder}/metrics.csv, column 'train_loss', row 7 "
                           "(step 7): '5.6x' is not a number"),
        "card": (lambda f: (f / "card.json").write_text("{"), "card.json is not valid JSON"),
        "empty": (lambda f: bad_cell(f, 2, ""), "row 3 (step 3): empty cell"),
        "stopped": (lambda f: (f / "DONE").unlink(), "incomplete: no DONE"),
        "edited": (lambda f: (f / "spec.json").write_text(
            (f / "spec.json").read_text().replace('"seed": 0', '"seed": 7')),
                   "spec.json describes run"),
    }
    for name, (damage, needle) in cases.items():
        store, folder = store_with(name, damage)
        (store / "my_notes").mkdir()  # not a run: never listed, never removed
        assert main(["runs", "--run-dir", str(store)]) == 1, name
        out = capsys.readouterr().out
        assert needle.format(id=folder.name, folder=folder) in out, (name, out)
        assert out.splitlines()[-1].startswith(f"1 run in {store}: 0 done"), name
        assert main(["runs", "--run-dir", str(store), "--remove"]) == 0
        assert capsys.readouterr().out.splitlines()[-1].endswith("; removed 1")
        assert sorted(p.name for p in store.iterdir()) == ["my_notes"], name

    good, _ = store_with("good", lambda f: None)
    assert main(["runs", "--run-dir", str(good)]) == 0
    assert capsys.readouterr().out.strip() == f"1 run in {good}: 1 done, 0 incomplete, 0 corrupt"
    store = tmp_path / "cell"  # emptied above: the next ensure_run retrains to the same metrics
    pd.testing.assert_frame_equal(load_metrics(ensure_run(s, store, datamodule=data_for(s))), ref)

    assert main(["runs", "--run-dir", str(tmp_path / "nowhere")]) == 2
    assert "--run-dir" in capsys.readouterr().err
