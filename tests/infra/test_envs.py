"""Python environments match their stack profile's pins; sglang exposes KT's --kt-* server flags."""

import json
import shlex

import pytest
from kthost import require_env, run_probe
from packaging.requirements import Requirement

from ktinfra.profiles import env_spec

# Flags the ktinfra plan renders into every serve command line (docs/CONTRACTS.md, serve.kt_*; render.serve
# sglang_argv). --kt-max-deferred-experts-per-token came to the sglang fork on 2025-11-06, two weeks after the
# others: a build between them passed here and its server stopped at "unrecognized arguments".
KT_SERVER_FLAGS = (
    "--kt-weight-path",
    "--kt-method",
    "--kt-cpuinfer",
    "--kt-threadpool-count",
    "--kt-num-gpu-experts",
    "--kt-max-deferred-experts-per-token",
)

# `--help` imports sglang's server (torch, transformers): seconds; bounded, as the probes are
SGLANG_HELP_TIMEOUT = 300


def pin_problems(pins: list[str], installed: dict, copies: dict | None = None) -> list[str]:
    """What keeps `installed` ({name: version}) from the pins; `copies` ({name: {site dir: [versions]}}, the
    pyenv probe's) fails a distribution installed twice in one directory, whichever version it reports."""
    problems = []
    for pin in pins:
        req = Requirement(pin)
        have = installed.get(req.name)
        twice = (copies or {}).get(req.name)
        if twice:
            problems.extend(
                f"{req.name} is installed {len(versions)} times in {where} ({', '.join(versions)}): its "
                f"files are a mix of them: pip uninstall {req.name} until none is left, then install {pin}"
                for where, versions in sorted(twice.items())
            )
        elif have is None:
            problems.append(f"{req.name} missing (profile pins {req.specifier or 'any version'})")
        elif not req.specifier.contains(have, prereleases=True):
            problems.append(f"{req.name} {have} does not satisfy {req.specifier}")
    return problems


def profile_pins(profile: dict, kind: str) -> list[str]:
    """Every pin of the profile's env: its packages, each wheel as name==version (kt-0.4-autodl's
    ktransformers and flash-attn), each git source present in any version (its name is its distribution's)."""
    if kind not in (profile.get("envs") or {}):
        return []
    env = env_spec(profile, kind)
    wheels = [f"{wheel['name']}=={wheel['version']}" for wheel in env["wheels"]]
    return [*env["packages"], *wheels, *git_sources(profile, kind)]


def git_sources(profile: dict, kind: str) -> list[str]:
    return [source["name"] for source in env_spec(profile, kind)["git"]] if kind in profile["envs"] else []


@pytest.mark.parametrize("kind", ["inference", "sft"])
def test_env_matches_profile_pins(request, host, profile, kind):
    env = request.getfixturevalue(f"{kind}_env")
    pins = profile_pins(profile, kind)
    require_env(env, f"{kind} env")
    names = [Requirement(p).name for p in pins]
    got = run_probe(host, env["python"], "pyenv", json.dumps(names))
    # a git source counts as present when its distribution or its module is there (a checkout on sys.path)
    dists = {**got["dists"], **{n: "0" for n in git_sources(profile, kind) if got["modules"].get(n)}}
    installed = {n: v for n, v in dists.items() if v is not None}
    problems = pin_problems(pins, installed, got.get("copies"))
    assert not problems, f"{kind} env {env['python']} vs profile {profile['name']}: " + "; ".join(problems)
    print(f"{kind} env {env['python']} (python {got['python']}) matches {profile['name']}: {', '.join(pins)}")


def test_sglang_lists_kt_flags(host, inference_env):
    python = require_env(inference_env, "inference env")
    if not run_probe(host, python, "pyenv", "[]")["modules"]["sglang"]:
        pytest.skip(f"sglang not installed in {python}")
    helped = host.run(f"timeout {SGLANG_HELP_TIMEOUT} {shlex.quote(python)} -m sglang.launch_server --help")
    assert helped.rc != 124, (  # timeout's own: the first "exited 124" said nothing of a hang
        f"sglang.launch_server --help in {python} did not finish within {SGLANG_HELP_TIMEOUT} s (hung: its "
        "imports wait on something; run it by hand to see where)"
    )
    assert helped.rc == 0, f"sglang.launch_server --help exited {helped.rc}: {helped.stderr.strip()[-800:]}"
    missing = [flag for flag in KT_SERVER_FLAGS if flag not in helped.stdout]
    assert not missing, f"sglang in {python} lacks {', '.join(missing)}: not the sglang-kt build"
