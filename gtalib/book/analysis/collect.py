"""Collecting a page's runs: reading (or training) them from the local run store, else the
repository's recorded runs; which are complete; pairing each arm with the recommended arm of the
same seed and saying where both arms of every pair come from; and the page's notices about its
runs (incomplete runs, sources, pair sources).

Reads :mod:`gtalib.book.design.figures` (run refs and display names) and, through the
:class:`gtalib.book.design.plan.Plan` it is handed, the run specs; the runs themselves through
:mod:`gtalib.training.runs` and :mod:`gtalib.training.records`.

Data model: a *runs frame* is a long pandas DataFrame with one row per logged step of each run
and the columns ``variant, arm, label, seed, step, tokens, train_loss, val_loss`` (plus any
``val_loss/<source>`` columns of the run store's ``metrics.csv``). ``arm`` is ``"alt"`` (the
configuration the paper argues against), ``"rec"`` (the one it recommends) or ``"main"``.
Losses in nats.

Pairs: both arms of a pair should come from one source (both recorded or both trained in the
local run store) and one kind of machine; :func:`run_pairs` marks the others MIXED.
"""

from __future__ import annotations

import contextlib
import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from markdown_it import MarkdownIt

from gtalib.book.analysis.style import plural
from gtalib.book.design.names import display_name
from gtalib.training import records
from gtalib.training import runs as store
from gtalib.training.machine import kind_differences
from gtalib.training.runs import resolve_run_dir
from gtalib.training.train import ensure_run


@dataclass
class Collected:
    """Runs of a figure as read from the run store.

    Attributes:
        runs: runs frame of the runs that are complete (see module docstring).
        status: one row per required run: ``variant, arm, label, seed, n_layer, max_steps,
            run_id, state, detail, source, device, machine_kind, kinds`` with ``state`` in ``done |
            missing | failed | corrupt`` (``corrupt``: a finished run whose files do not check
            out, ``detail`` naming run, file, column and row), ``source`` ``"local"`` or the
            recorded run's provenance (:func:`gtalib.training.records.record_label`), and the machine
            from the run's ``card.json``: ``device`` (string) and ``machine_kind`` (dict), each
            ``None`` when the card lacks it (unknown); ``kinds``: every machine kind known to
            give the run's metrics bit for bit (a recorded run's
            :func:`gtalib.training.records.bit_identical_kinds`, a local run's own kind; empty
            when unknown); ``record_check``: for a local run that also has a record, its
            comparison with the record (:func:`gtalib.training.records.compare_with_record`,
            a :class:`~gtalib.training.records.CheckResult`; a mismatch when the local run's
            files do not check out), else ``None``.
        cards: run cards (``card.json`` contents) of the complete runs.
        run_dir: the run store they were read from; record_dir: the recorded runs
            (:func:`gtalib.training.records.default_record_dir` when ``None``). A ``done`` run's folder is
            ``run_dir/<run_id>`` when its ``source`` is ``"local"``, else
            ``record_dir/<run_id>``.
    """

    runs: pd.DataFrame
    status: pd.DataFrame
    cards: list = field(default_factory=list)
    run_dir: Path | None = None
    record_dir: Path | None = None

    @property
    def incomplete(self) -> pd.DataFrame:
        """Status rows of runs that are missing or failed."""
        return self.status[self.status["state"] != "done"]

    @property
    def pairs(self) -> pd.DataFrame:
        """The ΔL pairs of the complete runs and where their arms come from (:func:`run_pairs`)."""
        return run_pairs(self.status)


#: What :func:`collect_runs` reads a run from when both the local store and the records have
#: it: ``"build"``, the local store (what this build trained), compared with its record;
#: ``"records"``, the record (the figure as recorded, to set beside this build's).
SOURCES = ("build", "records")


