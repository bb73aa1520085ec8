"""A figure's runs as the training layer's run specs (:mod:`gtalib.book.design.run_specs`)."""

import pytest

from gtalib.book.design import run_specs as specs
from gtalib.book.design.figures import ABLATIONS
from gtalib.book.design.run_specs import RunRef


def test_train_settings_rescale_warmup_like_the_cli():
    base = specs.train_settings("cpu")
    short = specs.train_settings("cpu", 100)
    assert short.max_steps == 100
    # same rule as `gtalib train --max-steps`: round(warmup * steps / preset steps)
    assert short.warmup_steps == round(base.warmup_steps * 100 / base.max_steps)
    with pytest.raises(ValueError, match="max_steps"):
        specs.train_settings("cpu", 0)


def test_paired_specs_differ_only_in_the_switch():
    data = {"test": True}
    for key, fig in ABLATIONS.items():
        v = fig.variants[0]
        alt = specs.run_spec(RunRef(v, "alt", tuple(fig.alt.items()), 0), "ci", None, data)
        rec = specs.run_spec(RunRef(v, "rec", tuple(fig.rec.items()), 0), "ci", None, data)
        assert alt.train == rec.train and alt.data == rec.data and alt.seed == rec.seed
        assert alt.run_id != rec.run_id, key
        differ = {f for f in alt.model.to_dict() if getattr(alt.model, f) != getattr(rec.model, f)}
        # the switch itself, plus what parameter matching and head doubling derive from it
        assert differ <= {*fig.alt, "intermediate_size", "n_head", "gqa_group"}, (key, differ)
