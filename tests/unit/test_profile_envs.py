"""Stack profile envs: pins, freeze drift and the install checks run on a target before any change."""

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra import envcheck, profiles
from ktinfra.cli import app

runner = CliRunner()


def _wheel(tmp_path: Path, name: str = "ktprobe-0.4.2+cpu-py3-none-any.whl") -> tuple[Path, str]:
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("ktprobe/__init__.py", "")
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def _site_profile(tmp_path: Path, wheel: Path, sha: str | None) -> Path:
    text = f"""
name: site
generation: legacy
python: "3.11"
envs:
  inference:
    name: kt-probe
    packages: [six==1.16.0]
    wheels: [{{name: ktprobe, file: {wheel.name}, path: {wheel}, sha256: {sha or "null"}}}]
    disk_bytes: 1000
    download_bytes: 1000
"""
    path = tmp_path / "site.yaml"
    path.write_text(text)
    return path


def test_shipped_profiles_resolve_every_env():
    for name in profiles.list_profiles():
        profile = profiles.load_profile(name)
        for key in profiles.ENV_KEYS:
            env = profiles.env_spec(profile, key)
            assert env["name"] in ("kt-kernel", "kt-sft")
            assert env["disk_bytes"] > 0


def test_current_stack_pins_and_keeps_sglang_out_of_sft():
    profile = profiles.load_profile("kt-0.7")
    inference = profiles.pins(profiles.env_spec(profile, "inference"))
    sft = profiles.env_spec(profile, "sft")
    assert inference == {"kt-kernel": "0.7.2", "sglang-kt": "0.7.2", "torch": "2.9.1"}
    assert profiles.pins(sft)["ktransformers"] == "0.7.2"
    assert "sglang-kt" in sft["exclude"]


def test_legacy_stack_carries_the_seed_wheels_and_conda_patches():
    sft = profiles.env_spec(profiles.load_profile("kt-0.4-autodl"), "sft")
    pins = profiles.pins(sft)
    assert pins["ktransformers"] == "0.4.2+cu128torch27fancy"
    # the version flash-attn's release wheel holds; its file name's +cu12torch2.7cxx11abiTRUE is added after
    # the build (test_envtune_review_wheel_versions.py)
    assert pins["flash-attn"] == "2.8.3"
    assert pins["transformers"] == "4.56.0"
    channels = {patch["channel"]: patch["packages"] for patch in sft["conda_patches"]}
    assert channels["conda-forge"] == ["libstdcxx-ng", "gcc_impl_linux-64"]
    assert channels["nvidia/label/cuda-11.8.0"] == ["cuda-runtime"]
    assert sft["git"][0]["repo"] == "https://github.com/hiyouga/LLaMA-Factory.git"


def test_legacy_inference_env_builds_kt_kernel_as_seed_002_did():
    """Before: the legacy inference env held the sglang fork alone (at its moving main, since 2026-03 the
    sglang-kt of the 0.7 stack): no kt-kernel, so `--kt-method` serving could not import kt_kernel, and the
    drift check could not see it missing. Now kt-kernel is built from the ktransformers commit seed 002
    deployed, with the OS packages its CMake build needs, and the fork is pinned to a commit of that week."""
    profile = profiles.load_profile("kt-0.4-autodl")
    env = profiles.env_spec(profile, "inference")
    sglang, kt_kernel = env["git"]
    assert (sglang["name"], sglang["ref"]) == ("sglang", "eaf832efc2ecbdd0b12f691fdf2608d4baf5b3c5")
    assert kt_kernel == {"name": "kt-kernel", "repo": "https://github.com/kvcache-ai/ktransformers.git",
                         "ref": "v0.4.4", "subdir": "kt-kernel", "editable": False, "host_cpu": True,
                         "extras": []}  # fmt: skip
    assert profile["upstream"]["ref"] == kt_kernel["ref"]  # the converter writes what this kt-kernel reads
    assert {"build-essential", "libhwloc-dev", "pkg-config"} <= set(env["os_packages"])
    sglang_only = "-e git+https://github.com/kvcache-ai/sglang.git@eaf832e#egg=sglang&subdirectory=python\n"
    problems = profiles.freeze_drift(env, sglang_only)
    assert problems == [
        "kt-kernel: kt-kernel from https://github.com/kvcache-ai/ktransformers.git is not installed"
    ]
    built = sglang_only + "kt-kernel @ file:///opt/kt/src/kt-kernel/kt-kernel\n"
    assert profiles.freeze_drift(env, built) == []