def collect_runs(refs, plan, run_dir, train: bool = False, record_dir=None,
                 source: str = "build") -> Collected:
    """Read (and with ``train=True`` first train) the runs ``refs`` need.

    A run the local store lacks is read from the repository's recorded runs
    (:mod:`gtalib.training.records`) when one is recorded, and labelled so in ``status.source``
    ("recorded <date> on <machine>"); only a run neither local nor recorded is trained. A local
    run that has a record too is compared with it (``status.record_check``); with
    ``source="records"`` the record is read instead.

    Args:
        refs: :class:`gtalib.book.design.figure_plan.RunRef` list. plan: the :class:`gtalib.book.design.plan.Plan`
            that resolves them into run specs. run_dir: run store root.
        train: train missing runs through :func:`gtalib.training.train.ensure_run` (else report
            them missing).
        record_dir: recorded runs (default :func:`gtalib.training.records.default_record_dir`).
        source: one of :data:`SOURCES`.
    Returns:
        :class:`Collected`. A run that fails to train is reported ``failed`` with its error, a
        finished run whose files are corrupt ``corrupt`` (paths relative to the store); nothing
        is raised, so a figure can say on its page which runs it lacks.

    Raises:
        ValueError: ``source`` not one of :data:`SOURCES`.
    """

    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    run_dir = resolve_run_dir(run_dir)
    frames, status, cards = [], [], []
    for ref in refs:
        spec = plan.spec(ref)
        path = run_dir / spec.run_id
        state, detail, where, card, kinds, check = "done", "", "local", None, [], None
        compare_to = None
        try:
            record = records.find_record(spec, record_dir)
            local = store.is_done(path) and not (source == "records" and record is not None)
            if local:
                compare_to, record = record, None
            if train and record is None and not local:
                # a standalone papermill run trains here; say which run, since it takes a while
                print(f"training {spec.run_id}: {ref.label}, seed {ref.seed} ...", flush=True)
                path = Path(ensure_run(spec, run_dir))
            if record is not None:  # the local store lacks it (or source="records"): the record
                df = records.load_record_metrics(record)
                card = store.load_card(record)
                where = records.record_label(records.load_record_info(record))
                kinds = records.bit_identical_kinds(record)
            elif not (path / "DONE").exists():
                state, detail = "missing", "not trained yet"
            else:
                # load_metrics checks every cell; a corrupt card names its file
                df = store.load_metrics(path)
                card = store.load_card(path) if (path / "card.json").exists() else None
                kinds = [card["machine_kind"]] if (card or {}).get("machine_kind") else []
                if compare_to is not None:  # this build's run beside the record it reproduces
                    check = records.compare_with_record(compare_to, df,
                                                        (card or {}).get("machine_kind"))
        except store.RunCorruptError as e:  # named on the page: run, file, column, row
            state, detail = "corrupt", str(e).replace(f"{run_dir}/", "")
        except Exception as e:  # reported on the figure's page, never plotted silently
            state, detail = "failed", f"{type(e).__name__}: {e}"
        if state != "done" and compare_to is not None:  # it cannot reproduce its record
            check = records.CheckResult(spec.run_id, "mismatch", {}, None,
                                        f"this build's run is unreadable: {detail}")
        if state == "done":
            df.insert(0, "max_steps", spec.train.max_steps)
            df.insert(0, "n_layer", spec.model.n_layer)
            df.insert(0, "seed", ref.seed)
            df.insert(0, "label", ref.label)
            df.insert(0, "arm", ref.arm)
            df.insert(0, "variant", ref.variant)
            frames.append(df)
            if card is not None:
                cards.append(card)
        card = card or {}
        status.append((ref.variant, ref.arm, ref.label, ref.seed, spec.model.n_layer,
                       spec.train.max_steps, spec.run_id, state, detail, where,
                       card.get("device") or None, card.get("machine_kind") or None, kinds, check))
    runs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["variant", "arm", "label", "seed", "n_layer", "max_steps", "step", "tokens",
                 "train_loss", "val_loss"]
    )
    st = pd.DataFrame(status, columns=STATUS_COLUMNS)
    return Collected(runs, st, cards, run_dir,
                     Path(record_dir) if record_dir is not None else records.default_record_dir())


#: How the pages name each outcome of :func:`gtalib.training.records.compare_with_record`.
OUTCOME_WORDS = {"bit-identical": "bit-identical", "within envelope": "within the envelope",
                 "mismatch": "outside the envelope"}

#: Columns of :attr:`Collected.status`.
STATUS_COLUMNS = ["variant", "arm", "label", "seed", "n_layer", "max_steps", "run_id", "state",
                  "detail", "source", "device", "machine_kind", "kinds", "record_check"]


