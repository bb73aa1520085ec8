"""The decode-speed page (gtalib.book.chapters.decode_speed): the numbers and words its sentences
state, from the recorded CPU measurement and the roofline model, and the templates naming them."""

import pandas as pd
import pytest

from gtalib.book.chapters import decode_speed as D
from gtalib.kernels import decode_model as dm


@pytest.fixture(scope="module")
def recorded():
    return dm.load_cpu_results(), dm.model_table(gpus=("H100",))


def test_the_facts_are_the_recorded_measurements(recorded):
    cpu, model = recorded
    facts = D.decode_facts(cpu, model)
    rows = pd.DataFrame(cpu["rows"])
    worst = rows["rel_error"].abs().max()
    assert facts["worst_error"] == f"{worst:.0%}" and facts["tolerance"] == "25%"
    assert facts["error_within"] == ("within" if worst <= 0.25 else "outside")
    assert D.decode_facts(cpu, model, tolerance=worst / 2)["error_within"] == "outside"
    big = rows[rows["context_k"] == rows["context_k"].max()]
    assert facts["rank_cpu"].split(" < ") == list(big.sort_values("measured_us")["shard"])
    assert facts["cpu_context"] == f"{int(big['context_k'].iloc[0])}K"
    # the H100's roofline ranks by bytes read: MLRA-4 first, MLA last (the paper's order)
    assert facts["rank_h100"].startswith("MLRA-4") and facts["rank_h100"].endswith("MLA (DP)")
    assert facts["rank_paper"] == facts["rank_h100"]
    assert facts["cpu_balance"] == f"{cpu['peak_flops'] / cpu['bandwidth']:.1f}"
    assert facts["h100_balance"] == "295" and facts["gpu_check"] == "none"
    env = {"date_utc": "2026-01-01", "gpu": "NVIDIA H100"}
    assert D.decode_facts(cpu, model, (pd.DataFrame(), env))["gpu_check"] == "2026-01-01, NVIDIA H100"


def test_the_tables_hold_the_errors_ratios_and_intensities(recorded):
    cpu, model = recorded
    err = D.error_table(cpu)
    rows = pd.DataFrame(cpu["rows"])
    assert err.shape == (rows["shard"].nunique(), rows["context_k"].nunique())
    assert err.abs().max().max() == pytest.approx(rows["rel_error"].abs().max())
    ratios = D.ratio_table(cpu, model, dm.paper_table())
    assert list(ratios.columns) == ["measured here (CPU)", "predicted, H100 (roofline)",
                                    "paper (H100, ≈)"]
    assert ratios.map(lambda x: x.endswith("×")).all().all()
    shards = D.shard_table()
    s = next(iter(dm.PAPER_SHARDS.values()))
    assert shards.loc[s.name, "FLOP / byte, bf16"] == pytest.approx(
        s.flops_per_token / (2 * s.elems_per_token))


def test_the_page_states_every_value_of_its_facts(recorded):
    from notebook_cells import stated_names

    assert stated_names("decode_speed") == set(D.decode_facts(*recorded))
