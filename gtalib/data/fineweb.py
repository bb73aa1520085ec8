"""FineWeb-Edu (``HuggingFaceFW/fineweb-edu``, configs ``sample-10BT`` / ``sample-100BT``) through HF ``datasets``.

The same pipeline as the registry corpus (:func:`gtalib.data.build.build_from_documents`): the
first documents of the config's ``train`` split, in the dataset's own order, up to a token budget,
become one source ``fineweb-edu`` with its own held-out validation split.

Two ways in:

* online: ``datasets.load_dataset("HuggingFaceFW/fineweb-edu", name=config, streaming=True)`` at
  the hub commit that :func:`check_hub` reads first (recorded in the manifest as ``version``);
* a local folder laid out like the hub repository: ``sample/10BT/*.parquet`` (``sample/100BT/...``)
  with a ``text`` column, and a ``README.md`` whose YAML front matter declares the configs, e.g.::

      ---
      configs:
      - config_name: sample-10BT
        data_files:
        - split: train
          path: sample/10BT/*
      ---

  (``datasets`` reads that front matter; nothing is fetched.) The manifest records the sha256 of
  the data files read.

Without a local path, the hub is probed first with a short timeout; when ``HF_HUB_OFFLINE`` or
``HF_DATASETS_OFFLINE`` is set, or the probe fails, :class:`HubUnavailable` is raised at once with
a message saying to pass a local folder.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Iterator

from .build import SourceDocs, build_from_documents, corpus_dir
from .sources import clean_text
from .tokenizers import get_tokenizer

REPO = "HuggingFaceFW/fineweb-edu"
CONFIGS = {"sample-10BT": "sample/10BT", "sample-100BT": "sample/100BT"}
HUB_TIMEOUT_S = 5.0


class HubUnavailable(ConnectionError):
    """The Hugging Face hub cannot be reached (offline mode or no connection)."""


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def check_hub(repo: str = REPO, timeout: float = HUB_TIMEOUT_S) -> str:
    """Probe the hub for dataset ``repo`` and return its current commit sha.

    Raises:
        HubUnavailable: offline mode is set, or the probe failed within ``timeout`` seconds. The
            message says to pass a local folder in the hub layout instead.
    """
    advice = (f"pass a local folder laid out like {repo} (e.g. `gtalib data build --corpus fineweb-edu "
              f"--path DIR`, DIR/sample/10BT/*.parquet with a `text` column and README configs)")
    if _truthy("HF_HUB_OFFLINE") or _truthy("HF_DATASETS_OFFLINE"):
        raise HubUnavailable(f"the Hugging Face hub is disabled (HF_HUB_OFFLINE/HF_DATASETS_OFFLINE); {advice}")
    from huggingface_hub import HfApi

    try:
        return HfApi().dataset_info(repo, timeout=timeout).sha
    except Exception as e:  # DNS, refused, timeout, HTTP errors: all mean "not usable now"
        raise HubUnavailable(f"cannot reach the Hugging Face hub for {repo} ({type(e).__name__}: {e}); "
                             f"{advice}") from e


def fineweb_corpus_name(config: str) -> str:
    """Corpus name of a FineWeb-Edu config, as used by :class:`~gtalib.data.TokenDataModule`."""
    return f"fineweb-edu-{config}"


def _check_config(config: str) -> None:
    if config not in CONFIGS:
        raise ValueError(f"config must be one of {sorted(CONFIGS)}, got {config!r}")


def iter_documents(config: str = "sample-10BT", path: str | os.PathLike | None = None,
                   revision: str | None = None) -> Iterator[tuple[str, str]]:
    """``(id, text)`` of the config's train split, streamed in the dataset's order.

    Args:
        config: ``"sample-10BT"`` or ``"sample-100BT"``.
        path: local folder in the hub layout; None streams from the hub (call :func:`check_hub` first).
        revision: hub commit to read (ignored for a local folder).

    Raises:
        ValueError: unknown config. FileNotFoundError: ``path`` is not a folder.
    """
    import datasets

    _check_config(config)
    if path is not None and not Path(path).is_dir():
        raise FileNotFoundError(f"FineWeb-Edu path {path} is not a folder")
    src = str(path) if path is not None else REPO
    ds = datasets.load_dataset(src, name=config, split="train", streaming=True,
                               revision=None if path is not None else revision)
    for i, row in enumerate(ds):
        yield str(row.get("id") or i), row["text"]


def build_fineweb(config: str = "sample-10BT", tokenizer: str = "gpt2", path: str | os.PathLike | None = None,
                  max_tokens: int = 10_000_000, data_dir=None) -> Path:
    """Build corpus :func:`fineweb_corpus_name` (``config``) from the first documents whose cleaned
    text holds ``max_tokens`` tokens in total (the last document is included whole).

    Returns:
        the corpus folder ``<data_dir>/corpora/fineweb-edu-<config>-<tokenizer>``.

    Raises:
        HubUnavailable: ``path`` is None and the hub is unreachable or disabled (fails fast).
        ValueError: unknown config or ``max_tokens < 1``.
    """
    _check_config(config)
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    tok = get_tokenizer(tokenizer, data_dir)
    if path is None:
        version, files_sha = check_hub(), None
    else:
        files = sorted((Path(path) / CONFIGS[config]).glob("*.parquet"))
        if not files:
            raise FileNotFoundError(f"no parquet files under {Path(path) / CONFIGS[config]}")
        h = hashlib.sha256()
        for f in files:
            h.update(f.name.encode() + b"\0" + hashlib.sha256(f.read_bytes()).digest())
        version, files_sha = "local", h.hexdigest()

    docs, n = [], 0
    for doc_id, text in iter_documents(config, path, None if path is not None else version):
        text = clean_text(text)
        if not text:
            continue
        docs.append((doc_id, text))
        n += len(tok.encode(text)) + 1
        if n >= max_tokens:
            break
    meta = {"registry": "huggingface", "package": REPO, "version": f"{config}@{version}", "archive": None,
            "sha256": files_sha, "licence": "ODC-By 1.0 (dataset card)", "max_tokens": max_tokens,
            "description": f"FineWeb-Edu {config}, first documents up to {max_tokens} tokens"}
    return build_from_documents([SourceDocs("fineweb-edu", docs, meta)], tok,
                                corpus_dir(fineweb_corpus_name(config), tokenizer, data_dir),
                                fineweb_corpus_name(config))
