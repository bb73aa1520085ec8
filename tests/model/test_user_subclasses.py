"""A user's class that starts from one of gtalib's attention classes (dense, latent, TPA, GTA,
MFA) resolves the sizes its parent's variant needs (or the variant it declares as
``base_variant``), builds the same model as that variant from the same seed, and trains with
``gtalib train`` at ``ci``; a class that cannot be built is refused in one line naming the
sizes it was not given."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from gtalib.cli import main
from gtalib.model.config import VARIANT_SIZES
from gtalib.model.gpt import GPT
from gtalib.model.presets import model_config
from model.test_user_variants import _module  # tests/model/test_user_variants.py

#: Built-in class (module, name) -> the variant a subclass resolves as.
PARENTS = {("dense", "DenseAttention"): "mha", ("latent", "LatentAttention"): "mla",
           ("tpa", "TPAttention"): "tpa", ("gta", "GTAttention"): "gta",
           ("mfa", "MFAttention"): "mfa"}


@pytest.fixture
def subclasses(tmp_path, monkeypatch):
    """One module of user classes, each a subclass of a built-in class under another name (and
    a GQA one declared through ``base_variant``); yields class name -> its import path."""
    lines = []
    for (module, cls), _ in PARENTS.items():
        lines += [f"from gtalib.model.attention.{module} import {cls}", "",
                  f"class My{cls}({cls}):", f'    """{cls} under another name."""', ""]
    lines += ["class MyGQA(DenseAttention):", "    base_variant = 'gqa'", ""]
    _module(tmp_path, "my_subclasses", "\n".join(lines), monkeypatch)
    yield {f"My{cls}": f"my_subclasses:My{cls}" for _, cls in PARENTS} | {
        "MyGQA": "my_subclasses:MyGQA"}
    sys.modules.pop("my_subclasses", None)


@pytest.mark.parametrize("parent", PARENTS, ids=lambda p: p[1])
def test_a_subclass_resolves_and_builds_as_its_parent_variant(parent, subclasses):
    variant = PARENTS[parent]
    mine, theirs = model_config("ci", subclasses[f"My{parent[1]}"]), model_config("ci", variant)
    assert mine.builtin_variant == variant
    # every size the parent's variant derives, the FFN width matched to MHA's included
    for field in (*VARIANT_SIZES, "intermediate_size", "n_head", "gqa_group"):
        assert getattr(mine, field) == getattr(theirs, field), field
    torch.manual_seed(0)
    a = GPT(mine)
    torch.manual_seed(0)
    b = GPT(theirs)
    assert type(a.blocks[0].attn).__name__ == f"My{parent[1]}"
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    idx = torch.randint(0, 256, (2, 16))
    assert torch.equal(a(idx, idx)[1], b(idx, idx)[1])  # the same loss, to the bit


def test_a_declared_base_variant_is_taken_and_a_foreign_one_refused(subclasses, tmp_path,
                                                                     monkeypatch):
    cfg = model_config("ci", subclasses["MyGQA"])
    assert cfg.builtin_variant == "gqa" and cfg.n_kv_head == 4 // 2  # ci: GQA group 2
    _module(tmp_path, "bad_base", "from gtalib.model.attention.dense import DenseAttention\n"
            "class Wrong(DenseAttention):\n    base_variant = 'mla'\n", monkeypatch)
    with pytest.raises(ValueError) as exc:
        model_config("ci", "bad_base:Wrong")
    assert "base_variant 'mla'" in str(exc.value) and "allowed: mha, mqa, gqa" in str(exc.value)
    assert "\n" not in str(exc.value)
    sys.modules.pop("bad_base", None)


def test_a_class_that_reads_a_size_it_was_not_given_is_one_line(tmp_path, monkeypatch, capsys):
    """A class that starts from ``Attention`` is given only the shared sizes: one that reads
    ``n_kv_head`` (``None``) is refused naming it, not with a TypeError's traceback."""
    _module(tmp_path, "needs_kv", "from torch import nn\n"
            "from gtalib.model.attention.base import Attention\n"
            "class NeedsKV(Attention):\n"
            "    def __init__(self, cfg, layer_idx=0):\n"
            "        super().__init__(cfg, layer_idx)\n"
            "        self.k = nn.Linear(cfg.d_model, self.cfg.n_kv_head * cfg.head_dim)\n",
            monkeypatch)
    assert main(["train", "--variant", "needs_kv:NeedsKV", "--preset", "ci",
                 "--run-dir", str(tmp_path / "runs")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("gtalib train: error:") and "NeedsKV cannot be built" in line
    assert "n_kv_head" in line and "DenseAttention" in line
    sys.modules.pop("needs_kv", None)


@pytest.mark.slow
def test_gtalib_train_trains_a_subclass_of_each_builtin_class_at_ci(subclasses, tmp_path, capsys):
    for name, path in subclasses.items():
        store = tmp_path / name
        assert main(["train", "--variant", path, "--preset", "ci", "--max-steps", "3",
                     "--eval-every", "3", "--run-dir", str(store), "--quiet"]) == 0, name
        (run,) = [p for p in store.iterdir() if p.is_dir()]
        spec = json.loads((run / "spec.json").read_text())
        assert spec["model"]["variant"] == path and (run / "DONE").is_file()
        card = json.loads((run / "card.json").read_text())
        assert 0 < card["final_train_loss"] < 6.0, (name, card)  # ln 256 ≈ 5.55 at the start
    capsys.readouterr()
