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
    assert g.loc["mla main", "final val loss"] == pytest.approx(2.25)
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
