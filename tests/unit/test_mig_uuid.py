"""MIG instances are selected by UUID: `nvidia-smi -L` (capture file nvidia-smi-L.txt) gives each MIG device's
UUID, the plan carries the planned instance's UUID (serve.mig_uuids / sft.mig_uuids), and render exports it as
CUDA_VISIBLE_DEVICES; the GPU index of a MIG-enabled GPU does not choose the instance a process gets.

synthetic-h100-mig-2x3g's nvidia-smi-L.txt is synthetic (its README says so: R470+ layout, made-up MIG
UUIDs); tests/fixtures/nvidia-smi/h100-580-mig-off is real output of an H100 with MIG off."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra.cli import app
from ktinfra.facts import capture as capture_module
from ktinfra.facts import from_capture, parse_files
from ktinfra.plan.host import FactsError, validate
from ktinfra.planner import PlanInputError, plan
from ktinfra.render import RenderError, render_serve
from ktinfra.render.train import render_train

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HOSTS = FIXTURES / "hosts"
MIG, H100 = HOSTS / "synthetic-h100-mig-2x3g", HOSTS / "h100-xeon-amx-16c"
REAL_L = FIXTURES / "nvidia-smi" / "h100-580-mig-off"
MODEL = "Qwen3-30B-A3B"
GPU_UUID = "GPU-15ad6b29-6927-2cac-9589-94c4a88d0418"  # the H100 capture's, in its CSV and XML
DEVICE_0 = "MIG-978553c0-9f55-5ab9-b2cd-da525c211123"  # synthetic-h100-mig-2x3g/nvidia-smi-L.txt
DEVICE_1 = "MIG-d9d7d000-7324-555b-9b15-aa9d35017479"
R450_0, R450_1 = f"MIG-{GPU_UUID}/1/0", f"MIG-{GPU_UUID}/2/0"  # GPU instances 1 and 2, compute instance 0
TRAIN = {"name": "r", "model_path": "/m", "dataset": "d", "dataset_dir": "/d", "output_dir": "/o"}


def _copy(tmp_path: Path, source: Path = MIG) -> Path:
    target = tmp_path / source.name
    shutil.copytree(source, target)
    return target


def _without_listing(tmp_path: Path) -> Path:
    """The MIG capture as a capture made before nvidia-smi-L.txt."""
    capture = _copy(tmp_path)
    (capture / "nvidia-smi-L.txt").unlink()
    return capture


def _devices(facts: dict) -> list[tuple]:
    (gpu,) = facts["gpus"]
    return [(d["index"], d["profile"], d["uuid"]) for d in gpu["mig_devices"]]


def _with_listing(listing: str) -> dict:
    """Facts of the MIG capture's nvidia-smi files with `listing` as its `nvidia-smi -L`."""
    files = {name: (MIG / name).read_text() for name in ("nvidia-smi-query.csv", "nvidia-smi-q.xml")}
    return parse_files({**files, "nvidia-smi-L.txt": listing}, "x")


def _sft_facts(capture: Path = MIG) -> dict:
    facts = from_capture(capture)
    for disk in facts["disks"]:  # the capture's 69 GB free is less than fine-tuning needs
        disk["avail_bytes"] = 10**12
    return facts


def _env(rendered, name: str) -> list[str]:
    return rendered.files[name][0].splitlines()


# --- capture and facts ------------------------------------------------------------------------------------


def test_the_capture_keeps_nvidia_smi_L(monkeypatch):
    asked = []
    monkeypatch.setattr(capture_module, "_run", lambda argv, **_: asked.append(argv) or "listing\n")
    files = capture_module.collect_live()
    assert capture_module.SOURCES["nvidia-smi-L.txt"] == ["nvidia-smi", "-L"]
    assert ["nvidia-smi", "-L"] in asked and files["nvidia-smi-L.txt"] == "listing\n"


def test_facts_carry_each_mig_instances_uuid_and_profile():
    facts = from_capture(MIG)
    assert _devices(facts) == [(0, "3g.40gb", DEVICE_0), (1, "3g.40gb", DEVICE_1)]
    assert facts["gpus"][0]["uuid"] == GPU_UUID
    validate(facts)


def test_a_capture_without_nvidia_smi_L_reads_as_before_with_the_uuids_unknown(tmp_path):
    facts = from_capture(_without_listing(tmp_path))
    assert _devices(facts) == [(0, None, None), (1, None, None)]
    (gpu,) = facts["gpus"]
    assert (gpu["mig"], gpu["memory_mib"], gpu["uuid"]) == (True, 40192, GPU_UUID)
    validate(facts)


