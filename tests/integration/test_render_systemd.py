"""Rendered units under a real systemd (Debian 12 container, systemd as PID 1): `make render-systemd`.

What is real: systemd 252 parsing the units and EnvironmentFiles, numactl, the Python launch shim that
hands the API key to sglang in-process, the /health readiness wait, Restart=/StartLimit, ExecCondition,
journald. What is a stand-in: the programs the units start (sglang.launch_server, the converter,
llamafactory-cli, accelerate), because the real ones need a GPU and a 30B+ model. The stand-ins record how
they were started, so the test checks exactly what the real programs would receive.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLANS = REPO / "tests" / "fixtures" / "plans"
sys.path.insert(0, str(REPO / "tests" / "unit"))
from int8_tree import CONVERTER as INT8_CONVERTER  # noqa: E402
from int8_tree import TINY  # noqa: E402
from systemd_box import systemd_box  # noqa: E402

IMAGE = os.environ.get("KTINFRA_BASE_IMAGE", "ktinfra/debian12-systemd:latest")
PY = "/opt/kt/envs/kt-kernel/bin/python"
SFT_BIN = "/opt/kt/envs/kt-sft/bin"
SITE = "/opt/kt/envs/kt-kernel/lib/python3.11/site-packages"

SGLANG_STANDIN = '''
"""Stand-in for sglang.launch_server: records its start, answers /health 503 while "loading", then 200."""
import json, os, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer

if __name__ == "__main__":
    argv = sys.argv[1:]
    print("standin sglang: loading", flush=True)
    if os.environ.get("STANDIN_CRASH_DURING_LOAD"):
        time.sleep(1)
        sys.exit(3)
    record = {
        "argv": argv,
        "cmdline": open("/proc/self/cmdline", "rb").read().decode().split("\\0"),
        "env_api_key": os.environ.get("KT_API_KEY"),
        "affinity": sorted(os.sched_getaffinity(0)),
        "cwd": os.getcwd(),
    }
    name = argv[argv.index("--served-model-name") + 1]
    with open(f"/run/standin-{name}.json", "w") as fh:
        json.dump(record, fh)
    host, port = argv[argv.index("--host") + 1], int(argv[argv.index("--port") + 1])
    started = time.monotonic()
    load_s = float(os.environ.get("STANDIN_LOAD_SECONDS", "4"))

    class Health(BaseHTTPRequestHandler):
        def do_GET(self):
            ready = time.monotonic() - started >= load_s
            self.send_response(200 if ready and self.path == "/health" else 503)
            self.end_headers()

        def log_message(self, *args):
            pass

    HTTPServer((host, port), Health).serve_forever()
'''

RECORDER = """#!{python}
import json, os, sys
out = os.environ.get("STANDIN_RECORD", "/run/standin-{tag}.jsonl")
with open(out, "a") as fh:
    fh.write(json.dumps({{"argv": sys.argv, "env": {{k: v for k, v in os.environ.items()
              if k.startswith(("KT_", "USE_KT", "ACCELERATE", "CUDA"))}}}}) + "\\n")
{extra}
"""


def sh(container: str, script: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        ["docker", "exec", container, "bash", "-c", script], capture_output=True, text=True
    )
    if check and result.returncode != 0:
        raise AssertionError(f"{script!r} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def put(container: str, path: str, content: str, mode: str = "0644") -> None:
    subprocess.run(
        ["docker", "exec", "-i", container, "bash", "-c", f"mkdir -p $(dirname {path}) && cat > {path}"],
        input=content,
        text=True,
        check=True,
    )
    sh(container, f"chmod {mode} {path}")


def ktinfra(*args: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "ktinfra", *args, "--json"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def install(container: str, rendered: dict) -> None:
    """Put the rendered files where `--json`'s "install" map says (what the roles do)."""
    for path in rendered["files"]:
        target = rendered["install"][Path(path).name]
        put(container, target, Path(path).read_text(), oct(Path(path).stat().st_mode & 0o777)[2:])
    sh(container, "systemctl daemon-reload")


