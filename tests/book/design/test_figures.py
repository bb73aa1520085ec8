"""Figure definitions: paper values, colours and the run sets behind each figure."""

import math
from dataclasses import replace

import pytest

from gtalib.book.design import figures
from gtalib.book.design import seeds as seed_policy
from gtalib.book.design.figures import (
    ABLATIONS,
    GATE_CPU_STEPS,
    ablation,
    by_preset,
    figure_spec,
)
from gtalib.book.design.names import canonical_options
from gtalib.book.design.paper import PAPER_MAIN_PPL, PAPER_SOURCES
from gtalib.book.design.plan import make_plan


#: The paper's four ablation figures, whose declared design the tests pin.
PAPER = ("init", "gate", "latent_scale", "double_heads")


def test_paper_final_delta_is_ln_ppl_ratio():
    # docs/paper_values.md: ln(14.094 / 13.860) = 0.017 for MHA's initialisation ablation
    assert ablation("init").paper_final("mha") == pytest.approx(0.0167, abs=5e-4)
    assert ablation("gate").paper_final("gqa") == pytest.approx(math.log(14.139 / 13.806))
    # no perplexities for GQA in the init figure: the curve's value at 100 B tokens (≈)
    assert ablation("init").paper_final("gqa") == 0.025
    # every paper ΔL is positive: each figure's recommendation wins in the paper
    for fig in ABLATIONS.values():
        assert all(fig.paper_final(v) > 0 for v in fig.variants), fig.key


def test_paper_colours_and_variants_follow_paper_md():
    init = ablation("init")
    assert init.variants == ("mha", "mqa", "gqa", "mla", "mfa", "tpa", "gla-2", "gla-4", "gta")
    assert (init.colors["mha"], init.colors["tpa"], init.colors["gta"]) == (
        "tab:purple", "tab:orange", "tab:green")
    gate = ablation("gate")
    assert gate.variants == ("gqa", "mla", "gla-2", "mlra-2", "mlra-4")
    assert (gate.colors["mlra-4"], gate.colors["gqa"]) == ("tab:red", "teal")
    for fig in ABLATIONS.values():
        assert set(fig.variants) <= set(fig.colors), fig.key
        assert set(fig.ci_variants) <= set(fig.variants), fig.key


def test_main_table_values_are_the_papers():
    assert PAPER_MAIN_PPL.loc["mlra-4", "avg"] == 13.672
    assert PAPER_MAIN_PPL["avg"].idxmin() == "mlra-4"
    # the paper's "avg" column is the mean of its seven sets (to its rounding)
    means = PAPER_MAIN_PPL[list(PAPER_SOURCES)].mean(axis=1)
    assert (means - PAPER_MAIN_PPL["avg"]).abs().max() < 0.06


