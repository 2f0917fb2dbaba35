"""kt_python_env's validate entry point run for real on localhost with a site profile file: this checkout's
ktinfra checks a staged copy, and the file goes into <ktinfra prefix>/profiles/ only once it passed; --check
checks the new file and writes nothing."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest
import yaml
from role_play import REPO, run_play

VALIDATE = [{"ansible.builtin.include_role": {"name": "kt_python_env", "tasks_from": "validate"}}]
PROFILE = {
    "name": "site",
    "generation": "current",
    "python": f"{sys.version_info.major}.{sys.version_info.minor}",
    "glibc_min": "2.17",
    "kernel_min": "3.10",
    "envs": {"inference": {"name": "probe", "packages": ["six==1.16.0"]}},
}


def _setup(tmp: Path) -> dict:
    """ktinfra in tmp/tool/bin, so site profiles go to tmp/tool/profiles; the staging file goes to tmp/scratch
    (TMPDIR) where the test can see that none is left."""
    (tmp / "tool" / "bin").mkdir(parents=True, exist_ok=True)
    (tmp / "scratch").mkdir(exist_ok=True)
    wrapper = tmp / "tool" / "bin" / "ktinfra"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m ktinfra "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return {
        "kt_preflight_ktinfra_exe": str(wrapper),
        "kt_python_env_profile": str(tmp / "site.yaml"),
        "kt_python_env_envs": ["inference"],
        "kt_python_env_manager": "venv",
        "kt_python_env_root": str(tmp / "envs"),
        "kt_python_env_wheelhouse": str(tmp / "wh"),
    }


def validate(
    tmp: Path, profile: str, flags: list[str] | None = None, cli: list[str] | None = None, **extra
) -> tuple[int, str]:
    (tmp / "site.yaml").write_text(profile)
    env = {"TMPDIR": str(tmp / "scratch")}
    return run_play(tmp, VALIDATE, _setup(tmp) | extra, cli, env=env, flags=flags)


def installed(tmp: Path) -> list[str]:
    profiles = tmp / "tool" / "profiles"
    return sorted(p.name for p in profiles.iterdir()) if profiles.exists() else []


def staged(tmp: Path) -> list[Path]:
    return [p for p in (tmp / "scratch").iterdir() if p.name.startswith("ktinfra-profile.")]


GOOD = yaml.safe_dump(PROFILE)
BAD_YAML = "name: site\nenvs: [unclosed\n"


@pytest.mark.parametrize(
    ("profile", "extra", "message"),
    [
        (BAD_YAML, {}, "is not valid YAML"),
        # slow: ktinfra refuses [bad-name] as it does [bad-yaml] (UnknownProfileError): the same stop, the
        # same nothing left installed
        pytest.param(
            GOOD.replace("name: site", "name: site/x"),
            {},
            "name must be letters, digits",
            marks=pytest.mark.slow,
        ),
        (GOOD, {"kt_python_env_wheelhouse": "/dev/null/wh"}, "--wheelhouse /dev/null/wh is not a directory"),
    ],
    ids=["bad-yaml", "bad-name", "problem"],
)
def test_a_rejected_site_profile_is_not_left_installed(tmp_path, profile, extra, message):
    """Before: the file was copied into profiles/ first, then `ktinfra profile check` rejected it, and the
    rejected file stayed installed on the host."""
    rc, output = validate(tmp_path, profile, **extra)
    assert rc != 0 and message in output, output[-3000:]
    assert installed(tmp_path) == []
    assert staged(tmp_path) == []


def test_a_checked_site_profile_is_installed_and_a_rerun_changes_nothing(tmp_path):
    rc, output = validate(tmp_path, GOOD)
    assert rc == 0, output[-3000:]
    assert installed(tmp_path) == ["site.yaml"]
    assert (tmp_path / "tool" / "profiles" / "site.yaml").read_text() == GOOD
    assert staged(tmp_path) == []
    rc, output = validate(tmp_path, GOOD)
    assert rc == 0 and "changed=0" in output, output[-3000:]


def test_check_mode_checks_the_new_file_and_writes_nothing(tmp_path):
    """Before: the check read the copy in profiles/, which --check does not make: a new or changed site
    profile failed --check with "object of type 'dict' has no attribute 'dest'" instead of being checked."""
    rc, output = validate(tmp_path, GOOD, ["--check"])
    assert rc == 0 and "changed=1" in output, output[-3000:]
    assert installed(tmp_path) == [] and staged(tmp_path) == []
    rc, output = validate(tmp_path, GOOD)
    assert rc == 0 and installed(tmp_path) == ["site.yaml"], output[-3000:]
    rc, output = validate(tmp_path, BAD_YAML, ["--check"])
    assert rc != 0 and "is not valid YAML" in output, output[-3000:]
    bumped = GOOD.replace("six==1.16.0", "six==1.17.0")
    rc, output = validate(tmp_path, bumped, ["--check"])
    assert rc == 0 and "changed=1" in output, output[-3000:]
    assert (tmp_path / "tool" / "profiles" / "site.yaml").read_text() == GOOD
    assert staged(tmp_path) == []


SFT = {"sft": {"name": "probe-sft", "packages": ["six==1.16.0"]}}
TWO_ENVS = yaml.safe_dump(PROFILE | {"envs": PROFILE["envs"] | SFT})


@pytest.mark.parametrize(
    ("cli", "planned"),
    [
        ("kt_python_env_envs=inference", ["probe"]),
        ("kt_python_env_envs=sft,inference", ["probe-sft", "probe"]),
        ('{"kt_python_env_envs": ["sft", "inference"]}', ["probe-sft", "probe"]),  # a list, as it is
    ],
    ids=["one", "two", "list"],
)
def test_envs_given_as_a_string_on_the_command_line_are_split_on_commas(tmp_path, cli, planned):
    """-e kt_python_env_envs=inference is the string "inference"; the argument spec passes it. Before, the
    check ran with --env=i --env=n --env=f ... and stopped: "--env e given twice"."""
    out = tmp_path / "planned.json"
    names = "{{ kt_python_env_install.envs | map(attribute='name') | list | to_json }}"
    tasks = VALIDATE + [{"ansible.builtin.copy": {"content": names, "dest": str(out)}}]
    (tmp_path / "site.yaml").write_text(TWO_ENVS)
    env = {"TMPDIR": str(tmp_path / "scratch")}
    rc, output = run_play(tmp_path, tasks, _setup(tmp_path), [cli], env=env)
    assert rc == 0, output[-3000:]
    assert installed(tmp_path) == ["site.yaml"]
    assert json.loads(out.read_text()) == planned


def test_the_other_roles_run_the_envs_where_this_host_has_them(tmp_path):
    """A conda host (AutoDL): the envs go to <conda>/envs/<name>. Before, kt_serve_python, kt_train_python,
    kt_train_serve_python and kt_model_store_convert_python still named kt_python_env_root/kt-kernel (or
    kt-sft)/bin/python, which such a host does not have: units and the converter ran a missing interpreter."""
    conda = tmp_path / "conda" / "bin" / "conda"
    conda.parent.mkdir(parents=True)
    conda.write_text("#!/bin/sh\nexit 0\n")
    conda.chmod(conda.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(PROFILE | {"envs": PROFILE["envs"] | {"sft": {
        "name": "probe-sft", "packages": ["six==1.16.0"]}}}))  # fmt: skip
    extra = _setup(tmp_path) | {
        "kt_python_env_envs": ["inference", "sft"],
        "kt_python_env_manager": "auto",
        "kt_python_env_conda_exe": str(conda),
    }
    names = ["kt_serve_python", "kt_train_python", "kt_train_serve_python", "kt_model_store_convert_python"]
    out = tmp_path / "pythons.json"
    tasks = VALIDATE + [
        {"ansible.builtin.include_vars": str(REPO / "roles" / role / "defaults" / "main.yml")}
        for role in ("kt_serve", "kt_train", "kt_model_store")
    ]
    content = "{{ {" + ", ".join(f"'{name}': {name}" for name in names) + "} | to_json }}"
    tasks.append({"ansible.builtin.copy": {"content": content, "dest": str(out)}})
    rc, output = run_play(tmp_path, tasks, extra, env={"TMPDIR": str(tmp_path / "scratch")})
    assert rc == 0, output[-3000:]
    envs = tmp_path / "conda" / "envs"
    assert json.loads(out.read_text()) == {
        "kt_serve_python": f"{envs}/probe/bin/python",
        "kt_train_python": f"{envs}/probe-sft/bin/python",
        "kt_train_serve_python": f"{envs}/probe/bin/python",
        "kt_model_store_convert_python": f"{envs}/probe/bin/python",
    }


def test_os_packages_of_a_profile_env_are_installed_with_the_roles_own(tmp_path):
    """A profile env's os_packages (the legacy inference env's kt-kernel build needs libhwloc-dev,
    pkg-config, g++) reach kt_common's os_packages with the role's own, before any env is made: under --check
    the run names the one missing here and changes nothing (git and python3-venv are installed)."""
    env = dict(PROFILE["envs"]["inference"], os_packages=["git", "no-such-package-ktinfra"])
    profile = dict(PROFILE, envs={"inference": env})
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(profile))
    main = [
        {"ansible.builtin.setup": {"gather_subset": ["min"]}},  # the OS vars are chosen by these facts
        {"ansible.builtin.include_role": {"name": "kt_python_env"}},
    ]
    rc, output = run_play(
        tmp_path, main, _setup(tmp_path), env={"TMPDIR": str(tmp_path / "scratch")}, flags=["--check"]
    )
    assert rc == 0, output[-3000:]
    assert "a real run refreshes the apt lists and installs no-such-package-ktinfra" in output, output[-3000:]
    assert not (tmp_path / "envs").exists()
