"""kt_train_datasets: entries LLaMA-Factory or the role cannot use are refused, naming the entry, before
anything on the host changes (real ansible on localhost, -c local, as test_kt_train_role)."""

from __future__ import annotations

import json

import pytest
from test_kt_train_role import FILES, run, systemctl_calls, train

TINY = str(FILES / "tiny_alpaca.json")


def untouched(tmp_path) -> None:
    for sub in ("cfg", "render", "units", "datasets", "outputs"):
        assert list((tmp_path / sub).iterdir()) == [], sub
    assert systemctl_calls(tmp_path) == []


def test_a_file_name_outside_datasets_is_refused(tmp_path):
    """Before: '../escaped.json' was copied into the store root (outside datasets/), registered, and the run
    installed; '/abs.json' would be read by LLaMA-Factory from / ."""
    datasets = [
        {"name": "tiny_alpaca", "src": TINY, "file_name": "../escaped.json"},
        {"name": "abs", "src": TINY, "file_name": "/tmp/abs.json"},
        {"name": "registry", "src": TINY, "file_name": "./dataset_info.json"},
        {"name": "fine", "src": TINY, "file_name": "sub/..data.json"},  # '..' only as a whole component
    ]
    rc, output = train(tmp_path, [run()], ["kt_train_start=true"], kt_train_datasets=datasets)
    assert rc != 0
    why = "file_name must be a path inside datasets/ (relative, no ..), not dataset_info.json"
    for name in ("tiny_alpaca", "abs", "registry"):
        assert f"{name}: {why}" in output, output[-3000:]
    assert "fine: file_name" not in output
    assert not (tmp_path / "escaped.json").exists()
    untouched(tmp_path)


def test_a_repeated_or_unusable_dataset_name_is_refused(tmp_path):
    """Before: a repeated name silently kept only the last entry in dataset_info.json, and 'x,y' or 'my data'
    were registered though LLaMA-Factory splits --dataset on commas and render refuses whitespace."""
    datasets = [
        {"name": "tiny_alpaca", "src": TINY, "file_name": "a.json"},
        {"name": "tiny_alpaca", "src": TINY, "file_name": "b.json"},
        {"name": "x,y", "src": TINY, "file_name": "c.json"},
        {"name": "my data", "src": TINY, "file_name": "d.json"},
    ]
    rc, output = train(tmp_path, [run()], kt_train_datasets=datasets)
    assert rc != 0
    assert "tiny_alpaca: dataset name given more than once" in output, output[-3000:]
    for name in ("x,y", "my data"):
        assert f"{name}: a dataset name holds no comma, whitespace" in output
    untouched(tmp_path)


def test_a_src_missing_on_the_controller_copies_nothing(tmp_path):
    """Before: the first dataset was copied into datasets/, then the copy of the second failed."""
    datasets = [
        {"name": "tiny_alpaca", "src": TINY, "file_name": "a.json"},
        {"name": "other", "src": str(tmp_path / "nope.json"), "file_name": "b.json"},
    ]
    rc, output = train(tmp_path, [run()], kt_train_datasets=datasets)
    assert rc != 0
    assert f"other: src {tmp_path / 'nope.json'} is not on the controller" in output, output[-3000:]
    untouched(tmp_path)


def test_a_misspelt_column_or_tag_is_refused(tmp_path):
    """Before: LLaMA-Factory ignores column keys it does not know, so `promt` left the default `instruction`
    column in use; the entry was registered as given."""
    datasets = [{"name": "tiny_alpaca", "src": TINY, "file_name": "a.json", "columns": {"promt": "q"}}]
    rc, output = train(tmp_path, [run()], kt_train_datasets=datasets)
    assert rc != 0 and "promt" in output, output[-3000:]
    untouched(tmp_path)
    datasets = [{"name": "tiny_alpaca", "src": TINY, "file_name": "a.json", "formatting": "sharegpt",
                 "columns": {"messages": "turns"}, "tags": {"roletag": "who"}}]  # fmt: skip
    rc, output = train(tmp_path, [run()], kt_train_datasets=datasets)
    assert rc != 0 and "roletag" in output, output[-3000:]
    untouched(tmp_path)


def test_known_columns_and_tags_are_registered_and_other_entries_kept(tmp_path):
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "dataset_info.json").write_text(json.dumps({"theirs": {"file_name": "t.json"}}))
    datasets = [{"name": "tiny_alpaca", "src": TINY, "file_name": "sub/a.json", "formatting": "sharegpt",
                 "columns": {"messages": "turns", "system": "sys"}, "tags": {"role_tag": "who"}}]  # fmt: skip
    (tmp_path / "datasets" / "sub").mkdir()
    rc, output = train(tmp_path, [run()], kt_train_datasets=datasets)
    assert rc == 0, output[-3000:]
    info = json.loads((tmp_path / "datasets" / "dataset_info.json").read_text())
    assert info == {
        "theirs": {"file_name": "t.json"},
        "tiny_alpaca": {"file_name": "sub/a.json", "formatting": "sharegpt",
                        "columns": {"messages": "turns", "system": "sys"}, "tags": {"role_tag": "who"}},
    }  # fmt: skip


# slow: the existing dataset_info.json is read (and its entries kept) through the same task in
# test_known_columns_and_tags_are_registered_and_other_entries_kept, and a bad dataset entry leaves datasets/
# untouched in the tests above; this refusal's message is checked in the slow tier only
@pytest.mark.slow
def test_a_dataset_info_that_is_not_a_json_object_is_named(tmp_path):
    """Before: from_json's "Expecting property name enclosed in double quotes" for a broken file; a JSON
    list passed the checks, the dataset files were copied, then combine failed."""
    for text in ("{not json", "[]"):
        (tmp_path / "datasets").mkdir(exist_ok=True)
        (tmp_path / "datasets" / "dataset_info.json").write_text(text)
        rc, output = train(tmp_path, [run()], ["kt_train_start=true"])
        assert rc != 0
        assert f"{tmp_path}/datasets/dataset_info.json is not a JSON object of dataset entries" in output, (
            output[-3000:]
        )
        assert [p.name for p in (tmp_path / "datasets").iterdir()] == ["dataset_info.json"]
        assert (tmp_path / "datasets" / "dataset_info.json").read_text() == text
        for sub in ("cfg", "render", "units", "outputs"):
            assert list((tmp_path / sub).iterdir()) == [], sub
