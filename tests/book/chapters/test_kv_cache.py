"""The parameter and KV tables against docs/variants.md's numbers and closed forms, and the CLI."""

import argparse
import io

import pandas as pd
import pytest
import torch

from gtalib.book.chapters.kv_cache import (
    KV_COLUMNS,
    PARAMS_COLUMNS,
    kv_table,
    params_table,
)
from gtalib.book.design.figures import ablation
from gtalib.model.config import VARIANTS

GATE_RUNS = ablation("gate").variants
DOUBLE_HEAD_RUNS = ablation("double_heads").variants
from gtalib.cli.tables import add_cli

torch.set_num_threads(1)

# docs/variants.md, "Parameter matching and paper sizes".
PAPER = {  # variant: (total parameters, attention params / layer, KV elements / token / layer)
    "mha": (2_872_593_408, 37_748_736, 6144),
    "mqa": (2_872_003_584, 19_660_800, 256),
    "gqa": (2_872_593_408, 23_592_960, 1536),
    "gta": (2_872_003_584, 21_430_272, 832),
    "mfa": (2_873_232_384, 39_323_648, 512),
    "tpa": (2_873_183_232, 14_106_624, 608),
    "mla": (2_872_052_736, 26_150_912, 576),
    "gla-2": (2_872_630_272, 20_645_376, 576),
    "gla-4": (2_873_220_096, 19_858_944, 576),
    "mlra-2": (2_872_630_272, 20_645_376, 576),
    "mlra-4": (2_873_220_096, 22_218_240, 576),
}
d, L, V, dh = 3072, 24, 50304, 128


def paper_total(attn_per_layer: int, F: int) -> int:
    """Tied embedding + final norm + L · (attention + SwiGLU 3·d·F + two block norms)."""
    return V * d + d + L * (attn_per_layer + 3 * d * F + 2 * d)


def double_heads_attn(variant: str) -> int:
    """Attention parameters at H = 48 (docs/variants.md "Double heads"), written out by hand."""
    H, dv = 48, dh
    if variant == "gqa":  # 6 KV heads kept
        return d * H * dh + 2 * d * 6 * dh + H * dv * d
    d_n, d_r, d_c = 128, 64, 512
    d_q = 1536 if variant == "mla" else 1024
    heads_per_block = H if variant == "mla" else H // 2  # GLA-2: 2 blocks of 256, 24 heads each
    up = d_c * heads_per_block * (d_n + dv)  # = Σ_blocks width · heads · (d_n + d_v)
    return d * d_q + d_q + d_q * H * (d_n + d_r) + d * (d_c + d_r) + d_c + up + H * dv * d


@pytest.fixture(scope="module")
def paper_table():
    return params_table("paper").set_index("variant")


def test_params_columns_and_rows(paper_table):
    df = paper_table.reset_index()
    assert list(df.columns) == PARAMS_COLUMNS
    assert list(df.variant) == (list(VARIANTS) + [f"{v}+gate" for v in GATE_RUNS]
                                + [f"{v}+2xheads" for v in DOUBLE_HEAD_RUNS])


@pytest.mark.parametrize("variant", VARIANTS)
def test_paper_rows(paper_table, variant):
    row = paper_table.loc[variant]
    assert (row.total_params, row.attn_params_per_layer, row.kv_elems_per_token_layer) == PAPER[variant]


def test_paper_mha_closed_form():
    # the table's MHA row is the plain arithmetic of docs/variants.md's sizes with F = 8192
    assert paper_total(4 * d * d, 8192) == PAPER["mha"][0]


@pytest.mark.parametrize("variant", GATE_RUNS)
def test_gate_rows(paper_table, variant):
    """The gate adds W_g (d × H·d_v = 3072²) per layer and F shrinks by exactly 1024
    (3·3072·1024 = 3072²), so the total is unchanged and the cache too."""
    row, base = paper_table.loc[f"{variant}+gate"], paper_table.loc[variant]
    assert row.attn_params_per_layer == base.attn_params_per_layer + d * 24 * dh
    assert row.total_params == base.total_params
    assert row.kv_elems_per_token_layer == base.kv_elems_per_token_layer