def test_the_r450_form_is_read():
    listing = (
        f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {GPU_UUID})\n"
        f"  MIG 3g.40gb Device 0: (UUID: {R450_0})\n"
        f"  MIG 3g.40gb Device 1: (UUID: {R450_1})\n"
    )
    assert _devices(_with_listing(listing)) == [(0, "3g.40gb", R450_0), (1, "3g.40gb", R450_1)]


@pytest.mark.parametrize(
    "line",
    [
        f"  MIG 3g.40gb Device 0: (UUID: {R450_1})",  # names GPU instance 2: device 1's, not device 0's
        "  MIG 3g.40gb Device 0: (UUID: MIG-GPU-00000000-1111-2222-3333-444444444444/1/0)",  # another GPU's
    ],
)
def test_an_r450_uuid_of_another_instance_is_not_taken(line):
    listing = f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {GPU_UUID})\n{line}\n"
    assert _devices(_with_listing(listing)) == [(0, None, None), (1, None, None)]


def test_malformed_lines_are_ignored():
    listing = "\n".join(
        [
            f"  MIG 3g.40gb     Device  1: (UUID: {DEVICE_1})",  # before any GPU line: no GPU to go with
            "WARNING: infoROM is corrupted at gpu 0000:00:07.0",
            f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {GPU_UUID})",
            f"  MIG 3g.40gb     Device  0: (UUID: {DEVICE_0[:-1]}',0)",  # quote and comma: not a UUID
            f"  MIG 3g.40gb     Device  0: (UUID: {DEVICE_0[:20]}",  # cut off
            f"  MIG 3g.40gb     Device  1: (UUID: {DEVICE_1[:-4]})",  # too short
            "  MIG 3g.40gb     Device  x: (UUID: MIG-x)",
            "",
        ]
    )
    facts = _with_listing(listing)
    assert _devices(facts) == [(0, None, None), (1, None, None)]
    assert facts["gpus"][0]["uuid"] == GPU_UUID


def test_a_mig_device_listed_twice_is_left_unknown_the_others_are_taken():
    listing = (
        f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {GPU_UUID})\n"
        f"  MIG 3g.40gb     Device  0: (UUID: {DEVICE_0})\n"
        f"  MIG 3g.40gb     Device  0: (UUID: {DEVICE_1})\n"
        f"  MIG 3g.40gb     Device  1: (UUID: {DEVICE_1})\r\n"  # CRLF
    )
    assert _devices(_with_listing(listing)) == [(0, None, None), (1, "3g.40gb", DEVICE_1)]


def test_a_listing_of_another_gpu_is_not_taken():
    """The -L line of GPU 0 names another GPU than the CSV and the XML: none of its MIG UUIDs is taken."""
    listing = (
        (MIG / "nvidia-smi-L.txt").read_text().replace(GPU_UUID, "GPU-dcbaa922-9dec-cfc5-d4c6-c6137b68bdcd")
    )
    facts = _with_listing(listing)
    assert _devices(facts) == [(0, None, None), (1, None, None)]
    assert facts["gpus"][0]["uuid"] == GPU_UUID


def test_the_real_listing_of_an_h100_without_mig():
    (gpu,) = from_capture(REAL_L)["gpus"]  # its CSV and its -L give the same UUID
    assert (gpu["uuid"], gpu["mig"]) == ("GPU-dcbaa922-9dec-cfc5-d4c6-c6137b68bdcd", False)


def test_the_gpu_uuid_comes_from_nvidia_smi_L_when_the_csv_lacks_it_and_no_gpu_from_it_alone():
    listing = (
        (REAL_L / "nvidia-smi-L.txt").read_text() + "GPU 1: NVIDIA H100 80GB HBM3 (UUID: " + GPU_UUID + ")\n"
    )
    csv = "index, name, memory.total [MiB]\n0, NVIDIA H100 80GB HBM3, 81559 MiB\n"
    (gpu,) = parse_files({"nvidia-smi-query.csv": csv, "nvidia-smi-L.txt": listing}, "x")["gpus"]
    assert gpu["uuid"] == "GPU-dcbaa922-9dec-cfc5-d4c6-c6137b68bdcd"


@pytest.mark.parametrize(
    "uuid", ["MIG-x", f"{DEVICE_0},0", f'"{DEVICE_0}"', GPU_UUID, f"{DEVICE_0}\n", 7, f"MIG-{GPU_UUID}/1"]
)
def test_facts_with_a_bad_mig_uuid_are_refused(uuid):
    facts = copy.deepcopy(from_capture(MIG))
    facts["gpus"][0]["mig_devices"][0]["uuid"] = uuid
    with pytest.raises(FactsError, match=r"gpus\[0\]\.mig_devices\[0\]\.uuid must be a MIG device UUID"):
        validate(facts)
    with pytest.raises(PlanInputError):
        plan(facts, MODEL, "serve")