@pytest.mark.parametrize("value", ["build-essential", [1], [{"name": "x"}]])
def test_os_packages_must_list_package_names(value):
    profile = profiles.load_profile("kt-0.7")
    profile["envs"]["inference"]["os_packages"] = value
    with pytest.raises(profiles.UnknownProfileError, match="envs.inference.os_packages must"):
        profiles.env_spec(profile, "inference")
    assert profiles.env_spec(profiles.load_profile("kt-0.7"), "inference")["os_packages"] == []


def test_a_git_source_gets_every_setting_the_installer_reads():
    """kt_python_env reads ref, subdir, editable and extras of each source; before, a source without a ref
    passed the profile check and stopped the play at the checkout, after the wheels were installed ('dict
    object' has no attribute 'ref')."""
    profile = profiles.load_profile("kt-0.7")
    profile["envs"]["sft"]["git"] = [{"name": "probe", "repo": "https://example.org/probe.git"}]
    (source,) = profiles.env_spec(profile, "sft")["git"]
    assert source == {"name": "probe", "repo": "https://example.org/probe.git", "ref": "HEAD", "subdir": "",
                      "editable": True, "extras": []}  # fmt: skip
    (legacy,) = profiles.env_spec(profiles.load_profile("kt-0.4-autodl"), "sft")["git"]
    assert legacy["ref"] == "000526908ae92cc1567130559f04a3436855e0cd"
    assert (legacy["subdir"], legacy["editable"], legacy["extras"]) == ("", True, ["torch", "metrics"])


def test_freeze_drift_names_wrong_missing_and_excluded_packages():
    env = profiles.env_spec(profiles.load_profile("kt-0.7"), "sft")
    freeze = "ktransformers==0.7.1\nsglang-kt==0.7.2\nTorch==2.9.1\n"
    problems = profiles.freeze_drift(env, freeze)
    assert any("ktransformers is 0.7.1, the profile pins 0.7.2" in p for p in problems)
    assert any("kt-kernel==0.7.2 is pinned by the profile but not installed" in p for p in problems)
    assert any("sglang-kt must not be in this env" in p for p in problems)
    assert not any("torch is" in p or "torch==" in p for p in problems)  # names are normalised
    complete = "ktransformers==0.7.2\nkt_kernel==0.7.2\ntorch==2.9.1\ntorchaudio==2.9.1\n"
    assert profiles.freeze_drift(env, complete) == []
    # what unpinned pip resolved: a torchaudio built for another torch, which llamafactory-kt cannot import
    unpinned = profiles.freeze_drift(env, complete.replace("torchaudio==2.9.1", "torchaudio==2.11.0"))
    assert len(unpinned) == 1 and "torchaudio is 2.11.0, the profile pins 2.9.1" in unpinned[0]


def test_a_pin_without_local_label_matches_a_local_build():
    env = profiles.env_spec(profiles.load_profile("kt-0.4-autodl"), "sft")
    freeze = "torch==2.7.1+cu128\ntorchaudio==2.7.1+cu128\ntransformers==4.56.0\nhuggingface-hub==0.34.0\n"
    freeze += "ktransformers==0.4.2+cu128torch27fancy\nflash_attn==2.8.3+cu12torch2.7cxx11abiTRUE\n"
    freeze += "-e git+https://github.com/hiyouga/LLaMA-Factory.git@abc#egg=llamafactory\n"
    assert profiles.freeze_drift(env, freeze) == []
    assert profiles.freeze_drift(env, freeze.replace("fancy", "")) != []


def test_wheel_version_comes_from_the_file_name():
    assert profiles.wheel_version(
        "flash_attn-2.8.3+cu12torch2.7cxx11abiTRUE-cp311-cp311-linux_x86_64.whl"
    ) == ("2.8.3+cu12torch2.7cxx11abiTRUE")
    with pytest.raises(ValueError, match="not a wheel"):
        profiles.wheel_version("flash_attn.tar.gz")


