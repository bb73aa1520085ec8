"""Sphinx hooks for the published book, loaded through ``sphinx.local_extensions`` in
``_config.yml``.

* **Launch buttons.** sphinx-book-theme builds the Binder and Colab links from the page's place in
  the book (``book/generated/<name>.ipynb``). The chapters under ``generated/`` are the copies
  that papermill executes at build time, not files of the repository; their source is
  ``notebooks/<name>.ipynb``. ``gtalib_launch_sources`` maps a folder of the book to the
  repository folder that holds its sources, and the links of those pages are rewritten to it.
  A page whose links do not have the expected form fails the build (a Sphinx warning under
  ``-W``) rather than publishing a dead link.
* **404 page.** sphinx-notfound-page writes ``404.html`` with absolute links, so it needs the URL
  path the site is served under. GitHub Pages serves ``https://github.com/<org>/<repo>`` at
  ``https://<org>.github.io/<repo>/``: the path ``/<repo>/`` is derived from ``repository.url``
  (the one place the repository is named) unless ``notfound_urls_prefix`` is set explicitly.
* **Meta description.** Every page gets ``<meta name="description">`` for search engines and link
  previews: the page's ``description`` metadata (front matter) if it has one, else its first
  paragraph of prose without math (:func:`page_description`), shortened to
  :data:`DESCRIPTION_CHARS` characters at a word.
* **Substitutions.** The values a build computes for a Markdown page's sentences (the landing
  page's run counts) are written by the job into ``generated/substitutions.json``; they become
  MyST substitutions (``{{ name }}``) beside any set in ``_config.yml``.
* **Scripts once.** sphinx-thebe 0.3.1 (installed with jupyter-book 1.0.4) registers its inline
  configuration script twice, and the second ``const`` declaration throws in the browser's
  console on every page; a script registered twice is written once.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlparse

from docutils import nodes
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)


def pages_url_prefix(repository_url: str) -> str:
    """The URL path under which GitHub Pages serves the project site of ``repository_url``.

    ``https://github.com/org/repo`` → ``/repo/``; a user or organisation site
    (``https://github.com/org/org.github.io``) is served at the root, ``/``.

    Raises:
        ValueError: ``repository_url`` is not ``https://github.com/<org>/<repo>``.
    """
    url = urlparse(repository_url or "")
    parts = [p for p in url.path.split("/") if p]
    if url.scheme != "https" or url.netloc != "github.com" or len(parts) != 2:
        raise ValueError(f"repository.url must be https://github.com/<org>/<repo>, got "
                         f"{repository_url!r}")
    org, repo = parts
    return "/" if repo.lower() == f"{org.lower()}.github.io" else f"/{repo}/"


def _set_notfound_prefix(app, config) -> None:
    if config.notfound_urls_prefix != "/en/latest/":  # set explicitly in _config.yml
        return
    config.notfound_urls_prefix = pages_url_prefix(
        config.html_theme_options.get("repository_url", ""))


#: The build's substitutions (:func:`gtalib.book.chapters.headline.run_facts`), in the book.
SUBSTITUTIONS = Path("generated") / "substitutions.json"


def _add_substitutions(app, config) -> None:
    path = Path(app.srcdir) / SUBSTITUTIONS
    if path.exists():
        config.myst_substitutions = {**(getattr(config, "myst_substitutions", None) or {}),
                                     **json.loads(path.read_text())}


def _rewrite_launch_links(app, pagename, templatename, context, doctree) -> None:
    sources = app.config.gtalib_launch_sources
    folder = next((f for f in sources if pagename.startswith(f.rstrip("/") + "/")), None)
    groups = [b for b in context.get("header_buttons", []) if b.get("label") == "launch-buttons"]
    if folder is None or not groups:
        return
    book_path = app.config.html_theme_options.get("path_to_docs", "").strip("/")
    built = "/".join(p for p in (book_path, pagename) if p) + ".ipynb"
    source = sources[folder].strip("/") + "/" + pagename[len(folder.rstrip("/")) + 1:] + ".ipynb"
    for button in (b for g in groups for b in g["buttons"] if b.get("url")):
        if built not in button["url"]:
            LOGGER.warning(f"{pagename}: launch link {button['url']!r} does not contain "
                           f"{built!r}; cannot point it at {source!r}")
            continue
        button["url"] = button["url"].replace(built, source)


#: The longest meta description (search engines cut theirs at about 155-160 characters).
DESCRIPTION_CHARS = 158


def page_description(doctree, fallback: str = "") -> str:
    """The first paragraph of ``doctree`` that is prose (not in a code cell or its output, no
    math, at least 40 characters), whitespace collapsed and cut at a word to at most
    :data:`DESCRIPTION_CHARS` characters (with "…"); ``fallback`` when there is none."""
    for para in doctree.findall(nodes.paragraph) if doctree is not None else ():
        if any(isinstance(n, nodes.math) for n in para.findall()):
            continue
        if any(c == "cell" or c.startswith("output") for a in _ancestors(para)
               for c in a.get("classes", [])):
            continue
        text = re.sub(r"\s+", " ", para.astext()).strip()
        if len(text) >= 40:
            break
    else:
        text = fallback
    if len(text) > DESCRIPTION_CHARS:
        text = text[:DESCRIPTION_CHARS - 1].rsplit(" ", 1)[0].rstrip(",;:(") + "…"
    return text


def _ancestors(node):
    while node.parent is not None:
        node = node.parent
        yield node


def _add_description(app, pagename, templatename, context, doctree) -> None:
    metatags = context.get("metatags", "")
    if 'name="description"' in metatags:
        return
    meta = context.get("meta") or {}
    text = meta.get("description") or page_description(doctree, context.get("title", ""))
    if text:
        text = re.sub(r"<[^>]+>", "", str(text))
        escaped = (text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
                   .replace(">", "&gt;"))
        context["metatags"] = metatags + f'\n    <meta name="description" content="{escaped}" />'


def _scripts_once(app, pagename, templatename, context, doctree) -> None:
    # one inline script is registered once with filename None and once with "" (same body)
    seen, kept = set(), []
    for js in context.get("script_files", []):
        key = (getattr(js, "filename", js) or "", getattr(js, "priority", None),
               tuple(sorted((k, str(v)) for k, v in getattr(js, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            kept.append(js)
    context["script_files"] = kept


def setup(app):
    app.add_config_value("gtalib_launch_sources", {}, "html", types=[dict])
    app.connect("config-inited", _set_notfound_prefix, priority=900)
    app.connect("config-inited", _add_substitutions, priority=900)
    # after sphinx-book-theme's add_launch_buttons (priority 501), before the page is rendered
    app.connect("html-page-context", _rewrite_launch_links, priority=510)
    app.connect("html-page-context", _add_description, priority=520)
    # before any handler that returns a template name (the event stops at the first that does)
    app.connect("html-page-context", _scripts_once, priority=521)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
