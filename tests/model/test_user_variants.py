"""A user's own attention variant named by import path (gtalib.model.user_variants): the
docs/interfaces.md example run exactly as written, parameter matching, the declared KV cache,
the run identity (import path + source hash) and the one-line refusals."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gtalib.model.config import ModelConfig
from gtalib.model.gpt import GPT
from gtalib.model.kvcache import kv_elems_per_device, kv_elems_per_token
from gtalib.model.params import count_params
from gtalib.model.presets import model_config
from gtalib.training.config import train_config
from gtalib.training.runs import RunSpec

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SECTION = (REPO / "docs" / "interfaces.md").read_text().split("## Your own attention variant")[1]
SECTION = SECTION.split("\n## ")[0]
CLASS_TEXT = re.search(r"```python\n(.*?)```", SECTION, re.S).group(1)
COMMAND, BOOK_COMMAND = (c.strip() for c in re.findall(r"```bash\n(.*?)```", SECTION, re.S))


def _module(folder: Path, name: str, text: str, monkeypatch):
    """``text`` as the module ``name`` in ``folder``, importable (a fresh import)."""
    (folder / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(folder))
    sys.modules.pop(name, None)
    importlib.invalidate_caches()
    return importlib.import_module(name)


@pytest.fixture
def nope(tmp_path, monkeypatch):
    """The docs' class as the module ``my_attention``; the import path of its class."""
    _module(tmp_path, "my_attention", CLASS_TEXT, monkeypatch)
    yield "my_attention:NoPE"
    sys.modules.pop("my_attention", None)


