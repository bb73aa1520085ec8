"""The browser checks of scripts/check_book.py (Playwright driving Debian's chromium) on a tiny
site written here: a good page passes; a too-wide table without a scroll container, a broken
image, a console error and raw TeX are each reported. Skipped where no browser is installed,
unless ``GTALIB_REQUIRE_BROWSER=1`` (CI), where they fail."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_book", REPO / "scripts" / "check_book.py")
check_book = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_book)

BROWSER = check_book.chromium()
#: CI installs a browser and sets this: there the checks must run, not skip.
REQUIRED = os.environ.get("GTALIB_REQUIRE_BROWSER") == "1"
pytestmark = pytest.mark.skipif(BROWSER is None and not REQUIRED,
                                reason=f"no browser installed ({', '.join(check_book.BROWSERS)})")

# a 1x1 PNG
PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
                    "0000000d49444154789c6360f80f000001010100186dd8a90000000049454e44ae426082")
PAGE = ('<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width">'
        '<style>body{{margin:0}} main{{max-width:600px;padding:16px}}</style></head>'
        '<body><main><p>Loss falls with width.</p><img src="fig.png" alt="">{}</main></body></html>')
WIDE = "<table><tr>" + "<td style='white-space:nowrap'>a very wide cell</td>" * 12 + "</tr></table>"


def _check(tmp_path: Path, body: str) -> list[str]:
    assert BROWSER is not None, "GTALIB_REQUIRE_BROWSER=1 but no browser is installed"
    html = tmp_path / "html"
    html.mkdir(exist_ok=True)
    (html / "fig.png").write_bytes(PNG)
    (html / "page.html").write_text(PAGE.format(body))
    return check_book.check_rendered(html, None, BROWSER)


def test_a_good_page_passes(tmp_path):
    # a wide table in a scroll container that shows its scrollbar is fine, as is a narrow one
    scrolled = ("<div style='overflow-x:auto' class='s'>" + WIDE + "</div><style>"
                ".s::-webkit-scrollbar{height:8px}.s::-webkit-scrollbar-thumb{background:#999}"
                "</style><table><tr><td>n</td><td>2</td></tr></table>")
    assert _check(tmp_path, scrolled) == []


@pytest.mark.parametrize("body, expected", [
    (WIDE, "page.html at 390 px: table 1 (\"a very wide cell\") is "),
    ('<img src="missing.png" alt="">', "page.html: image missing.png did not load"),
    ("<script>console.error('boom')</script>", "page.html: console error: boom"),
    ("<script>undefinedFunction()</script>", "page.html: uncaught error: "),
    (r"<p>the gate \(g = \sigma(x)\) and $W_O$</p>", "page.html: raw TeX in the rendered text"),
])
def test_each_kind_of_break_is_reported(tmp_path, body, expected):
    problems = _check(tmp_path, body)
    assert any(p.startswith(expected) for p in problems), problems


def test_launch_links_must_open_the_page_source_in_this_repository(tmp_path):
    repo = check_book.Repository("org", "repo", "main", "https://mybinder.org",
                                 "https://colab.research.google.com", tmp_path)
    assert repo.launch_problem("https://mybinder.org/v2/gh/org/repo/main?urlpath=lab/tree/"
                               "page.ipynb", "page") is not None  # no such file in the checkout
    (tmp_path / "page.ipynb").write_text("{}")
    assert repo.launch_problem("https://mybinder.org/v2/gh/org/repo/main?urlpath=lab/tree/"
                               "page.ipynb", "page") is None
    assert repo.launch_problem("https://colab.research.google.com/github/org/repo/blob/main/"
                               "page.ipynb", "page") is None
    assert "not a Binder/Colab URL of org/repo@main" in repo.launch_problem(
        "https://mybinder.org/v2/gh/other/repo/main?urlpath=lab/tree/page.ipynb", "page")


def test_the_first_screen_holds_the_landing_verdicts_and_each_first_figure(tmp_path):
    """At 1400 px: a figure page whose figure starts below the first screen is reported, as is
    a landing page without a verdict for a claim; a page that scrolls sideways at any width."""
    from gtalib.book.design.figures import claims

    html = tmp_path / "html"
    (html / "generated").mkdir(parents=True)
    (html / "fig.png").write_bytes(PNG)
    low = ('<main><article class="bd-article"><div style="height:1200px">text</div>'
           '<img src="../fig.png" alt="a figure"></article></main>')
    (html / "generated" / "init_ablation.html").write_text(PAGE.format("").replace(
        '<main><p>Loss falls with width.</p><img src="fig.png" alt=""></main>', low))
    rows = "".join(f"<tr><td>{c.number}</td><td>says</td><td><strong class='gtalib-verdict'>"
                   f"{'agrees' if c.number != 2 else ''}</strong></td></tr>" for c in claims())
    wide = "<div style='width:2000px'>wide</div>"
    (html / "intro.html").write_text(PAGE.format(
        f"<div class='gtalib-headline'><table><tbody>{rows}</tbody></table></div>{wide}"))
    problems = check_book.check_rendered(html, None, BROWSER)
    assert any(p.startswith("generated/init_ablation.html at 1400 px: the first figure "
                            "(../fig.png) starts 1229 px down") for p in problems), problems
    assert "intro.html at 1400 px: claim 2 shows no verdict (got '')" in problems
    assert not any("claim 1 " in p for p in problems)
    assert any(p.startswith("intro.html at 390 px: the page is") and "scrolls sideways" in p
               for p in problems), problems


def test_the_claims_page_leads_with_its_table(tmp_path):
    """At 1400 px the claims page's first shown table (one in a closed fold, the parameters',
    does not count) must have its headings and first claim on the first screen: a table whose
    headings alone show at the bottom is reported, as is a page without a table."""
    html = tmp_path / "html"
    (html / "generated").mkdir(parents=True)
    page = ('<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width">'
            '<style>body{{margin:0}} p,summary{{margin:0;height:{}px}} th,td{{padding:0}}</style>'
            '</head><body><main>'
            '<article class="bd-article"><p>lead</p><details><summary>Parameters</summary>'
            '<table><tr><th>preset</th><td>cpu</td></tr></table></details>{}</article></main>'
            '</body></html>')
    claims = ("<table style='border-spacing:0'><thead><tr><th style='height:50px'>claim</th>"
              "<th>verdict</th></tr></thead><tbody><tr><td style='height:150px'>1</td>"
              "<td>agrees</td></tr></tbody></table>")
    target = html / "generated" / "claims.html"

    def problems(lead: int, body: str = claims) -> list[str]:
        target.write_text(page.format(lead, body))
        return [p for p in check_book.check_rendered(html, None, BROWSER)
                if "first table" in p or "no table" in p]

    # the lead and the fold's summary take 2 x 350 px: the table starts at 700, its row ends at 900
    assert problems(350) == []
    # 2 x 380: the headings show (760-810) but the first claim ends at 960, below the 900 px screen
    assert problems(380) == ['generated/claims.html at 1400 px: the first table ("claim") starts '
                             '760 px down and its first row ends 960 px down, below the first '
                             'screen (900 px)']
    assert problems(100, "<p>no table</p>") == ["generated/claims.html: no table shown"]