def complete_variants(collected: Collected) -> tuple[list[str], list[str]]:
    """Split variants into those whose every required run is done and those lacking any.

    A variant with a missing or failed run is left out of the figure entirely (not plotted with
    fewer seeds), and the page names it.
    """
    bad = set(collected.incomplete["variant"])
    allv = list(dict.fromkeys(collected.status["variant"]))
    return [v for v in allv if v not in bad], [v for v in allv if v in bad]


# ---------------------------------------------------------------------------------------------
# Pairs: where both arms come from
# ---------------------------------------------------------------------------------------------

def same_machine(a, b) -> bool | None:
    """Whether two runs (:attr:`Collected.status` rows) have the numbers of one kind of
    machine: some kind gives both bit for bit (their ``kinds``: the kind that trained each, and
    for a recorded run the kinds a re-training reproduced it on), else their card's
    ``machine_kind`` dicts compared when both have one. Without both kinds only different
    ``device`` strings decide (``False``: different CPUs); ``None`` (unknown) otherwise, since
    one CPU name covers several kinds (AMD EPYC family 25 and 26 are both "AMD EPYC")."""
    ka, kb = a.get("kinds"), b.get("kinds")
    if ka and kb:
        return any(k in kb for k in ka)
    if isinstance(a["machine_kind"], dict) and isinstance(b["machine_kind"], dict):
        return a["machine_kind"] == b["machine_kind"]
    if _known(a["device"]) and _known(b["device"]) and a["device"] != b["device"]:
        return False
    return None


def _known(device) -> bool:
    """Whether a status row's ``device`` names a machine (pandas may hold a missing one as NaN)."""
    return isinstance(device, str) and bool(device)


def _machine_name(row) -> str:
    """The machine of a status row as a page names it: its ``device`` string, else its
    ``machine_kind`` as ``key=value`` pairs, else ``"unknown machine"``."""
    if _known(row["device"]):
        return row["device"]
    if isinstance(row["machine_kind"], dict):
        return ", ".join(f"{k}={v}" for k, v in sorted(row["machine_kind"].items()))
    return "unknown machine"


def run_pairs(status: pd.DataFrame) -> pd.DataFrame:
    """Every ΔL pair whose two runs are complete, and whether its arms come from one source
    and one machine (docs: book/methods.md, "Statistics": a pair is only paired when both arms
    were trained alike; rounding differs between CPU kinds).

    A pair is a non-``rec`` arm and the ``rec`` arm of the same variant, depth, length and seed.

    Args:
        status: :attr:`Collected.status`.
    Returns:
        DataFrame ``[variant, arm, n_layer, max_steps, seed, mixed, unknown, pair_source]``:
        ``mixed`` when the arms differ in source (local / recorded) or machine
        (:func:`same_machine` False), ``unknown`` when the machine of an arm is unknown, and
        ``pair_source`` the text the pages print, e.g. ``"both recorded on AMD EPYC (2 logical
        CPUs)"`` (with ``", its arms trained on two CPU kinds, each shown to give both bit for bit"`` when the arms
        share a kind only through a recorded re-training), ``"both local, machine unknown"`` or
        ``"MIXED: alt recorded on AMD EPYC (2 logical CPUs), rec local on Intel Xeon (16 logical
        CPUs)"``.
    """
    cols = ["variant", "arm", "n_layer", "max_steps", "seed", "mixed", "unknown", "pair_source"]
    done = status[status["state"] == "done"]
    key = ["variant", "n_layer", "max_steps", "seed"]
    rec = {tuple(r[k] for k in key): r for _, r in done[done["arm"] == "rec"].iterrows()}
    rows = []
    for _, a in done[~done["arm"].isin(["rec", "main"])].iterrows():
        r = rec.get(tuple(a[k] for k in key))
        if r is None:
            continue
        src_a, src_r = ("local" if x["source"] == "local" else "recorded" for x in (a, r))
        same = same_machine(a, r)
        mixed = src_a != src_r or same is False
        if mixed:
            text = (f"MIXED: {a['arm']} {src_a} on {_machine_name(a)}, rec {src_r} on "
                    f"{_machine_name(r)}")
            if same is False and _machine_name(a) == _machine_name(r):
                text += f" ({'; '.join(kind_differences(a['machine_kind'], r['machine_kind']))})"
        elif same is None:
            text = (f"both {src_r} on {a['device']}, machine kind unknown"
                    if _known(a["device"]) and a["device"] == r["device"] else
                    f"both {src_r}, machine unknown")
        else:
            text = f"both {src_r} on {_machine_name(r)}"
            if isinstance(a["machine_kind"], dict) and isinstance(r["machine_kind"], dict) \
                    and a["machine_kind"] != r["machine_kind"]:
                text += ", its arms trained on two CPU kinds, each shown to give both bit for bit"
        rows.append((a["variant"], a["arm"], a["n_layer"], a["max_steps"], a["seed"], mixed,
                     same is None, text))
    return pd.DataFrame(rows, columns=cols)


