"""`ktinfra lora serve --start` under a real systemd (Debian 12 container, systemd as PID 1):
`make render-systemd`.

What is real: ktinfra itself (this checkout and its venv, bind-mounted read-only at the same paths and run
inside the container as root), its adapter checks, the install into /etc/systemd/system and the env dir,
`systemctl daemon-reload` / `enable --now`, systemd 252 reading the unit and the EnvironmentFile, the launch
shim that hands the API key to the server in-process, the /health wait. The adapters are real PEFT / KT SFT
output files, written byte by byte in safetensors format (tiny shapes, zero weights).

What is a stand-in: the server program the unit starts (sglang.launch_server in --server-python's env),
because the real one needs a GPU and a 30B model; it records how it was started and answers /health. And
kt-kernel's adapter converter (it needs torch), for the KT SFT output: it writes the merged PEFT adapter
kt-kernel's converter writes, or fails on request. Paths covered: plain PEFT adapters on a BF16 plan (served
as they are, no conversion) and a KT SFT output (converted, then served from the converted directory).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "unit"))
from safetensors_file import write_safetensors  # noqa: E402
from systemd_box import systemd_box  # noqa: E402

H100 = REPO / "tests" / "fixtures" / "hosts" / "h100-xeon-amx-16c"
IMAGE = "ktinfra/debian12-systemd:latest"
SERVER_ENV = "/opt/kt/envs/kt-kernel"
SITE = f"{SERVER_ENV}/lib/python3.11/site-packages"
BASE = "/models/Qwen3-30B-A3B"
TEMPLATE = "/etc/systemd/system/ktinfra-serve@.service"
KEY = "sk-lora-start-test"

SGLANG_STANDIN = '''
"""Stand-in for sglang.launch_server: records how it was started, "loads" 2 s, then answers /health 200."""
import json, os, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer

argv = sys.argv[1:]
record = {
    "argv": argv,
    "cmdline": open("/proc/self/cmdline", "rb").read().decode().split("\\0"),
    "env_api_key": os.environ.get("KT_API_KEY"),
}
with open(f"/run/standin-{argv[argv.index('--served-model-name') + 1]}.json", "w") as fh:
    json.dump(record, fh)
time.sleep(2)


class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


HTTPServer((argv[argv.index("--host") + 1], int(argv[argv.index("--port") + 1])), Health).serve_forever()
'''

# kt-kernel's convert_kt_to_sglang_adapter.py CLI: SRC DST --base-model-name-or-path BASE; it writes one PEFT
# adapter whose tensors include the per-expert LoRA (what sglang-kt serves as a merged KT adapter).
CONVERTER_STANDIN = """
import json, os, struct, sys
from pathlib import Path

src, dst = Path(sys.argv[1]), Path(sys.argv[2])
if os.environ.get("STANDIN_CONVERTER_FAIL"):
    sys.exit("standin converter: out of memory")
config = json.loads((src / "adapter_config.json").read_text())
config["base_model_name_or_path"] = sys.argv[sys.argv.index("--base-model-name-or-path") + 1]
shapes = {
    "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": [2, 8],
    "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": [8, 2],
    "base_model.model.model.layers.0.mlp.experts.0.gate_proj.lora_A.weight": [2, 8],
    "base_model.model.model.layers.0.mlp.experts.0.gate_proj.lora_B.weight": [4, 2],
}
header, offset = {}, 0
for name, shape in shapes.items():
    size = 4 * shape[0] * shape[1]
    header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size]}
    offset += size