# --- plan -----------------------------------------------------------------------------------------------


def test_the_serve_plan_names_the_planned_instance():
    result = plan(from_capture(MIG), MODEL, "serve")
    serve = result["serve"]
    assert (serve["gpu_indices"], serve["mig_uuids"], serve["tensor_parallel_size"]) == ([0], [DEVICE_0], 1)
    assert result["reasons"]["mig_uuids"].startswith(
        f"GPU 0: {DEVICE_0}, its largest instance, MIG device 0 (3g.40gb, GPU instance 1, 60 SMs), 40192 MiB"
    )
    (warning,) = [w for w in result["warnings"] if "MIG" in w]
    assert warning.endswith(
        f"serve.mig_uuids names that instance ({DEVICE_0}), which `ktinfra render` exports as "
        "CUDA_VISIBLE_DEVICES instead of the GPU index 0"
    )
    assert "set CUDA_VISIBLE_DEVICES" not in warning


def test_the_uuid_is_the_largest_instances_not_the_first(tmp_path):
    capture = _copy(tmp_path)
    xml = capture / "nvidia-smi-q.xml"
    xml.write_text(xml.read_text().replace("<total>40192 MiB</total>", "<total>19968 MiB</total>", 1))
    result = plan(from_capture(capture), MODEL, "serve")
    assert result["serve"]["mig_uuids"] == [DEVICE_1]
    assert "MIG device 1 (3g.40gb, GPU instance 2, 60 SMs), 40192 MiB" in result["reasons"]["mig_uuids"]


def test_the_sft_plan_names_the_planned_instance():
    result = plan(_sft_facts(), MODEL, "sft")
    assert result["feasible"], result["problems"]
    assert (result["sft"]["gpu_indices"], result["sft"]["mig_uuids"]) == ([0], [DEVICE_0])
    assert any("sft.mig_uuids names that instance" in w for w in result["warnings"])


@pytest.mark.parametrize("mode", ["serve", "sft"])
def test_without_nvidia_smi_L_the_plan_keeps_the_index_and_says_what_to_capture_or_set(tmp_path, mode):
    result = plan(_sft_facts(_without_listing(tmp_path)), MODEL, mode)
    assert (result[mode]["gpu_indices"], result[mode]["mig_uuids"]) == ([0], None)
    assert "mig_uuids" not in result["reasons"]
    (warning,) = [w for w in result["warnings"] if "MIG" in w]
    assert (
        "the facts lack MIG device 0's UUID (`nvidia-smi -L`, kept in a capture as nvidia-smi-L.txt; "
        f"captures made before it lack it), so {mode}.mig_uuids is null and `ktinfra render` exports the GPU "
        "index 0 as CUDA_VISIBLE_DEVICES, which does not choose the instance"
    ) in warning
    assert warning.endswith(
        f'set {mode}.mig_uuids to ["MIG-..."], the UUID `nvidia-smi -L` prints for MIG device 0 under GPU 0'
    )


@pytest.mark.parametrize("mode", ["serve", "sft"])
def test_plans_without_mig_have_no_mig_uuids(mode):
    result = plan(_sft_facts(H100), MODEL, mode)
    assert result[mode]["mig_uuids"] is None and "mig_uuids" not in result["reasons"]


# --- render ---------------------------------------------------------------------------------------------


def test_render_serve_exports_the_mig_uuid():
    rendered = render_serve(plan(from_capture(MIG), MODEL, "serve"), name="q", model_path="/m")
    env = _env(rendered, "ktinfra-serve-q.env")
    assert f'CUDA_VISIBLE_DEVICES="{DEVICE_0}"' in env and 'CUDA_DEVICE_ORDER="PCI_BUS_ID"' in env
    assert "--tensor-parallel-size 1" in next(line for line in env if line.startswith("KT_SERVE_ARGS="))


def test_render_train_exports_the_mig_uuid():
    rendered = render_train(plan(_sft_facts(), MODEL, "sft"), **TRAIN)
    env = _env(rendered, "ktinfra-train-r.env")
    assert f'CUDA_VISIBLE_DEVICES="{DEVICE_0}"' in env and 'CUDA_DEVICE_ORDER="PCI_BUS_ID"' in env


def test_render_from_a_capture_end_to_end(tmp_path):
    out = tmp_path / "out"
    args = [
        "render",
        "serve",
        "--name",
        "q",
        "--model",
        MODEL,
        "--from",
        MIG,
        "--model-path",
        "/m",
        "--out",
        out,
    ]
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    assert f'CUDA_VISIBLE_DEVICES="{DEVICE_0}"' in (out / "ktinfra-serve-q.env").read_text().splitlines()


