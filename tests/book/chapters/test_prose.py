"""The chapters' prose states its numbers from the data (gtalib.book.chapters.prose), in sentences
displayed from the notebooks' template cells: every name a page states exists, every fact is
stated somewhere, the facts follow the data they are read from, and no page types a number the
data holds."""

import dataclasses
import json
import re
from pathlib import Path

import pytest
from notebook_cells import stated_names, static_text

from gtalib.book.chapters import prose
from gtalib.book.design import chapters as registry
from gtalib.book.design import figures
from gtalib.book.design.paper import (
    PAPER_MAIN_PPL,
    PAPER_MATCHED_PARAMS_B,
    PAPER_MLRA4_GATED_AVG_PPL,
)

REPO = Path(__file__).resolve().parents[3]


def _code(stem: str) -> str:
    nb = json.loads((REPO / "notebooks" / f"{stem}.ipynb").read_text())
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")


def _page_facts() -> set[str]:
    """The names the chapters modules' own facts give: each chapters module's ``FACT_NAMES``
    (its words and numbers from a page's data, stated beside :func:`prose.facts`)."""
    import importlib
    import pkgutil

    from gtalib.book import chapters

    return {n for m in pkgutil.iter_modules(chapters.__path__) for n in getattr(
        importlib.import_module(f"gtalib.book.chapters.{m.name}"), "FACT_NAMES", ())}


def test_every_stated_name_is_a_fact_and_every_fact_is_stated():
    """Every fact of prose.facts() is stated by some page, except those each figure's spec brings
    (figure_facts: a page states the ones it quotes). A page may also state the names a chapters
    module gives from its data (its ``FACT_NAMES``), values of its own run or record given by a
    ``*_facts`` function of its chapter module (whose test checks that page's names), and an
    ablation page its own values (``fig_<name>``, ablation.page_facts and
    curve_features.page_facts; tests/book/chapters/test_ablation.py checks their names)."""
    facts = prose.facts()
    page = _page_facts()
    assert not page & set(facts), "a chapters module gives a name prose.facts() has"
    used = {}
    for stem in registry.notebooks():
        names = {n for n in stated_names(stem) if not n.startswith("fig_")} - page
        own = names - set(facts)
        assert not own or re.search(rf"\b{stem}\.\w+_facts\(", _code(stem)), (
            f"{stem} states unknown facts {sorted(own)}")
        names -= own
        if names:  # a page that states them must read them (a missing key fails its cell)
            assert "prose.facts()" in _code(stem), stem
        for n in names:
            used.setdefault(n, stem)
    unused = set(facts) - set(used) - set(prose.figure_facts())
    assert not unused, f"facts no page states: {sorted(unused)}"


def test_no_page_types_a_paper_perplexity_or_a_training_length():
    """The values the data holds appear in the prose only as a template's fields."""
    values = {f"{v:.3f}" for a in figures.ABLATIONS.values() for pair in a.paper_ppl.values()
              for v in pair}
    values |= {f"{v:.3f}" for v in PAPER_MAIN_PPL.to_numpy().ravel()}
    values.add(f"{PAPER_MLRA4_GATED_AVG_PPL:.3f}")
    values.add(f"{PAPER_MATCHED_PARAMS_B:g} B")  # the paper's matched size (kv_cache page)
    steps = dict(figures.ablation("gate").train["cpu"])["max_steps"]
    lengths = [rf"\b{steps:,}\s+steps", rf"\b{steps}\s+steps", r"\b250\s+steps",
               r"\b(32|64|128) wide\b", r"d_model (128|256)\b"]  # the widths the data holds
    for stem in registry.notebooks():
        text = static_text(stem)
        typed = sorted(v for v in values if v in text)
        assert not typed, f"{stem} types paper values {typed}"
        for pattern in lengths:
            assert not re.search(pattern, text), f"{stem} types a length ({pattern})"


def test_the_facts_follow_the_data(monkeypatch):
    """Changed data, changed words: the gate figure's own length at cpu (tokens = steps × the cpu
    batch of 16 sequences × 128 tokens) and the init figure's paper perplexities."""
    gate, init = figures.ablation("gate"), figures.ablation("init")
    ppl = dict(init.paper_ppl, tpa=(15.5, 14.25))
    monkeypatch.setitem(figures.ABLATIONS, "gate",
                        dataclasses.replace(gate, train={"cpu": (("max_steps", 2000),)}))
    monkeypatch.setitem(figures.ABLATIONS, "init", dataclasses.replace(init, paper_ppl=ppl))
    facts = prose.facts()
    assert facts["gate_steps"] == "2,000"
    assert facts["gate_tokens"] == f"{2000 * 16 * 128 / 1e6:.2f} M" == "4.10 M"
    assert facts["gate_factor"] == "eight"  # 2,000 / the cpu preset's 250
    assert (facts["init_tpa_alt_ppl"], facts["init_tpa_rec_ppl"]) == ("15.500", "14.250")
    assert facts["init_steps"] == "250"  # no override: the cpu preset's length


def test_the_facts_as_the_book_states_them():
    """The values themselves, against the paper (docs/paper_values.md) and the cpu presets."""
    facts = prose.facts()
    assert (facts["init_tpa_alt_ppl"], facts["init_tpa_rec_ppl"]) == ("14.478", "13.985")
    assert (facts["latent_scale_mlra-2_alt_ppl"], facts["latent_scale_mlra-2_rec_ppl"]) == (
        "13.808", "13.804")
    assert facts["gate_mlra-4_rec_ppl"] == f"{PAPER_MLRA4_GATED_AVG_PPL:.3f}" == "13.621"
    assert (facts["gate_steps"], facts["gate_tokens"], facts["gate_factor"]) == (
        "1,000", "2.05 M", "four")
    assert (facts["paper_params"], facts["paper_layers"], facts["paper_tokens"]) == (
        "2.9 B", "24", "100 B")
    assert facts["paper_matched_params"] == "2.87 B"
    assert (facts["paper_heads"], facts["paper_heads_doubled"]) == ("24", "48")
    assert facts["ladder_token_lengths"] == "250, 1,000 and 2,000"
    assert facts["ladder_token_tokens"] == "0.51, 2.05 and 4.10"
    assert facts["looks"] == "5 and then 10"


@pytest.mark.parametrize("factor, words", [(4, "four"), (4.0, "four"), (2.5, "2.5"), (12, "12")])
def test_factors_are_written_as_the_prose_writes_them(factor, words):
    assert prose._times(factor) == words