def test_run_sets_count_each_configuration_once():
    # cpu: init 9×2 arms = 18 (250 steps); gate 5×2 = 10 at its own 1000 steps, shared with
    # nothing; latent: 3 unscaled + MLRA-2; heads: 3 doubled; main: 11 plain (all but MLRA-4
    # counted) + gated MLRA-4 -> 37 configurations. The seed table runs the 35 configurations
    # of the ablation figures at 10 pairs (two looks) and the main table at 5, whatever the
    # book asks below that: the main table's plain runs share seeds 0-4 with the init
    # figure's zero-init arms, so only MLRA-4 and gated MLRA-4 are the table's alone.
    assert {figure_spec(k).seeds_at("cpu", 1) for k in ABLATIONS} == {10} and figure_spec("main").seeds_at("cpu", 1) == 5
    # ... plus the pair at seed 0 at data orders 1-4 of the initialisation figure (9 variants × 2
    # arms × 4 orders = 72 runs) and of the gating figure (5 × 2 × 4 = 40), whatever the seed count
    orders = 9 * 2 * 4 + 5 * 2 * 4
    # ... plus, for the two figures read in the joint design, pairs 1-9 each at its own data
    # order (pair 0 is the seed-0 pair at order 0): 9 × 2 × 9 = 162 and 5 × 2 × 9 = 90 runs
    joint = 9 * 2 * 9 + 5 * 2 * 9
    assert len(make_plan("cpu", 2).runs) == 35 * 10 + 2 * 5 + orders + joint
    assert len(make_plan("cpu", 5).runs) == 35 * 10 + 2 * 5 + orders + joint
    # more than 5: the book's count
    assert len(make_plan("cpu", 6).runs) == 35 * 10 + 2 * 6 + orders + joint
    # a book-wide length: no extra seeds, and the gate runs share their no-gate arms again (31)
    assert len(make_plan("cpu", 2, max_steps=20).runs) == 31 * 2
    gate = make_plan("cpu", 2).figure_refs["gate"]
    # (read in the joint design: pair k also at data order k)
    assert {dict(r.train)["max_steps"] for r in gate} == {GATE_CPU_STEPS}
    assert {dict(r.train).get("max_steps") for r in make_plan("cpu", 2).figure_refs["init"]} == {None}
    # a book-wide length override applies to every figure, the gating page's included
    assert {r.train for r in make_plan("cpu", 2, max_steps=20).figure_refs["gate"]} == {()}
    assert make_plan("cpu", 2, max_steps=20).spec(gate[0]).train.max_steps == 1000
    assert make_plan("cpu", 2, max_steps=20).spec(
        make_plan("cpu", 2, max_steps=20).figure_refs["gate"][0]).train.max_steps == 20
    assert {r.train for r in make_plan("ci", 1).figure_refs["gate"]} == {()}
    # ci: init {gqa, mla} 4; gate +2 gated; latent: mla no scale, gla-2 both arms = 3; heads +2;
    # and the init pair at seed 0 again at data orders 1 and 2 (seeds.DATA_ORDERS): 4 × 2
    assert len(make_plan("ci", 1).runs) == 11 + 8
    assert len(make_plan("ci", 1).data_order_refs["init"]) == 8
    # every data-order run is its figure's run at seed 0 with only the data order changed
    plan = make_plan("ci", 1)
    base = {(r.variant, r.arm, r.options): r for r in plan.figure_refs["init"] if r.seed == 0}
    for r in plan.data_order_refs["init"]:
        assert r.seed == 0 and dict(r.train)["data_seed"] in (1, 2)
        assert base[(r.variant, r.arm, r.options)].train == tuple(
            kv for kv in r.train if kv[0] != "data_seed")
    assert make_plan("ci", 1, max_steps=5).data_order_refs == {}
    refs = figure_spec("gate").runs("cpu", 3)
    assert len(refs) == 5 * 2 * figure_spec("gate").seeds_at("cpu")
    assert {r.arm for r in refs} == {"alt", "rec"}


def test_canonical_options_drop_defaults():
    assert canonical_options({"gate": False, "init": "zero"}) == ()
    assert canonical_options({"gate": True}) == (("gate", True),)


def test_figure_variants_validation():
    assert figure_spec("init").variants_at("ci") == ("gqa", "mla")
    assert figure_spec("gate").variants_at("cpu", "GQA, mlra4") == ("gqa", "mlra-4")
    with pytest.raises(KeyError, match="not in the gate figure"):
        figure_spec("gate").variants_at("cpu", ["mha"])
    # a name that is no variant at all gets the figure's list too, not the registry's eleven
    with pytest.raises(KeyError) as exc:
        figure_spec("gate").variants_at("cpu", ["bogus"])
    assert exc.value.args[0] == ("variant 'bogus' is not in the gate figure; allowed: "
                                 + ", ".join(ablation("gate").variants))
    with pytest.raises(KeyError, match="allowed"):
        ablation("nope")
    with pytest.raises(ValueError, match="seeds"):
        figure_spec("init").runs("ci", 0)