dst.mkdir(parents=True)
(dst / "adapter_config.json").write_text(json.dumps(config))
raw = json.dumps(header).encode()
(dst / "adapter_model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))
"""


# The KT instance: converted by the stand-in into --output-dir, then served from there.
KT_ARGS = (
    "--adapter", "kt=/srv/train/kt", "--name", "kt", "--port", "30001",
    "--converter", "/srv/bin/convert_kt_to_sglang_adapter.py",
    "--converter-python", f"{SERVER_ENV}/bin/python",
    "--output-dir", "/srv/converted", "--out", "/srv/out-kt", "--start",
)  # fmt: skip


def peft_adapter(root: Path, rank: int = 2) -> Path:
    """PEFT's LoRA output (attention only): adapter_config.json + adapter_model.safetensors."""
    root.mkdir(parents=True)
    config = {"peft_type": "LORA", "r": rank, "lora_alpha": 2 * rank, "target_modules": ["q_proj"],
              "base_model_name_or_path": BASE}  # fmt: skip
    (root / "adapter_config.json").write_text(json.dumps(config))
    prefix = "base_model.model.model.layers.0.self_attn.q_proj"
    write_safetensors(
        root / "adapter_model.safetensors",
        {f"{prefix}.lora_A.weight": [rank, 8], f"{prefix}.lora_B.weight": [8, rank]},
    )
    return root


def kt_adapter(root: Path, rank: int = 2, experts: int = 4, hidden: int = 8, inter: int = 4) -> Path:
    """A KT SFT output: PEFT's files, kt-kernel's fused expert LoRA and its kt_adapter_manifest.json."""
    peft_adapter(root, rank)
    shapes = {"gate_lora_a": [experts, rank, hidden], "gate_lora_b": [experts, inter, rank],
              "up_lora_a": [experts, rank, hidden], "up_lora_b": [experts, inter, rank],
              "down_lora_a": [experts, rank, inter], "down_lora_b": [experts, hidden, rank]}  # fmt: skip
    write_safetensors(
        root / "fused_expert_lora.safetensors", {f"layers.0.experts.{k}": v for k, v in shapes.items()}
    )
    names = ("adapter_config.json", "adapter_model.safetensors", "fused_expert_lora.safetensors")
    artifacts = {n: {"size": (root / n).stat().st_size, "sha256": "0" * 64} for n in names}
    manifest = {"version": 1, "status": "ready", "lora": {"rank": rank}, "artifacts": artifacts}
    (root / "kt_adapter_manifest.json").write_text(json.dumps(manifest))
    return root


def sh(box: str, script: str, check: bool = True, env: dict[str, str] | None = None):
    flags = [f"--env={k}={v}" for k, v in (env or {}).items()]
    result = subprocess.run(
        ["docker", "exec", *flags, box, "bash", "-c", script], capture_output=True, text=True, timeout=300
    )
    if check and result.returncode != 0:
        raise AssertionError(f"{script!r} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def lora_serve(box: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The real `ktinfra lora serve`, run as root inside the container by the venv running this test."""
    flags = [f"--env={k}={v}" for k, v in (env or {}).items()]
    return subprocess.run(
        ["docker", "exec", *flags, box, sys.executable, "-m", "ktinfra", "lora", "serve",
         "--base", BASE, "--model", "Qwen3-30B-A3B", "--from", str(H100),
         "--server-python", f"{SERVER_ENV}/bin/python", *args, "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def tree(box: str, *paths: str) -> str:
    """What is at the paths (files with sha256, mode, owner); "" for paths that do not exist."""
    listing = sh(box, "for p in " + " ".join(paths) + "; do [ -e $p ] && find $p "
                 "-printf '%p %m %u %s\\n' -type f -exec sha256sum {} +; done; true")  # fmt: skip
    return listing.stdout


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    # ktinfra's venv is bind-mounted at its own path; the interpreter it was made from too, unless it is the
    # image's own /usr/bin/python3.11 (a pyenv build on this host). Both read-only: nothing is written there.
    mounts = {str(REPO), sys.prefix}
    if not sys.base_prefix.startswith("/usr"):
        mounts.add(sys.base_prefix)
    with systemd_box("lora-start", [f"-v{m}:{m}:ro" for m in sorted(mounts)], image=IMAGE) as name:
        sh(name, f"python3 -m venv --without-pip {SERVER_ENV} && mkdir -p {SITE}/sglang {BASE} /srv/bin")
        inputs = tmp_path_factory.mktemp("inputs")
        (inputs / "sglang").mkdir()
        (inputs / "sglang" / "__init__.py").write_text("")
        (inputs / "sglang" / "launch_server.py").write_text(SGLANG_STANDIN)
        (inputs / "convert_kt_to_sglang_adapter.py").write_text(CONVERTER_STANDIN)
        (inputs / "key").write_text(KEY + "\n")
        for adapter in ("math", "chat"):
            peft_adapter(inputs / "train" / adapter)
        kt_adapter(inputs / "train" / "kt")
        for source, target in (("sglang/.", f"{SITE}/sglang/"), ("train", "/srv/train"), ("key", "/root/key"),
                               ("convert_kt_to_sglang_adapter.py", "/srv/bin/")):  # fmt: skip
            subprocess.run(["docker", "cp", f"{inputs}/{source}", f"{name}:{target}"], check=True)
        sh(name, "chmod 600 /root/key")
        yield name


def journal(box: str, instance: str) -> str:
    return sh(box, f"journalctl -u ktinfra-serve@{instance}.service --no-pager -o cat", check=False).stdout


def standin(box: str, name: str) -> dict:
    return json.loads(sh(box, f"cat /run/standin-{name}.json").stdout)


def test_a_failed_conversion_installs_nothing(box):
    """All or nothing: the converter fails, so no converted adapter, no --out bundle, no unit, no env file."""
    watched = (TEMPLATE, "/etc/ktinfra", "/srv/converted", "/srv/out-kt")
    before = tree(box, *watched)
    res = lora_serve(box, *KT_ARGS, env={"STANDIN_CONVERTER_FAIL": "1"})
    assert res.returncode == 1, res.stdout + res.stderr
    assert "converter failed (exit 1): standin converter: out of memory" in res.stderr
    assert tree(box, *watched) == before
    assert sh(box, "ls -A /srv").stdout.split() == ["bin", "train"]
    assert "ktinfra-serve@kt" not in sh(box, "systemctl list-units --all --no-legend 'ktinfra-*'").stdout


def test_start_installs_enables_and_starts_the_lora_server(box):
    """Two PEFT adapters on a BF16 plan: served as they are (no conversion), with the API key."""
    began = time.monotonic()
    res = lora_serve(
        box, "--adapter", "math=/srv/train/math", "--adapter", "chat=/srv/train/chat", "--name", "q30",
        "--max-loras-per-batch", "2", "--host", "0.0.0.0", "--api-key-file", "/root/key",
        "--out", "/srv/out", "--start",
    )  # fmt: skip
    took = time.monotonic() - began
    assert res.returncode == 0, res.stderr + journal(box, "q30")
    result = json.loads(res.stdout)
    assert result["unit"] == "ktinfra-serve@q30.service"
    assert (result["started"], result["conversions"]) == (True, [])
    assert took >= 2, f"--start returned after {took:.1f}s, before the server answered /health"

    # installed where the unit's EnvironmentFile= points, as the bundle in --out has them
    env_files = sh(box, "systemctl show -P EnvironmentFiles ktinfra-serve@q30.service").stdout.split()
    assert env_files[0] == "/etc/ktinfra/serve/q30.env"
    assert sh(box, f"stat -c '%a %U %G' {env_files[0]}").stdout.strip() == "600 root root"
    assert sh(box, f"cat {env_files[0]}").stdout == sh(box, "cat /srv/out/ktinfra-serve-q30.env").stdout
    unit = sh(box, f"cat {TEMPLATE}").stdout
    assert unit == sh(box, "cat /srv/out/ktinfra-serve@.service").stdout
    assert f'KT_API_KEY="{KEY}"' in sh(box, f"cat {env_files[0]}").stdout.splitlines()
    assert KEY not in unit
    assert sh(box, "ls -A /etc/systemd/system /etc/ktinfra/serve").stdout.count(".tmp") == 0

    assert sh(box, "systemctl is-enabled ktinfra-serve@q30.service").stdout.strip() == "enabled"
    assert sh(box, "systemctl is-active ktinfra-serve@q30.service").stdout.strip() == "active"
    health = sh(box, f"{SERVER_ENV}/bin/python -c 'import urllib.request as u;"
                     "print(u.urlopen(\"http://127.0.0.1:30000/health\").status)'")  # fmt: skip
    assert health.stdout.strip() == "200"  # --start returned once the server was up: no wait here

    record = standin(box, "q30")
    assert record["argv"] == [f"--api-key={KEY}", *result["command"][3:]]
    argv = record["argv"]
    at = argv.index("--enable-lora")
    assert argv[at:] == ["--enable-lora", "--lora-paths", "math=/srv/train/math", "chat=/srv/train/chat",
                         "--max-loras-per-batch", "2", "--lora-backend", "triton"]  # fmt: skip
    assert argv[argv.index("--kt-num-gpu-experts") + 1] == "0"
    assert "--kt-gpu-prefill-token-threshold" not in argv
    assert int(argv[argv.index("--max-running-requests") + 1]) >= 2
    assert (argv[argv.index("--kt-method") + 1], argv[argv.index("--model") + 1]) == ("BF16", BASE)
    assert not any(KEY in part for part in record["cmdline"]), record["cmdline"]
    assert record["env_api_key"] is None


def test_a_second_start_with_other_adapters_restarts_the_running_instance(box):
    """`--start` again for a running instance: it serves what this run asked for. Before, `enable --now`
    left the server running on the adapters it was started with, and the run said "started": true. The
    same run once more changes no file, and the instance keeps running (no model reload)."""
    pid = sh(box, "systemctl show -P MainPID ktinfra-serve@q30.service").stdout.strip()
    args = ("--adapter", "math=/srv/train/math", "--name", "q30", "--host", "0.0.0.0",
            "--api-key-file", "/root/key", "--out", "/srv/out-math", "--start")  # fmt: skip
    res = lora_serve(box, *args)
    assert res.returncode == 0, res.stderr + journal(box, "q30")
    argv = standin(box, "q30")["argv"]
    assert argv[argv.index("--enable-lora") :] == [
        "--enable-lora", "--lora-paths", "math=/srv/train/math", "--max-loras-per-batch", "1",
        "--lora-backend", "triton",
    ]  # fmt: skip
    restarted = sh(box, "systemctl show -P MainPID ktinfra-serve@q30.service").stdout.strip()
    assert restarted not in ("0", pid)
    assert sh(box, "systemctl is-active ktinfra-serve@q30.service").stdout.strip() == "active"
    assert lora_serve(box, *args).returncode == 0
    assert sh(box, "systemctl show -P MainPID ktinfra-serve@q30.service").stdout.strip() == restarted


def test_a_kt_adapter_is_served_from_its_converted_directory(box):
    """The KT SFT output the failed run left alone: converted now (no --overwrite needed), and the second
    instance shares the installed template."""
    res = lora_serve(box, *KT_ARGS)
    assert res.returncode == 0, res.stderr + journal(box, "kt")
    result = json.loads(res.stdout)
    assert [c["output"] for c in result["conversions"]] == ["/srv/converted/kt"]
    sh(box, "test -s /srv/converted/kt/adapter_model.safetensors")
    assert sh(box, "systemctl is-enabled ktinfra-serve@kt.service").stdout.strip() == "enabled"
    assert sh(box, "systemctl is-active ktinfra-serve@kt.service").stdout.strip() == "active"
    assert sh(box, "stat -c '%a %U' /etc/ktinfra/serve/kt.env").stdout.strip() == "600 root"
    argv = standin(box, "kt")["argv"]
    assert argv[argv.index("--enable-lora"):] == [
        "--enable-lora", "--lora-paths", "kt=/srv/converted/kt", "--max-loras-per-batch", "1",
        "--lora-backend", "triton",
    ]  # fmt: skip
    assert argv[argv.index("--kt-num-gpu-experts") + 1] == "0"
    assert sh(box, "systemctl is-active ktinfra-serve@q30.service").stdout.strip() == "active"


def test_a_second_start_with_another_env_dir_is_refused_and_changes_nothing(box):
    """The template is shared by every instance: one reading its env files from elsewhere would cut the
    running q30 and kt off theirs. Refused before anything is converted or written."""
    watched = (TEMPLATE, "/etc/ktinfra", "/srv/lab", "/srv/out-moved", "/srv/converted")
    before = tree(box, *watched)
    digest = hashlib.sha256(sh(box, f"cat {TEMPLATE}").stdout.encode()).hexdigest()
    res = lora_serve(
        box, "--adapter", "math=/srv/train/math", "--name", "moved", "--port", "30002",
        "--env-dir", "/srv/lab/serve", "--out", "/srv/out-moved", "--start",
    )  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    assert "reads its instances' env files from /etc/ktinfra/serve" in res.stderr
    assert "pass --env-dir /etc/ktinfra/serve" in res.stderr
    assert tree(box, *watched) == before
    assert hashlib.sha256(sh(box, f"cat {TEMPLATE}").stdout.encode()).hexdigest() == digest
    enabled = sh(box, "systemctl is-enabled ktinfra-serve@moved.service", check=False).stdout.strip()
    assert enabled != "enabled"
    for instance in ("q30", "kt"):
        assert sh(box, f"systemctl is-active ktinfra-serve@{instance}.service").stdout.strip() == "active"
