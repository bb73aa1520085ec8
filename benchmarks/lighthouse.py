#!/usr/bin/env python
"""Lighthouse scores of the built book: the landing page, one figure page and the claims page,
on a phone and on a desktop, with the audits that cost a point; writes ``benchmarks/lighthouse.md`` and
``benchmarks/lighthouse.json``.

Usage (one command; npm fetches Lighthouse once):
    .venv/bin/python benchmarks/lighthouse.py [--html-dir book/_build/html]

Serves the built site over HTTP under its GitHub Pages path (as scripts/check_book.py does) and
runs ``npx lighthouse@12.2.3`` (it works with Node 20) on Debian's chromium (``CHROME_PATH``,
default ``/usr/bin/chromium``), headless, nothing fetched from outside the site that the book
does not fetch itself. Records the date, the machine's CPU (``/proc/cpuinfo``), the commit and
the versions of Lighthouse, Chromium and Node.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIGHTHOUSE = "lighthouse@12.2.3"
#: The pages scored: the landing page, the first ablation figure's page and the claims page.
PAGES = ("intro.html", "generated/init_ablation.html", "generated/claims.html")
CATEGORIES = ("performance", "accessibility", "best-practices", "seo")
CHROME_FLAGS = ("--headless=new --no-sandbox --disable-gpu --disable-background-networking "
                "--disable-dev-shm-usage")


def _check_book():
    spec = importlib.util.spec_from_file_location("check_book", REPO / "scripts" / "check_book.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cpu_name() -> str:
    """The CPU as /proc/cpuinfo names it, with its family and model numbers."""
    info = {}
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        key, _, value = line.partition(":")
        info.setdefault(key.strip(), value.strip())
    return (f"{info.get('model name', platform.processor())} (family {info.get('cpu family')}, "
            f"model {info.get('model')}; {os.cpu_count()} logical CPUs)")


def run(cmd, **kw) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=True, **kw).stdout.strip()


def score(url: str, form: str, out: Path, chrome: str) -> dict:
    """One Lighthouse run: ``{category: score 0-100}`` and the audits below 1 (id → title)."""
    cmd = ["npx", "--yes", LIGHTHOUSE, url, "--quiet", "--output=json", f"--output-path={out}",
           f"--only-categories={','.join(CATEGORIES)}", f"--chrome-flags={CHROME_FLAGS}"]
    if form == "desktop":
        cmd.append("--preset=desktop")
    subprocess.run(cmd, check=True, env={**os.environ, "CHROME_PATH": chrome})
    report = json.loads(out.read_text())
    scores = {c: round(100 * report["categories"][c]["score"]) for c in CATEGORIES}
    lost = {}
    for c in CATEGORIES[1:]:  # what costs accessibility, best practices or SEO a point
        for ref in report["categories"][c]["auditRefs"]:
            audit = report["audits"][ref["id"]]
            if ref["weight"] and audit["score"] is not None and audit["score"] < 1:
                lost[ref["id"]] = audit["title"]
    return {"scores": scores, "lost": lost, "lighthouse": report["lighthouseVersion"],
            "user_agent": report["environment"]["hostUserAgent"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--html-dir", type=Path, default=REPO / "book" / "_build" / "html")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "lighthouse")
    args = p.parse_args(argv)
    chrome = os.environ.get("CHROME_PATH", "/usr/bin/chromium")
    check = _check_book()
    html = args.html_dir.resolve()
    prefix = check.site_url_prefix(html.parent.parent)
    summary = json.loads((html.parent.parent / "generated" / "build_summary.json").read_text())
    load = os.getloadavg()[0]
    results = {}
    with check.serve(html, prefix) as base, tempfile.TemporaryDirectory() as tmp:
        for page in PAGES:
            for form in ("mobile", "desktop"):
                print(f"lighthouse {page} ({form}) ...", flush=True)
                results[f"{page} ({form})"] = score(base + page, form, Path(tmp) / "r.json",
                                                    chrome)
    commit = run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO)
    dirty = bool(run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO))
    env = {"date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "cpu": cpu_name(), "commit": commit + (" (with uncommitted changes)" if dirty else ""),
           "lighthouse": next(iter(results.values()))["lighthouse"],
           "chromium": run([chrome, "--version"]), "node": run(["node", "--version"]),
           "load_average_before": round(load, 2),
           "book": {k: summary.get(k) for k in ("preset", "seeds", "runs_trained", "runs_read")}}
    data = {"environment": env, "results": {k: {"scores": v["scores"], "lost": v["lost"]}
                                            for k, v in results.items()}}
    args.out.with_suffix(".json").write_text(json.dumps(data, indent=2) + "\n")
    book = env["book"]
    trained = ("nothing trained (`--no-train`): every run read from the run store or the "
               "repository's records" if book["runs_trained"] is None else
               f"{book['runs_trained']} runs trained, {book['runs_read']} read from records")
    lines = [
        "# Lighthouse scores of the book", "",
        f"Measured {env['date_utc']} on {env['cpu']}, commit {env['commit']}, Lighthouse "
        f"{env['lighthouse']} (`npx {LIGHTHOUSE}`), {env['chromium']} (Debian's, headless), Node "
        f"{env['node']}, on the book built at preset `{book['preset']}` ({trained}), served "
        f"locally under its GitHub Pages path; load average {env['load_average_before']} before "
        "(a shared machine). Performance depends on the machine and its load; the other three "
        "do not. Regenerate with:", "",
        "```bash", ".venv/bin/python benchmarks/lighthouse.py   # after `gtalib book`", "```", "",
        "| page | " + " | ".join(CATEGORIES) + " | below 1 (accessibility, best practices, SEO) |",
        "|---|" + "---|" * (len(CATEGORIES) + 1)]
    for page, r in results.items():
        lines.append(f"| {page} | " + " | ".join(str(r["scores"][c]) for c in CATEGORIES)
                     + f" | {', '.join(r['lost'].values()) or 'none'} |")
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-len(results) - 2:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
