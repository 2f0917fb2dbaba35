"""kt_model_store: ModelScope allow patterns its client would read differently are refused at the start.

modelscope's snapshot_download splits each allow pattern on ',' and strips the spaces around the parts
(modelscope.hub.utils.utils.convert_patterns), where the fetcher selects the listing with the pattern as
written. 'model-0000[1,2]-of-*' became 'model-0000[1' and '2]-of-*', which match no file: the download
fetched nothing and the model was refused afterwards ("listed file(s) missing"), on every run. The role now
refuses such a pattern before it makes anything (no fetcher venv, no store). The first test shows the real
client's split (the dev extra installs the modelscope version the role installs on targets).
"""

from __future__ import annotations

import pytest
from test_kt_model_store_role import role_vars
from test_model_store_review2_paths import run_in


def test_the_real_modelscope_client_splits_patterns_on_commas_and_strips_them():
    from modelscope.hub.utils.utils import convert_patterns

    assert convert_patterns(["model-0000[1,2]-of-*"]) == ["model-0000[1", "2]-of-*"]
    assert convert_patterns([" *.json"]) == ["*.json"]


@pytest.mark.parametrize("pattern", ["model-0000[1,2]-of-*", "*.json ", " config.json"])
def test_a_modelscope_pattern_its_client_splits_is_refused_before_any_change(tmp_path, pattern):
    model = {"name": "m", "source": "modelscope", "repo": "Qwen/Qwen3-30B-A3B", "allow_patterns": [pattern]}
    rc, output, cwd = run_in(tmp_path, role_vars(tmp_path, [model]))
    assert rc != 0, output[-3000:]
    assert "the ModelScope client splits allow_patterns on ','" in output, output[-3000:]
    assert pattern.replace('"', '\\"') in output, output[-3000:]
    assert list(cwd.iterdir()) == [], output[-3000:]
    assert not (tmp_path / "store").exists() and not (tmp_path / "venv").exists()


def test_the_same_pattern_from_hugging_face_passes_the_check(tmp_path):
    """huggingface_hub matches the pattern as written: no reason to refuse it there. A local model with no
    source stops the role at the check after this one, before any change."""
    models = [
        {"name": "h", "source": "hf", "repo": "Qwen/Qwen3-30B-A3B", "allow_patterns": ["a[1,2]*", " b"]},
        {"name": "l", "source": "local", "repo": str(tmp_path / "absent")},
    ]
    rc, output, _ = run_in(tmp_path, role_vars(tmp_path, models))
    assert rc != 0, output[-3000:]
    assert "local source" in output and "splits allow_patterns" not in output, output[-3000:]
