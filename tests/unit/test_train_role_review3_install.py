"""kt_train (review 3) by real ansible-playbook on localhost, writing only into tmp_path (the helpers of
test_kt_train_role: a stand-in systemctl on PATH that records what it was asked)."""

from __future__ import annotations

import json

import pytest
import test_kt_train_role as base


# slow: a dataset copied into a folder of datasets/ and registered with its path is
# test_train_review_datasets.py::test_known_columns_and_tags_are_registered_and_other_entries_kept (there the
# folder is there before the play), and a second play changing nothing is molecule serve's idempotence step;
# the folder the play makes and the daemon-reload without a start are checked in the slow tier only
@pytest.mark.slow
def test_a_dataset_in_a_folder_is_copied_and_a_changed_unit_is_reloaded(tmp_path):
    """Before: a copied dataset whose file_name is in a folder of datasets/ ('sub/nested.json', which the
    check lets through and LLaMA-Factory reads) failed with "Destination directory ... does not exist"
    after the entries before it were copied. And a unit template installed without a start here was never
    loaded: a run started later by hand (or restarted on failure) ran the unit systemd had loaded before."""
    src = str(base.FILES / "tiny_alpaca.json")
    datasets = [
        {"name": "tiny_alpaca", "src": src, "file_name": "tiny_alpaca.json"},
        {"name": "nested", "src": src, "file_name": "sub/deeper/nested.json"},
    ]
    runs = [base.run(dataset="tiny_alpaca,nested")]
    rc, output = base.train(tmp_path, runs, kt_train_datasets=datasets)
    assert rc == 0, output[-3000:]
    nested = tmp_path / "datasets" / "sub" / "deeper" / "nested.json"
    assert nested.read_bytes() == (base.FILES / "tiny_alpaca.json").read_bytes()
    info = json.loads((tmp_path / "datasets" / "dataset_info.json").read_text())
    assert info["nested"] == {"file_name": "sub/deeper/nested.json", "formatting": "alpaca"}
    assert (tmp_path / "units" / "ktinfra-train@.service").exists()
    # loaded, not started (`systemctl show` reads how the run last ended: 9226b18, 14d76ae)
    calls = [c for c in base.systemctl_calls(tmp_path) if not c.startswith("show ")]
    assert calls == ["daemon-reload"], calls

    rc, output = base.train(tmp_path, runs, kt_train_datasets=datasets)  # unchanged: nothing to do
    assert rc == 0 and "changed=0" in output, output[-3000:]
    assert [c for c in base.systemctl_calls(tmp_path) if not c.startswith("show ")] == ["daemon-reload"]
