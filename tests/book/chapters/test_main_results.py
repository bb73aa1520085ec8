"""The main-results chapter (gtalib.book.chapters.main_results) on synthetic metrics whose perplexities
and entropy gap are known in closed form."""

import math

import pytest
from synthetic import metrics, runs_frame

from gtalib.book.chapters import main_results as M


def test_entropy_gap():
    runs = runs_frame({("mla", "main", 0): metrics([0, 5], [5.0, 2.0]),
                       ("mla", "main", 1): metrics([0, 5], [5.0, 2.5])})
    g = M.entropy_gap(runs, entropy=3.0)
    assert g.loc["mla main", "val loss"] == pytest.approx(2.25)
    assert g.loc["mla main", "gap"] == pytest.approx(0.75)
    assert g.loc["mla main", "seeds"] == 2


def test_main_table_perplexity_and_avg():
    la, lb = math.log(10.0), math.log(20.0)
    spec = {}
    for seed in (0, 1):
        m = metrics([0, 100], [4.0, 3.0], **{"val_loss/news": [5.0, la], "val_loss/bible": [5.0, lb]})
        spec[("mla", "main", seed)] = m
    mean, half = M.main_table(runs_frame(spec))
    assert list(mean.columns) == ["news", "bible", "avg"]
    assert mean.loc["mla main", "news"] == pytest.approx(10.0)
    assert mean.loc["mla main", "avg"] == pytest.approx(15.0)  # mean of perplexities, as the paper
    assert half.loc["mla main", "avg"] == pytest.approx(0.0)
    loss, _ = M.main_table(runs_frame(spec), metric="loss")
    assert loss.loc["mla main", "bible"] == pytest.approx(lb)
    with pytest.raises(ValueError, match="metric"):
        M.main_table(runs_frame(spec), metric="acc")


def test_the_caption_counts_the_seeds_in_the_table():
    runs = runs_frame({("mla", "main", 0): metrics([0, 5], [5.0, 2.0]),
                       ("mla", "main", 1): metrics([0, 5], [5.0, 2.5]),
                       ("gqa", "main", 0): metrics([0, 5], [5.0, 2.2])})
    assert M.seeds_shown(M.entropy_gap(runs, entropy=3.0)) == "1–2 seeds"
    one = runs[runs["variant"] == "mla"]
    assert M.seeds_shown(M.entropy_gap(one, entropy=3.0)) == "2 seeds"


def test_the_facts_the_page_states():
    """The caption's seeds, half-widths and the paper's set count, from the tables; an empty
    result (no configuration complete) still gives every name."""
    import pandas as pd

    from gtalib.book.design.paper import PAPER_MLRA4_GATED_AVG_PPL
    from gtalib.book.design.figures import figure_spec

    runs = runs_frame({("mla", "main", 0): metrics([0, 5], [5.0, 2.0]),
                       ("mla", "main", 1): metrics([0, 5], [5.0, 2.5])})
    gap = M.entropy_gap(runs, entropy=3.0)
    ppl = pd.DataFrame({"avg": [12.0]}, index=["MLA"])
    main = M.MainResult("ci", 0.95, None, ppl, pd.DataFrame({"avg": [0.4567]}, index=["MLA"]),
                        ppl, gap)
    facts = M.main_facts(main)
    assert facts["main_seeds"] == "2 seeds" and facts["main_half_widths"] == "MLA ±0.457"
    assert facts["main_confidence"] == "95%" and facts["main_preset"] == "`ci`"
    assert facts["main_planned_seeds"] == str(figure_spec("main").seeds_at("ci"))
    assert facts["paper_sets"] == "7" and facts["paper_gated_avg"] == str(PAPER_MLRA4_GATED_AVG_PPL)
    empty = M.MainResult("ci", 0.95, None, *[pd.DataFrame()] * 4)
    assert M.main_facts(empty)["main_seeds"] == "0 seeds"
    assert M.main_facts(empty)["main_half_widths"] == "—"
    with pytest.raises(ValueError, match="name must be"):
        M.show_table(main, "bars")


def test_the_page_states_every_value_its_facts_give():
    from gtalib.book.chapters.prose import facts
    from notebook_cells import stated_names

    named = stated_names("main_results")
    ours = {"main_preset", "main_seeds", "main_confidence", "main_half_widths",
            "main_planned_seeds", "paper_sets", "paper_gated_avg"}
    assert ours <= named and named <= ours | set(facts())
