"""kt_train and the secrets of a plan's sft.launcher.env (a token, a proxy password): they reach the run's
0600 RUN.env and no output of the play. Real ansible on localhost through ansible-runner at -vvv (its stdout
is ansible-playbook's -vvv output, its job_events every callback's whole result), the stand-in systemctl of
test_kt_train_role."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import ansible_runner
from test_kt_train_role import FILES, run, setup, train

SECRETS = {
    "HF_TOKEN": "hf_planted0secret",
    "WANDB_API_KEY": "wandbplanted0key",
    "HTTPS_PROXY": "http://lab:pr0xypass@proxy.lab:3128",
}
SHOWN = {"NCCL_DEBUG": "INFO", "WANDB_PROJECT": "qwen3-lora"}
PASSWORDS = ("hf_planted0secret", "wandbplanted0key", "pr0xypass")


def _plan_file(tmp: Path) -> Path:
    plan = json.loads((FILES / "plan-tiny-sft.json").read_text())
    plan["sft"]["launcher"]["env"].update(SECRETS | SHOWN)
    path = tmp / "plan.json"
    path.write_text(json.dumps(plan))
    path.chmod(0o600)
    return path


def _runner(tmp: Path, runs: list) -> tuple[str, str, str]:
    """(status, -vvv stdout, every job event's JSON) of the role run by ansible-runner."""
    (tmp / "scratch").mkdir(exist_ok=True)
    play = tmp / "play.yml"
    tasks = [{"ansible.builtin.include_role": {"name": "kt_train"}}]
    play.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    extra = setup(tmp) | {"kt_train_runs": runs, "ansible_python_interpreter": sys.executable}
    (tmp / "vars.json").write_text(json.dumps(extra))
    env = {
        "PATH": f"{tmp / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin",
        "KT_TEST_SYSTEMCTL_LOG": str(tmp / "systemctl.log"),
        "KT_TEST_LORA_CONFIG_DIR": str(tmp / "cfg" / "lora"),
        "TMPDIR": str(tmp / "scratch"),
        "ANSIBLE_ROLES_PATH": str(Path(__file__).resolve().parents[2] / "roles"),
        "ANSIBLE_LOCALHOST_WARNING": "false",
    }
    (tmp / "runner").mkdir()
    result = ansible_runner.run(
        private_data_dir=str(tmp / "runner"),
        playbook=str(play),
        inventory="localhost ansible_connection=local",
        cmdline=f"-e @{tmp / 'vars.json'}",
        envvars=env,
        verbosity=3,
        quiet=True,
    )
    events = "\n".join(p.read_text() for p in (tmp / "runner" / "artifacts").rglob("job_events/*.json"))
    return result.status, result.stdout.read(), events


def test_launcher_env_secrets_stay_out_of_vvv_and_job_events_but_reach_the_env_file(tmp_path):
    """Before: the plan's slurp (base64), the set_facts that took and kept it and the staging copy's diff
    showed HF_TOKEN, WANDB_API_KEY and the proxy password at -vvv, and job_events held them at any
    verbosity."""
    plan_file = _plan_file(tmp_path)
    status, stdout, events = _runner(tmp_path, [run("secret", plan_file=str(plan_file), start=True)])
    assert status == "successful", stdout[-3000:]
    assert "start ktinfra-train@secret.service" in (tmp_path / "systemctl.log").read_text()
    assert "ESTABLISH LOCAL CONNECTION" in stdout and '"event": "runner_on_ok"' in events  # -vvv, events
    for password in PASSWORDS:
        assert password not in stdout, password
        assert password not in events, password
    # what is not a secret still shows, for debugging: the knobs' values, the proxy's host, each name
    assert '"NCCL_DEBUG": "INFO"' in stdout and '"WANDB_PROJECT": "qwen3-lora"' in stdout
    assert '"HTTPS_PROXY": "http://(hidden)@proxy.lab:3128"' in stdout
    assert '"HF_TOKEN": "(hidden)"' in stdout and '"WANDB_API_KEY": "(hidden)"' in stdout
    # the run still gets every value, from its 0600 env file; the kept plan holds them too, 0600
    env = tmp_path / "cfg" / "secret.env"
    assert oct(env.stat().st_mode & 0o777) == "0o600"
    lines = env.read_text().splitlines()
    for name, value in (SECRETS | SHOWN).items():
        assert f'{name}="{value}"' in lines, (name, lines)
    kept = tmp_path / "cfg" / "secret.plan.json"
    assert oct(kept.stat().st_mode & 0o777) == "0o600"
    assert json.loads(kept.read_text()) == json.loads(plan_file.read_text())
    assert kept.read_text() == json.dumps(json.loads(plan_file.read_text()), indent=4, sort_keys=True) + "\n"


def test_a_plan_file_that_is_not_json_is_named_before_any_change(tmp_path):
    """The plan is read by the module now: its error names the file and the position, not the text."""
    bad = tmp_path / "plan.json"
    bad.write_text('{"sft": {"launcher": {"env": {"HF_TOKEN": "hf_planted0secret"}}}')  # cut short
    rc, output = train(tmp_path, [run("secret", plan_file=str(bad))])
    assert rc != 0
    assert f"plan_file {bad} is not JSON: Expecting" in output, output[-3000:]
    assert "hf_planted0secret" not in output
    assert not list((tmp_path / "cfg").iterdir()) and not list((tmp_path / "units").iterdir())


def test_which_launcher_env_values_show():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "roles" / "kt_train" / "library"))
    from kt_train_plan import shown

    env = {"USE_KT": "1", "OMP_NUM_THREADS": "32", "CUDA_LAUNCH_BLOCKING": "1", "GH_PAT": "ghp_x12345",
           "KT_API_KEY": "kt-secret-1", "http_proxy": "lab:pr0xypass@proxy.lab:3128", "ALL_PROXY": "socks5://p:1",
           "NO_PROXY": "localhost,10.0.0.0/8"}  # fmt: skip
    plan = {"sft": {"launcher": {"env": env}}, "problems": ["token ghp_x12345 and pr0xypass seen"]}
    got = shown(plan)
    assert got["sft"]["launcher"]["env"] == env | {
        "GH_PAT": "(hidden)",
        "KT_API_KEY": "(hidden)",
        "http_proxy": "(hidden)@proxy.lab:3128",
    }
    assert got["problems"] == ["token (hidden) and (hidden) seen"]
    assert plan["sft"]["launcher"]["env"]["GH_PAT"] == "ghp_x12345"  # the plan itself is left as it was