def test_without_nvidia_smi_L_render_exports_the_index_as_before(tmp_path):
    rendered = render_serve(
        plan(from_capture(_without_listing(tmp_path)), MODEL, "serve"), name="q", model_path="/m"
    )
    assert 'CUDA_VISIBLE_DEVICES="0"' in _env(rendered, "ktinfra-serve-q.env")


@pytest.mark.parametrize("mode", ["serve", "sft"])
def test_plans_without_the_key_render_as_with_it_null(mode):
    """Plans made before mig_uuids (no key) and plans without MIG (null) render the same files."""
    made = plan(_sft_facts(H100), MODEL, mode)
    older = copy.deepcopy(made)
    del older[mode]["mig_uuids"]

    def files(p):
        if mode == "serve":
            return render_serve(p, name="q", model_path="/m", weight_path="/w").files
        return render_train(p, **TRAIN).files

    assert files(older) == files(made)
    env = files(made)["ktinfra-serve-q.env" if mode == "serve" else "ktinfra-train-r.env"][0]
    assert 'CUDA_VISIBLE_DEVICES="0"' in env.splitlines()


def test_a_hand_written_r450_uuid_is_exported():
    made = plan(from_capture(MIG), MODEL, "serve")
    made["serve"]["mig_uuids"] = [R450_0]
    assert f'CUDA_VISIBLE_DEVICES="{R450_0}"' in _env(
        render_serve(made, name="q", model_path="/m"), "ktinfra-serve-q.env"
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (["MIG-x"], 'plan serve.mig_uuids[0] "MIG-x" is not a MIG device UUID'),
        (
            [f"{DEVICE_0},1"],
            "serve.mig_uuids[0] " + json.dumps(f"{DEVICE_0},1") + " is not a MIG device UUID",
        ),
        ([f'{DEVICE_0}"'], "serve.mig_uuids[0] " + json.dumps(f'{DEVICE_0}"') + " is not a MIG device UUID"),
        ([f"{DEVICE_0} "], "is not a MIG device UUID"),
        (["mig-" + DEVICE_0[4:]], "is not a MIG device UUID"),
        ([GPU_UUID], "is not a MIG device UUID"),
        ([f"MIG-{GPU_UUID}/1"], "is not a MIG device UUID"),
        ([0], "serve.mig_uuids[0] 0 is not a MIG device UUID"),
        ([], "plan serve.mig_uuids must be a list of MIG device UUIDs"),
        (DEVICE_0, "plan serve.mig_uuids must be a list of MIG device UUIDs"),
        (
            [DEVICE_0, DEVICE_1],
            "serve.mig_uuids lists 2 MIG device(s) for the 1 GPU(s) of serve.gpu_indices [0]",
        ),
    ],
)
def test_bad_mig_uuids_in_a_hand_written_plan_are_refused_before_anything_is_written(
    tmp_path, value, message
):
    made = plan(from_capture(MIG), MODEL, "serve")
    made["serve"]["mig_uuids"] = value
    with pytest.raises(RenderError) as caught:
        render_serve(made, name="q", model_path="/m")
    assert message in str(caught.value)
    plan_file, out = tmp_path / "plan.json", tmp_path / "out"
    plan_file.write_text(json.dumps(made))
    args = ["render", "serve", "--name", "q", "--plan", plan_file, "--model-path", "/m", "--out", out]
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 1 and result.output.startswith("error: ") and message in result.output
    assert not out.exists()


def test_more_than_one_mig_instance_is_refused():
    made = plan(from_capture(MIG), MODEL, "serve")
    made["serve"].update(gpu_indices=[0, 1], tensor_parallel_size=2, mig_uuids=[DEVICE_0, DEVICE_1])
    with pytest.raises(RenderError, match="lists 2 MIG devices: a process sees one MIG instance"):
        render_serve(made, name="q", model_path="/m")


def test_mig_uuids_without_gpu_indices_are_refused():
    made = plan(_sft_facts(), MODEL, "sft")
    del made["sft"]["gpu_indices"]  # a plan from before sft.gpu_indices would render every host GPU
    with pytest.raises(RenderError, match=r"plan sft.mig_uuids needs sft.gpu_indices"):
        render_train(made, **TRAIN)


def test_a_launcher_env_may_repeat_the_mig_uuid_but_not_change_it():
    made = plan(_sft_facts(), MODEL, "sft")
    made["sft"]["launcher"]["env"]["CUDA_VISIBLE_DEVICES"] = DEVICE_0
    render_train(made, **TRAIN)
    made["sft"]["launcher"]["env"]["CUDA_VISIBLE_DEVICES"] = "0"
    with pytest.raises(RenderError, match=f"sets CUDA_VISIBLE_DEVICES=0, but ktinfra sets it to {DEVICE_0}"):
        render_train(made, **TRAIN)
