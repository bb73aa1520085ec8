"""Run ids that do not move: every recorded bundle's id is the hash of its spec, today and after
a model or training option is added with a default value (gtalib.training.runs.RunSpec.hash_payload)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from gtalib.model.config import ModelConfig
from gtalib.training import records, runs
from gtalib.training.config import TrainConfig

BUNDLES = sorted(p for p in records.default_record_dir().iterdir() if runs.is_run_id(p.name))


def _spec_json(folder) -> dict:
    return json.loads((folder / "spec.json").read_text())


def _with_option(base, name: str, default):
    """``base`` (a frozen config dataclass) with one more field ``name`` of default ``default``:
    what adding an option to gtalib's config would do."""
    return dataclasses.make_dataclass(f"{base.__name__}Plus", [(name, type(default), default)],
                                      bases=(base,), frozen=True)


def test_every_recorded_bundle_is_named_by_the_hash_of_its_spec():
    assert len(BUNDLES) >= 623
    wrong = [f.name for f in BUNDLES if runs.load_spec(f).run_id != f.name]
    assert wrong == []


def test_the_always_hashed_fields_are_those_every_recorded_spec_holds():
    # the first bundles were named when the hash took every field but attn_impl /
    # checkpoint_every; a bundle recorded since may also hold a later field, at its default
    # (e.g. variant_source: None for the paper's variants), which its id leaves out
    later = {f.name: f.default for f in dataclasses.fields(ModelConfig)
             if f.name not in runs.ALWAYS_HASHED_MODEL_FIELDS | {"attn_impl"}}
    models = {frozenset(k for k in _spec_json(f)["model"] if k not in later) for f in BUNDLES}
    trains = {frozenset(_spec_json(f)["train"]) for f in BUNDLES}
    assert models == {runs.ALWAYS_HASHED_MODEL_FIELDS | {"attn_impl"}}
    assert trains == {runs.ALWAYS_HASHED_TRAIN_FIELDS | {"checkpoint_every"}}
    not_default = [f.name for f in BUNDLES for k, v in _spec_json(f)["model"].items()
                  if k in later and v != later[k]]
    assert not_default == []
    assert any(later.keys() & _spec_json(f)["model"].keys() for f in BUNDLES)  # such bundles exist


@pytest.mark.parametrize("where", ["model", "train"])
def test_an_option_added_with_its_default_keeps_every_recorded_id(where):
    Model = _with_option(ModelConfig, "rope", True) if where == "model" else ModelConfig
    Train = _with_option(TrainConfig, "label_smoothing", 0.0) if where == "train" else TrainConfig
    moved, changed = [], 0
    for folder in BUNDLES:
        d = _spec_json(folder)
        spec = runs.RunSpec(Model(**d["model"]), Train(**d["train"]), d["data"], d["seed"])
        assert (spec.model.rope if where == "model" else spec.train.label_smoothing) in (True, 0.0)
        if spec.run_id != folder.name:
            moved.append(folder.name)
        # the same run with the new option away from its default is another run
        other = dataclasses.replace(spec, model=spec.model.replace(rope=False)) if where == "model" \
            else dataclasses.replace(spec, train=spec.train.replace(label_smoothing=0.1))
        changed += other.run_id != folder.name
    assert moved == []
    assert changed == len(BUNDLES)


def test_a_result_field_outside_the_fixed_set_changes_the_id_only_off_its_default():
    spec = runs.load_spec(BUNDLES[0])
    Model = _with_option(ModelConfig, "rope", True)
    plus = dataclasses.replace(spec, model=Model(**spec.model.to_dict()))
    assert "rope" not in plus.hash_payload()["model"]
    assert plus.hash_payload() == spec.hash_payload()
    off = dataclasses.replace(plus, model=plus.model.replace(rope=False))
    assert off.hash_payload()["model"]["rope"] is False


def test_editing_a_specs_dict_leaves_the_spec_and_its_id_as_they_are():
    """to_dict is a copy: a caller that blanks the data order in it (as a cost's key does) does
    not change the spec it came from."""
    spec = runs.load_spec(BUNDLES[0])
    before = spec.run_id
    d = spec.to_dict()
    for part in d.values():
        if isinstance(part, dict):
            part.clear()
    assert spec.run_id == before and spec.data and spec.to_dict() != d