def test_site_profile_file_loads_by_path(tmp_path):
    wheel, sha = _wheel(tmp_path)
    assert profiles.load_profile(str(_site_profile(tmp_path, wheel, sha)))["name"] == "site"
    with pytest.raises(profiles.UnknownProfileError, match="does not exist"):
        profiles.load_profile(str(tmp_path / "missing.yaml"))


def test_check_accepts_a_local_wheel_with_its_sha256(tmp_path):
    wheel, sha = _wheel(tmp_path)
    profile = profiles.load_profile(str(_site_profile(tmp_path, wheel, sha)))
    result = envcheck.check_install(
        profile, ["inference"], root=tmp_path / "envs", wheelhouse=tmp_path / "wh"
    )
    assert result["problems"] == []
    env = result["envs"][0]
    assert env["prefix"] == str(tmp_path / "envs" / "kt-probe")
    assert env["wheels"][0]["version"] == "0.4.2+cpu"
    assert result["manager"] in ("venv", "conda")


def test_check_refuses_a_wrong_sha256_and_a_missing_pin(tmp_path):
    wheel, _ = _wheel(tmp_path)
    profile = profiles.load_profile(str(_site_profile(tmp_path, wheel, "ab" * 32)))
    result = envcheck.check_install(profile, ["inference"], root=tmp_path, wheelhouse=tmp_path / "wh")
    assert f"sha256 of {wheel} is" in result["problems"][0]
    unpinned = profiles.load_profile(str(_site_profile(tmp_path, wheel, None)))
    result = envcheck.check_install(unpinned, ["inference"], root=tmp_path, wheelhouse=tmp_path / "wh")
    assert "has no sha256 pin" in result["problems"][0]


def test_override_moves_a_wheel_to_another_file(tmp_path):
    wheel, _ = _wheel(tmp_path)
    other, other_sha = _wheel(tmp_path, "ktprobe-0.4.3-py3-none-any.whl")
    profile = profiles.load_profile(str(_site_profile(tmp_path, wheel, "ab" * 32)))
    overrides = envcheck.parse_wheels_json(json.dumps({"ktprobe": {"path": str(other), "sha256": other_sha}}))
    result = envcheck.check_install(
        profile, ["inference"], root=tmp_path, wheelhouse=tmp_path / "wh", wheel_overrides=overrides
    )
    assert result["problems"] == []
    assert result["envs"][0]["wheels"][0]["version"] == "0.4.3"
    stray = envcheck.check_install(
        profile,
        ["inference"],
        root=tmp_path,
        wheelhouse=tmp_path / "wh",
        wheel_overrides={"nope": {"sha256": "0"}},
    )
    assert any("'nope' matches no wheel" in p for p in stray["problems"])


def test_check_sums_disk_needs_per_filesystem(tmp_path):
    profile = profiles.load_profile("kt-0.7")
    result = envcheck.check_install(
        profile, ["inference", "sft"], root=tmp_path / "envs", wheelhouse=tmp_path / "wh"
    )
    need = sum(
        profiles.env_spec(profile, k)["disk_bytes"] + profiles.env_spec(profile, k)["download_bytes"]
        for k in ("inference", "sft")
    )
    # the sft env's wheels that the inference env downloaded first are in the wheelhouse already
    need -= profiles.env_spec(profile, "sft")["download_shared_bytes"]["inference"]
    assert result["disks"][0]["need_bytes"] == need
    too_small = result["disks"][0]["free_bytes"] < need
    assert any("disk too small" in p for p in result["problems"]) == too_small


def test_conda_requested_without_conda_is_a_problem_not_a_crash(tmp_path, monkeypatch):
    monkeypatch.setattr(envcheck, "CONDA_CANDIDATES", (str(tmp_path / "miniconda3" / "bin" / "conda"),))
    monkeypatch.setenv("PATH", str(tmp_path))
    result = envcheck.check_install(
        profiles.load_profile("kt-0.7"),
        ["inference"],
        root=tmp_path,
        wheelhouse=tmp_path,
        manager="conda",
    )
    assert any("env manager conda requested but no conda found" in p for p in result["problems"])


