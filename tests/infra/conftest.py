"""KT host suite: pytest-testinfra checks that a host can really run KTransformers.

    pytest tests/infra --hosts=local:// --kt-role=serve
    pytest tests/infra --hosts=ssh://root@gpu1 --kt-role=sft --kt-profile=kt-0.4-autodl
    pytest tests/infra --hosts=docker://ktbox --kt-role=any
`ktinfra doctor` runs this suite and exits non-zero on any failed check.
"""

from __future__ import annotations

import json
import os
import shlex

import pytest
from kthost import ENV_MARKERS, ROLES, Expect, ProbeError, facts_cores, find_env_python, run_probe

from ktinfra.doctor import HEALTH_URL_ENV, mask_password
from ktinfra.profiles import DEFAULT_PROFILE, load_profile


def pytest_addoption(parser):
    group = parser.getgroup("kt", "KT host expectations")
    group.addoption("--kt-role", choices=ROLES, default="serve", help="what the host must be able to do")
    group.addoption("--kt-profile", default=DEFAULT_PROFILE, help="stack profile the envs must match")
    group.addoption("--kt-method", default="AMXINT8", help="serve kt_method (AMX* methods need AMX)")
    group.addoption("--kt-python", default="auto", help="python of the inference env on the target")
    group.addoption("--kt-sft-python", default="auto", help="python of the SFT env on the target")
    group.addoption(
        "--kt-supervisor-dir",
        default=None,
        help="kt_serve_supervisor_dir on the target, where it is not /etc/ktinfra/supervisor",
    )
    group.addoption("--kt-unit", action="append", default=[], help="systemd unit that must be enabled+active")
    group.addoption(
        "--kt-health-url",
        # ktinfra doctor hands it over by the environment: a key in it stays out of this pytest's argv
        default=os.environ.get(HEALTH_URL_ENV) or None,
        help=f"serve health endpoint that must answer 200 (default: ${HEALTH_URL_ENV})",
    )
    group.addoption(
        "--kt-moe-tolerance",
        type=float,
        default=0.04,
        help="max relative L2 error of the AMXINT8 MoE forward against float32 (int8 weights+activations)",
    )


@pytest.fixture(scope="session")
def expect(pytestconfig) -> Expect:
    return Expect(role=pytestconfig.getoption("kt_role"), method=pytestconfig.getoption("kt_method"))


@pytest.fixture(scope="session")
def profile(pytestconfig) -> dict:
    return load_profile(pytestconfig.getoption("kt_profile"))


@pytest.fixture(scope="module")
def probe_python(host, inference_env, sft_env) -> str:
    """The python the stdlib probes and the health check run with: an env python the user named (ktinfra
    doctor --python/--sft-python), else python3 on the target's PATH, else an env python found in the usual
    prefixes. A target without any failed every CPU check with a ProbeError traceback ("python3: not
    found" cut into its last line) and the health check with a bare "sh: 1: python3: not found"."""
    for env in (inference_env, sft_env):
        if env["given"] and env["python"]:
            return env["python"]
    if host.run("command -v python3 >/dev/null 2>&1").rc == 0:
        return "python3"
    for env in (inference_env, sft_env):
        if env["python"]:
            return env["python"]
    name = getattr(host, "kt_label", None) or host.backend.get_pytest_id()
    pytest.fail(
        f"no python3 on the PATH of {name}, and no env python found: the suite's probes and the health "
        "check run on the target with python3; install it, or name the env's python (ktinfra doctor "
        "--python PATH, pytest --kt-python=PATH)",
        pytrace=False,
    )


@pytest.fixture(scope="module")
def cpu(host, probe_python) -> dict:
    return facts_cores(run_probe(host, probe_python, "cpu"))


def _env_python(host, pytestconfig, profile, kind: str, option: str) -> dict:
    envs = profile.get("envs", {})
    env_name = envs.get(kind, {}).get("name", kind)
    explicit = pytestconfig.getoption(option)
    if explicit != "auto":
        ok = host.run(f"{shlex.quote(explicit)} -c 'import sys'").rc == 0  # a path, never shell text
        # named as `ktinfra doctor --python/--sft-python` takes it and as this suite's --kt-python/...
        flag = option.replace("_", "-")
        given = f"ktinfra doctor --{flag.removeprefix('kt-')}, pytest --{flag}"
        why = "" if ok else f"python {explicit} does not run ({given})"
        # "given": an env the user named that does not run fails its checks (it is not merely absent)
        return {"kind": kind, "name": env_name, "python": explicit if ok else None, "why": why, "given": True}
    python, why = find_env_python(host, env_name, ENV_MARKERS[kind])
    if not python:  # an env made elsewhere (a site's kt_python_env_root) is found only when named
        flag = option.replace("_", "-")
        why += f" (an env elsewhere: ktinfra doctor --{flag.removeprefix('kt-')} PATH, pytest --{flag}=PATH)"
    return {"kind": kind, "name": env_name, "python": python, "why": why, "given": False}


@pytest.fixture(scope="module")
def inference_env(host, pytestconfig, profile) -> dict:
    return _env_python(host, pytestconfig, profile, "inference", "kt_python")


@pytest.fixture(scope="module")
def sft_env(host, pytestconfig, profile) -> dict:
    return _env_python(host, pytestconfig, profile, "sft", "kt_sft_python")


KT_KERNEL_CHECK = "import importlib.util,sys; sys.exit(0 if importlib.util.find_spec('kt_kernel') else 1)"


