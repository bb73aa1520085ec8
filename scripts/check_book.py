#!/usr/bin/env python
"""Check a built book: every page exists, each figure page shows its image, no page has an error
output, math is served offline, every internal link and image resolves (anchors included), the
404 page exists; with Debian's chromium (driven by Playwright), open every page in a real
browser at 1400 and 390 px and fail on console errors, failed requests, broken images, raw TeX,
untypeset math, tables/figures/equations cut off or wider than the column, pages that scroll
sideways, download and launch links that lead nowhere, a search that does not find the gating
chapter, blank figure pages, a landing page without a verdict for every claim of the paper, a
figure page whose first figure starts below the first screen at 1400 px, and a claims page whose
table (its headings and first claim) is not on the first screen at 1400 px (see check_rendered).
Without chromium the browser checks are skipped, saying so.

Usage: .venv/bin/python scripts/check_book.py [--html-dir book/_build/html] [--screenshots DIR]
Exit status 0 when every check passes; each failure is printed on its own line.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import json
import os
import re
import shutil
import sys
import threading
import time
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote, unquote, urljoin, urlsplit

import numpy as np
import yaml

from gtalib.book.analysis.stats import VERDICTS
from gtalib.book.chapters.headline import verdict_word
from gtalib.book.design.chapters import figure_notebooks, notebooks
from gtalib.book.design.figures import claims
from gtalib.book.pipeline.job import html_error_outputs
from gtalib.book.pipeline.paths import BOOK_DIR

REPO = Path(__file__).resolve().parents[1]
PROSE_PAGES = ("intro", "methods", "reproduction")
#: A screenshot whose grey levels vary less than this (std, 0..1 scale) is taken as blank.
BLANK_STD = 0.02


def page_path(html_dir: Path, name: str) -> Path:
    return html_dir / ("generated" if name in notebooks() else "") / f"{name}.html"


def image_is_blank(png: Path) -> bool:
    """True if the image is nearly uniform (grey-level std below :data:`BLANK_STD`)."""
    import matplotlib.image as mpimg

    img = mpimg.imread(png)
    grey = img[..., :3].mean(axis=-1) if img.ndim == 3 else img
    if grey.dtype != np.float32 and grey.max() > 1:
        grey = grey / 255.0
    return float(np.std(grey)) < BLANK_STD


def check_static(html_dir: Path) -> list[str]:
    """Checks that need no browser."""
    problems = []
    for name in (*PROSE_PAGES, *notebooks()):
        if not page_path(html_dir, name).exists():
            problems.append(f"missing page {page_path(html_dir, name)}")
    for name in figure_notebooks():
        page = page_path(html_dir, name)
        if not page.exists():
            continue
        srcs = re.findall(r'<img[^>]+src="([^"]+\.png)"', page.read_text(errors="replace"))
        if not srcs:
            problems.append(f"{page.name}: no figure image")
        for src in srcs:
            img = (page.parent / src).resolve()
            if not img.exists():
                problems.append(f"{page.name}: image {src} missing")
            elif image_is_blank(img):
                problems.append(f"{page.name}: image {src} is blank")
    problems += [f"error output: {e}" for e in html_error_outputs(html_dir)]
    mathjax = html_dir / "_static" / "mathjax" / "tex-chtml.js"
    if not mathjax.exists():
        problems.append(f"offline MathJax missing ({mathjax})")
    for page in html_dir.rglob("*.html"):
        if re.search(r'<script[^>]+src="https?://[^"]*mathjax', page.read_text(errors="replace")):
            problems.append(f"{page.relative_to(html_dir)}: loads MathJax from the network")
    return problems


class _LinkParser(HTMLParser):
    """Collects a page's link targets (``href``/``src``) and the ids it defines."""

    LINK_ATTRS = {"a": "href", "link": "href", "img": "src", "script": "src", "source": "src",
                  "iframe": "src"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self.ids.add(attrs[key])
        value = attrs.get(self.LINK_ATTRS.get(tag, ""))
        if value:
            self.links.append(value)


def site_url_prefix(book_dir: Path) -> str:
    """The URL path the site is served under (``/<repo>/`` on GitHub Pages), derived from
    ``repository.url`` in ``<book_dir>/_config.yml`` as the book's own Sphinx hook does."""
    spec = importlib.util.spec_from_file_location("gtalib_publish",
                                                  book_dir / "_ext" / "gtalib_publish.py")
    publish = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(publish)
    config = yaml.safe_load((book_dir / "_config.yml").read_text())
    return publish.pages_url_prefix(config.get("repository", {}).get("url", ""))


def check_links(html_dir: Path, url_prefix: str = "/") -> list[str]:
    """Every internal link, stylesheet, script and image of every page resolves to a file of the
    built site, and every ``#anchor`` to an id of its target page. Links with a scheme (https:,
    mailto:, ...) are external and not followed. Absolute paths (the 404 page uses them, as it is
    served at any depth) must start with ``url_prefix`` and resolve below the site root."""
    html_dir = Path(html_dir).resolve()
    pages = {}
    for page in html_dir.rglob("*.html"):
        if page.relative_to(html_dir).parts[0] == "_static":
            continue  # the themes' Jinja macro files, copied verbatim: not pages
        parser = _LinkParser()
        parser.feed(page.read_text(errors="replace"))
        pages[page] = parser
    problems = []
    if not (html_dir / "404.html").is_file():
        problems.append("no 404.html page")
    for page, parser in sorted(pages.items()):
        rel = page.relative_to(html_dir)
        for link in parser.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc:
                continue
            path = unquote(parts.path)
            if not path:
                target = page
            elif path.startswith("/"):
                if not path.startswith(url_prefix):
                    problems.append(f"{rel}: link {link} is outside the site's path {url_prefix}")
                    continue
                target = html_dir / path[len(url_prefix):]
            else:
                target = page.parent / path
            target = target.resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.is_relative_to(html_dir) or not target.is_file():
                problems.append(f"{rel}: broken link {link}")
            elif parts.fragment and target in pages and \
                    unquote(parts.fragment) not in pages[target].ids:
                problems.append(f"{rel}: link {link}: no id {parts.fragment!r} in "
                                f"{target.relative_to(html_dir)}")
    return problems


#: Browsers the checks drive, first found first: Debian's chromium (``.ci/run`` installs it),
#: other distributions' names for it, and the Google Chrome that GitHub's Ubuntu runners carry.
BROWSERS = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")


def chromium() -> str | None:
    """The first of :data:`BROWSERS` on this machine (its path), or None."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


# ---------------------------------------------------------------------------------------------
# The book in a real browser (Playwright driving Debian's chromium)

#: Viewport widths (CSS px) every page is opened at: a laptop, and a phone held upright.
VIEWPORT_WIDTHS = (1400, 390)
#: The first screen's height (CSS px): at the first width, the landing page's verdicts, each
#: figure page's first figure and the claims page's table (headings and first claim) must show
#: above it.
VIEWPORT_HEIGHT = 900
#: The page whose first table, the claims with their verdicts, must be on the first screen.
CLAIMS_PAGE = "claims"
#: The words a verdict of the landing page's headline may have.
VERDICT_WORDS = frozenset({verdict_word(v) for v in VERDICTS} | {"mixed", "not measured"})
#: Below this width the page is opened as on a phone (touch, overlay scrollbars: a scrollbar
#: that the page does not style stays invisible until the reader touches it).
PHONE_WIDTH = 600
#: Browser errors that are expected and harmless: (regular expression searched in the message,
#: why it is allowed). Every other console error, uncaught error and failed request fails.
ALLOWED_BROWSER_ERRORS: tuple[tuple[str, str], ...] = ()
#: The book's search must find this chapter for this word (the gating chapter for "gate").
SEARCH = ("gate", "gating_ablation")
#: TeX that MathJax should have typeset, seen in the rendered text: ``\(``/``\[`` delimiters,
#: ``$$``, ``$x$`` (opening ``$`` not followed, closing one not preceded, by a space, as
#: MyST's dollarmath reads it) and common TeX commands.
RAW_TEX = re.compile(
    r"\\[()\[\]]|\$\$|(?<![\w$\\])\$(?=[^\s$])[^$\n]{0,200}(?<=[^\s$\\])\$(?![\w$])"
    r"|\\(?:frac|dfrac|sqrt|sum|prod|int|mathrm|mathbf|mathcal|mathbb|operatorname|text|left"
    r"|right|begin|end|cdot|times|approx|leq|geq|alpha|beta|gamma|delta|Delta|epsilon|theta"
    r"|lambda|mu|sigma|tau|phi|pi|infty|partial|nabla|hat|tilde|log|exp)(?![A-Za-z])")
#: Math in a page's source (MyST markdown, or a notebook's markdown cells), code removed first.
_SOURCE_MATH = re.compile(r"\$\$|(?<![\w$\\])\$(?=[^\s$])[^$\n]+(?<=[^\s$\\])\$(?![\w$])"
                          r"|\\begin\{|\{math\}|\\\(|\\\[")
_CODE = re.compile(r"^(```|~~~).*?^\1|`[^`\n]+`", re.S | re.M)

# Waits for MathJax's first typesetting, the images and the fonts, then reads what the reader
# sees: broken images, the text outside code and typeset math, the math nodes, the buttons.
_PAGE_JS = """async () => {
  const wait = (p, ms) => Promise.race([p, new Promise(r => setTimeout(r, ms))]);
  if (window.MathJax && MathJax.startup && MathJax.startup.promise)
    await wait(MathJax.startup.promise, 15000);
  const imgs = Array.from(document.images);
  imgs.forEach(i => { if (i.loading === 'lazy') i.loading = 'eager'; });
  await Promise.all(imgs.map(i => i.complete ? null : wait(new Promise(r => {
    i.addEventListener('load', r); i.addEventListener('error', r); }), 15000)));
  await wait(document.fonts.ready, 10000);
  const skip = 'mjx-container, script, style, pre, code, kbd, samp, textarea, noscript, .highlight';
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const text = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const p = n.parentElement;
    if (p && !p.closest(skip) && p.getClientRects().length) text.push(n.nodeValue);
  }
  const math = Array.from(document.querySelectorAll('.math'));
  const hrefs = sel => Array.from(document.querySelectorAll(sel)).map(a => a.href);
  return {
    broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src') || '(no src)'),
    text: text.join('\\n'),
    math: math.length,
    untypeset: math.filter(m => !m.querySelector('mjx-container')).map(m => m.textContent.trim().slice(0, 60)),
    containers: document.querySelectorAll('mjx-container').length,
    mathErrors: Array.from(document.querySelectorAll('mjx-merror')).map(e => e.getAttribute('data-mjx-error') || e.textContent.slice(0, 60)),
    downloads: hrefs('.dropdown-download-buttons a[href]'),
    launches: hrefs('.dropdown-launch-buttons a[href]'),
  };
}"""

# Every table, figure, image and display equation of the main content column must fit in the
# column, or sit in a scroll container (overflow-x auto/scroll) that itself fits; an ancestor
# with overflow-x hidden/clip narrower than the element cuts it off. Elements that are not
# rendered (a collapsed cell) are skipped.
_LAYOUT_JS = """() => {
  const col = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const c = col.getBoundingClientRect(), cs = getComputedStyle(col);
  const left = c.left + parseFloat(cs.paddingLeft) + parseFloat(cs.borderLeftWidth);
  const right = c.right - parseFloat(cs.paddingRight) - parseFloat(cs.borderRightWidth);
  const cw = Math.round(right - left), px = v => Math.round(v);
  const inside = r => r.left >= left - 1 && r.right <= right + 1;
  const tag = a => a.tagName.toLowerCase() + (typeof a.className === 'string' && a.className.trim()
    ? '.' + a.className.trim().split(/\\s+/).join('.') : '');
  const tables = Array.from(col.querySelectorAll('table'));
  const eqs = Array.from(col.querySelectorAll('mjx-container[display="true"] > mjx-math'));
  const name = el => {
    const t = el.tagName.toLowerCase();
    if (t === 'table') {
      const cell = Array.from(el.querySelectorAll('caption, th, td')).map(c => c.textContent.trim()).find(t => t);
      return `table ${tables.indexOf(el) + 1} ("${(cell || '').slice(0, 30)}")`;
    }
    if (t === 'img') return `image ${el.getAttribute('src')}`;
    if (t === 'figure') { const i = el.querySelector('img'); return `figure ${i ? i.getAttribute('src') : ''}`; }
    return `display equation ${eqs.indexOf(el) + 1}`;
  };
  const out = [];
  for (const el of col.querySelectorAll('table, figure, img, mjx-container[display="true"] > mjx-math')) {
    const r = el.getBoundingClientRect();
    if (!el.getClientRects().length || r.width === 0) continue;
    let verdict = null;
    for (let a = el.parentElement; a && a !== col; a = a.parentElement) {
      const ox = getComputedStyle(a).overflowX, ar = a.getBoundingClientRect();
      if (ox === 'auto' || ox === 'scroll') {
        const as = getComputedStyle(a);
        // the height a horizontal scrollbar takes: none for a hidden or an overlay scrollbar
        const bar = a.offsetHeight - a.clientHeight - parseFloat(as.borderTopWidth) - parseFloat(as.borderBottomWidth);
        verdict = !inside(ar) || !a.clientWidth
          ? `sits in a scroll container (${tag(a)}) ${px(ar.width)} px wide, outside the ${cw} px column`
          : a.scrollWidth > a.clientWidth + 1 && bar < 1
          ? `is ${px(r.width)} px wide in a ${px(ar.width)} px scroll container (${tag(a)}) that shows no scrollbar`
          : 'ok';
        break;
      }
      if ((ox === 'hidden' || ox === 'clip') && (r.left < ar.left - 1 || r.right > ar.right + 1)) {
        verdict = `is cut off: ${px(r.width)} px wide, ${px(ar.width)} px shown (overflow-x: ${ox} on ${tag(a)})`;
        break;
      }
    }
    if (verdict === null && !inside(r))
      verdict = r.width > right - left + 1
        ? `is ${px(r.width)} px wide in a ${cw} px column, with no scroll container`
        : `sticks out of the ${cw} px column by ${px(Math.max(left - r.left, r.right - right))} px`;
    if (verdict && verdict !== 'ok') out.push(`${name(el)} ${verdict}`);
  }
  const doc = document.documentElement;
  if (doc.scrollWidth > doc.clientWidth + 1)
    out.push(`the page is ${doc.scrollWidth} px wide in a ${doc.clientWidth} px window (scrolls sideways)`);
  return out;
}"""

# The landing page's headline rows: each claim's number and its verdict (word, whether it is
# rendered, where it ends, in page coordinates).
_HEADLINE_JS = """() => Array.from(document.querySelectorAll('.gtalib-headline table tbody tr')).map(tr => {
  const v = tr.querySelector('.gtalib-verdict'), r = v ? v.getBoundingClientRect() : null;
  return {claim: tr.cells[0].textContent.trim(), verdict: v ? v.textContent.trim() : null,
          shown: !!(v && v.getClientRects().length && r.width > 0), bottom: r ? r.bottom + scrollY : null};
})"""
# Where a page's first figure (an image of its article) starts, in page coordinates.
_FIRST_FIGURE_JS = """() => {
  const i = Array.from(document.querySelectorAll('article.bd-article img, main img')).find(i => i.getClientRects().length);
  return i ? {top: i.getBoundingClientRect().top + scrollY, src: i.getAttribute('src')} : null;
}"""

# Where a page's first shown table (one in a closed fold, such as the parameters', is not shown)
# starts and where its first body row ends, in page coordinates.
_FIRST_TABLE_JS = """() => {
  const t = Array.from(document.querySelectorAll('article.bd-article table, main table')).find(
    t => t.getClientRects().length && !t.closest('details:not([open])'));
  if (!t) return null;
  const row = t.tBodies.length && t.tBodies[0].rows.length ? t.tBodies[0].rows[0] : t.rows[0];
  const cell = t.querySelector('th, td');
  return {top: t.getBoundingClientRect().top + scrollY,
          rowBottom: row.getBoundingClientRect().bottom + scrollY,
          cell: cell ? cell.textContent.trim().slice(0, 30) : ''};
}"""


def first_table_problems(first: dict | None, name: str, width: int) -> list[str]:
    """What is wrong with the claims page's first table ``first`` (:data:`_FIRST_TABLE_JS`) at
    ``width``: none shown, or its headings and first claim not all on the first screen (its
    first row ending below :data:`VIEWPORT_HEIGHT`): a table whose headings alone peek in at the
    bottom does not lead the page."""
    if first is None:
        return [f"{name}: no table shown"]
    if first["rowBottom"] > VIEWPORT_HEIGHT:
        return [f"{name} at {width} px: the first table (\"{first['cell']}\") starts "
                f"{first['top']:.0f} px down and its first row ends {first['rowBottom']:.0f} px "
                f"down, below the first screen ({VIEWPORT_HEIGHT} px)"]
    return []


def headline_problems(rows: list, width: int, first_screen: bool) -> list[str]:
    """What is wrong with the landing page's headline ``rows`` (:data:`_HEADLINE_JS`): a claim
    of :func:`gtalib.book.design.figures.claims` without a row, a row without a shown verdict or
    with a verdict that is not a verdict word (:data:`VERDICT_WORDS`), and with
    ``first_screen`` a verdict ending below :data:`VIEWPORT_HEIGHT`."""
    problems, by_claim = [], {r["claim"]: r for r in rows}
    for c in claims():
        r = by_claim.get(str(c.number))
        where = f"intro.html at {width} px: claim {c.number}"
        if r is None:
            problems.append(f"{where} has no row in the headline")
        elif not r["shown"] or r["verdict"] not in VERDICT_WORDS:
            problems.append(f"{where} shows no verdict (got {r['verdict']!r})")
        elif first_screen and r["bottom"] > VIEWPORT_HEIGHT:
            problems.append(f"{where}: its verdict ends {r['bottom']:.0f} px down, below the "
                            f"first screen ({VIEWPORT_HEIGHT} px)")
    return problems


class Repository(NamedTuple):
    """Where the launch buttons must point: ``github.com/<org>/<name>`` at ``branch``, its
    sources checked out at ``root``; ``binderhub_url``/``colab_url`` as in _config.yml."""

    org: str
    name: str
    branch: str
    binderhub_url: str
    colab_url: str
    root: Path

    @classmethod
    def from_book(cls, book_dir: Path, root: Path = REPO) -> Repository | None:
        """From ``repository`` and ``launch_buttons`` of ``<book_dir>/_config.yml`` (None
        without a GitHub repository.url)."""
        path = Path(book_dir) / "_config.yml"
        config = yaml.safe_load(path.read_text()) if path.is_file() else {}
        repo = config.get("repository") or {}
        m = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)/?", repo.get("url", ""))
        if not m:
            return None
        buttons = config.get("launch_buttons") or {}
        return cls(m[1], m[2], repo.get("branch", "main"),
                   buttons.get("binderhub_url", "").rstrip("/"),
                   buttons.get("colab_url", "").rstrip("/"), Path(root))

    def launch_problem(self, href: str, stem: str) -> str | None:
        """Why ``href`` is not a Binder or Colab link to ``<something>/<stem>.ipynb`` of this
        repository, a file of its checkout; None if it is."""
        org, name, branch = (re.escape(x) for x in (self.org, self.name, self.branch))
        patterns = [rf"{re.escape(u)}/v2/gh/{org}/{name}/{branch}\?urlpath=(?:lab/)?tree/(.+)"
                    for u in (self.binderhub_url,) if u]
        patterns += [rf"{re.escape(u)}/github/{org}/{name}/blob/{branch}/(.+)"
                     for u in (self.colab_url,) if u]
        m = next((m for p in patterns if (m := re.fullmatch(p, href))), None)
        if m is None:
            return f"launch link {href} is not a Binder/Colab URL of {self.org}/{self.name}@{self.branch}"
        source = unquote(m[1])
        if Path(source).stem != stem or not (self.root / source).is_file():
            return f"launch link {href} opens {source}, not this page's source in the repository"
        return None


@contextlib.contextmanager
def serve(html_dir: Path, url_prefix: str = "/"):
    """Serve ``html_dir`` on 127.0.0.1 under ``url_prefix``, as GitHub Pages does (the 404
    page's absolute links need the prefix); yields the site's base URL."""
    root = str(Path(html_dir).resolve())

    class Handler(SimpleHTTPRequestHandler):
        def translate_path(self, path):
            path = urlsplit(path).path
            if not path.startswith(url_prefix):
                return os.path.join(root, ".outside-the-site-path")  # answered 404
            return super().translate_path("/" + path[len(url_prefix):])

        def log_message(self, *args):  # the checks report what failed
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=root))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}{url_prefix}"
    finally:
        server.shutdown()
        server.server_close()


def site_pages(html_dir: Path) -> list[Path]:
    """Every page of the built site, relative to it (the themes' macro files under _static are
    not pages)."""
    return sorted(p.relative_to(html_dir) for p in Path(html_dir).rglob("*.html")
                  if p.relative_to(html_dir).parts[0] != "_static")


def source_has_math(html_dir: Path, rel: Path) -> bool:
    """The page's published source (``_sources/``: MyST markdown, or a notebook's markdown cells
    and markdown/LaTeX outputs) holds math, code blocks and spans left out."""
    found = sorted((Path(html_dir) / "_sources" / rel.parent).glob(rel.stem + ".*"))
    if not found:
        return False
    text = found[0].read_text(errors="replace")
    if found[0].suffix == ".ipynb":
        cells = json.loads(text).get("cells", [])
        text = "\n".join(
            ["".join(c["source"]) for c in cells if c.get("cell_type") == "markdown"]
            + ["".join(v) for c in cells for o in c.get("outputs", [])
               for k, v in o.get("data", {}).items() if k in ("text/markdown", "text/latex")])
    return bool(_SOURCE_MATH.search(_CODE.sub("", text)))


def _allowed(message: str) -> bool:
    return any(re.search(pattern, message) for pattern, _ in ALLOWED_BROWSER_ERRORS)


def _watch(page, errors: list[str]) -> None:
    """Collect the page's console errors, uncaught errors and failed requests into ``errors``."""
    def console(msg):
        # Chromium logs each failed load as "Failed to load resource" without its URL; the
        # request handlers below report those with the URL
        if msg.type == "error" and not msg.text.startswith("Failed to load resource"):
            errors.append(f"console error: {msg.text[:300]}")

    def failed(request):
        why = request.failure or ""
        errors.append(f"request outside the site (the book must work offline): {request.url}"
                      if "BLOCKED_BY_CLIENT" in why else f"request failed: {request.url} ({why})")

    page.on("console", console)
    page.on("pageerror", lambda e: errors.append(f"uncaught error: {str(e)[:300]}"))
    page.on("requestfailed", failed)
    page.on("response", lambda r: r.status >= 400 and errors.append(f"HTTP {r.status}: {r.url}"))


