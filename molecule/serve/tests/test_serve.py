"""Verify of molecule/serve: model store layout and markers, rendered units under real systemd."""

from __future__ import annotations

import json
import time

from ansible_run import http_status

STORE = "/srv/ktinfra"
SUBDIRS = ["models", "cpu-weights", "gguf", "loras", "datasets", "outputs", "wheelhouse", "hf-cache"]
MODEL = f"{STORE}/models/tiny-qwen3-moe"
INSTANCES = {"tiny": ("127.0.0.1", 30000), "tiny-public": ("0.0.0.0", 30001)}
# Golden: `ktinfra render serve` of files/plan-tiny.json (the planner's output for the H100 capture as of
# 5250666, without the serve keys added since: an earlier ktinfra's plan file) with
# kt_serve_overrides {max_running_requests: 7} (plan: 32) and tiny-public's own {chunked_prefill_size: 4096}.
GOLDEN_ARGS = (
    "--host {host} --port {port} --model /srv/ktinfra/models/tiny-qwen3-moe --trust-remote-code "
    "--mem-fraction-static 0.92 --chunked-prefill-size {chunk} --max-running-requests 7 "
    "--cuda-graph-max-bs 32 "
    "--tensor-parallel-size 1 --served-model-name {name} --enable-mixed-chunk --kt-method AMXINT8 "
    "--kt-weight-path /srv/ktinfra/cpu-weights/tiny-qwen3-moe-INT8 --kt-cpuinfer 14 --kt-threadpool-count 1 "
    "--kt-num-gpu-experts {gpu_experts} --kt-max-deferred-experts-per-token 0"
)
# `tiny` serves the adapter train.yml converted: all experts in kt-kernel, kt_serve's LoRA defaults.
LORA_ARGS = (
    " --enable-lora --lora-paths tiny-sft=/srv/ktinfra/loras/tiny-sft --max-loras-per-batch 1"
    " --lora-backend triton"
)


def env_of(host, name: str) -> dict[str, str]:
    text = host.file(f"/etc/ktinfra/serve/{name}.env").content_string
    pairs = (line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return {key: value.strip('"') for key, value in pairs}


def test_store_layout_on_the_default_root(host):
    assert not host.file("/root/autodl-tmp").exists
    for sub in SUBDIRS:
        assert host.file(f"{STORE}/{sub}").is_directory, sub
    state = json.loads(host.file("/etc/ktinfra/store.json").content_string)
    assert state["root"] == STORE and state["dirs"]["loras"] == f"{STORE}/loras"
    assert state["models"]["tiny-qwen3-moe"]["path"] == MODEL


def test_local_model_copied_whole_and_marked_complete(host):
    marker = json.loads(host.file(f"{MODEL}/.ktinfra-complete.json").content_string)
    source = host.file("/srv/src/tiny-qwen3-moe/model.safetensors").size
    assert marker["files"]["model.safetensors"] == source == host.file(f"{MODEL}/model.safetensors").size
    assert set(marker["files"]) == set(host.file("/srv/src/tiny-qwen3-moe").listdir())
    assert marker["request"]["source"] == "local"


def test_units_pass_systemd_analyze_verify(host):
    for name in INSTANCES:
        result = host.run(f"systemd-analyze verify ktinfra-serve@{name}.service")
        assert result.rc == 0 and result.stderr.strip() == "", result.stderr


def test_instances_enabled_and_running(host):
    for name in INSTANCES:
        service = host.service(f"ktinfra-serve@{name}")
        assert service.is_enabled and service.is_running, name


def test_env_files_are_0600_and_hold_the_key_only_where_set(host):
    for name in INSTANCES:
        env = host.file(f"/etc/ktinfra/serve/{name}.env")
        assert (env.mode, env.user) == (0o600, "root")
    assert env_of(host, "tiny-public")["KT_API_KEY"] == "molecule-not-a-secret"
    assert "KT_API_KEY" not in env_of(host, "tiny")
    for path in ("/etc/systemd/system/ktinfra-serve@.service", "/etc/ktinfra/serve/tiny-public.plan.json"):
        assert "molecule-not-a-secret" not in host.file(path).content_string


def test_golden_command_line_against_the_plan(host):
    for name, (bind, port) in INSTANCES.items():
        lora = name == "tiny"
        experts, chunk = (0, 8192) if lora else (8, 4096)
        expected = GOLDEN_ARGS.format(host=bind, port=port, name=name, gpu_experts=experts, chunk=chunk)
        expected += LORA_ARGS if lora else " --enable-metrics"
        assert env_of(host, name)["KT_SERVE_ARGS"] == expected
    unit = host.file("/etc/systemd/system/ktinfra-serve@.service").content_string
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    assert exec_start.startswith(
        "ExecStart=/usr/bin/numactl $KT_NUMACTL_ARGS /opt/kt/envs/kt-kernel/bin/python -c "
    )
    assert host.package("numactl").is_installed
    assert env_of(host, "tiny")["KT_NUMACTL_ARGS"] == ""  # one NUMA node in the plan: nothing to place
    assert "sglang.launch_server" in exec_start and exec_start.endswith("$KT_SERVE_ARGS")
    assert "Restart=on-failure" in unit


def test_bind_addresses(host):
    listening = host.run("ss -ltnH").stdout
    assert "127.0.0.1:30000" in listening and "0.0.0.0:30001" in listening


def health(host, port: int) -> int:
    return http_status(host, port, "/health")


def show(host, name: str, prop: str) -> str:
    return host.check_output(f"systemctl show -p {prop} --value ktinfra-serve@{name}.service")


def test_crashed_server_is_restarted_by_systemd(host):
    """Seed 002's server died after 4 minutes and stayed dead; Restart=on-failure brings it back."""
    name, port = "tiny", 30000
    assert health(host, port) == 200
    pid, restarts = show(host, name, "MainPID"), int(show(host, name, "NRestarts"))
    host.run(f"kill -9 {pid}")
    deadline = time.time() + 90
    while time.time() < deadline:
        new_pid = show(host, name, "MainPID")
        if new_pid not in ("0", pid) and show(host, name, "ActiveState") == "active":
            break
        time.sleep(1)
    assert new_pid not in ("0", pid)
    assert int(show(host, name, "NRestarts")) == restarts + 1
    assert health(host, port) == 200
