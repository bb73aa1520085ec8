"""The notebooks' parameters, validated in one place.

papermill hands a notebook what its command line says: ``-p train false`` arrives as the string
``"false"`` (papermill only converts ``True``/``False``/``None`` and numbers), ``-p variants
"gqa,mla"`` as one string, ``-y`` values as YAML. Every notebook therefore passes its
``parameters`` cell through :func:`notebook_params` before doing anything else; the function
returns typed values or raises :class:`ParameterError` naming the parameter, the value it got and
what is allowed, before any run is trained.

Accepted spellings:

- booleans: ``True``/``False``, ``1``/``0``, and the strings ``true/false``, ``yes/no``,
  ``1/0`` in any case;
- integers: ``int`` or a string of digits (``"3"``); never a bool or a fraction;
- lists (``variants``): a list or tuple, a comma-separated string (``"gqa,mla"``), a YAML flow
  or block list (``"[gqa, mla]"``, ``"- gqa\\n- mla"``) or a JSON list (``'["gqa", "mla"]'``);
- ``None`` where a parameter has a default meaning: as ``None`` or the strings ``none``,
  ``null`` or the empty string.
"""

from __future__ import annotations

import ast
import html
import math
import os
from dataclasses import dataclass, fields
from functools import cached_property
from pathlib import Path

import yaml

from gtalib.book.design.figures import figure_spec
from gtalib.book.design.plan import Plan, make_plan
from gtalib.book.design.seeds import DEFAULT_SEEDS, MAX_SEEDS, counts_words, seed_counts
from gtalib.book.pipeline.paths import REPO
from gtalib.model.presets import PRESETS

_TRUE = ("true", "yes", "1")
_FALSE = ("false", "no", "0")
_NONE = ("none", "null", "")
BOOL_ALLOWED = "a boolean: true/false, yes/no or 1/0 (any case)"


class ParameterError(ValueError):
    """A notebook parameter has a value the notebook cannot use (the message names it)."""


def _fail(name: str, value, allowed: str):
    raise ParameterError(f"notebook parameter {name!r} = {value!r} ({type(value).__name__}): "
                         f"expected {allowed}")


def _is_none(value) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in _NONE)