def test_a_figure_runs_one_seed_count_for_every_variant(monkeypatch):
    """The seed table raises the seed count of every variant of a figure, both arms alike (the
    larger of it and the book's); a book-wide max_steps override falls back to the book's
    count; every cpu figure runs 5."""

    for key, n in (("init", 10), ("latent_scale", 10), ("double_heads", 10), ("gate", 10)):
        assert figure_spec(key).seeds_at("cpu", 3) == n
    monkeypatch.setitem(figures.ABLATIONS, "gate", replace(figures.ABLATIONS["gate"],
                        seeds={"cpu": 10, "ci": 4}))
    gate = figure_spec("gate")
    assert gate.seeds_at("ci", 2) == 4 and gate.variants_at("ci") == ("gqa", "mla")
    assert gate.seeds_at("ci", 5) == 5  # never fewer than the book's
    assert gate.seeds_at("ci", 2, max_steps=7) == 2
    assert {r.variant for r in gate.runs("ci", 2, variants=["mla"])} == {"mla"}
    refs = figure_spec("gate").runs("ci", 2)
    assert sorted((r.variant, r.arm, r.seed) for r in refs) == sorted(
        (v, a, s) for v in ("gqa", "mla") for a in ("alt", "rec") for s in range(4))
    assert set(make_plan("ci", 2).figure_refs["gate"]) == set(refs)
    assert figure_spec("init").seeds_at("ci", 3) == 3  # ci: the book's count
    for bad in (0, True, {"mla": 4}):
        with pytest.raises(ValueError, match=r"figure 'gate': seeds\['ci'\] must be a positive "):
            replace(figures.ABLATIONS["gate"], seeds={"ci": bad})
    with pytest.raises(KeyError, match="unknown figure 'rope'.*allowed: init, gate"):
        figure_spec("rope").seeds_at("ci")


def test_the_ablation_figures_are_read_in_the_declared_looks():
    """cpu: the four ablation figures at 10 pairs, read at 5 and 10, but those read in the joint
    design (initialisation, gating), at one look declared with it; the main table and every
    other preset or count: one look at the count run."""
    for key in ABLATIONS:
        joint = key in seed_policy.JOINT["cpu"]
        assert figure_spec(key).looks_at("cpu") == ((10,) if joint else (5, 10))
        assert figure_spec(key).looks_at("cpu", 12) == (12,)  # more than declared: one look
        assert figure_spec(key).looks_at("cpu", 3, max_steps=20) == (3,)
        assert figure_spec(key).looks_at("ci", 2) == (2,)
    assert seed_policy.counts_words("cpu", 3) == "the ablation figures run 10, the main table 5"
    assert seed_policy.counts_words("ci", 2, max_steps=5) is None
    assert seed_policy.counts_words("ci", 2) is None


def test_a_plan_of_some_chapters_runs_them_once_in_book_order_and_reads_only_their_ladder_axes():
    from gtalib.book.design.ladder import ladder_runs

    plan = make_plan("ci", 2, notebooks=["claims", "init_ablation", "init_ablation"])
    assert plan.notebooks == ("init_ablation", "claims")
    width = make_plan("cpu", 3, notebooks=["main_results"]).ladder_refs
    assert set(width) == set(ladder_runs("cpu", part="width"))
    assert set(make_plan("cpu", 3, notebooks=["scale_ladder"]).ladder_refs) == set(ladder_runs("cpu"))
    assert make_plan("cpu", 3, notebooks=["kv_cache"]).ladder_refs == ()


def test_the_own_design_drops_the_books_length_and_seed_overrides():
    """A book at 7 seeds and 50 steps: its own design plans what the preset's plan at the
    smallest count plans (the preset's lengths, each figure its fixed count); a plan already at
    its own design is its own."""
    book = make_plan("cpu", 7, max_steps=50, notebooks=["scale_ladder"])
    own = book.own_design()
    assert (own.seeds, own.max_steps, own.notebooks) == (1, None, ("scale_ladder",))
    assert own.figure_refs == make_plan("cpu", 1).figure_refs != book.figure_refs
    assert {len(r) for r in own.figure_refs.values()} != {len(r) for r in book.figure_refs.values()}
    assert own.own_design() is own
    assert book.own_design(7).seeds == 7 and book.own_design(7).max_steps is None
    for bad in (0, True, "1"):
        with pytest.raises(ValueError, match="seeds must be a positive integer"):
            own.own_design(bad)