def pair_source_summary(pairs: pd.DataFrame) -> str:
    """The *pair source* cell of a table row from that row's :func:`run_pairs` rows: the common
    text when every pair shares it, else each text with its seeds, e.g. ``"seeds 0, 2: both
    local on X; seed 1: MIXED: ..."``; ``""`` for no pair."""
    groups = pairs.groupby("pair_source", sort=False)["seed"].agg(list)
    if len(groups) <= 1:
        return groups.index[0] if len(groups) else ""
    return "; ".join(f"{'seed' if len(s) == 1 else 'seeds'} {', '.join(map(str, s))}: {t}"
                     for t, s in groups.items())


# ---------------------------------------------------------------------------------------------
# What a page says about its runs
# ---------------------------------------------------------------------------------------------

def missing_notice(collected) -> str | None:
    """Markdown notice listing missing/failed runs, or None when every run is complete."""
    bad = collected.incomplete
    if bad.empty:
        return None
    lines = [f"**Incomplete: {len(bad)} of {len(collected.status)} runs are missing or failed.** "
             "Variants with any incomplete run are left out of this page's figure and tables "
             "(never plotted with fewer seeds):", ""]
    for _, r in bad.iterrows():
        lines.append(f"- {r['label']}, seed {r['seed']} (`{r['run_id']}`): {r['state']}"
                     + (f" — {r['detail']}" if r["detail"] else ""))
    return "\n".join(lines)


def sources_notice(collected) -> str:
    """Markdown line over a page's provenance table (:func:`provenance_html`, which gives each
    source, date and machine): how many runs are complete, how the ones trained in the local
    run store compare with their records, then how many of its ΔL pairs are mixed, i.e. have
    arms from different sources or machines (:func:`gtalib.book.analysis.collect.run_pairs`),
    and which."""
    done = collected.status[collected.status["state"] == "done"]
    if done.empty:
        return "**No complete run.**"
    local = done[done["source"] == "local"]
    checks = [c.outcome for c in local.get("record_check", ()) if hasattr(c, "outcome")]
    text = f"**Where these runs come from:** {plural(len(done), 'complete run')}" + (
        f", {len(local)} of them trained in the local run store" if len(local) else "")
    if checks:
        text += (f", {len(checks)} of which compared with their records: "
                 + ", ".join(f"{checks.count(k)} {w}" for k, w in OUTCOME_WORDS.items())
                 + " (*This build against its records* on the reproduction page)")
    text += "."
    pairs = collected.pairs
    if pairs.empty:
        return text
    mixed = pairs[pairs["mixed"]]
    text += (f" ΔL pairs (both arms of one seed): {len(pairs)}, of which **{len(mixed)} mixed** "
             f"(arms from different sources or machines, not paired as the figure assumes)")
    if len(mixed):
        text += ": " + ", ".join(
            f"{display_name(r.variant)} {r.arm} seed {r.seed} ({r.n_layer} layers, "
            f"{r.max_steps} steps)" for r in mixed.itertuples()) + " (*pair source* under the table above)"
    unknown = int((pairs["unknown"] & ~pairs["mixed"]).sum())
    if unknown:
        text += f"; {unknown} with an arm whose run card names no machine kind"
    return text + "."


def pair_source_lines(texts: dict) -> str:
    """Markdown under a final-ΔL or ladder table: where both arms of each row's pairs come from
    (``texts``: row label → its *pair source*, :func:`gtalib.book.analysis.collect.pair_source_summary`),
    kept out of the table so that the table fits the text column. One line when every row shares
    the text, else one bullet per distinct text naming its rows; ``""`` for no rows."""
    by_text = {}
    for label, text in texts.items():
        by_text.setdefault(text, []).append(label)
    if len(by_text) <= 1:
        return f"*Pair source* (every row): {next(iter(by_text))}." if by_text else ""
    return "*Pair source*:\n\n" + "\n".join(f"- {t}: {'; '.join(rows)}"
                                             for t, rows in by_text.items())


