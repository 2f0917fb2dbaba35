"""kt_preflight with a site profile file (kt_python_env_profile: a controller path), run for real on localhost
with its tool venv under tmp_path: the plans read the copy kt_python_env's checks installed next to ktinfra,
not the controller path; --check plans against a staged copy and installs nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from role_play import REPO, logging_ktinfra, run_play, stacks_planned
from test_kt_python_env_site_profile import PROFILE  # the same small site profile

PREFLIGHT = [
    {"ansible.builtin.setup": {"gather_subset": ["min"]}},
    {"ansible.builtin.include_role": {"name": "kt_preflight"}},
]
H100 = REPO / "tests" / "fixtures" / "facts" / "h100-amx.json"


def _extra(tmp: Path) -> dict:
    """The tool venv under tmp/tool; the plans' ktinfra is a stand-in in tmp/kt/bin that logs its arguments
    and runs this checkout (site profiles then go to tmp/kt/profiles); the H100 capture's facts."""
    for sub in ("wheelhouse", "scratch"):
        (tmp / sub).mkdir(parents=True, exist_ok=True)
    wrapper = logging_ktinfra(tmp / "kt" / "bin" / "ktinfra")
    (tmp / "site.yaml").write_text(yaml.safe_dump(PROFILE))
    return {
        "kt_preflight_tool_dir": str(tmp / "tool"),
        "kt_preflight_build_dir": str(tmp / "dist"),
        "kt_preflight_wheelhouse": str(tmp / "wheelhouse"),
        "kt_preflight_python": getattr(sys, "_base_executable", sys.executable),
        "kt_preflight_ktinfra": str(wrapper),
        # an extra var outranks the facts task's register: the plans run on the H100 capture's facts
        "kt_preflight_facts_run": {"stdout": H100.read_text()},
        "kt_preflight_requests": [{"model": "Qwen3-30B-A3B", "mode": "serve"}],
        "kt_python_env_profile": str(tmp / "site.yaml"),
        "kt_python_env_envs": ["inference"],
        "kt_python_env_manager": "venv",
        "kt_python_env_root": str(tmp / "envs"),
        "kt_python_env_wheelhouse": str(tmp / "wh"),
    }


def _preflight(tmp: Path, extra: dict, flags: list[str] | None = None) -> tuple[int, str, dict]:
    out = tmp / "seen.json"
    out.unlink(missing_ok=True)
    plans = "kt_preflight_plans | map(attribute='stack') | list"
    seen = (
        "{{ {'stack': kt_preflight_stack_arg | default(none), 'plans': "
        + plans
        + ", 'pending': kt_preflight_stack_pending | default(none)} | to_json }}"
    )
    dump = {"ansible.builtin.copy": {"content": seen, "dest": str(out)}, "check_mode": False}
    rc, output = run_play(tmp, [*PREFLIGHT, dump], extra, env={"TMPDIR": str(tmp / "scratch")}, flags=flags)
    return rc, output, json.loads(out.read_text()) if out.exists() else {}


@pytest.mark.slow
def test_a_site_profile_file_is_planned_from_its_copy_on_the_target(tmp_path):
    """Before: `ktinfra plan --stack <controller path>` ran on the target, before kt_python_env's checks
    copied the file there: on every remote host "stack profile file ... does not exist", then "gave no
    plan"."""
    extra = _extra(tmp_path)
    installed = tmp_path / "kt" / "profiles" / "site.yaml"
    rc, output, seen = _preflight(tmp_path, extra)
    assert rc == 0, output[-3000:]
    assert seen == {"stack": str(installed), "plans": ["site"], "pending": ""}
    assert installed.read_text() == (tmp_path / "site.yaml").read_text()
    assert stacks_planned(tmp_path / "kt" / "bin" / "ktinfra") == [str(installed)]
    # a changed file under --check: the plans read a staged copy of it; nothing is installed, none is left;
    # kt_serve and kt_train are told to plan from a staged copy too (kt_common's plan_stack)
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(PROFILE | {"name": "site-next"}))
    rc, output, seen = _preflight(tmp_path, extra, ["--check"])
    assert rc == 0, output[-3000:]
    assert seen["plans"] == ["site-next"] and yaml.safe_load(installed.read_text())["name"] == "site"
    assert seen["pending"] == str(tmp_path / "site.yaml")
    staged = stacks_planned(tmp_path / "kt" / "bin" / "ktinfra")[-1]
    assert Path(staged).parent == tmp_path / "scratch" and not Path(staged).exists()
    assert not [p for p in (tmp_path / "scratch").iterdir() if p.name.startswith("ktinfra-profile.")]


@pytest.mark.slow
def test_a_site_profile_file_is_installed_for_the_plans_without_the_env_checks(tmp_path):
    """kt_preflight_check_envs false skipped kt_python_env's checks, and with them the only copy of the file
    to the target; a stack of another file than kt_python_env_profile is refused with both names."""
    extra = _extra(tmp_path) | {"kt_preflight_check_envs": False}
    rc, output, seen = _preflight(tmp_path, extra)
    assert rc == 0, output[-3000:]
    assert seen["plans"] == ["site"] and (tmp_path / "kt" / "profiles" / "site.yaml").exists()
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(PROFILE))
    rc, output, seen = _preflight(tmp_path, extra | {"kt_preflight_stack": str(other)})
    assert rc != 0 and f"kt_preflight_stack {other} is a site profile file" in output, output[-3000:]