@pytest.fixture(scope="module")
def box():
    with systemd_box("render-it", image=IMAGE) as name:
        sh(name, f"python3 -m venv --without-pip /opt/kt/envs/kt-kernel && mkdir -p {SITE}/sglang")
        put(name, f"{SITE}/sglang/__init__.py", "")
        put(name, f"{SITE}/sglang/launch_server.py", SGLANG_STANDIN)
        yield name


def _serve(tmp_path: Path, name: str, port: int, *extra: str) -> dict:
    out = tmp_path / name
    return ktinfra(
        "render", "serve", "--plan", str(PLANS / "seed002-qwen3-30b-a3b-serve.json"), "--name", name,
        "--model-path", "/models/Qwen3-30B-A3B", "--weight-path", "/models/Qwen3-30B-A3B-INT8",
        "--port", str(port), "--out", str(out), *extra,
    )  # fmt: skip


def test_serve_start_waits_for_health_and_hides_the_key(box, tmp_path):
    key = tmp_path / "key"
    key.write_text("sk-render-test\n")
    rendered = _serve(tmp_path, "q30", 8000, "--host", "0.0.0.0", "--api-key-file", str(key))
    install(box, rendered)
    began = time.monotonic()
    sh(box, "timeout 120 systemctl start ktinfra-serve@q30.service")
    took = time.monotonic() - began
    assert took >= 4, f"start returned after {took:.1f}s, before /health turned 200"
    assert sh(box, "systemctl is-active ktinfra-serve@q30.service").stdout.strip() == "active"
    record = json.loads(sh(box, "cat /run/standin-q30.json").stdout)
    assert record["argv"] == ["--api-key=sk-render-test", *rendered["argv"][3:]]
    assert not any("sk-render-test" in part for part in record["cmdline"]), record["cmdline"]
    assert record["env_api_key"] is None
    assert record["cwd"] == "/var/lib/ktinfra/serve/q30"
    # An unprivileged container caps RLIMIT_MEMLOCK (systemd cannot raise the hard limit there), so check
    # what systemd applies; on a host the process gets "unlimited".
    limits = sh(box, "systemctl show -P LimitMEMLOCK ktinfra-serve@q30.service").stdout.split()
    limits += sh(box, "systemctl show -P LimitNOFILE ktinfra-serve@q30.service").stdout.split()
    assert limits == ["infinity", "1048576"]
    assert sh(box, "stat -c %a /etc/ktinfra/serve/q30.env").stdout.strip() == "600"
    health = sh(
        box, f"{PY} -c 'import urllib.request as u;print(u.urlopen(\"{rendered['health_url']}\").status)'"
    )
    assert health.stdout.strip() == "200"
    journal = sh(box, "journalctl -t ktinfra-serve-q30 --no-pager -o cat").stdout
    assert "standin sglang: loading" in journal


def test_serve_numactl_pins_cpus_from_the_plan(box, tmp_path):
    plan = json.loads((PLANS / "seed002-qwen3-30b-a3b-serve.json").read_text())
    plan["serve"]["numa_cpus"] = "1"
    plan_file = tmp_path / "pinned.json"
    plan_file.write_text(json.dumps(plan))
    rendered = ktinfra(
        "render", "serve", "--plan", str(plan_file), "--name", "pin1", "--model-path", "/models/q",
        "--weight-path", "/models/q-int8", "--port", "8002", "--out", str(tmp_path / "pin1"),
    )  # fmt: skip
    assert rendered["numactl_args"] == ["--physcpubind=1"]
    install(box, rendered)
    sh(box, "timeout 120 systemctl start ktinfra-serve@pin1.service")
    record = json.loads(sh(box, "cat /run/standin-pin1.json").stdout)
    assert record["affinity"] == [1]
    sh(box, "systemctl stop ktinfra-serve@pin1.service")


