"""kt_train's finished rule (tasks/finished.yml) where the store's outputs folder has non-ASCII characters
(模型-outputs/RUN): the unit's end record there is read as anywhere else. Real ansible on localhost, the
stand-in systemctl of test_kt_train_role (a unit it did not start shows as systemd shows a forgotten one)."""

from __future__ import annotations

import json

from role_play import task_output
from test_kt_train_review9_end_record import FAILED, end_record
from test_kt_train_role import run, setup, train
from test_lora import kt_dir


def test_a_failure_record_in_a_non_ascii_outputs_folder_keeps_the_run_unfinished(tmp_path):
    """Complete files (adapter, then train_results.json) and a record after them that says the trainer exited
    1: not handed over. Without the record read, the files alone would have handed it over."""
    outputs = tmp_path / "模型-outputs"
    setup(tmp_path)  # the store the role test writes, with its outputs folder moved
    store = json.loads((tmp_path / "store.json").read_text())
    store["dirs"]["outputs"] = str(outputs)
    (tmp_path / "store-unicode.json").write_text(json.dumps(store, ensure_ascii=False))
    out = kt_dir(outputs / "failed")
    (out / "train_results.json").write_text("{}")
    end_record(out, FAILED, after_results=1)
    rc, output = train(
        tmp_path,
        [run("failed", serve_instance="tiny")],
        kt_train_store_state_file=str(tmp_path / "store-unicode.json"),
    )
    assert rc == 0, output[-3000:]
    read = task_output(output, "Read how the run's unit last ended, as it recorded: failed")
    assert "ok: [localhost]" in read, read
    assert not list((tmp_path / "cfg" / "serve").glob("*.lora.json")) and not list(
        (tmp_path / "loras").iterdir()
    )