@pytest.mark.parametrize("manager", ["auto", "conda", "venv"])
def test_a_conda_exe_that_is_no_executable_file_is_a_problem(tmp_path, manager):
    """Before: a directory passed os.access(X_OK) and was taken as conda; a missing one fell back to a venv
    without a word under manager auto."""
    for conda_exe in (tmp_path, tmp_path / "no-conda"):
        result = envcheck.check_install(
            profiles.load_profile("kt-0.7"),
            ["inference"],
            root=tmp_path,
            wheelhouse=tmp_path,
            manager=manager,
            conda_exe=str(conda_exe),
        )
        assert result["problems"][0] == (
            f"conda {conda_exe} (--conda-exe, kt_python_env_conda_exe) is not an executable file"
        )
        assert "conda_exe" not in result or result["conda_exe"] is None


def test_legacy_conda_patches_need_conda(tmp_path):
    result = envcheck.check_install(
        profiles.load_profile("kt-0.4-autodl"), ["sft"], root=tmp_path, wheelhouse=tmp_path, manager="venv"
    )
    assert any("patches the env with conda" in p for p in result["problems"])
    with pytest.raises(ValueError, match="env manager must be one of"):
        envcheck.check_install(
            profiles.load_profile("kt-0.7"), ["sft"], root=tmp_path, wheelhouse=tmp_path, manager="pip"
        )


def test_cli_check_exit_codes(tmp_path):
    unknown = runner.invoke(
        app,
        [
            "profile",
            "check",
            "kt-9.9",
            "--env",
            "sft",
            "--root",
            str(tmp_path),
            "--wheelhouse",
            str(tmp_path),
        ],
    )
    assert unknown.exit_code == 1
    wheel, _ = _wheel(tmp_path)
    site = _site_profile(tmp_path, wheel, "ab" * 32)
    bad = runner.invoke(
        app,
        [
            "profile",
            "check",
            str(site),
            "--env",
            "inference",
            "--root",
            str(tmp_path),
            "--wheelhouse",
            str(tmp_path),
            "--json",
        ],
    )
    assert bad.exit_code == 2
    assert "sha256 of" in json.loads(bad.stdout)["problems"][0]


def test_cli_drift_exit_codes(tmp_path):
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("kt-kernel==0.7.2\nsglang-kt==0.7.2\ntorch==2.9.1\n")
    ok = runner.invoke(
        app, ["profile", "drift", "kt-0.7", "--env", "inference", "--freeze", str(freeze), "--json"]
    )
    assert ok.exit_code == 0 and json.loads(ok.stdout)["problems"] == []
    freeze.write_text("kt-kernel==0.7.1\n")
    drift = runner.invoke(
        app, ["profile", "drift", "kt-0.7", "--env", "inference", "--freeze", str(freeze), "--json"]
    )
    assert drift.exit_code == 2


def _profile_with_pythons(tmp_path: Path, python: str) -> dict:
    wheel, sha = _wheel(tmp_path)
    path = _site_profile(tmp_path, wheel, sha)
    path.write_text(path.read_text().replace('python: "3.11"', f"python: {python}"))
    return profiles.load_profile(str(path))


