"""Data: pinned registry corpus and FineWeb-Edu, tokenizers, uint16 token shards, ``TokenDataModule``.

Ground layer. May import: nothing of gtalib (a corpus knows no model). Read by the training layer
(the datamodule), the book (the corpus build) and the CLI (``gtalib data``).

See ``gtalib.data.build`` for the split rule and output layout, ``gtalib.data.datamodule`` for the
batch order, ``gtalib.data.shards`` for the shard format.
"""
from .build import (build_default, build_from_documents, corpus_dir, corpus_identity, data_identity, load_manifest,
                    unigram_entropy)
from .archives import Archive, ChecksumError, default_data_dir, fetch
from .fineweb import HubUnavailable, build_fineweb, fineweb_corpus_name
from .shards import ShardError, open_shard, read_header, write_shard
from .sources import SOURCES, default_sources
from .tokenizers import Tokenizer, get_tokenizer

__all__ = ["Archive", "ChecksumError", "DataSpec", "HubUnavailable", "SOURCES", "ShardError", "TokenDataModule",
           "Tokenizer", "build_default", "build_fineweb", "build_from_documents", "corpus_dir", "corpus_identity", "data_identity",
           "default_data_dir", "default_sources", "fetch", "fineweb_corpus_name", "get_tokenizer", "load_manifest",
           "open_shard", "read_header", "unigram_entropy", "write_shard"]


def __getattr__(name):
    # The data module imports lightning (seconds); load it only when asked for.
    if name in ("DataSpec", "TokenDataModule"):
        from . import datamodule

        return getattr(datamodule, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