def as_bool(name: str, value) -> bool:
    """``value`` as a bool (spellings in the module docstring).

    Raises:
        ParameterError: anything else, including ``None`` and integers other than 0 and 1.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        key = value.strip().lower()
        if key in _TRUE:
            return True
        if key in _FALSE:
            return False
    _fail(name, value, BOOL_ALLOWED)


def as_int(name: str, value, minimum: int = 1, optional: bool = False,
           maximum: int | None = None) -> int | None:
    """``value`` as an integer ≥ ``minimum`` (and ≤ ``maximum`` if given; an ``int`` or a string
    of digits); ``None`` (or ``"none"``) allowed only when ``optional``.

    Raises:
        ParameterError: a bool, a fraction, another string, or a value outside the range.
    """
    allowed = (f"an integer >= {minimum}" if maximum is None
               else f"an integer from {minimum} to {maximum}") + (" or None" if optional else "")
    if optional and _is_none(value):
        return None
    if isinstance(value, bool):
        _fail(name, value, allowed)
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        number = int(value.strip())
    elif isinstance(value, int):
        number = value
    else:
        _fail(name, value, allowed)
    if number < minimum or (maximum is not None and number > maximum):
        _fail(name, value, allowed)
    return number


def as_fraction(name: str, value) -> float:
    """``value`` as a number strictly between 0 and 1 (a float or a numeric string).

    Raises:
        ParameterError: not a number, or outside (0, 1).
    """
    allowed = "a number strictly between 0 and 1 (e.g. 0.95)"
    if isinstance(value, bool):
        _fail(name, value, allowed)
    try:
        number = float(value)
    except (TypeError, ValueError):
        _fail(name, value, allowed)
    if not (math.isfinite(number) and 0 < number < 1):
        _fail(name, value, allowed)
    return number


def as_list(name: str, value, optional: bool = False) -> list[str] | None:
    """``value`` as a non-empty list of non-empty strings: a list/tuple, a comma string, or a
    YAML/JSON list given as a string; ``None`` allowed only when ``optional``.

    Raises:
        ParameterError: anything else (a number, a mapping, an empty list, a nested item).
    """
    allowed = ('a list of names: a comma string ("gqa,mla"), a YAML or JSON list '
               '("[gqa, mla]", \'["gqa", "mla"]\')' + (" or None" if optional else ""))
    if optional and _is_none(value):
        return None
    items = value
    if isinstance(value, str):
        text = value.strip()
        if text.startswith(("[", "{", "- ")):
            try:
                items = yaml.safe_load(text)
            except yaml.YAMLError:
                _fail(name, value, allowed)
        else:
            items = [part.strip() for part in text.split(",")]
    if not isinstance(items, (list, tuple)) or not items:
        _fail(name, value, allowed)
    out = []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            _fail(name, value, allowed)
        out.append(item.strip())
    return out


def as_choice(name: str, value, choices) -> str:
    """``value`` if it is one of ``choices`` (strings, exact).

    Raises:
        ParameterError: anything else.
    """
    if not isinstance(value, str) or value not in choices:
        _fail(name, value, "one of " + ", ".join(choices))
    return value


def as_path(name: str, value) -> str | None:
    """``value`` as a path string, or ``None`` (the default meaning of the parameter).

    Raises:
        ParameterError: neither a string nor a path.
    """
    if _is_none(value):
        return None
    if not isinstance(value, (str, os.PathLike)):
        _fail(name, value, "a folder path or None (the default)")
    return os.fspath(value)


@dataclass(frozen=True)
class NotebookParams:
    """Validated parameters of one notebook; fields a notebook does not have stay at their
    defaults. The HTML representation is the small parameters table shown on a page, with the
    run store named relative to the repository (never a path of the machine that built it)."""

    preset: str = "cpu"
    seeds: int = DEFAULT_SEEDS
    ladder_seeds: int | None = None
    max_steps: int | None = None
    variants: list | None = None
    run_dir: str | None = None
    train: bool = True
    smoothing: int | None = None
    confidence: float = 0.95
    remeasure_decode: bool = False
    given: tuple = ()
    figure: str | None = None

    @cached_property
    def plan(self) -> Plan:
        """The book's plan at these parameters (:func:`gtalib.book.design.plan.make_plan`),
        resolved once per page and handed to its chapter functions. The corpus is built first
        if it is missing (a notebook run by itself from a fresh clone, training or not: the run
        ids hash it); the book job has built it before.

        Raises:
            FileNotFoundError: the corpus's archives are missing (the message names the command
                that fetches them).
        """
        plan = make_plan(self.preset, self.seeds, self.max_steps)
        plan.data(build=True)
        return plan

    @property
    def seed_notice(self) -> str | None:
        """What the page says when it was given a seed count below its figure's fixed design
        (its spec's ``seeds_at``; a page of every figure, the claims page:
        below any of theirs): the design's count is read, not the one asked for; ``None``
        otherwise, and for the book's own default count
        (:data:`gtalib.book.design.figure_plan.DEFAULT_SEEDS`, which every design meets or raises, as
        the parameters table says)."""
        if "seeds" not in self.given or self.seeds == DEFAULT_SEEDS:
            return None
        if self.figure is None:
            counts = seed_counts(self.preset, self.seeds, self.max_steps)
            if all(n <= self.seeds for n in counts.values()):
                return None
            design = (f"at {self.preset} "
                      f"{counts_words(self.preset, self.seeds, self.max_steps)}")
        else:
            n = figure_spec(self.figure).seeds_at(self.preset, self.seeds, self.max_steps)
            if n <= self.seeds:
                return None
            design = (f"at {self.preset} this {'table' if self.figure == 'main' else 'figure'} "
                      f"runs {n} {'seeds' if self.figure == 'main' else 'seed pairs'}")
        return (f"seeds = {self.seeds} is below the count fixed for this preset before any run: "
                f"{design}, and that is what this page reads; a smaller count would be a "
                "different design, not a subset of this one")

    def shown(self) -> dict:
        """The parameters this notebook was given, as a reader should see them."""
        out = {}
        for name in self.given:
            value = getattr(self, name)
            if name == "run_dir":
                value = run_dir_label(value)
            elif name == "seeds":
                value = self._seeds_shown()
            elif name == "variants" and value is not None:
                value = ", ".join(value)
            elif value is None:
                value = "default"
            out[name] = value
        return out

    def _seeds_shown(self):
        """The book's count, and what the preset's figures make of it
        (:func:`gtalib.book.design.seeds.counts_words`)."""

        words = counts_words(self.preset, self.seeds, self.max_steps)
        if words is None:
            return self.seeds
        return f"{self.seeds} (the book's count; at {self.preset} {words})"

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><th>{html.escape(k)}</th><td><code>{html.escape(str(v))}</code></td>"
                       "</tr>" for k, v in self.shown().items())
        notice = self.seed_notice
        return ((f"<p><strong>Note:</strong> {html.escape(notice)}.</p>" if notice else "")
                + "<details class=\"gtalib-params\"><summary>Parameters of this page</summary>"
                f"<table>{rows}</table></details>")


def run_dir_label(run_dir) -> str:
    """How a page names a run store: ``"default"`` for ``None``, the path relative to the
    repository when it lies inside it, else ``"a folder outside the repository"`` (the
    builder's file system is none of the reader's business)."""
    if run_dir is None:
        return "default ($GTALIB_RUN_DIR, else runs/ in the repository)"
    path = Path(run_dir).resolve()
    try:
        return path.relative_to(REPO).as_posix() or "."
    except ValueError:
        return "a folder outside the repository"


_CHECKS = {
    "seeds": lambda v: as_int("seeds", v, 1, maximum=MAX_SEEDS),  # as the CLI's --seeds
    "ladder_seeds": lambda v: as_int("ladder_seeds", v, 1, optional=True),
    "max_steps": lambda v: as_int("max_steps", v, 1, optional=True),
    "variants": lambda v: as_list("variants", v, optional=True),
    "run_dir": lambda v: as_path("run_dir", v),
    "train": lambda v: as_bool("train", v),
    "smoothing": lambda v: as_int("smoothing", v, 1, optional=True),
    "confidence": lambda v: as_fraction("confidence", v),
    "remeasure_decode": lambda v: as_bool("remeasure_decode", v),
}


#: The parameters of every notebook's first cell, which installs gtalib where it is missing
#: (Colab, a bare Jupyter): the repository (a git URL or a local checkout) and the commit to fetch.
SETUP_PARAMETERS = ("gtalib_source", "gtalib_commit")


def injected_parameters() -> list[str]:
    """The names papermill injected into the running notebook (its ``-p``/``-y`` parameters),
    read from IPython's input history: papermill's cell is the one whose first line is exactly
    ``# Parameters``. ``[]`` outside an IPython kernel or when nothing was injected."""
    try:
        from IPython import get_ipython
    except ImportError:
        return []
    shell = get_ipython()
    names = []
    for source in (shell.user_ns.get("In", []) if shell is not None else []):
        if source.startswith("# Parameters\n"):
            names += [t.id for node in ast.parse(source).body if isinstance(node, ast.Assign)
                      for t in node.targets if isinstance(t, ast.Name)]
    return names


