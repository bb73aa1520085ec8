"""Copy the built book's answer, the introduction's forest plot, into docs/ for the README.

The landing page of a built book shows the four ablations' final ΔL per variant beside the
paper's value, coloured by verdict (``gtalib.book.chapters.headline.forest_figure``, written by
the build as ``book/generated/headline-forest-wide.png`` at 200 dpi). This script halves it (the
mean of each 2×2 block of pixels, so 100 dpi: about 850 px wide, small enough to commit) and
writes ``docs/book_answer.png``, and prints the headline's claims table beside it, from which the
README's verdict lines are written. Regenerate both with the default book read from its records
(nothing trained, a few minutes on two cores)::

    .venv/bin/gtalib book --no-train --run-dir /tmp/empty-runs
    .venv/bin/python scripts/readme_figure.py

Usage: ``scripts/readme_figure.py [--book-dir book] [--out docs/book_answer.png]``. Exits with
status 1 and one line when the book has not been built (no forest plot in ``BOOK/generated``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib.image as mpimg

REPO = Path(__file__).resolve().parents[1]


def halved(pixels):
    """``pixels`` (H, W, C floats in 0..1) at half the size: each 2×2 block's mean."""
    h, w = pixels.shape[0] // 2 * 2, pixels.shape[1] // 2 * 2
    p = pixels[:h, :w]
    return (p[0::2, 0::2] + p[1::2, 0::2] + p[0::2, 1::2] + p[1::2, 1::2]) / 4


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--book-dir", type=Path, default=REPO / "book")
    p.add_argument("--out", type=Path, default=REPO / "docs" / "book_answer.png")
    args = p.parse_args(argv)
    generated = args.book_dir / "generated"
    source = generated / "headline-forest-wide.png"
    if not source.is_file():
        print(f"readme_figure: no {source}: build the book first (gtalib book --no-train)",
              file=sys.stderr)
        return 1
    mpimg.imsave(args.out, halved(mpimg.imread(source))[..., :3])
    summary = json.loads((generated / "build_summary.json").read_text())
    print(f"{args.out}: from {source} (preset {summary['preset']})")
    print((generated / "headline.md").read_text().split("```{image}")[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
