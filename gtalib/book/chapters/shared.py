"""What one book build computes once and every page and snippet of it reads: a figure's result
(:func:`gtalib.book.chapters.ablation.ablation_result`), the claims table
(:func:`gtalib.book.chapters.claims.claims_table`) and the values derived from a figure's result
(:mod:`gtalib.book.chapters.curve_features`), kept as pickles in a folder private to the build
(:data:`ENV_SHARED_RESULTS`). Outside a build nothing is kept and every call computes.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

from gtalib.book.design.plan import Plan
from gtalib.training.runs import resolve_run_dir, write_atomic


#: Set by the book job for its own steps and its kernels: a folder private to one build where
#: each figure's result is kept once computed (:func:`gtalib.book.chapters.ablation.ablation_result`), so that the figure's
#: page, the claims page and the generated methods snippets read one computation; so are the
#: claims table (:func:`gtalib.book.chapters.claims.claims_table`) and the values computed from a
#: figure's result (:func:`derived_file`: the curve figures' features and data-order tables,
#: :mod:`gtalib.book.chapters.curve_features`). The job fills it before it executes the pages
#: and removes it at the end.
ENV_SHARED_RESULTS = "GTALIB_BOOK_RESULTS"


def shared_file(key: str, plan: Plan, run_dir, confidence: float, source: str = "build"
                ) -> Path | None:
    """Where the build keeps the result of ``key`` (an ablation figure read at the page defaults:
    all its variants, no training, default smoothing and columns; or another result computed
    once per build, such as the claims table), or ``None`` outside a build."""
    folder = os.environ.get(ENV_SHARED_RESULTS)
    if not folder or not Path(folder).is_dir():  # a variable left over from a build that ended
        return None
    ident = repr((key, plan.preset, plan.seeds, plan.max_steps, str(resolve_run_dir(run_dir)),
                  float(confidence), source))
    return Path(folder) / f"{key}-{hashlib.sha256(ident.encode()).hexdigest()[:16]}.pkl"


def derived_file(result, name: str, *inputs) -> Path | None:
    """Where the build keeps ``name``, a value computed from the build's ``result`` of a figure
    and from ``inputs`` (everything else the computation reads, compared by their ``repr``),
    beside the result's own file (:attr:`gtalib.book.chapters.ablation.AblationResult.shared`), whose name already fixes the
    figure, plan, run store, confidence and source; ``None`` for a result the build does not
    share (outside a build, or a result read at other options than the page defaults)."""
    shared = getattr(result, "shared", None)
    if shared is None or not shared.parent.is_dir():  # no build, or one that ended
        return None
    ident = repr((shared.name, name, *inputs)).encode()
    return shared.with_name(f"{result.key}-{name}-{hashlib.sha256(ident).hexdigest()[:16]}.pkl")


def shared_value(path: Path | None, compute):
    """``compute()``, once per build: loaded from ``path`` (:func:`shared_file`,
    :func:`derived_file`) where a page or snippet of this build already computed it, else
    computed and kept there; computed on every call where ``path`` is ``None`` (outside a
    build). Pages run side by side may both compute a value before either has kept it: each
    keeps the same value, whole (written atomically)."""
    if path is not None and path.exists():
        with path.open("rb") as f:
            return pickle.load(f)
    value = compute()
    if path is not None:
        write_atomic(path, pickle.dumps(value))
    return value
