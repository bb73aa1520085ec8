"""The data module under a real lightning.Trainer: infinite train stream, one val loader per source."""
import lightning as L
import numpy as np
import torch

from gtalib.data.build import SourceDocs, build_from_documents, corpus_dir
from gtalib.data.datamodule import TokenDataModule
from gtalib.data.tokenizers import get_tokenizer


class _Recorder(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(256, 256)
        self.seen, self.val_seen = [], []

    def training_step(self, batch, batch_idx):
        x, y = batch
        self.seen.append(x.clone())
        return torch.nn.functional.cross_entropy(self.emb(x).flatten(0, 1), y.flatten())

    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        self.val_seen.append((dataloader_idx, batch[0].shape[0]))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_trainer_consumes_batches_in_order(tmp_path):
    rng = np.random.default_rng(1)
    docs = lambda p: [(str(i), p + " ".join(rng.choice(["ab", "cd", "ef"], size=40))) for i in range(30)]
    build_from_documents([SourceDocs("a", docs("A"), {}), SourceDocs("b", docs("B"), {})], get_tokenizer("bytes"),
                         corpus_dir("default", "bytes", tmp_path), "default")
    dm = TokenDataModule(block_size=16, batch_size=4, val_windows=8, val_batch_size=4, data_dir=tmp_path, build=False)
    model = _Recorder()
    trainer = L.Trainer(max_steps=4, val_check_interval=2, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0, default_root_dir=tmp_path)
    trainer.fit(model, dm)
    assert len(model.seen) == 4
    for i, x in enumerate(model.seen):
        assert x.equal(dm.train_batch(i)[0])
    # two validations x two sources x two batches of 4 windows
    assert sorted(model.val_seen) == [(0, 4)] * 4 + [(1, 4)] * 4


def test_resumed_fit_continues_the_batch_order(tmp_path):
    rng = np.random.default_rng(2)
    docs = [(str(i), " ".join(rng.choice(["ab", "cd", "ef"], size=40))) for i in range(30)]
    build_from_documents([SourceDocs("a", docs, {})], get_tokenizer("bytes"),
                         corpus_dir("default", "bytes", tmp_path), "default")
    # checkpoints are saved by hand: Lightning's own checkpointing would leave the first fit's
    # files where the second one writes ("Checkpoint directory ... exists and is not empty")
    kw = dict(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False, enable_model_summary=False,
              num_sanity_val_steps=0, limit_val_batches=0, default_root_dir=tmp_path,
              enable_checkpointing=False)
    dm = lambda: TokenDataModule(block_size=16, batch_size=4, val_windows=4, val_batch_size=4, data_dir=tmp_path,
                                 build=False)
    first = L.Trainer(max_steps=2, **kw)
    first.fit(_Recorder(), dm())
    ckpt = tmp_path / "two.ckpt"
    first.save_checkpoint(ckpt)
    resumed, d = _Recorder(), dm()
    L.Trainer(max_steps=4, **kw).fit(resumed, d, ckpt_path=ckpt, weights_only=True)
    assert [x.tolist() for x in resumed.seen] == [d.train_batch(i)[0].tolist() for i in (2, 3)]
