"""The gate probes (gtalib.training.probes): first-token share against explicit attention probabilities
(closed form for uniform attention, naive recomputation for GQA and MLRA-2), the gate's σ(0) = 0.5,
the residual max against an independent block loop, no side effects on the model, and probe_run /
``gtalib probe`` on a real tiny run whose checkpoint was kept."""

from __future__ import annotations

import json
import math
import shutil

import pytest
import torch

from gtalib import cli

from gtalib.training import probes, runs
from gtalib.training.train import ensure_run
from gtalib.model.attention import REGISTRY, functional
from gtalib.book.design.run_specs import RunRef
from gtalib.book.design.plan import make_plan
from gtalib.data.shards import open_shard
from gtalib.model.gpt import GPT
from gtalib.model.presets import model_config

T = 16


def make(variant, **opts):
    torch.manual_seed(0)
    return GPT(model_config("ci", variant, init="normal", **opts))


def tokens(batch=3):
    return torch.randint(0, 256, (batch, T), generator=torch.Generator().manual_seed(1))


def attention_inputs(model, idx) -> list[torch.Tensor]:
    """Each layer's attention input (the normed block input ``(B, T, d_model)``) in one forward."""
    xs = []
    hooks = [blk.attn.register_forward_pre_hook(lambda m, args: xs.append(args[0])) for blk in model.blocks]
    with torch.no_grad():
        model(idx)
    for h in hooks:
        h.remove()
    return xs


def share_on_key0(scores: torch.Tensor) -> float:
    """Mean causal softmax probability on key 0 of ``scores (B, H, T, T)``, queries 1..T-1."""
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    p = scores.masked_fill(~causal, -math.inf).softmax(-1)
    return p[:, :, 1:, 0].mean().item()


