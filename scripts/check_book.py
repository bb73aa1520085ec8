#!/usr/bin/env python
"""Check a built book: every page exists, each figure page shows its image, no page has an error
output, math is served offline, every internal link and image resolves (anchors included), the
404 page exists; with Debian's chromium, render the figure pages headless and fail on blank or
broken screenshots and on math that MathJax did not typeset.

Usage: .venv/bin/python scripts/check_book.py [--html-dir book/_build/html] [--screenshots DIR]
Exit status 0 when every check passes; each failure is printed on its own line.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
import yaml

from gtalib.book.design.chapters import figure_notebooks, notebooks
from gtalib.book.pipeline.job import html_error_outputs
from gtalib.book.pipeline.paths import BOOK_DIR

PROSE_PAGES = ("intro", "methods", "reproduction")
#: A screenshot whose grey levels vary less than this (std, 0..1 scale) is taken as blank.
BLANK_STD = 0.02
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run",
                  "--hide-scrollbars")


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


def chromium() -> str | None:
    for name in ("/usr/bin/chromium", "chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def check_rendered(html_dir: Path, out_dir: Path, browser: str) -> list[str]:
    """Screenshot every figure page (fail if blank) and check MathJax typeset the methods page."""
    problems = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in figure_notebooks():
        page = page_path(html_dir, name)
        png = out_dir / f"{name}.png"
        with tempfile.TemporaryDirectory() as profile:
            r = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                                "--window-size=1280,2400", "--virtual-time-budget=8000",
                                f"--screenshot={png}", page.resolve().as_uri()],
                               capture_output=True, text=True, timeout=120)
        if r.returncode != 0 or not png.exists():
            problems.append(f"{name}: chromium failed ({r.returncode}): {r.stderr[-500:]}")
        elif image_is_blank(png):
            problems.append(f"{name}: rendered page is blank ({png})")
    with tempfile.TemporaryDirectory() as profile:
        r = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                            "--virtual-time-budget=10000", "--dump-dom",
                            page_path(html_dir, "methods").resolve().as_uri()],
                           capture_output=True, text=True, timeout=120)
    if "mjx-container" not in r.stdout:
        problems.append("methods.html: MathJax did not typeset the math (no mjx-container)")
    return problems


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--html-dir", type=Path, default=BOOK_DIR / "_build" / "html")
    p.add_argument("--screenshots", type=Path, default=BOOK_DIR / "_build" / "screenshots")
    p.add_argument("--no-browser", action="store_true", help="skip the chromium checks")
    p.add_argument("--url-prefix", default=None,
                   help="URL path the site is served under (default: derived from repository.url "
                        "in the book's _config.yml, two folders above --html-dir)")
    args = p.parse_args(argv)
    if not args.html_dir.is_dir():
        print(f"no built book at {args.html_dir}; run `gtalib book` first", file=sys.stderr)
        return 2
    problems = check_static(args.html_dir)
    prefix = args.url_prefix or site_url_prefix(args.html_dir.resolve().parent.parent)
    problems += check_links(args.html_dir, prefix)
    browser = None if args.no_browser else chromium()
    if browser:
        problems += check_rendered(args.html_dir, args.screenshots, browser)
    else:
        print("chromium not found: rendered-page checks skipped")
    for line in problems:
        print(f"FAIL {line}")
    if not problems:
        print(f"book OK: {args.html_dir}" + (f", screenshots in {args.screenshots}" if browser else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
