"""Shard format: round trip, header fields, and clear errors for missing/corrupt/truncated files."""
import struct

import numpy as np
import pytest

from gtalib.data.shards import HEADER_BYTES, ShardError, open_shard, read_header, write_shard

DOCS = [[5, 6, 7], [], [65535, 1]]


def test_round_trip(tmp_path):
    p = tmp_path / "a.bin"
    n = write_shard(p, DOCS, vocab_size=65536, eot=9)
    expected = [9, 5, 6, 7, 9, 9, 65535, 1]  # each document preceded by eot
    assert n == len(expected)
    assert open_shard(p, check_ids=True).tolist() == expected
    assert read_header(p) == {"version": 1, "vocab_size": 65536, "eot": 9, "itemsize": 2, "n_tokens": 8}
    assert p.stat().st_size == HEADER_BYTES + 2 * 8
    raw = p.read_bytes()
    assert raw[:8] == b"GTALIBTK" and np.frombuffer(raw[HEADER_BYTES:], "<u2").tolist() == expected
    assert not (tmp_path / "a.bin.tmp").exists()


def test_write_rejects_out_of_range(tmp_path):
    with pytest.raises(ValueError, match="token id"):
        write_shard(tmp_path / "b.bin", [[1, 300]], vocab_size=256, eot=0)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="vocab_size"):
        write_shard(tmp_path / "b.bin", [[1]], vocab_size=70000, eot=0)
    with pytest.raises(ValueError, match="eot"):
        write_shard(tmp_path / "b.bin", [[1]], vocab_size=256, eot=256)


@pytest.mark.parametrize("damage, match", [
    (lambda p: p.unlink(), "does not exist"),
    (lambda p: p.write_bytes(p.read_bytes()[:-2]), "truncated"),
    (lambda p: p.write_bytes(p.read_bytes()[:10]), "shorter than its header"),
    (lambda p: p.write_bytes(b"NOTASHRD" + p.read_bytes()[8:]), "not a gtalib token shard"),
    (lambda p: p.write_bytes(p.read_bytes()[:8] + struct.pack("<I", 7) + p.read_bytes()[12:]), "version 7"),
    (lambda p: p.write_bytes(p.read_bytes() + b"\0\0"), "corrupt"),
])
def test_damaged_shard_errors_name_the_file(tmp_path, damage, match):
    p = tmp_path / "c.bin"
    write_shard(p, DOCS, vocab_size=65536, eot=9)
    damage(p)
    with pytest.raises(ShardError, match=match) as e:
        open_shard(p)
    assert str(p) in str(e.value)


def test_check_ids_catches_bad_token(tmp_path):
    p = tmp_path / "d.bin"
    write_shard(p, [[1, 2]], vocab_size=256, eot=0)
    raw = bytearray(p.read_bytes())
    raw[HEADER_BYTES + 2:HEADER_BYTES + 4] = struct.pack("<H", 999)
    p.write_bytes(bytes(raw))
    assert open_shard(p).tolist() == [0, 999, 2]  # header still consistent
    with pytest.raises(ShardError, match="outside"):
        open_shard(p, check_ids=True)