def naive_dense_share(attn, x) -> float:
    B = x.shape[0]
    q = attn.rope(attn.query(x), 0).double()  # (B, T, H, D)
    k = attn.rope(attn.k_proj(x).view(B, T, attn.n_kv_head, attn.dim), 0).double()  # (B, T, Hkv, D)
    k = k[:, :, torch.arange(attn.n_head) // (attn.n_head // attn.n_kv_head)]  # (B, T, H, D)
    return share_on_key0(torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(attn.dim))


def naive_latent_share(attn, x) -> float:
    """Mean over the softmax branches; head h of branch b reads block ``block_of(b, h)``."""
    B, H = x.shape[0], attn.n_head
    q_n, q_r = attn.queries(x, 0)
    c, k_r = attn.latents(x, 0)  # (B, T, nb, w), (B, T, 1, d_r)
    W_uk, _ = attn.up_weights()  # (nb, H/groups, d_n, w)
    q = torch.cat([q_n, q_r], -1).double()  # (B, T, H, d_n + d_r)
    shares = []
    for b in range(attn.n_branches):
        k_n = torch.stack([c[:, :, attn.block_of(b, h)] @ W_uk[attn.block_of(b, h), h % attn.heads_per_group].T
                           for h in range(H)], dim=2)  # (B, T, H, d_n)
        k = torch.cat([k_n, k_r.expand(B, T, H, -1)], -1).double()  # (B, T, H, d_n + d_r)
        shares.append(share_on_key0(torch.einsum("bthd,bshd->bhts", q, k) * attn.scale))
    return sum(shares) / len(shares)


def test_uniform_attention_gives_the_closed_form_share():
    """W_Q = 0: every score is 0, so query i spreads 1/(i+1) over keys 0..i."""
    m = make("mha")
    with torch.no_grad():
        for blk in m.blocks:
            blk.attn.q_proj.weight.zero_()
    expected = sum(1 / (i + 1) for i in range(1, T)) / (T - 1)
    got = probes.measure(m, tokens())["first_token_share"]
    assert got == pytest.approx([expected] * m.cfg.n_layer, rel=1e-6)


@pytest.mark.parametrize("variant,naive,sharpen", [
    ("gqa", naive_dense_share, ("q_proj", "k_proj")),
    ("mlra-2", naive_latent_share, ("wq_b", "wkv_b")),
])
def test_share_equals_a_naive_recomputation(variant, naive, sharpen):
    """Ten times larger q/k weights make the attention far from uniform (the check is not the
    closed form); the probe (fp32) and the float64 recomputation agree to 1e-5 relative."""
    m = make(variant)
    with torch.no_grad():
        for blk in m.blocks:
            for name in sharpen:
                getattr(blk.attn, name).weight.mul_(10)
    idx = tokens()
    with torch.no_grad():
        ref = [naive(blk.attn, x) for blk, x in zip(m.blocks, attention_inputs(m, idx))]
    uniform = sum(1 / (i + 1) for i in range(1, T)) / (T - 1)
    assert max(abs(r - uniform) for r in ref) > 0.005, (ref, uniform)
    assert probes.measure(m, idx)["first_token_share"] == pytest.approx(ref, rel=1e-5)


@pytest.mark.parametrize("variant", sorted(REGISTRY))
def test_every_variant_is_probed(variant):
    """Every variant's training forward reaches the probed SDPA helper; values in range."""
    out = probes.measure(make(variant, gate=True), tokens(2))
    n = out["n_layer"]
    assert len(out["first_token_share"]) == len(out["gate_mean"]) == len(out["max_abs_residual"]) == n
    assert all(0 < s < 1 for s in out["first_token_share"] + out["gate_mean"])
    assert out["batch"] == {"windows": 2, "tokens_per_window": T}


def test_zero_gate_weights_give_a_gate_of_one_half_and_no_gate_gives_none():
    m = make("mha", gate=True)
    with torch.no_grad():
        for blk in m.blocks:
            blk.attn.g_proj.weight.zero_()
    assert probes.measure(m, tokens())["gate_mean"] == [0.5] * m.cfg.n_layer
    assert probes.measure(make("mha"), tokens())["gate_mean"] is None


def test_max_residual_equals_an_independent_block_loop():
    m = make("gta").eval()
    idx = tokens()
    with torch.no_grad():
        h, ref = m.wte(idx), []
        for blk in m.blocks:
            h = blk(h)  # (B, T, d_model)
            ref.append(h.abs().max().item())
    out = probes.measure(m, idx)
    assert out["max_abs_residual"] == ref
    assert out["max_abs_residual_overall"] == max(ref)


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_probe_leaves_the_model_as_it_was(training):
    m = make("mlra-4", gate=True).train(training)
    idx = tokens()
    before = m(idx)[0].detach()
    sdpa, impls = functional._sdpa, [blk.attn.impl for blk in m.blocks]
    probes.measure(m, idx)
    assert all(mod.training == training for mod in m.modules())
    assert functional._sdpa is sdpa and [blk.attn.impl for blk in m.blocks] == impls
    assert not any(mod._forward_hooks or mod._forward_pre_hooks for mod in m.modules())
    assert torch.equal(m(idx)[0], before)


# ------------------------------------------------------------------ a real run, its checkpoint kept

def ci_ref(gate: bool) -> RunRef:
    return RunRef("mha", "rec" if gate else "alt", (("gate", gate),), 0,
                          train=(("checkpoint_every", 3), ("eval_every", 3), ("max_steps", 6)))


@pytest.fixture(scope="module")
def kept_run(tmp_path_factory):
    """A real, tiny finished gated run (ci preset, 6 steps) that kept checkpoints/last.ckpt."""
    spec = make_plan("ci", 1).spec(ci_ref(True))
    path = ensure_run(spec, tmp_path_factory.mktemp("store"), accelerator="cpu", keep_checkpoint=True)
    return spec, path


def test_probe_run_writes_finite_probes_of_every_layer(kept_run):
    spec, path = kept_run
    out = probes.probe_run(path)
    assert json.loads((path / "probes.json").read_text()) == out
    assert out["run_id"] == spec.run_id and out["gate"] is True and out["variant"] == "mha"
    assert out["n_layer"] == spec.model.n_layer
    values = out["gate_mean"] + out["first_token_share"] + out["max_abs_residual"]
    assert len(values) == 3 * spec.model.n_layer and all(math.isfinite(v) for v in values)
    assert out["batch"] == {"windows": 8, "tokens_per_window": spec.train.seq_len}


def test_fixed_batch_takes_the_sources_in_turn_and_ignores_the_gate(kept_run):
    spec, _ = kept_run
    batch = probes.fixed_batch(spec)
    assert batch.dtype == torch.int64 and batch.shape == (8, spec.train.seq_len)
    assert torch.equal(batch, probes.fixed_batch(make_plan("ci", 1).spec(ci_ref(False))))
    # validation window 0 of a source starts at its first token: rows 0..5 are the 6 sources
    dm = runs.default_datamodule(spec)
    vals = [open_shard(dm.path / s["val"]["file"]) for s in dm.manifest["sources"]]
    assert len(vals) == 6
    for row, val in zip(batch, vals):
        assert row.tolist() == val[:spec.train.seq_len].tolist()
    with pytest.raises(ValueError, match="n_windows"):
        probes.fixed_batch(spec, n_windows=10_000)


def test_cli_prints_a_row_per_run_and_says_why_a_run_is_not_probed(kept_run, tmp_path, capsys):
    spec, path = kept_run
    assert cli.main(["probe", str(path)]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split()[:4] == ["run_id", "gate_mean", "first_token", "max|h|"]
    assert row.split()[0] == spec.run_id and spec.describe() in row
    bare = tmp_path / spec.run_id
    shutil.copytree(path, bare, ignore=shutil.ignore_patterns("checkpoints"))
    assert cli.main(["probe", str(bare)]) == 2
    out = capsys.readouterr()
    assert out.out == ""  # no table header above errors alone
    assert out.err.startswith("gtalib probe: error: not probed: ")
    assert "trained with its checkpoint kept" in out.err
    (bare / "DONE").unlink()
    assert cli.main(["probe", str(bare)]) == 2
    assert "not finished" in capsys.readouterr().err
    assert cli.main(["probe", str(tmp_path / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err