def _check_page(context, base: str, html_dir: Path, rel: Path, width: int,
                repository: Repository | None, shots: Path | None) -> list[str]:
    """Open one page at one viewport width and check it (see :func:`check_rendered`)."""
    url, name = base + rel.as_posix(), rel.as_posix()
    page = context.new_page()
    errors, problems = [], []
    _watch(page, errors)
    try:
        response = page.goto(url, wait_until="load", timeout=60_000)
        if response is None or not response.ok:
            problems.append(f"{name}: HTTP {response.status if response else 'no response'}")
        refresh = re.search(r'<meta http-equiv="refresh" content="\d+;\s*url=([^"]+)"',
                            (html_dir / rel).read_text(errors="replace"), re.I)
        if refresh:  # a redirect (index.html): it must arrive; its target is checked itself
            page.wait_for_url(urljoin(url, refresh[1]), timeout=30_000)
            page.wait_for_load_state("load")
        else:
            problems += _check_content(page, html_dir, rel, width, repository, context)
            if shots is not None:
                png = shots / f"{name.removesuffix('.html').replace('/', '_')}-{width}.png"
                page.screenshot(path=png)
                if rel.stem in figure_notebooks() and image_is_blank(png):
                    problems.append(f"{name} at {width} px: rendered page is blank ({png})")
    except Exception as e:  # a page that cannot be opened or read is a failure, not a crash
        problems.append(f"{name} at {width} px: {type(e).__name__}: {str(e).splitlines()[0]}")
    finally:
        page.close()
    return problems + [f"{name}: {e}" for e in errors if not _allowed(e)]