@pytest.fixture(scope="module")
def kt_python(host, expect, inference_env, sft_env) -> str:
    """The python kt-kernel is checked in: the role's env when it holds kt-kernel, else the other env that
    does. The SFT env is found by llamafactory, and kt-0.4-autodl's has none (its ktransformers 0.4.2 wheel
    brings its own cpuinfer_ext): every kt-kernel check of --role sft ran there and failed with "No module
    named 'kt_kernel'" on a host whose inference env holds it."""
    order = [sft_env, inference_env] if expect.role == "sft" else [inference_env, sft_env]
    lacking = []
    for env in order:
        if env["python"]:
            if host.run(f"{shlex.quote(env['python'])} -c {shlex.quote(KT_KERNEL_CHECK)}").rc == 0:
                return env["python"]
            lacking.append(f"{env['kind']} env {env['python']} has no kt_kernel module")
        elif env.get("given"):
            pytest.fail(f"{env['kind']} env: {env['why']}", pytrace=False)
    why = "; ".join([*(env["why"] for env in order if not env["python"]), *lacking])
    expect.require(False, expect.needs_kt_kernel, "kt-kernel", why)


@pytest.fixture(scope="module")
def kt_info(host, kt_python) -> dict:
    """The probe's answer; an import that kills python (SIGILL: the loaded CPU variant uses instructions
    this CPU lacks) is the import check's failure, not an error of every kt-kernel check."""
    try:
        return run_probe(host, kt_python, "kt_kernel_moe", json.dumps({"mode": "info"}))
    except ProbeError as exc:
        if exc.signal_name is None:
            raise
        why = (
            ": kt-kernel's loaded CPU variant uses instructions this CPU lacks (a single-variant build for "
            "another CPU, or KT_KERNEL_CPU_VARIANT forcing one)"
            if exc.signal_name == "SIGILL"
            else ""
        )
        return {"import_error": f"python was killed by {exc.signal_name} while loading kt-kernel{why}"}


def _host_labels(config) -> list[tuple[str, str]]:
    """(testinfra's pytest id, label) of each host, in the order testinfra parametrizes them: the label is
    the --hosts entry as given (password masked), or for ansible:// each inventory host's ansible://NAME.
    testinfra's own id is BACKEND://NAME only: 'ssh://root@gpu1:2222' was reported as 'ssh://gpu1', and two
    ports of one host got pytest's _0/_1 suffixes. This mirrors testinfra.backend.get_backends."""
    from testinfra.backend import get_backend_class, parse_hostspec

    option = config.option
    if getattr(option, "hosts", None) is None:
        return []
    defaults = {
        "connection": option.connection, "ssh_config": option.ssh_config,
        "ssh_identity_file": option.ssh_identity_file, "sudo": option.sudo, "sudo_user": option.sudo_user,
        "ansible_inventory": option.ansible_inventory, "force_ansible": option.force_ansible,
    }  # fmt: skip
    found: dict = {}
    for spec in option.hosts.split(","):
        host, kw = parse_hostspec(spec)
        for key, value in defaults.items():
            kw.setdefault(key, value)
        connection = kw.get("connection") or ("local" if host is None else "paramiko")
        klass = get_backend_class(connection)
        for name in klass.get_hosts(host, **kw):
            key = (name, frozenset(kw.items()))
            if key not in found:
                backend = klass(**kw) if connection == "local" else klass(name, **kw)
                label = backend.get_pytest_id() if connection == "ansible" else mask_password(spec)
                found[key] = (backend.get_pytest_id(), label)
    return sorted(found.values(), key=lambda pair: pair[0])


def pytest_collection_modifyitems(config, items):
    """Tag each result with its host and its own parameters, so `ktinfra doctor` groups checks per host as the
    user named it and builds clean ids. At collection rather than in a fixture: a module fixture that fails
    (an unreachable host) stops the setup before any later fixture, and doctor then read the host from the
    test id ('ssh://gpu1-inference' for a parametrized check)."""
    try:
        labels = _host_labels(config)
    except Exception:  # testinfra changed: fall back to its own ids
        labels = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        host = callspec.params.get("_testinfra_host") if callspec else None
        if host is None:
            continue
        index = callspec.indices.get("_testinfra_host")
        label = host.backend.get_pytest_id()
        if index is not None and index < len(labels) and labels[index][0] == label:
            label = labels[index][1]
        host.kt_label = label
        item.user_properties.append(("kt_host", label))
        params = [str(v) for k, v in callspec.params.items() if k != "_testinfra_host"]
        item.user_properties.append(("kt_params", "-".join(params)))


@pytest.fixture(scope="module", autouse=True)
def _reachable(host) -> None:
    """A host where no command runs fails every check with the reason, once per module and host: each check
    used to quote testinfra's CommandResult repr (for a probe, its base64 source cut off before ssh's own
    message), so 'ssh: Could not resolve hostname' or 'No such container' was nowhere to be read."""
    name = getattr(host, "kt_label", None) or host.backend.get_pytest_id()
    try:
        result = host.run("true")
    except Exception as exc:  # testinfra's ssh backend raises RuntimeError(CommandResult) when ssh exits 255
        out = exc.args[0] if exc.args else exc
        reason = str(getattr(out, "stderr", "") or out).strip()
        pytest.fail(f"cannot run commands on {name}: {reason}", pytrace=False)
    if result.rc != 0:
        reason = (result.stderr or result.stdout).strip() or f"'true' exited {result.rc}"
        if result.rc == 127 and "sshpass" in reason:  # testinfra's ssh backend hands a password to sshpass
            reason += (
                " (a password in an ssh:// URL goes to sshpass on the controller: apt install sshpass; "
                "or log in with a key (ssh-copy-id), no password in the URL)"
            )
        pytest.fail(f"cannot run commands on {name}: {reason}", pytrace=False)
