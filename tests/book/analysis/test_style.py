"""What every figure and table shares (gtalib.book.analysis.style): pluralisation and y-ranges."""

import pytest

from gtalib.book.analysis import style
from gtalib.book.chapters import ablation


def test_plural():
    assert style.plural(1, "thread") == "1 thread"
    assert style.plural(2, "thread") == "2 threads"
    assert ablation._hardware([{"device": "cpu", "threads": 1}]) == "cpu, 1 thread"


def test_curve_limits():
    assert style.curve_limits([0.1, 0.3]) == pytest.approx((-0.024, 0.324))  # 0 included
    assert style.curve_limits([-0.2, float("nan")]) == pytest.approx((-0.216, 0.016))
    assert style.curve_limits([]) == (-1.0, 1.0)


def test_every_table_escapes_html_in_its_cells_and_labels():
    import pandas as pd

    df = pd.DataFrame({"claim": ["ΔL < 0 for <b>all</b>"], "ppl": [13.6721]}, index=["<i>8</i>"])
    html = style.table_style(df.style.format("{:.2f}", subset=["ppl"])).to_html()
    assert "ΔL &lt; 0 for &lt;b&gt;all&lt;/b&gt;" in html and "&lt;i&gt;8&lt;/i&gt;" in html
    assert "<b>" not in html and "<i>" not in html and "13.67" in html


def test_a_verdict_column_gets_room_for_its_sentence():
    import pandas as pd

    df = pd.DataFrame({"ΔL": ["+0.02"], "verdict": ["within noise (p = 0.13 adjusted): …"]})
    html = style.table_style(df.style).to_html()
    # the rule is keyed to the verdict column (its position, col1), not to every cell
    assert "min-width: 14em" in html and html.count("min-width") == 1
    assert "min-width" not in style.table_style(df[["ΔL"]].style).to_html()
    # a verdict of a few words ("agrees at 10 pairs") leaves the room to the other columns
    assert "min-width" not in style.table_style(df.assign(verdict="agrees at 10 pairs").style
                                                ).to_html()


def test_sentences_and_their_headings_read_left_numbers_right():
    import re

    import pandas as pd

    df = pd.DataFrame({"claim": ["Zero init helps all nine."], "ΔL": [0.02], "n": ["10"],
                       "verdict": ["agrees"]})
    html = style.table_style(df.style.hide(axis="index"), prose=["claim"]).to_html()
    left = set(re.findall(r"(t[dh])\.col(\d) \{\s*text-align: left;", html))
    # the claim (col0) and the verdict (col3), cells and headings; ΔL and n keep the right
    assert left == {("td", "0"), ("th", "0"), ("td", "3"), ("th", "3")}
    assert re.search(r"#T_\w+ td \{\s*padding: 2px 5px;\s*text-align: right;", html)


def test_a_pipe_inside_a_cell_does_not_end_it():
    """|ΔL| in a cell (the rule comparison's *why*) must stay one cell of the pipe table."""
    import re

    import pandas as pd

    md = style.md_table(pd.DataFrame({"why": ["|ΔL| 0.033 ≤ spread 0.034"], "n": [5]},
                                         index=pd.Index(["GLA-2"], name="variant")))
    header, _, row = md.splitlines()
    cells = re.split(r"(?<!\\)\|", row)[1:-1]
    assert len(cells) == len(re.split(r"(?<!\\)\|", header)[1:-1]) == 3
    assert cells[1].strip() == r"\|ΔL\| 0.033 ≤ spread 0.034"


    no_index = style.md_table(pd.DataFrame({"a": [1]}), index=False).splitlines()
    assert no_index[0].split() == ["|", "a", "|"] and no_index[2].split() == ["|", "1", "|"]