def _check_content(page, html_dir: Path, rel: Path, width: int,
                   repository: Repository | None, context) -> list[str]:
    name, problems = rel.as_posix(), []
    info = page.evaluate(_PAGE_JS)
    problems += [f"{name}: image {src} did not load" for src in info["broken"]]
    tex = [m.group(0) for m in RAW_TEX.finditer(info["text"])]
    if tex:
        problems.append(f"{name}: raw TeX in the rendered text ({len(tex)}x), first {tex[0]!r}")
    if info["untypeset"]:
        problems.append(f"{name}: MathJax did not typeset {len(info['untypeset'])} of "
                        f"{info['math']} formulas, first {info['untypeset'][0]!r}")
    elif not info["containers"] and source_has_math(html_dir, rel):
        problems.append(f"{name}: its source has math but the page shows none typeset "
                        "(no mjx-container)")
    problems += [f"{name}: MathJax error: {e}" for e in info["mathErrors"]]
    problems += [f"{name} at {width} px: {p}" for p in page.evaluate(_LAYOUT_JS)]
    if name == "intro.html":
        problems += headline_problems(page.evaluate(_HEADLINE_JS), width,
                                      width == VIEWPORT_WIDTHS[0])
    if rel.stem in figure_notebooks() and width == VIEWPORT_WIDTHS[0]:
        first = page.evaluate(_FIRST_FIGURE_JS)
        if first is None:
            problems.append(f"{name}: no figure shown")
        elif first["top"] >= VIEWPORT_HEIGHT:
            problems.append(f"{name} at {width} px: the first figure ({first['src']}) starts "
                            f"{first['top']:.0f} px down, below the first screen "
                            f"({VIEWPORT_HEIGHT} px)")
    if rel.stem == CLAIMS_PAGE and width == VIEWPORT_WIDTHS[0]:
        problems += first_table_problems(page.evaluate(_FIRST_TABLE_JS), name, width)
    if width == VIEWPORT_WIDTHS[0]:  # the buttons are the same at every width
        problems += _check_buttons(context, html_dir, rel, info, repository)
    return problems


