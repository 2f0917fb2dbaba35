"""`render convert` int4: a finished --output of another model is refused, not skipped.

An int4 conversion's done marker was an empty file: rendering the conversion of another model (the Instruct
fine-tune of the same architecture, so the same shapes and pools) into an --output that held a finished one
rendered fine, the unit's ExecCondition skipped the conversion on the old marker and the server loaded the old
model's experts. The unit now writes KT_CONVERT_SOURCE (the model converted) into the marker, and render
refuses an --output whose marker names another model. The marker is written here by the rendered unit's own
ExecStartPost code, run with a real Python on the values of the rendered env file.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from int8_tree import moe_model
from test_render_support import install_executables, make_systemd_root, unit_executables, verify_unit

from ktinfra.render import RenderError, write_bundle
from ktinfra.render.convert import DONE_MARKER, render_convert


def convert(model: Path, output: Path):
    return render_convert(
        model_path=str(model), output=str(output), method="int4", cpuinfer_threads=4, threadpool_count=1
    )


def env_values(rendered) -> dict[str, str]:
    (text, _mode) = next(v for k, v in rendered.files.items() if k.endswith(".env"))
    pairs = (line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return {key: value.strip('"') for key, value in pairs}


def finish(rendered, output: Path) -> None:
    """The converter's output, then the unit's marker step as systemd runs it: ${VAR} is one argument."""
    output.mkdir(parents=True, exist_ok=True)
    (output / "model.safetensors").write_bytes(b"")  # stands in for the merged tree
    unit = rendered.files["ktinfra-convert@.service"][0]
    line = next(x for x in unit.splitlines() if x.startswith("ExecStartPost=") and "KT_CONVERT_MARKER" in x)
    code = line.split("'")[1]
    env = env_values(rendered)
    argv = [sys.executable, "-c", code, env["KT_CONVERT_MARKER"], env["KT_CONVERT_SOURCE"]]
    subprocess.run(argv, check=True)


def test_a_finished_output_of_another_model_is_refused(tmp_path):
    base = moe_model(tmp_path / "Qwen3-30B-A3B")
    instruct = moe_model(tmp_path / "Qwen3-30B-A3B-Instruct-2507")
    output = tmp_path / "experts-int4"
    first = convert(base, output)
    finish(first, output)
    assert (output / DONE_MARKER).read_text() == str(base)
    assert convert(base, output).info == first.info  # the same conversion again: skipped, as re-runs need
    with pytest.raises(RenderError) as refused:
        convert(instruct, output)
    assert f"holds a finished conversion of {base} (its {DONE_MARKER} says so), not of {instruct}" in str(
        refused.value
    )
    (tmp_path / "moved").symlink_to(base)  # the same model by another path is the same conversion
    assert convert(tmp_path / "moved", output).info["done_marker"] == str(output / DONE_MARKER)


def test_an_empty_marker_of_an_older_ktinfra_tells_nothing(tmp_path):
    output = tmp_path / "experts-int4"
    output.mkdir()
    (output / DONE_MARKER).touch()
    assert convert(moe_model(tmp_path / "other"), output).info["kt_weight_path"] == str(output)


def test_int8_keeps_the_manifest_as_the_marker_and_the_unit_loads(tmp_path_factory, tmp_path):
    rendered = render_convert(
        model_path=str(moe_model(tmp_path / "m")),
        output=str(tmp_path / "int8"),
        method="int8",
        cpuinfer_threads=4,
        threadpool_count=1,
    )
    assert env_values(rendered)["KT_CONVERT_SOURCE"] == ""  # the manifest kt-kernel reads is not rewritten
    root = make_systemd_root(tmp_path_factory.mktemp("sysroot"))
    out = tmp_path / "bundle"
    write_bundle(out, rendered)
    unit = out / "ktinfra-convert@.service"
    install_executables(root, unit_executables(unit.read_text()))
    result = verify_unit(root, unit, "q")
    assert result.returncode == 0, result.stderr