def test_serve_restarts_after_a_crash(box):
    # Shorter RestartSec for the test only; everything else is the rendered unit.
    put(box, "/etc/systemd/system/ktinfra-serve@q30.service.d/test.conf", "[Service]\nRestartSec=2\n")
    sh(box, "systemctl daemon-reload")
    pid = sh(box, "systemctl show -P MainPID ktinfra-serve@q30.service").stdout.strip()
    sh(box, f"kill -9 {pid}")
    for _ in range(60):
        state = sh(box, "systemctl is-active ktinfra-serve@q30.service", check=False).stdout.strip()
        new_pid = sh(box, "systemctl show -P MainPID ktinfra-serve@q30.service").stdout.strip()
        if state == "active" and new_pid not in ("0", pid):
            break
        time.sleep(1)
    assert state == "active"
    assert sh(box, "systemctl show -P NRestarts ktinfra-serve@q30.service").stdout.strip() == "1"


def test_serve_crash_during_load_fails_the_start_quickly(box, tmp_path):
    rendered = _serve(tmp_path, "broken", 8003)
    install(box, rendered)
    put(box, "/etc/systemd/system/ktinfra-serve@broken.service.d/test.conf",
        "[Service]\nEnvironment=STANDIN_CRASH_DURING_LOAD=1\n")  # fmt: skip
    sh(box, "systemctl daemon-reload")
    began = time.monotonic()
    result = sh(box, "timeout 120 systemctl start ktinfra-serve@broken.service", check=False)
    assert result.returncode != 0
    assert time.monotonic() - began < 30
    # the stand-in itself started and crashed (exit 3), not a unit that could not start its program at all
    status = sh(box, "systemctl show -P ExecMainStatus ktinfra-serve@broken.service").stdout.strip()
    journal = sh(box, "journalctl -u ktinfra-serve@broken.service --no-pager -o cat").stdout
    assert status == "3" and "standin sglang: loading" in journal, (status, journal[-2000:])
    sh(box, "systemctl stop ktinfra-serve@broken.service", check=False)


# `ktinfra weights manifest` as the int8 convert unit runs it after the converter: the real
# ktinfra/int8_weights.py (stdlib only, with ktinfra/digest.py), put in the box; the box has no typer/rich for
# the whole CLI.
KTINFRA_LAUNCHER = """#!/usr/bin/python3
import sys
from pathlib import Path
sys.path.insert(0, "/opt/ktinfra/tool/lib")
from ktinfra import int8_weights
assert sys.argv[1:3] == ["weights", "manifest"], sys.argv
model = Path(sys.argv[sys.argv.index("--model-path") + 1])
try:
    print(int8_weights.write_manifest(Path(sys.argv[3]), model))
except int8_weights.WeightsError as exc:
    sys.exit(f"error: {exc}")
"""


def test_convert_runs_once_then_is_skipped(box, tmp_path):
    """int8: the converter writes the layer tree (stand-in, tests/unit/int8_tree.py), the unit's
    ExecStartPost writes kt-weight-manifest.json with ktinfra's code, and that manifest is the done marker.
    A conversion whose tree the manifest refuses fails the unit and leaves no marker: the next start runs."""
    script = "/opt/ktinfra/src/ktransformers/kt-kernel/scripts/convert_cpu_weights.py"
    put(box, script, RECORDER.format(python=PY, tag="convert", extra="") + INT8_CONVERTER, "0755")
    for module in ("__init__.py", "digest.py", "int8_weights.py"):
        put(box, f"/opt/ktinfra/tool/lib/ktinfra/{module}", (REPO / "ktinfra" / module).read_text())
    put(box, "/opt/ktinfra/tool/bin/ktinfra", KTINFRA_LAUNCHER, "0755")
    put(box, "/models/Qwen3-30B-A3B/config.json", json.dumps(TINY))
    rendered = ktinfra(
        "render", "convert", "--plan", str(PLANS / "seed002-qwen3-30b-a3b-serve.json"),
        "--model-path", "/models/Qwen3-30B-A3B", "--output", "/models/Qwen3-30B-A3B-INT8", "--method", "int8",
        "--out", str(tmp_path / "conv"),
    )  # fmt: skip
    install(box, rendered)
    unit = rendered["unit"]
    put(box, f"/etc/systemd/system/{unit}.d/cut.conf", "[Service]\nEnvironment=STANDIN_CUT=1\n")
    sh(box, "systemctl daemon-reload")
    failed = sh(box, f"systemctl start {unit}", check=False)
    assert failed.returncode != 0
    assert "lacks 1 of its .kt files" in sh(box, f"journalctl -u {unit} --no-pager -o cat").stdout
    sh(box, f"test ! -e {rendered['done_marker']}")
    sh(box, f"rm /etc/systemd/system/{unit}.d/cut.conf && systemctl daemon-reload")
    sh(box, f"systemctl reset-failed {unit}")
    sh(box, f"systemctl start {unit}")
    sh(box, f"systemctl stop {unit} && systemctl start {unit}")
    runs = sh(box, "cat /run/standin-convert.jsonl").stdout.splitlines()
    assert len(runs) == 2, runs  # the cut one, the good one; the third start was skipped
    assert json.loads(runs[1])["argv"][1:] == rendered["argv"][2:]
    assert rendered["done_marker"] == "/models/Qwen3-30B-A3B-INT8/kt-weight-manifest.json"
    listing = sh(box, "ls -A /models/Qwen3-30B-A3B-INT8").stdout.split()
    assert sorted(listing) == ["_layer_0", "_layer_1", "kt-weight-manifest.json"]
    manifest = json.loads(sh(box, f"cat {rendered['done_marker']}").stdout)
    assert (manifest["threadpool_count"], len(manifest["layers"])) == (2, 2)  # seed 002's 2 pools
    assert "exec-condition" in sh(box, f"journalctl -u {unit} --no-pager -o cat").stdout