def _check_buttons(context, html_dir: Path, rel: Path, info: dict,
                   repository: Repository | None) -> list[str]:
    """The download button serves the page's source (.ipynb/.md) from the build; the launch
    buttons are Binder/Colab links to the page's source in the repository."""
    name, problems = rel.as_posix(), []
    has_source = any((html_dir / "_sources" / rel.parent).glob(rel.stem + ".*"))
    if has_source and not info["downloads"]:
        problems.append(f"{name}: no download link for its source")
    for href in info["downloads"]:
        if not re.search(r"\.(ipynb|md)$", urlsplit(href).path):
            problems.append(f"{name}: download link {href} is not the page's .ipynb/.md source")
            continue
        r = context.request.get(href)
        if not r.ok:
            problems.append(f"{name}: download link {href}: HTTP {r.status}")
        elif href.endswith(".ipynb") and "cells" not in json.loads(r.body()):
            problems.append(f"{name}: download link {href} is not a notebook")
    for href in info["launches"]:
        why = (repository.launch_problem(href, rel.stem) if repository else
               f"launch link {href} but no repository in _config.yml")
        if why:
            problems.append(f"{name}: {why}")
    if repository and has_source and next(
            (html_dir / "_sources" / rel.parent).glob(rel.stem + ".*")).suffix == ".ipynb":
        for host, label in ((repository.binderhub_url, "Binder"), (repository.colab_url, "Colab")):
            if host and not any(h.startswith(host + "/") for h in info["launches"]):
                problems.append(f"{name}: no {label} launch link")
    return problems