def test_the_papers_curve_features_read_from_its_knots():
    """docs/paper_values.md: every curve of both figures falls; the initialisation curves close
    up (first points 0.045–0.08, ends 0.02–0.03), the gating curves all start near 0.018 and end
    0.005–0.012 apart; TPA and GQA are drawn on top, GTA falls slowest, MLRA-4 ends lowest."""
    init, gate = ablation("init"), ablation("gate")
    assert {init.paper_course(v) for v in init.variants} == {-1}
    assert {gate.paper_course(v) for v in gate.variants} == {-1}
    assert init.paper_course("mha") == -1 and ablation("latent_scale").paper_course("mla") == 0
    assert init.paper_convergence() == -1 and gate.paper_convergence() == +1
    assert init.paper_convergence(["mha", "gta"]) == -1  # 0.08 / 0.045 → 0.02 / 0.02
    assert init.paper_convergence(["mha"]) == 0
    assert (init.top_curve, init.slowest_fall, init.lowest_end) == ("tpa", "gta", None)
    assert (gate.top_curve, gate.slowest_fall, gate.lowest_end) == ("gqa", None, "mlra-4")


def test_the_design_is_one_field_of_each_figure_s_spec_and_the_views_show_it():
    """The values declared before the runs (seed counts, looks, data orders, the joint design,
    the spot-check set), read back through the seed policy and the views by preset that other
    code imports from gtalib.book.design.seeds: the paper's figures' values as declared; a
    figure added later declares its own in its spec and leaves these as they are."""
    def of(view: dict, keys=PAPER) -> dict:  # the paper's figures' part of a view
        return {p: {k: v for k, v in by_key.items() if k in keys} for p, by_key in view.items()}

    assert of(by_preset("seeds"), (*PAPER, "main", "ladder", "ladder_width")) == {
        "cpu": {"init": 10, "gate": 10, "latent_scale": 10, "double_heads": 10, "main": 5,
                "ladder": 3, "ladder_width": 5},
        "ci": {"ladder": 2, "ladder_width": 2}}
    assert of(by_preset("looks")) == {"cpu": dict.fromkeys(PAPER, (5, 10))}
    assert seed_policy.ablation_looks("cpu") == (5, 10) and seed_policy.ablation_looks("ci") == ()
    assert of(seed_policy.DATA_ORDERS) == {"cpu": {"init": (1, 2, 3, 4), "gate": (1, 2, 3, 4)},
                                           "ci": {"init": (1, 2)}}
    assert of(seed_policy.DATA_ORDERS_DECLARED) == {"cpu": dict.fromkeys(PAPER, (1, 2, 3, 4))}
    assert of(seed_policy.JOINT_DECLARED) == {"cpu": dict.fromkeys(PAPER, 10), "ci": {"init": 2}}
    assert of(seed_policy.JOINT) == {"cpu": {"init": 10, "gate": 10}, "ci": {"init": 2}}
    assert of(by_preset("spot_check", (*ABLATIONS, "main")), (*PAPER, "main")) == {
        "cpu": {"init": "mha", "gate": "gla-2", "latent_scale": "mlra-2", "double_heads": "gqa",
                "main": "mha"},
        "gpu": {"init": "mha", "gate": "gla-2", "latent_scale": "mlra-2", "double_heads": "gqa",
                "main": "mha"},
        "ci": {"init": "gqa", "gate": "mla", "latent_scale": "gla-2", "double_heads": "gqa",
               "main": "gqa"}}
    # the runs follow the spec, not the view: a figure's changed field changes its runs
    assert len(figure_spec("init").data_order_runs("ci")) == 2 * 2 * 2 and figure_spec("gate").data_order_runs("ci") == []
    joint = figures.ABLATIONS["init"].joint["ci"]
    assert len(figure_spec("init").joint_runs("ci", joint)) == 2 * 2 * joint


def test_no_design_module_keeps_a_table_keyed_by_figure_name():
    """No module-level table of the design modules but figures.py has figure keys as its keys
    (a dict whose keys are all figure keys, at any depth of a module-level assignment)."""
    import ast
    from pathlib import Path

    import gtalib.book.design as design

    keys = {*ABLATIONS, *figures.TABLES}
    for path in Path(design.__file__).parent.glob("*.py"):
        if path.name == "figures.py":
            continue
        tables = [n.value for n in ast.parse(path.read_text()).body
                  if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None]
        for node in (d for t in tables for d in ast.walk(t) if isinstance(d, ast.Dict)):
            named = [k.value for k in node.keys if isinstance(k, ast.Constant)]
            assert not (named and set(named) <= keys), \
                f"{path.name}: a table keyed by figure name {named}"
