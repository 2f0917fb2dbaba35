"""`render convert` review (session 37): what the rendered conversion writes must be what the plan loads.

kt-kernel reads NUMA pool i of a converted tree from `_layer_N/_numa_i` (a merged tree: `blk.*.numa.i` keys)
and only with the run's own pool count (tests/unit/test_legacy_int8_pools.py has the upstream references), so
the converter's --threadpool-count fixes the tree's layout for good.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from int8_tree import CONVERTER, moe_model
from test_render_support import (
    PLANS,
    install_executables,
    load_fixture_plan,
    make_systemd_root,
    unit_executables,
    verify_unit,
)
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.render import RenderError, render_serve, write_bundle
from ktinfra.render.convert import render_convert, render_lora_convert


@pytest.fixture
def serve_plan():
    plan = load_fixture_plan("seed002-qwen3-30b-a3b-serve.json")
    assert plan["serve"]["kt_threadpool_count"] == 2 and plan["serve"]["kt_method"] == "AMXINT8"
    return plan


def _convert(tmp_path, rendered) -> None:
    """Run the rendered converter argv with the stand-in convert_cpu_weights.py (same argparse flags)."""
    script = tmp_path / "convert_cpu_weights.py"
    script.write_text(CONVERTER)
    args = rendered.info["argv"][2:]
    subprocess.run([sys.executable, str(script), *args], check=True, capture_output=True)


def test_a_pool_count_other_than_the_serve_plans_is_refused(serve_plan, tmp_path):
    """Before, --threadpool-count 1 with the seed 002 plan (2 pools) rendered (exit 0): hours of conversion
    gave a tree split over 1 pool, which render serve (and kt-kernel: "Path not found: …/_numa_1") refuses
    for that same plan. Now render convert says so first."""
    model = moe_model(tmp_path / "Qwen3-30B-A3B")
    output = tmp_path / "Qwen3-30B-A3B-INT8"
    with pytest.raises(
        RenderError, match=r"--threadpool-count 1 contradicts the plan's serve.kt_threadpool_count 2"
    ):
        render_convert(model_path=str(model), output=str(output), plan=serve_plan, threadpool_count=1)
    # what that render would have converted: refused by render serve for the same plan
    stale = render_convert(model_path=str(model), output=str(output), method="int8", cpuinfer_threads=8,
                           threadpool_count=1)  # fmt: skip
    _convert(tmp_path, stale)
    with pytest.raises(RenderError, match="split over 1 NUMA pool"):
        render_serve(serve_plan, name="q", model_path=str(model), weight_path=str(output))


def test_the_plans_own_pool_count_converts_a_tree_the_plan_serves(serve_plan, tmp_path):
    model = moe_model(tmp_path / "Qwen3-30B-A3B")
    output = tmp_path / "Qwen3-30B-A3B-INT8"
    for given in (None, 2):  # left out, or the same as the plan's
        rendered = render_convert(
            model_path=str(model), output=str(output), plan=serve_plan, threadpool_count=given
        )
        args = rendered.info["argv"]
        assert args[args.index("--threadpool-count") + 1] == "2"
    _convert(tmp_path, rendered)
    argv = render_serve(serve_plan, name="q", model_path=str(model), weight_path=str(output)).info["argv"]
    assert argv[argv.index("--kt-threadpool-count") + 1] == "2"


def test_cpuinfer_threads_may_still_differ_from_the_plan(serve_plan):
    rendered = render_convert(model_path="/m/q", output="/m/q-INT8", plan=serve_plan, cpuinfer_threads=4)
    args = rendered.info["argv"]
    assert args[args.index("--cpuinfer-threads") + 1] == "4"
    assert args[args.index("--threadpool-count") + 1] == "2"


@pytest.mark.parametrize(
    ("tp_enabled", "pools", "given", "ok"),
    [(False, 4, 4, False), (False, 4, 1, True), (True, 2, 1, False), (True, 2, 2, True)],
)
def test_an_sft_plans_pools_are_not_overridden(tp_enabled, pools, given, ok):
    """The sft run loads INT8 experts over kt_threadpool_count pools with kt_tp_enabled, else over 1."""
    plan = load_fixture_plan("h100-qwen3-30b-a3b-sft-current.json")
    plan["sft"]["kt"]["kt_config"].update(kt_tp_enabled=tp_enabled, kt_threadpool_count=pools)
    plan["sft"]["kt"]["kt_config"]["kt_num_threads"] = 8

    def render():
        return render_convert(model_path="/m/q", output="/m/q-INT8", plan=plan, threadpool_count=given)

    if ok:
        args = render().info["argv"]
        assert args[args.index("--threadpool-count") + 1] == str(given)
    else:
        with pytest.raises(RenderError, match=f"--threadpool-count {given} contradicts the plan's sft run"):
            render()


def test_the_command_line_refuses_it_before_writing(tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["render", "convert", "--plan", f"{PLANS}/seed002-qwen3-30b-a3b-serve.json",
                                   "--model-path", "/m/q", "--output", "/m/q-INT8", "--threadpool-count", "1",
                                   "--out", str(out)])  # fmt: skip
    assert res.exit_code == 1
    assert res.output.startswith(
        "error: --threadpool-count 1 contradicts the plan's serve.kt_threadpool_count 2"
    )
    assert not out.exists()


PROGRAM_OPTIONS = [
    ("convert", "python"),
    ("convert", "script"),
    ("convert", "ktinfra"),
    ("lora", "python"),
    ("lora", "script"),
    ("legacy-lora", "script"),
]


def _render_job(kind: str, **option):
    if kind == "convert":
        return render_convert(
            model_path="/m/q",
            output="/m/q-INT8",
            method="int8",
            cpuinfer_threads=8,
            threadpool_count=2,
            **option,
        )
    return render_lora_convert(
        adapter="/runs/r1", output="/srv/lora/r1", legacy=kind == "legacy-lora",
        model_path=None if kind == "legacy-lora" else "/m/q", **option,
    )  # fmt: skip


@pytest.mark.parametrize(("kind", "option"), PROGRAM_OPTIONS)
@pytest.mark.parametrize("tail", ["/", "/.", "/.."])
def test_a_program_path_naming_a_directory_is_refused(kind, option, tail):
    """Before, --python /opt/kt/envs/kt-kernel/bin/python/ rendered a unit systemd does not load ("Executable
    path specifies a directory"), and a --script or --ktinfra ending in '/' failed only when run (for int8
    after the conversion's hours, when the manifest step ran)."""
    value = {
        "python": "/opt/kt/envs/kt-kernel/bin/python",
        "script": "/opt/c.py",
        "ktinfra": "/opt/bin/ktinfra",
    }
    with pytest.raises(RenderError, match=f"--{option} .* names a directory, not a program"):
        _render_job(kind, **{option: value[option] + tail})
    assert _render_job(kind, **{option: value[option]})


def test_systemd_refuses_an_exec_program_ending_in_a_slash(tmp_path_factory, tmp_path):
    """The premise, with Debian's systemd: the unit loads with the program's path, not with it + '/'."""
    root = make_systemd_root(tmp_path_factory.mktemp("sysroot"))
    write_bundle(tmp_path, _render_job("convert"))
    unit = tmp_path / "ktinfra-convert@.service"
    install_executables(root, unit_executables(unit.read_text()))
    assert verify_unit(root, unit, "q").returncode == 0
    python = "/opt/kt/envs/kt-kernel/bin/python"
    unit.write_text(unit.read_text().replace(f"ExecStart={python} ", f"ExecStart={python}/ "))
    result = verify_unit(root, unit, "q")
    assert result.returncode != 0 and "Executable path specifies a directory" in result.stderr


def _exec_condition_skips(rendered) -> bool:
    """Run the unit's ExecCondition code with a real Python on the rendered marker: exit 1 skips the start."""
    unit = rendered.files["ktinfra-convert@.service"][0]
    line = next(x for x in unit.splitlines() if x.startswith("ExecCondition="))
    code = line.split("'")[1]
    marker = rendered.info["done_marker"]
    return subprocess.run([sys.executable, "-c", code, marker], check=False).returncode == 1


def _finish(tmp_path, rendered) -> None:
    """The converter (stand-in), then the unit's finishing step: the real `ktinfra weights manifest`."""
    _convert(tmp_path, rendered)
    finish = rendered.info["finish_argv"]
    res = CliRunner().invoke(app, finish[1:])
    assert res.exit_code == 0, res.output


def test_an_output_holding_another_split_is_refused_not_skipped(serve_plan, tmp_path):
    """Before, re-rendering for a plan with other pools (or the other kernel) into a finished --output
    rendered (exit 0), and the unit's ExecCondition then skipped the conversion on the old tree's marker: the
    start 'succeeded' and the tree stayed split over the old pools."""
    model = moe_model(tmp_path / "Qwen3-30B-A3B")
    output = str(tmp_path / "Qwen3-30B-A3B-CPU")
    first = render_convert(model_path=str(model), output=output, plan=serve_plan)
    assert not _exec_condition_skips(first)
    _finish(tmp_path, first)
    assert _exec_condition_skips(first)
    # the same conversion again: finished, so skipped, as Ansible re-runs need
    assert render_convert(model_path=str(model), output=output, plan=serve_plan).info == first.info
    one_pool = dict(serve_plan, serve=dict(serve_plan["serve"], kt_threadpool_count=1))
    with pytest.raises(
        RenderError, match=r"already holds a conversion split over 2 NUMA pools, this one is over 1"
    ):
        render_convert(model_path=str(model), output=output, plan=one_pool)
    with pytest.raises(RenderError, match=r"already holds INT8 weights: converting int4 into it"):
        render_convert(
            model_path=str(model), output=output, method="int4", cpuinfer_threads=8, threadpool_count=2
        )


def test_an_output_cut_off_midway_is_converted_on(serve_plan, tmp_path, monkeypatch):
    """A tree of this same conversion without its marker (the converter died) renders: the unit runs again."""
    model = moe_model(tmp_path / "Qwen3-30B-A3B")
    output = str(tmp_path / "Qwen3-30B-A3B-INT8")
    rendered = render_convert(model_path=str(model), output=output, plan=serve_plan)
    monkeypatch.setenv("STANDIN_CUT", "1")
    _convert(tmp_path, rendered)
    again = render_convert(model_path=str(model), output=output, plan=serve_plan)
    assert again.info == rendered.info and not _exec_condition_skips(again)


@pytest.mark.parametrize("value", [True, 8.0, "8"])
@pytest.mark.parametrize("option", ["cpuinfer_threads", "threadpool_count"])
def test_thread_counts_that_are_no_whole_number_are_refused(option, value):
    """Before, render_convert(cpuinfer_threads=True) rendered '--cpuinfer-threads True' (8.0: '8.0'), which
    the converter's argparse (type=int) refuses when the unit starts; "8" raised a TypeError."""
    counts = {"cpuinfer_threads": 8, "threadpool_count": 1, option: value}
    with pytest.raises(
        RenderError, match=f"--{option.replace('_', '-')} must be from 1 to 8192, got {value}"
    ):
        render_convert(model_path="/m/q", output="/m/q-INT8", method="int8", **counts)


def test_an_int8_output_holding_other_files_is_refused(serve_plan, tmp_path):
    """Before, an --output holding anything but _layer_N folders rendered (exit 0); the unit then converted
    for hours and its finishing `ktinfra weights manifest` refused the tree ("holds README.md ..."), leaving
    no marker, so every later start converted again and failed again."""
    model = moe_model(tmp_path / "Qwen3-30B-A3B")
    output = tmp_path / "Qwen3-30B-A3B-INT8"
    output.mkdir()
    assert render_convert(model_path=str(model), output=str(output), plan=serve_plan)  # an empty one is fine
    (output / "README.md").write_text("notes\n")
    (output / "_layer_x").mkdir()
    with pytest.raises(RenderError, match=r"holds README.md, _layer_x: an int8 conversion ends with"):
        render_convert(model_path=str(model), output=str(output), plan=serve_plan)
    # int4 stays merged: its output takes other files (config.json, the index) and is not judged so
    assert render_convert(model_path=str(model), output=str(output), method="int4", cpuinfer_threads=8,
                          threadpool_count=2)  # fmt: skip
    # the premise: the finishing step refuses a converted tree with a stray file in it
    clean = tmp_path / "clean-INT8"
    rendered = render_convert(model_path=str(model), output=str(clean), plan=serve_plan)
    _convert(tmp_path, rendered)
    (clean / "README.md").write_text("notes\n")
    res = CliRunner().invoke(app, rendered.info["finish_argv"][1:])
    assert res.exit_code == 1 and "README.md" in res.output


def test_a_symlinked_int8_output_is_refused(serve_plan, tmp_path):
    model = moe_model(tmp_path / "Qwen3-30B-A3B")
    (tmp_path / "real").mkdir()
    link = tmp_path / "Qwen3-30B-A3B-INT8"
    link.symlink_to(tmp_path / "real")
    with pytest.raises(RenderError, match="is a symlink, which kt-kernel refuses as an INT8 weight root"):
        render_convert(model_path=str(model), output=str(link), plan=serve_plan)
    assert render_convert(model_path=str(model), output=str(tmp_path / "real"), plan=serve_plan)


def test_an_output_whose_entries_cannot_be_looked_at_is_left_to_the_converter(
    serve_plan, tmp_path, monkeypatch
):
    """A folder readable but not searchable (mode r-- for the rendering user) lists its names but stat fails
    with EACCES on each; that raised a PermissionError traceback from the int8 root check. Root reads every
    folder, so the stat refusal is stood in for here."""
    import pathlib

    model = moe_model(tmp_path / "Qwen3-30B-A3B")
    output = tmp_path / "Qwen3-30B-A3B-INT8"
    (output / "_layer_0").mkdir(parents=True)
    real_is_dir = pathlib.Path.is_dir

    def is_dir(self):
        if self.parent == output:
            raise PermissionError(13, "Permission denied", str(self))
        return real_is_dir(self)

    monkeypatch.setattr(pathlib.Path, "is_dir", is_dir)
    rendered = render_convert(model_path=str(model), output=str(output), plan=serve_plan)
    assert rendered.info["kt_weight_path"] == str(output)