def _check_search(context, base: str, html_dir: Path, query: str, expected: str) -> list[str]:
    """The search page finds ``expected`` (a page, relative to the site) for ``query``."""
    page = context.new_page()
    errors = []
    _watch(page, errors)
    try:
        page.goto(f"{base}search.html?q={quote(query)}", wait_until="load", timeout=60_000)
        # Sphinx's searchtools writes the summary once the search has finished
        page.wait_for_function("() => { const s = document.querySelector("
                               "'#search-results .search-summary'); return s && s.innerText.trim(); }",
                               timeout=30_000)
        found = [urlsplit(h).path for h in page.eval_on_selector_all(
            "#search-results ul.search li a", "els => els.map(a => a.href)")]
    except Exception as e:
        return [f"search for {query!r}: {type(e).__name__}: {str(e).splitlines()[0]}"]
    finally:
        page.close()
    want = urlsplit(base + expected).path
    problems = [] if want in found else [
        f"search for {query!r} does not find {expected} (found: {', '.join(found[:5]) or 'nothing'})"]
    return problems + [f"search.html?q={query}: {e}" for e in errors if not _allowed(e)]


def check_rendered(html_dir: Path, out_dir: Path | None, browser: str, url_prefix: str = "/",
                   repository: Repository | None = None,
                   search: tuple[str, str] | None = None) -> list[str]:
    """Open every page of the site in headless Chromium (Playwright), served over HTTP under
    ``url_prefix``, at each of :data:`VIEWPORT_WIDTHS`, and check that it has
    no console error, uncaught error or failed request (requests leaving the site are blocked
    and fail: the book works offline), except :data:`ALLOWED_BROWSER_ERRORS`;
    every image loaded (``naturalWidth > 0``);
    no raw TeX in the visible text outside code (:data:`RAW_TEX`), every math node typeset by
    MathJax, no MathJax error, and typeset math wherever the page's source has math;
    no table, figure, image or display equation cut off or wider than the content column
    unless it sits in a horizontal scroll container within the column, and no sideways scroll;
    a download link to the page's own source that the site serves, launch links that are
    Binder/Colab URLs of ``repository`` opening the page's source there;
    figure pages not blank (screenshots of every page go to ``out_dir``);
    at the first width, the landing page's verdicts, each figure page's first figure and the
    claims page's table (its headings and first claim, :func:`first_table_problems`) on the
    first screen.
    Each page is opened as a first-time reader; below :data:`PHONE_WIDTH` as on a phone, where a
    scroll container must show a scrollbar the page styles (overlay ones are invisible).
    With ``search=(query, page)``, the search page must find that page for the query."""
    from playwright.sync_api import sync_playwright  # pinned in requirements.txt

    html_dir = Path(html_dir).resolve()
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    problems = []
    with serve(html_dir, url_prefix) as base, sync_playwright() as pw:
        # scrollbars shown (Playwright hides them by default), so that the layout check sees
        # whether a scroll container shows one
        chrome = pw.chromium.launch(executable_path=browser, ignore_default_args=["--hide-scrollbars"],
                                    args=["--disable-gpu", "--disable-dev-shm-usage"])
        origin = re.escape(base[:base.index("/", len("http://"))])

        @contextlib.contextmanager
        def visitor(width):
            """A first-time reader (fresh storage: the theme's first visit is checked on every
            page) at ``width``; nothing may be fetched from outside the site (blocked, such a
            request fails)."""
            phone = dict(is_mobile=True, has_touch=True) if width < PHONE_WIDTH else {}
            context = chrome.new_context(viewport={"width": width, "height": VIEWPORT_HEIGHT}, **phone)
            context.route(re.compile(rf"^(?!{origin}/)"), lambda route: route.abort("blockedbyclient"))
            try:
                yield context
            finally:
                context.close()

        for width in VIEWPORT_WIDTHS:
            for rel in site_pages(html_dir):
                with visitor(width) as context:
                    problems += _check_page(context, base, html_dir, rel, width, repository, out_dir)
        if search:
            with visitor(VIEWPORT_WIDTHS[0]) as context:
                expected = page_path(Path(""), search[1]).as_posix()
                problems += _check_search(context, base, html_dir, search[0], expected)
        chrome.close()
    return list(dict.fromkeys(problems))  # a problem seen at both widths is reported once


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--html-dir", type=Path, default=BOOK_DIR / "_build" / "html")
    p.add_argument("--screenshots", type=Path, default=BOOK_DIR / "_build" / "screenshots")
    p.add_argument("--no-browser", action="store_true", help="skip the browser checks")
    p.add_argument("--url-prefix", default=None,
                   help="URL path the site is served under (default: derived from repository.url "
                        "in the book's _config.yml, two folders above --html-dir)")
    args = p.parse_args(argv)
    if not args.html_dir.is_dir():
        print(f"no built book at {args.html_dir}; run `gtalib book` first", file=sys.stderr)
        return 2
    problems = check_static(args.html_dir)
    book_dir = args.html_dir.resolve().parent.parent
    prefix = args.url_prefix or site_url_prefix(book_dir)
    problems += check_links(args.html_dir, prefix)
    browser = None if args.no_browser else chromium()
    if browser:
        t0 = time.perf_counter()
        problems += check_rendered(args.html_dir, args.screenshots, browser, prefix,
                                   Repository.from_book(book_dir), SEARCH)
        print(f"browser checks: {len(site_pages(args.html_dir))} pages at "
              f"{'/'.join(map(str, VIEWPORT_WIDTHS))} px in {time.perf_counter() - t0:.0f} s")
    else:
        print("browser checks skipped: " + ("--no-browser" if args.no_browser else
              f"no browser found ({', '.join(BROWSERS)})"))
    for line in problems:
        print(f"FAIL {line}")
    if not problems:
        print(f"book OK: {args.html_dir}" + (f", screenshots in {args.screenshots}" if browser else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
