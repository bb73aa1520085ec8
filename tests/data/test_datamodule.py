"""TokenDataModule: seed-determined batch order, disjoint DDP slices, fixed validation windows, identity."""
import types

import numpy as np
import pytest

from gtalib.data.build import SourceDocs, build_from_documents, corpus_dir
from gtalib.data.datamodule import DataSpec, TokenDataModule
from gtalib.data.shards import ShardError, open_shard
from gtalib.data.tokenizers import get_tokenizer

T = 8


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(0)
    words = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]

    def docs(prefix, n):
        return [(f"{prefix}{i}", f"{prefix} " + " ".join(rng.choice(words, size=30))) for i in range(n)]

    build_from_documents([SourceDocs("src_a", docs("A", 40), {}), SourceDocs("src_b", docs("B", 20), {})],
                         get_tokenizer("bytes"), corpus_dir("default", "bytes", root), "default")
    return root


def _dm(data_dir, **kw):
    args = dict(block_size=T, batch_size=4, data_seed=0, val_windows=8, val_batch_size=4, data_dir=data_dir, build=False)
    args.update(kw)
    dm = TokenDataModule(**args)
    dm.setup()
    return dm


def _attach(dm, rank, world, step=0, accumulate=1):
    # The fields of lightning.Trainer the data module reads.
    dm.trainer = types.SimpleNamespace(global_rank=rank, world_size=world, global_step=step,
                                       accumulate_grad_batches=accumulate)
    return dm


def _contains(haystack: np.ndarray, needle: np.ndarray) -> bool:
    win = np.lib.stride_tricks.sliding_window_view(haystack, len(needle))
    return bool((win == needle).all(axis=1).any())


def test_same_seed_same_batches_different_seed_different(data_dir):
    a, b, c = _dm(data_dir), _dm(data_dir), _dm(data_dir, data_seed=1)
    for i in range(3):
        xa, ya = a.train_batch(i)
        xb, yb = b.train_batch(i)
        assert xa.equal(xb) and ya.equal(yb)
    assert not a.train_batch(0)[0].equal(c.train_batch(0)[0])
    assert not a.train_batch(0)[0].equal(a.train_batch(1)[0])


def test_windows_are_shifted_train_text(data_dir):
    dm = _dm(data_dir, batch_size=16, block_size=64)  # 65 random-word bytes: unique in the corpus
    x, y = dm.train_batch(0)
    assert x.shape == (16, 64) and x.dtype.is_floating_point is False
    assert x[:, 1:].equal(y[:, :-1])
    path = corpus_dir("default", "bytes", data_dir)
    train = [np.asarray(open_shard(path / f"{s}.train.bin")) for s in ("src_a", "src_b")]
    val = [np.asarray(open_shard(path / f"{s}.val.bin")) for s in ("src_a", "src_b")]
    for row_x, row_y in zip(x.numpy(), y.numpy()):
        window = np.concatenate([row_x, row_y[-1:]]).astype(np.uint16)
        assert any(_contains(t, window) for t in train)
        assert not any(_contains(v, window) for v in val)


@pytest.mark.parametrize("world", [2, 4])
def test_ddp_ranks_get_disjoint_slices_of_the_global_batch(data_dir, world):
    single = _attach(_dm(data_dir), 0, 1)
    ranks = [_attach(_dm(data_dir), r, world) for r in range(world)]
    single_batches = [b for b, _ in zip(single.train_dataloader(), range(3))]
    rank_batches = [[b for b, _ in zip(dm.train_dataloader(), range(3))] for dm in ranks]
    for step in range(3):
        x = np.concatenate([rank_batches[r][step][0].numpy() for r in range(world)])
        assert (x == single_batches[step][0].numpy()).all()
        assert all(rank_batches[r][step][0].shape[0] == 4 // world for r in range(world))
    with pytest.raises(ValueError, match="divisible by the world size 3"):
        _attach(_dm(data_dir), 0, 3).train_dataloader()


def test_resume_continues_with_next_batch(data_dir):
    dm = _attach(_dm(data_dir), 0, 1, step=5, accumulate=2)
    x, _ = next(iter(dm.train_dataloader()))
    assert x.equal(dm.train_batch(10)[0])


def test_validation_windows_fixed_and_per_source(data_dir):
    dm, other = _attach(_dm(data_dir), 0, 1), _attach(_dm(data_dir, data_seed=7), 0, 1)
    assert dm.val_source_names == ["src_a", "src_b"]
    loaders = dm.val_dataloader()
    assert len(loaders) == 2
    path = corpus_dir("default", "bytes", data_dir)
    for name, loader, loader2 in zip(dm.val_source_names, loaders, other.val_dataloader()):
        batches = list(loader)
        assert len(batches) == 2 and all(b[0].shape == (4, T) for b in batches)
        assert all(b1[0].equal(b2[0]) for b1, b2 in zip(batches, loader2))  # seed does not matter
        val = np.asarray(open_shard(path / f"{name}.val.bin"), dtype=np.int64)
        assert batches[0][0][0].tolist() == val[:T].tolist()  # first window at the start
        assert batches[-1][1][-1].tolist() == val[-T:].tolist()  # last window at the end
    # under DDP each rank validates an equal half of every batch
    halves = [list(_attach(_dm(data_dir), r, 2).val_dataloader()[0]) for r in range(2)]
    full = list(loaders[0])
    for i in range(2):
        assert np.concatenate([halves[0][i][0], halves[1][i][0]]).tolist() == full[i][0].tolist()


def test_data_identity(data_dir):
    a, b, c = _dm(data_dir), _dm(data_dir), _dm(data_dir, data_seed=3)
    assert a.data_identity() == b.data_identity()
    assert a.data_identity()["hash"] != c.data_identity()["hash"]
    ident = a.data_identity()["corpus"]
    assert ident["tokenizer"]["name"] == "bytes"
    assert [s["name"] for s in ident["sources"]] == ["src_a", "src_b"]
    spec = DataSpec(data_seed=3, val_windows=8)
    assert TokenDataModule.from_spec(spec, block_size=T, batch_size=4, val_batch_size=4, data_dir=data_dir).data_identity() == c.data_identity()


def test_corrupt_or_missing_shards_fail_clearly(data_dir, tmp_path):
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(data_dir, root)
    shard = corpus_dir("default", "bytes", root) / "src_b.train.bin"
    raw = bytearray(shard.read_bytes())
    raw[-1] ^= 0xFF
    shard.write_bytes(bytes(raw))
    with pytest.raises(ShardError, match="src_b.train.bin.*sha256"):
        _dm(root)
    shard.write_bytes(bytes(raw[:-3]))
    with pytest.raises(ShardError, match="src_b.train.bin.*truncated"):
        _dm(root)
    shard.unlink()
    with pytest.raises(ShardError, match="src_b.train.bin does not exist"):
        _dm(root)
    with pytest.raises(FileNotFoundError, match="gtalib data build"):
        TokenDataModule(tokenizer="gpt2", data_dir=tmp_path / "empty", build=False).prepare_data()


def test_bad_arguments():
    with pytest.raises(ValueError, match="val_windows"):
        TokenDataModule(val_windows=10, val_batch_size=4)


def test_module_level_identity_matches_datamodule(data_dir, tmp_path):
    from gtalib.data import data_identity

    ident = data_identity("bytes", data_dir=data_dir)
    assert {k: v for k, v in ident.items() if k != "hash"} == _dm(data_dir).data_identity()["corpus"]
    with pytest.raises(FileNotFoundError, match="gtalib data build"):
        data_identity("gpt2", data_dir=tmp_path)