#: A recorded run's source as :func:`gtalib.training.records.record_label` words it.
_RECORDED = re.compile(r"^recorded (?P<date>\S+) on (?P<machine>.+)$")


def provenance_table(collected) -> pd.DataFrame:
    """Where a page's complete runs come from, compactly: one row per source, date and machine
    with the number of runs. ``source`` is ``"trained here"`` (the local run store; the date
    is the day its card says it finished) or ``"recorded"`` (the repository's bundles; the day
    it was recorded); ``machine`` is the run card's device (:func:`_machine_name`).

    Returns:
        DataFrame ``[source, date, machine, runs, configurations]``, oldest first;
        ``configurations``: label → seeds of the runs in that row.
    """
    done = collected.status[collected.status["state"] == "done"]
    rows = []
    for _, r in done.iterrows():
        m = _RECORDED.match(str(r["source"]))
        if m:
            source, date, machine = "recorded", m["date"], m["machine"]
        else:
            source, date, machine = "trained here", "", _machine_name(r)
            card = Path(collected.run_dir or "") / r["run_id"] / "card.json"
            with contextlib.suppress(OSError, ValueError):
                date = str(json.loads(card.read_text()).get("finished_utc") or "")[:10]
        rows.append((source, date or "unknown", machine, r["label"], r["seed"]))
    cols = ["source", "date", "machine", "runs", "configurations"]
    if not rows:
        return pd.DataFrame(columns=cols)
    runs = pd.DataFrame(rows, columns=["source", "date", "machine", "label", "seed"])
    out = []
    for (source, date, machine), g in runs.groupby(["source", "date", "machine"], sort=True):
        configs = {lab: sorted(x["seed"]) for lab, x in g.groupby("label", sort=False)}
        out.append((source, date, machine, len(g), configs))
    return pd.DataFrame(out, columns=cols)


def seeds_words(seeds) -> str:
    """Seeds as ranges: ``[0, 1, 2, 5]`` → ``"seeds 0–2, 5"``, ``[3]`` → ``"seed 3"``."""
    seeds, parts = sorted(seeds), []
    for s in seeds:
        if parts and s == parts[-1][1] + 1:
            parts[-1][1] = s
        else:
            parts.append([s, s])
    words = ", ".join(f"{a}" if a == b else f"{a}–{b}" for a, b in parts)
    return f"{'seed' if len(seeds) == 1 else 'seeds'} {words}"


def provenance_html(collected) -> str:
    """The provenance section of a page, as HTML: a bold lead with the pairs and the records
    comparison (:func:`sources_notice`'s sentences after its source counts), the compact table
    (:func:`provenance_table`) and, in a closed dropdown, the configurations and seeds of each
    of its rows."""
    table = provenance_table(collected)
    notice = sources_notice(collected)
    if table.empty:
        return f"<p>{_md_bold(notice)}</p>"
    head = "".join(f"<th>{c}</th>" for c in ("source", "date", "machine", "runs"))
    body = "".join(
        f"<tr><td>{html.escape(r.source)}</td><td>{html.escape(r.date)}</td>"
        f"<td>{html.escape(r.machine)}</td><td>{r.runs}</td></tr>" for r in table.itertuples())
    items = "".join(
        f"<li><strong>{html.escape(r.source)} {html.escape(r.date)}, "
        f"{html.escape(r.machine)}</strong>: "
        + "; ".join(f"{html.escape(lab)} ({seeds_words(seeds)})"
                    for lab, seeds in r.configurations.items()) + "</li>"
        for r in table.itertuples())
    n = int(table["runs"].sum())
    return (f"<p>{_md_bold(notice)}</p>"
            f'<table class="gtalib-provenance"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>"
            f'<details class="gtalib-configurations"><summary>The {n} runs by configuration '
            f"and seed</summary><ul>{items}</ul></details>")


def _md_bold(text: str) -> str:
    """:func:`sources_notice`'s Markdown as inline HTML (markdown-it-py, CommonMark, raw HTML
    escaped): ``**bold**`` and ``*italic*``."""
    return MarkdownIt("commonmark", {"html": False}).renderInline(text)
