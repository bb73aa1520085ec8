"""What every figure and table shares (gtalib.book.style): pluralisation and y-ranges."""

import pytest

from gtalib.book import ablation, style


def test_plural():
    assert style.plural(1, "thread") == "1 thread"
    assert style.plural(2, "thread") == "2 threads"
    assert ablation._hardware([{"device": "cpu", "threads": 1}]) == "cpu, 1 thread"


def test_curve_limits():
    assert style.curve_limits([0.1, 0.3]) == pytest.approx((-0.024, 0.324))  # 0 included
    assert style.curve_limits([-0.2, float("nan")]) == pytest.approx((-0.216, 0.016))
    assert style.curve_limits([]) == (-1.0, 1.0)
