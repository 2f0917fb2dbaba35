"""kt_model_store run by real ansible on localhost: hub settings that cannot work are refused before the
store, the fetcher's venv or its helpers are made."""

from __future__ import annotations

import pytest
from role_play import run_play
from test_kt_model_store_role import TASKS, role_vars

HF_MODEL = [{"name": "m", "repo": "org/m"}]


@pytest.mark.parametrize(
    ("setting", "value", "said"),
    [
        ("kt_model_store_hf_endpoint", "hf-mirror.com", "got 'hf-mirror.com'"),
        ("kt_model_store_hf_endpoint", "https://", "got 'https://'"),
        ("kt_model_store_download_workers", 0, "got 0 and 172800"),
    ],
)
def test_a_hub_setting_that_cannot_work_is_refused_before_any_change(tmp_path, setting, value, said):
    """Before: an endpoint without its scheme (as the seeds' hf-mirror.com is often written) made the venv,
    installed huggingface_hub and the helpers, then failed "Request URL is missing an 'http://' or 'https://'
    protocol" without naming the variable; 0 workers failed inside snapshot_download."""
    rc, output = run_play(tmp_path, TASKS, role_vars(tmp_path, HF_MODEL, **{setting: value}))
    assert rc != 0, output[-3000:]
    assert "kt_model_store_hf_endpoint must be empty or a URL with its scheme" in output, output[-3000:]
    assert said in output, output[-3000:]
    assert not (tmp_path / "store").exists() and not (tmp_path / "venv").exists()
    assert not (tmp_path / "prefix").exists()


def test_a_mirror_url_is_accepted(tmp_path):
    """https://hf-mirror.com/ (the mirror China's hosts use) passes the check; the play lays out the store."""
    extra = role_vars(tmp_path, [], kt_model_store_hf_endpoint="https://hf-mirror.com/")
    rc, output = run_play(tmp_path, TASKS, extra)
    assert rc == 0, output[-3000:]
    assert (tmp_path / "store" / "models").is_dir()
