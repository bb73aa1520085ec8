"""A user's own attention variant, named by import path: ``"module.path:ClassName"``, a subclass
of :class:`gtalib.model.attention.base.Attention` defined outside gtalib.

Such a name is accepted wherever a variant name is (:func:`gtalib.model.config.canonical_variant`
keeps it as typed). A :class:`~gtalib.model.config.ModelConfig` of it records the class's
source hash (:func:`source_hash`, its field ``variant_source``), so the run id of a changed
class is another id and a run of the old class is never read for it; building a model refuses a
spec whose class has changed since (:func:`variant_class`). Its KV cache is what its
``cache_shapes`` declares (:meth:`~gtalib.model.attention.base.Attention.kv_elems_per_token`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import sys


def is_user_variant(name) -> bool:
    """Whether ``name`` is an import path (``"module:Class"``) rather than a built-in name."""
    return isinstance(name, str) and ":" in name


def check_path(name: str) -> str:
    """``name`` stripped, when it has the form ``module.path:ClassName`` (dotted identifiers).

    Raises:
        KeyError: another form; the message shows the allowed one.
    """
    path = name.strip()
    module, _, cls = path.partition(":")
    if not (module and cls and all(p.isidentifier() for p in module.split("."))
            and cls.isidentifier()):
        raise KeyError(f"variant {name!r} is not an import path of the form "
                       f"'module.path:ClassName'")
    return path


def variant_class(path: str, source: str | None = None) -> type:
    """The class named by the import path ``path``, checked.

    Args:
        source: the class's :func:`source_hash` as a spec recorded it; ``None``: not checked.
    Raises:
        ValueError: one line saying why: the module does not import, it has no such class, the
            class is not a subclass of gtalib's ``Attention``, it is one of gtalib's own, or its
            source has changed since ``source`` was taken.
    """
    path = check_path(path)
    module_name, _, cls_name = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any import-time failure of the user's module
        raise ValueError(f"variant {path!r}: cannot import module {module_name!r} "
                         f"({type(exc).__name__}: {exc})") from None
    cls = getattr(module, cls_name, None)
    # a subclass of Attention has loaded its module; looked up, not imported (that module
    # imports this one through gtalib.model.config)
    base = sys.modules.get("gtalib.model.attention.base")
    if not (inspect.isclass(cls) and base is not None and issubclass(cls, base.Attention)):
        raise ValueError(f"variant {path!r}: {module_name}.{cls_name} is not a subclass of "
                         f"gtalib.model.attention.Attention")
    if cls.__module__.split(".")[0] == "gtalib":
        raise ValueError(f"variant {path!r}: a class of gtalib itself; name it by its variant name")
    if source is not None and source_hash(cls) != source:
        raise ValueError(f"variant {path!r}: the class's source has changed since this spec was "
                         f"made (sha256 {source_hash(cls)[:12]}…, the spec's {source[:12]}…); "
                         f"make a new spec")
    return cls


@functools.lru_cache(maxsize=None)
def source_hash(cls: type) -> str:
    """sha256 (hex) of the class's source text (:func:`inspect.getsource`), read once per class
    object: the source of the code that runs (a module imported again makes a new class).

    Raises:
        ValueError: the source cannot be read (a class defined at an interactive prompt).
    """
    try:
        text = inspect.getsource(cls)
    except (OSError, TypeError) as exc:
        raise ValueError(f"variant class {cls.__qualname__}: its source cannot be read ({exc}); "
                         f"define it in a module file") from None
    return hashlib.sha256(text.encode()).hexdigest()


def display_name(path: str) -> str:
    """How the book names a user's variant: its class name."""
    return check_path(path).partition(":")[2]