@pytest.mark.parametrize("variant,F", [("gqa", 7680), ("mla", 7320), ("gla-2", 8344)])
def test_double_heads_rows(paper_table, variant, F):
    """H = 48, F re-matched to the paper's widths (docs/variants.md: 7680 / 7320 / 8344); cache
    unchanged."""
    row = paper_table.loc[f"{variant}+2xheads"]
    assert row.attn_params_per_layer == double_heads_attn(variant)
    assert row.total_params == paper_total(double_heads_attn(variant), F)
    assert row.kv_elems_per_token_layer == PAPER[variant][2]


def test_small_preset_matched(paper_table):
    """Every row of a small preset is within 0.1 % of its MHA row (parameter matching)."""
    df = params_table("ci").set_index("variant")
    assert (abs(df.total_params / df.loc["mha", "total_params"] - 1) < 1e-3).all()


def test_kv_table():
    df = kv_table()
    assert list(df.columns) == KV_COLUMNS
    assert len(df) == 4 * len(VARIANTS)
    got = {(r.variant, r.tp): r.kv_elems_per_device for r in df.itertuples()}
    # docs/variants.md Table-1 values in units of d_h = 128 (MLRA-2 beyond TP 2: documented choice)
    spec = {"mha": (128, 64, 32, 16), "gqa": (16, 8, 4, 2), "mqa": (2, 2, 2, 2),
            "mla": (4.5,) * 4, "gla-2": (4.5, 2.5, 2.5, 2.5), "gla-4": (4.5, 2.5, 1.5, 1.5),
            "mlra-4": (4.5, 2.5, 1.5, 1.5), "mlra-2": (4.5, 2.5, 1.5, 1.5)}
    for v, units in spec.items():
        for tp, u in zip((1, 2, 4, 8), units):
            assert got[(v, tp)] == u * dh, (v, tp)
    withu = kv_table(with_units=True)
    assert (withu.kv_dh_units * dh == withu.kv_elems_per_device).all()


def _cli(argv, capsys):
    parser = argparse.ArgumentParser()
    add_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    assert args.func(args) == 0
    return capsys.readouterr().out


def test_cli_csv(capsys, paper_table):
    out = _cli(["tables", "params", "--preset", "paper", "--csv"], capsys)
    assert out.splitlines()[0] == ",".join(PARAMS_COLUMNS)
    pd.testing.assert_frame_equal(pd.read_csv(io.StringIO(out)), paper_table.reset_index())
    out = _cli(["tables", "kv", "--csv"], capsys)
    assert out.splitlines()[0] == ",".join(KV_COLUMNS)
    pd.testing.assert_frame_equal(pd.read_csv(io.StringIO(out)), kv_table())


def test_cli_rejects_unknown_preset(capsys):
    with pytest.raises(SystemExit):
        _cli(["tables", "params", "--preset", "huge"], capsys)


def test_kv_facts_state_the_table1_setting_and_the_paper_width():
    """The captions' sizes, from the configs: Table 1's 64 query heads of d_h 128, RoPE
    width 64, GQA/GTA with 8 KV heads (the paper's setting); the paper models' d_model 3072."""
    from gtalib.book.chapters.kv_cache import kv_facts

    assert kv_facts() == {"t1_n_head": "64", "t1_head_dim": "128", "t1_rope_dim": "64",
                          "t1_n_kv_head": "8", "paper_d_model": "3072"}


def test_the_kv_page_states_every_size_its_captions_name():
    from gtalib.book.chapters.kv_cache import kv_facts
    from gtalib.book.chapters.prose import facts
    from notebook_cells import stated_names

    named = stated_names("kv_cache")
    assert {"t1_n_head", "t1_rope_dim", "t1_n_kv_head", "paper_d_model"} <= named
    assert named <= set(kv_facts()) | set(facts())