def test_the_docs_command_trains_the_docs_class_as_written(tmp_path):
    (tmp_path / "my_attention.py").write_text(CLASS_TEXT)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
           "GTALIB_RUN_DIR": str(tmp_path / "runs")}
    out = subprocess.run(COMMAND, shell=True, cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    (run,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    spec = json.loads((run / "spec.json").read_text())
    assert spec["model"]["variant"] == "my_attention:NoPE"
    # the class is the file's last statement: its source runs from "class NoPE" to the end
    source = CLASS_TEXT[CLASS_TEXT.index("class NoPE"):]
    assert spec["model"]["variant_source"] == hashlib.sha256(source.encode()).hexdigest()
    assert spec["model"]["intermediate_size"] == 344  # MHA's at ci: the same attention params
    assert RunSpec.from_dict(spec).run_id == run.name
    assert (run / "DONE").exists() and f"run {run.name}" in out.stdout


def test_parameter_matched_like_mha_whose_attention_it_shares(nope):
    cfg, mha = model_config("ci", nope), model_config("ci", "mha")
    # 4·d·H·d_h attention parameters in both: the same width and total, to the parameter
    assert count_params(cfg)["attn_per_layer"] == 4 * 128 * 4 * 32 == \
        count_params(mha)["attn_per_layer"]
    assert cfg.intermediate_size == mha.intermediate_size == 344
    assert count_params(cfg)["total"] == count_params(mha)["total"]


def test_its_kv_cache_is_what_its_class_declares(nope):
    cfg = model_config("ci", nope)
    assert kv_elems_per_token(cfg) == 2 * cfg.n_head * cfg.head_dim == 256
    cache = GPT(cfg).new_cache(3, 7)  # what the model allocates: 3 sequences × 7 positions
    assert [sum(t.numel() for k, t in layer.items() if k != "len") for layer in cache["layers"]] \
        == [3 * 7 * 256] * cfg.n_layer
    with pytest.raises(ValueError, match="no tensor-parallel rule"):
        kv_elems_per_device(cfg, 2)


def test_cached_decoding_equals_the_full_forward(nope):
    torch.manual_seed(0)
    model = GPT(model_config("ci", nope, init="normal")).eval()
    idx = torch.randint(0, 256, (2, 20))
    with torch.no_grad():
        full = model(idx)[0]
        cache = model.new_cache(2, 20)
        parts = [model.forward_cached(idx[:, :12], cache), model.forward_cached(idx[:, 12:], cache)]
    assert torch.allclose(torch.cat(parts, 1), full, atol=1e-5)
    assert (full[:, 1:] - full[:, :1]).abs().max() > 1e-3  # W_O is not zero: attention acts


def test_a_changed_class_is_another_run_and_an_old_spec_is_refused(tmp_path, monkeypatch):
    text = CLASS_TEXT.replace("class NoPE", "class Mine")
    _module(tmp_path, "mine_v1", text, monkeypatch)
    old = model_config("ci", "mine_v1:Mine")
    spec = RunSpec(old, train_config("ci"), {"corpus": "default"}, 0)
    changed = text.replace("without rotary", "with no rotary")  # the docstring only
    _module(tmp_path, "mine_v1", changed, monkeypatch)
    new = model_config("ci", "mine_v1:Mine")
    assert new.variant_source != old.variant_source
    assert RunSpec(new, spec.train, spec.data, 0).run_id != spec.run_id
    # a stored spec keeps its hash; building its model now is refused
    stored = RunSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert stored.run_id == spec.run_id
    with pytest.raises(ValueError, match="source has changed since this spec was made"):
        GPT(stored.model)
    sys.modules.pop("mine_v1", None)


def test_a_class_that_cannot_be_matched_is_refused_in_one_line(tmp_path, monkeypatch):
    big = CLASS_TEXT.replace("class NoPE", "class Big").replace("3 * self.h", "60 * self.h")
    _module(tmp_path, "big_attention", big, monkeypatch)
    with pytest.raises(ValueError) as exc:
        model_config("ci", "big_attention:Big")
    assert "cannot match 'big_attention:Big'" in str(exc.value)
    assert "attention alone exceeds" in str(exc.value) and "\n" not in str(exc.value)
    sys.modules.pop("big_attention", None)


@pytest.mark.parametrize("variant, why", [
    ("no_such_module_55:X", "cannot import module 'no_such_module_55'"),
    ("torch.nn:Linear", "is not a subclass of gtalib.model.attention.Attention"),
    ("gtalib.model.attention.dense:DenseAttention", "a class of gtalib itself"),
    ("my attention:X", "is not an import path of the form 'module.path:ClassName'"),
])
def test_a_bad_import_path_is_refused_in_one_line(variant, why):
    with pytest.raises((KeyError, ValueError)) as exc:
        ModelConfig(variant=variant)
    assert why in exc.value.args[0] and "\n" not in exc.value.args[0]


def test_the_train_cli_refuses_a_bad_class_with_exit_2(tmp_path):
    out = subprocess.run([str(BIN / "gtalib"), "train", "--variant", "torch.nn:Linear",
                          "--preset", "ci", "--run-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1].startswith(
        "gtalib train: error: argument --variant: variant 'torch.nn:Linear': torch.nn.Linear is "
        "not a subclass")


def test_options_it_cannot_take(nope):
    with pytest.raises(ValueError, match="head_multiplier=2 .* not defined for a user's variant"):
        model_config("ci", nope, head_multiplier=2)
    with pytest.raises(ValueError, match="latent_scale=False only applies"):
        model_config("ci", nope, latent_scale=False)
    with pytest.raises(ValueError, match="variant_source applies to a user's variant"):
        ModelConfig(variant="mha", variant_source="0" * 64)


def test_the_docs_book_command_parses_to_the_class(tmp_path, monkeypatch):
    import shlex

    from gtalib.cli import build_parser

    (tmp_path / "my_attention.py").write_text(CLASS_TEXT)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("my_attention", None)
    words = shlex.split(BOOK_COMMAND)
    assert words[:2] == ["PYTHONPATH=$PWD", "gtalib"]
    args = build_parser().parse_args(words[2:])
    assert args.variants == ("my_attention:NoPE",) and args.only == "init_ablation"
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([*words[2:4], "--variants", "mha"])
    assert exit_.value.code == 2
    sys.modules.pop("my_attention", None)
