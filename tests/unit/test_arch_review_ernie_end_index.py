"""ERNIE-4.5's moe_layer_end_index -1 is transformers' default (Ernie4_5_MoeConfig: "-1" becomes
num_hidden_layers - 1, the last layer) and appears in hand-written ERNIE configs; the parser refused it as
out of range 0..layers-1."""

import json

import pytest
from model_configs import ERNIE_4_5_21B_A3B

from ktinfra import catalog


def _arch(tmp_path, **changes):
    (tmp_path / "config.json").write_text(json.dumps({**ERNIE_4_5_21B_A3B, **changes}))
    return catalog.resolve(str(tmp_path))


def test_end_index_minus_one_is_the_last_layer(tmp_path):
    last = _arch(tmp_path, moe_layer_end_index=-1)
    null = catalog.from_config(ERNIE_4_5_21B_A3B, name="null")  # the published config's null end
    assert last.num_moe_layers == null.num_moe_layers == 27  # layers 1..27 of 28
    assert last.total_params == null.total_params


@pytest.mark.parametrize("value", [-2, 28, -1.0, True, "-1"])
def test_other_end_indexes_out_of_range_are_still_refused(tmp_path, value):
    with pytest.raises(catalog.ModelConfigError, match="moe_layer_end_index must be an integer from 0 to 27"):
        _arch(tmp_path, moe_layer_end_index=value)
