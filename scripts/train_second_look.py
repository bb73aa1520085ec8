"""Train the second look's runs (seeds 5-9 of the four ablation figures at the ``cpu`` preset)
into a run store, through the book's own Dask path (:func:`gtalib.book.pipeline.schedule.train_all`).

The initialisation, latent-scaling and double-heads figures go first (250 steps), then the gating
figure (1000 steps). Both arms of each pair form one task, so a pair is trained on one worker.
With ``--record`` it trains nothing: it records (``gtalib record add``) every pair whose two arms
are finished in STORE and not yet both recorded, and prints one line per pair recorded (variant,
seed, run ids, seconds of each arm), the lines a commit of those bundles quotes.

Usage: .venv/bin/python scripts/train_second_look.py STORE [--jobs N] [--first SEED] [--last SEED]
       .venv/bin/python scripts/train_second_look.py STORE --record
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gtalib.book.design import plan as plan_mod
from gtalib.book.pipeline import job, schedule
from gtalib.training import machine, records, runs

ORDER = (("init", "latent_scale", "double_heads"), ("gate",))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--first", type=int, default=5, help="first seed (default 5)")
    ap.add_argument("--last", type=int, default=9, help="last seed (default 9)")
    ap.add_argument("--record", action="store_true", help="record the finished pairs, train nothing")
    a = ap.parse_args()
    plan = plan_mod.make_plan("cpu", a.last + 1)
    if a.record:
        record_pairs(plan, Path(a.store), a.first, a.last)
        return
    job.ensure_corpus(plan)
    here = machine.machine_kind(threads=1)
    for keys in ORDER:
        refs = [r for k in keys for r in look_refs(plan, k, a.first, a.last)]
        specs = [(label, s) for label, s in plan.specs(refs) if not recorded_here(s, here)]
        print(f"{', '.join(keys)}: {len(refs)} run references, seeds {a.first}-{a.last}, "
              f"{len(specs)} not yet recorded on this machine kind", flush=True)
        failed = schedule.train_all(specs, a.store, jobs=a.jobs, accelerator="cpu")
        for msg in failed:
            print("FAILED:", msg, flush=True)


def recorded_here(spec, kind: dict) -> bool:
    """Whether ``spec`` has a bundle known bit-identical on machine ``kind``: training it again
    here (a fresh run store, say) would only reproduce it, and its pair partner trained here
    still forms a one-kind pair."""
    folder = records.find_record(spec)
    return folder is not None and any(machine.same_kind(k, kind)
                                      for k in records.bit_identical_kinds(folder))


def look_refs(plan, key: str, first: int, last: int) -> list:
    """The run references of figure ``key`` in ``plan`` at seeds ``first..last``."""
    return [r for r in plan.figure_refs[key] if first <= r.seed <= last]


def record_pairs(plan, store: Path, first: int, last: int) -> None:
    """Record each pair of the four figures at seeds ``first..last`` that is finished in ``store``
    (both arms) and not yet both in ``book/recorded/``."""
    for keys in ORDER:
        for key in keys:
            refs = look_refs(plan, key, first, last)
            by_pair: dict = {}
            for ref, (_, spec) in zip(refs, plan.specs(refs)):
                by_pair.setdefault((ref.variant, ref.seed), []).append(spec)
            for (variant, seed), pair in by_pair.items():
                folders = [runs.run_path(s, store) for s in pair]
                if not all(runs.is_done(f) for f in folders):
                    continue
                if all(records.find_record(s) is not None for s in pair):
                    continue
                for f in folders:
                    records.record_run(f)
                secs = [runs.load_card(f)["train_wall_s"] for f in folders]
                print(f"{key} {variant} seed {seed}: " + ", ".join(
                    f"{s.run_id} {t:.0f} s" for s, t in zip(pair, secs)), flush=True)


if __name__ == "__main__":
    main()
