"""Curve arithmetic (gtalib.book.analysis.curves) on synthetic metrics whose ΔL, smoothing and plateau
escape are known in closed form."""

import math

import pandas as pd
import pytest
from synthetic import metrics, runs_frame

from gtalib.book.analysis import curves as C


def test_paired_delta_uses_common_steps_only():
    rec = metrics([0, 10, 20, 30], [5.0, 4.0, 3.0, 2.5])
    alt = metrics([0, 10, 30], [5.5, 4.25, 2.6])
    d = C.paired_delta(alt, rec)
    assert d["step"].tolist() == [0, 10, 30]
    assert d["delta"].tolist() == pytest.approx([0.5, 0.25, 0.1])
    assert d["tokens"].tolist() == [0, 1000, 3000]


def test_paired_delta_rejects_unpaired_runs():
    rec = metrics([0, 10], [5.0, 4.0], tokens_per_step=100)
    alt = metrics([0, 10], [5.0, 4.0], tokens_per_step=200)
    with pytest.raises(ValueError, match="not paired"):
        C.paired_delta(alt, rec)
    with pytest.raises(ValueError, match="share no step"):
        C.paired_delta(metrics([1], [1.0]), metrics([2], [1.0]))
    with pytest.raises(KeyError, match="val_loss"):
        C.paired_delta(rec.drop(columns="val_loss"), rec)


def test_smoothing_is_trailing_mean():
    s = C.smooth(pd.Series([0.0, 2.0, 4.0, 6.0]), 2)
    assert s.tolist() == [0.0, 1.0, 3.0, 5.0]
    with pytest.raises(ValueError, match="window"):
        C.smooth(pd.Series([1.0]), 0)


def test_auto_smoothing():
    assert C.auto_smoothing(20) == 1 and C.auto_smoothing(300) == 15 and C.auto_smoothing(0) == 1


def test_plateau_escape_step():
    steps = list(range(10))
    # starts at ln V, drops to the plateau 3.0, leaves it at step 6
    loss = [5.5, 3.05, 3.0, 3.0, 3.0, 3.0, 2.8, 2.6, 2.5, 2.4]
    runs = runs_frame({("mla", "rec", 0): metrics(steps, loss),
                       ("mla", "alt", 0): metrics(steps, [3.0] * 10)})
    e = C.plateau_escape(runs, entropy=3.0, margin=0.1, window=1).set_index("arm")
    assert e.loc["rec", "escape_step"] == 6 and e.loc["rec", "escape_tokens"] == 600
    assert math.isnan(e.loc["alt", "escape_step"])