def test_venv_takes_the_first_listed_python_this_host_has(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3.12").symlink_to(Path(sys.executable))
    monkeypatch.setenv("PATH", str(bin_dir))
    profile = _profile_with_pythons(tmp_path, '["3.11", "3.12"]')
    result = envcheck.check_install(
        profile, ["inference"], root=tmp_path / "envs", wheelhouse=tmp_path / "wh", manager="venv"
    )
    assert result["problems"] == []
    assert (result["python"], result["python_exe"]) == ("3.12", str(bin_dir / "python3.12"))


def test_no_listed_python_is_one_problem_naming_all_of_them(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    profile = _profile_with_pythons(tmp_path, '["3.11", "3.12"]')
    result = envcheck.check_install(
        profile, ["inference"], root=tmp_path / "envs", wheelhouse=tmp_path / "wh", manager="venv"
    )
    assert result["python_exe"] is None
    assert any("python3.11 or python3.12 not found" in p for p in result["problems"])


@pytest.mark.parametrize("python", ["[]", "3.11", '["3.11", "three"]'])
def test_a_profile_python_that_is_not_a_version_list_is_refused(tmp_path, python):
    with pytest.raises(profiles.UnknownProfileError, match="python must be a version"):
        _profile_with_pythons(tmp_path, python)


def test_a_freeze_with_a_bom_or_arbitrary_equality_reads_every_package():
    """Before: a BOM hid the first package ('not installed'), and pkg===1.0 was read as version '=1.0'."""
    env = profiles.env_spec(profiles.load_profile("kt-0.7"), "sft")
    complete = "ktransformers==0.7.2\nkt_kernel==0.7.2\ntorch==2.9.1\ntorchaudio==2.9.1\n"
    assert profiles.freeze_drift(env, "\ufeff" + complete) == []
    assert profiles.freeze_drift(env, complete.replace("torch==", "torch===")) == []
    assert profiles.parse_freeze("torch===2.9.1\n") == {"torch": "2.9.1"}


def _venv_made_with(prefix: Path, layout: str) -> str:
    """An env at `prefix` as `layout` leaves it; the X.Y it was made with."""
    if layout == "venv":  # a real one, made by the Python running the tests
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
        return f"{sys.version_info.major}.{sys.version_info.minor}"
    if layout == "virtualenv":  # virtualenv's pyvenv.cfg keys
        prefix.mkdir(parents=True)
        (prefix / "pyvenv.cfg").write_text(
            "home = /usr/bin\nimplementation = CPython\nversion_info = 3.9.2.final.0\n"
        )
        return "3.9"
    (prefix / "conda-meta").mkdir(parents=True)  # conda's record of the env's python package
    (prefix / "conda-meta" / "python-3.10.14-h955ad1f_0.json").write_text("{}")
    (prefix / "conda-meta" / "python-dateutil-2.9.0-pyhd8ed1ab_0.json").write_text("{}")
    return "3.10"


@pytest.mark.parametrize("layout", ["venv", "virtualenv", "conda"])
def test_an_env_made_with_another_python_is_refused_before_the_install(tmp_path, layout):
    """Before: the env was kept as it was (its bin/python exists), and the install into it failed half-way
    through the play: no kt-kernel wheel for its Python (kt-kernel 0.7.2 ships cp311 and cp312 only)."""
    made = _venv_made_with(tmp_path / "envs" / "kt-kernel", layout)
    profile = profiles.load_profile("kt-0.7")
    result = envcheck.check_install(
        profile, ["inference"], root=tmp_path / "envs", wheelhouse=tmp_path / "wh"
    )
    refused = f"kt-kernel: the env at {tmp_path / 'envs' / 'kt-kernel'} was made with Python {made}"
    assert any(p.startswith(refused) for p in result["problems"]) == (made not in ("3.11", "3.12"))
    profile["python"] = ["3.8"]  # a version none of the layouts has: every one is refused
    result = envcheck.check_install(
        profile, ["inference"], root=tmp_path / "envs", wheelhouse=tmp_path / "wh"
    )
    problem = next(p for p in result["problems"] if p.startswith(refused))
    assert "profile kt-0.7 installs with Python 3.8: remove it" in problem
    assert (
        envcheck.made_with_full_python(tmp_path / "envs" / "kt-sft") is None
    )  # no env there: nothing to refuse


def test_freeze_drift_names_urls_without_their_tokens():
    """kt_python_env fails with these problems at the default verbosity: a git source's https://user:token@
    and a `name @ URL?token=` install printed their tokens there."""
    profile = profiles.load_profile("kt-0.7")
    profile["envs"]["sft"]["git"] = [{"name": "probe", "repo": "https://ci:g1t-t0ken@example.org/probe.git"}]
    env = profiles.env_spec(profile, "sft")
    freeze = "ktransformers==0.7.2\nkt_kernel==0.7.2\ntorch==2.9.1\n"
    freeze += "torchaudio @ https://files.example.org/torchaudio-2.11.0.whl?X-Amz-Signature=s1gn3d\n"
    problems = profiles.freeze_drift(env, freeze)
    assert "kt-sft: probe from https://example.org/probe.git is not installed" in problems
    # the query runs to the next space, as in the filter: the comma after it goes with it
    wheel = "https://files.example.org/torchaudio-2.11.0.whl"
    assert f"kt-sft: torchaudio is {wheel} the profile pins 2.9.1" in problems
    assert not [p for p in problems if "t0ken" in p or "s1gn3d" in p or "ci:" in p]
