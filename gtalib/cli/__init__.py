"""The cli layer: the ``gtalib`` command line (console script ``gtalib = gtalib.cli:main``, or
``python -m gtalib``).

Top layer. May import: every layer below (``gtalib.book``, ``gtalib.decode``, ``gtalib.training``,
``gtalib.model``, ``gtalib.data``, ``gtalib.kernels``). Nothing below imports it.

One module per subcommand, each with an ``add_cli(subparsers)`` that registers its parsers and
sets ``func`` on the leaves (handlers return an exit status); :mod:`gtalib.cli.core` holds what
they share (argument types, :class:`~gtalib.cli.core.CliError`, one-line errors with exit 2).
Heavy libraries (torch, Lightning, pandas) are imported inside the handlers, so
``gtalib --help`` stays fast.

================  =====================================================================
module            subcommand
================  =====================================================================
``train``         ``gtalib train``, ``gtalib runs``
``data``          ``gtalib data build|info``
``record``        ``gtalib record add|list|check|costs``
``probe``         ``gtalib probe``
``tables``        ``gtalib tables params|kv``
``book``          ``gtalib book``
``decode``        ``gtalib decode`` (tensor-parallel decode check; ``torchrun -m gtalib decode``)
================  =====================================================================
"""

from __future__ import annotations

import argparse
import sys

from gtalib.cli import book, data, decode, probe, record, tables, train
from gtalib.cli.core import run_command, run_reporting_errors
from gtalib.cli.signals import command_process, stop_status, stop_words

#: The subcommand modules, in the order ``gtalib --help`` lists them.
SUBCOMMANDS = (train, data, record, probe, tables, book, decode)


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, like every other error of the command
    (``gtalib book: error: argument --seeds: …``, exit 2), pointing to ``--help`` instead of
    printing the usage block. Its subparsers are of the same class (argparse's default)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    """The full ``gtalib`` parser with every subcommand registered."""
    parser = OneLineParser(
        prog="gtalib",
        description="Attention variants of Multi-Head Low-Rank Attention (MLRA, arXiv 2603.02188): "
                    "train them, build the corpora, print the tables, build the book.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.add_cli(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``gtalib`` console script; returns the exit status (2 and a one-line
    message for an expected error, :func:`gtalib.cli.core.run_reporting_errors`; 130 after
    Ctrl-C and 143 after SIGTERM, with one line, :mod:`gtalib.cli.signals`)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    action = getattr(args, f"{args.command}_command", None)  # e.g. `gtalib record check`
    prog = f"gtalib {args.command}" + (f" {action}" if action else "")
    with command_process():
        try:
            status = run_reporting_errors(prog, run_command, args)
        except KeyboardInterrupt:  # a command without words of its own for it
            print(f"{prog}: {stop_words()}", file=sys.stderr)
            return stop_status()
    return stop_status() if status == 130 else status


if __name__ == "__main__":
    sys.exit(main())