def notebook_params(figure: str | None = None, **given) -> NotebookParams:
    """Validate a notebook's parameters (keywords named as in its ``parameters`` cell).

    Args:
        figure: the figure of the notebook: an ablation key (``"init"``, ``"gate"``, ...; its
            ``variants`` are checked against that figure's list) or ``"main"``; the seed
            notice (:attr:`NotebookParams.seed_notice`) is about it (``None``: every figure).
        given: the notebook's parameters: ``preset``, ``seeds``, ``ladder_seeds``,
            ``max_steps``, ``variants``,
            ``run_dir``, ``train``, ``smoothing``, ``confidence``, ``remeasure_decode``.
    Returns:
        :class:`NotebookParams` with typed values (variant names canonical).
    Raises:
        ParameterError: an unknown parameter name or a value outside what is allowed (the
            message names the parameter, the value and the allowed values); also a parameter
            papermill injected (:func:`injected_parameters`) that the notebook does not declare
            (papermill itself only warns: ``-p sedes 3`` would otherwise run at the default).
    """

    names = [f.name for f in fields(NotebookParams) if f.name not in ("given", "figure")]
    unknown = [k for k in given if k not in names]
    if unknown:
        raise ParameterError(f"unknown notebook parameter(s) {', '.join(map(repr, unknown))}; "
                             f"known: {', '.join(names)}")
    allowed = [*given, *SETUP_PARAMETERS]
    stray = [k for k in injected_parameters() if k not in allowed]
    if stray:
        raise ParameterError(f"unknown notebook parameter(s) {', '.join(map(repr, stray))}; "
                             f"this notebook takes: {', '.join(allowed)}")
    out = {}
    for name, value in given.items():
        if name == "preset":
            out[name] = as_choice(name, value, tuple(PRESETS))
        else:
            out[name] = _CHECKS[name](value)
    if out.get("variants") is not None:
        if figure is None:
            raise ParameterError("notebook parameter 'variants' needs the figure it selects from")

        try:
            out["variants"] = list(figure_spec(figure).variants_at(out.get("preset", "cpu"),
                                                           out["variants"]))
        except KeyError as e:
            raise ParameterError(f"notebook parameter 'variants' = {given['variants']!r}: "
                                 f"{e.args[0]}") from None
    return NotebookParams(**out, given=tuple(given), figure=figure)