# env_dir: kt_train_config_dir moved elsewhere; '%' checks that the unit's EnvironmentFile= is escaped
@pytest.mark.parametrize(
    ("plan_name", "env_dir"),
    [
        ("h100-qwen3-30b-a3b-sft-current.json", None),
        ("seed002-qwen3-30b-a3b-sft-legacy.json", None),
        ("h100-qwen3-30b-a3b-sft-current.json", "/srv/lab%i/train"),
    ],
)
def test_train_unit_launches_with_kt_environment(box, tmp_path, plan_name, env_dir):
    tag = plan_name.split("-sft-")[1].removesuffix(".json") + ("-moved" if env_dir else "")
    sh(box, f"mkdir -p {SFT_BIN} && ln -sf {PY} {SFT_BIN}/python && rm -f /run/standin-train.jsonl")
    for program in ("accelerate", "llamafactory-cli"):
        put(box, f"{SFT_BIN}/{program}", RECORDER.format(python=PY, tag="train", extra=""), "0755")
    moved = ["--env-dir", env_dir] if env_dir else []
    rendered = ktinfra(
        "render", "train", "--plan", str(PLANS / plan_name), "--name", f"run-{tag}",
        "--model-path", "/models/Qwen3-30B-A3B", "--dataset", "identity", "--dataset-dir", "/data",
        "--output-dir", f"/runs/{tag}", "--out", str(tmp_path / tag), *moved,
    )  # fmt: skip
    if env_dir:
        assert set(rendered["install"].values()) - {"/etc/systemd/system/ktinfra-train@.service"} == {
            f"{env_dir}/run-{tag}{suffix}" for suffix in (".env", ".yaml", ".accelerate.yaml")
        }
        assert rendered["config_file"] == f"{env_dir}/run-{tag}.yaml"
    install(box, rendered)
    sh(box, f"systemctl start {rendered['unit']}")
    for _ in range(30):
        runs = sh(box, "cat /run/standin-train.jsonl 2>/dev/null", check=False).stdout.splitlines()
        if runs:
            break
        time.sleep(0.5)
    run = json.loads(runs[0])
    assert run["argv"][1:] == rendered["argv"][1:]
    assert run["env"]["USE_KT"] == "1"
    assert run["env"]["CUDA_VISIBLE_DEVICES"] == "0"
    config = sh(box, f"cat {rendered['config_file']}").stdout
    assert "use_kt: true" in config
    if tag == "current":
        assert run["env"]["ACCELERATE_USE_KT"] == "true"
        sh(box, f"test -s {run['env']['KT_ACCELERATE_CONFIG']}")
