"""Rendered units pass `systemd-analyze verify` (Debian's systemd) in a temp root holding their programs.

`--root` makes verify resolve units and ExecStart= programs inside the temp root, so the check stays
meaningful (a unit whose program is missing fails) without installing anything on this machine.
"""

from __future__ import annotations

import pytest
from test_render_support import (
    install_executables,
    load_fixture_plan,
    make_systemd_root,
    unit_executables,
    verify_unit,
)

from ktinfra.render import render_serve, write_bundle
from ktinfra.render.convert import render_convert, render_lora_convert
from ktinfra.render.train import render_train

MODEL = "/root/autodl-tmp/Qwen3-30B-A3B"
WEIGHTS = "/root/autodl-tmp/Qwen3-30B-A3B-INT8"


@pytest.fixture(scope="module")
def systemd_root(tmp_path_factory):
    return make_systemd_root(tmp_path_factory.mktemp("sysroot"))


def _verify_clean(systemd_root, unit_path, instance):
    unit_text = unit_path.read_text()
    install_executables(systemd_root, unit_executables(unit_text))
    result = verify_unit(systemd_root, unit_path, instance)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "", result.stderr
    return unit_text


def test_serve_unit_verifies(systemd_root, tmp_path):
    plan = load_fixture_plan("seed002-qwen3-30b-a3b-serve.json")
    rendered = render_serve(plan, name="Qwen3-30B-A3B", model_path=MODEL, weight_path=WEIGHTS, user="ktinfra")
    write_bundle(tmp_path, rendered)
    text = _verify_clean(systemd_root, tmp_path / "ktinfra-serve@.service", "Qwen3-30B-A3B")
    for directive in (
        "Restart=on-failure",
        "StartLimitIntervalSec=",
        "StartLimitBurst=",
        "RestartSec=",
        "TimeoutStartSec=3600",
        "LimitMEMLOCK=infinity",
        "LimitNOFILE=",
        "StandardOutput=journal",
        "StandardError=journal",
        "SyslogIdentifier=ktinfra-serve-%i",
        "EnvironmentFile=/etc/ktinfra/serve/%i.env",
        "ExecStart=/usr/bin/numactl $KT_NUMACTL_ARGS /opt/kt/envs/kt-kernel/bin/python -c ",
        "User=ktinfra",
    ):
        assert directive in text


def test_verify_catches_a_missing_program(tmp_path_factory, tmp_path):
    """The check is real: a unit whose ExecStart program is absent from the root fails verify."""
    root = make_systemd_root(tmp_path_factory.mktemp("bare"))
    rendered = render_serve(load_fixture_plan("seed002-qwen3-30b-a3b-serve.json"), name="q", model_path=MODEL,
                            weight_path=WEIGHTS)  # fmt: skip
    write_bundle(tmp_path, rendered)
    result = verify_unit(root, tmp_path / "ktinfra-serve@.service", "q")
    assert result.returncode != 0
    assert "/usr/bin/numactl" in result.stderr


def _job_bundles():
    sft_current = load_fixture_plan("h100-qwen3-30b-a3b-sft-current.json")
    sft_legacy = load_fixture_plan("seed002-qwen3-30b-a3b-sft-legacy.json")
    train = {"model_path": "/m/q", "dataset": "d", "dataset_dir": "/data", "output_dir": "/runs/r1"}
    return {
        "convert": (
            render_convert(model_path="/m/q", output="/m/q-int8", method="int8", cpuinfer_threads=8,
                           threadpool_count=2),
            "ktinfra-convert@.service", "q-int8",
        ),
        "lora-current": (
            render_lora_convert(adapter="/runs/r1", output="/srv/lora/r1", model_path="/m/q"),
            "ktinfra-lora-convert@.service", "r1",
        ),
        "lora-legacy": (
            render_lora_convert(adapter="/runs/r1", output="/srv/lora/r1", legacy=True),
            "ktinfra-lora-convert@.service", "r1",
        ),
        "train-current": (render_train(sft_current, name="r1", **train), "ktinfra-train@.service", "r1"),
        "train-legacy": (render_train(sft_legacy, name="r1", **train), "ktinfra-train@.service", "r1"),
    }  # fmt: skip


@pytest.mark.parametrize("job", ["convert", "lora-current", "lora-legacy", "train-current", "train-legacy"])
def test_job_units_verify(systemd_root, tmp_path, job):
    rendered, unit_name, instance = _job_bundles()[job]
    write_bundle(tmp_path, rendered)
    text = _verify_clean(systemd_root, tmp_path / unit_name, instance)
    assert "StandardOutput=journal" in text and f"SyslogIdentifier={unit_name.split('@')[0]}-%i" in text
    if job.startswith("train"):
        assert "Restart=on-failure" in text and "StartLimitBurst=" in text
