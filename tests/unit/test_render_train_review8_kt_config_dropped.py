"""kt_config keys llamafactory-kt 0.9.6.dev0 drops when they are true (hparams/model_args.py
_normalize_advanced_kt_config: transformers-kt's transport metadata `enabled` and `kt_skip_expert_loading`)
pass render train; false, the value llamafactory-kt refuses as derived from its own arguments, does not."""

from __future__ import annotations

import pytest
import yaml
from test_render_support import load_fixture_plan, render_train_here

from ktinfra.render import RenderError

CURRENT = "h100-qwen3-30b-a3b-sft-current.json"


def _render(tmp_path, **keys):
    plan = load_fixture_plan(CURRENT)
    plan["sft"]["kt"].setdefault("kt_config", {}).update(keys)
    rendered = render_train_here(plan, tmp_path)
    return yaml.safe_load(rendered.files["r.yaml"][0])["kt_config"]


@pytest.mark.parametrize("key", ["enabled", "kt_skip_expert_loading"])
def test_a_true_transport_key_passes(tmp_path, key):
    assert _render(tmp_path, **{key: True})[key] is True


@pytest.mark.parametrize("key", ["enabled", "kt_skip_expert_loading"])
def test_a_false_transport_key_is_refused(tmp_path, key):
    with pytest.raises(RenderError, match=f"kt_config.{key} is not a kt_config key"):
        _render(tmp_path, **{key: False})
