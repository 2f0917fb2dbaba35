"""`ktinfra profile` on bad input: broken site profiles, paths that are files, malformed hashes; and data
with [brackets] printed as data, not rich markup."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ktinfra import envcheck
from ktinfra.cli import app

runner = CliRunner()
HEAD = 'name: site\ngeneration: current\npython: "3.11"\n'


def test_show_keeps_package_extras_in_brackets():
    res = runner.invoke(app, ["profile", "show", "kt-0.7"], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "ktransformers[sft]==0.7.2" in res.output
    shown = json.loads(runner.invoke(app, ["profile", "show", "kt-0.7", "--json"]).stdout)
    assert "ktransformers[sft]==0.7.2" in shown["envs"]["sft"]["packages"]


BROKEN = {
    "malformed yaml": ("name: site\n  generation: [\n", "is not valid YAML (line 2"),
    "envs is a list": (HEAD + "envs: [1, 2]\n", "envs must map env keys (inference, sft) to env settings"),
    "env is null": (HEAD + "envs:\n  inference: null\n", "envs.inference must be a mapping with a name"),
    "packages not a list": (
        HEAD + "envs:\n  inference: {name: e, packages: six==1.16.0}\n",
        "envs.inference.packages must be a list",
    ),
    "wheel without file": (
        HEAD + "envs:\n  inference: {name: e, wheels: [{name: w}]}\n",
        "each of envs.inference.wheels must be a mapping with name, file",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_show_refuses_a_broken_site_profile_in_one_line(tmp_path, case):
    text, message = BROKEN[case]
    site = tmp_path / "site.yaml"
    site.write_text(text)
    res = runner.invoke(app, ["profile", "show", str(site)])
    assert res.exit_code == 1, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert res.output.startswith(f"error: profile file {site}") and message in res.output
    assert len(res.output.strip().splitlines()) == 1


def _check(tmp_path: Path, *extra: str, root: Path | None = None, wheelhouse: Path | None = None):
    root = root or tmp_path / "envs"
    wheelhouse = wheelhouse or tmp_path / "wh"
    argv = ["profile", "check", "kt-0.7", "--env", "inference", "--root", str(root)]
    return runner.invoke(app, [*argv, "--wheelhouse", str(wheelhouse), "--json", *extra])


def test_check_reports_root_and_wheelhouse_that_are_files(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    res = _check(tmp_path, root=afile, wheelhouse=afile / "wh")
    assert res.exit_code == 2, res.output
    problems = json.loads(res.stdout)["problems"]
    assert problems[:2] == [
        f"--root {afile} is not a directory",
        f"--wheelhouse {afile / 'wh'} is not a directory ({afile} is a file)",
    ]


def test_check_reports_an_env_path_that_is_a_file(tmp_path):
    """Before: "no problems" (exit 0) with a file where the env goes; the install then failed there."""
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "kt-kernel").write_text("x")
    res = _check(tmp_path)
    assert res.exit_code == 2, res.output
    assert f"kt-kernel: {tmp_path / 'envs' / 'kt-kernel'} is a file, not an env directory" in res.stdout


def test_check_with_directories_has_no_directory_problem(tmp_path):
    res = _check(tmp_path)
    assert not any("is not a directory" in p for p in json.loads(res.stdout)["problems"])


@pytest.mark.parametrize("digest", ["zz", "ab" * 31, "ab" * 32 + "0", "g" * 64])
def test_check_refuses_a_malformed_sha256(tmp_path, digest):
    res = _check(tmp_path, "--wheel", f"kt-kernel=https://example.org/k.whl#sha256={digest}")
    assert res.exit_code == 1
    assert res.output.strip() == (
        f"error: wheel override kt-kernel: sha256 must be 64 hex digits, got {digest.lower()!r}"
    )
    res = _check(
        tmp_path, "--wheels-json", json.dumps({"kt-kernel": {"url": "https://x/k.whl", "sha256": digest}})
    )
    assert res.exit_code == 1 and "sha256 must be 64 hex digits" in res.output


def test_check_accepts_a_well_formed_sha256_in_either_case(tmp_path):
    res = _check(tmp_path, "--wheel", "kt-kernel=https://example.org/k.whl#sha256=" + "AB" * 32)
    assert res.exit_code in (0, 2) and "64 hex digits" not in res.output


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--root", "", "error: --root is empty"),
        ("--wheelhouse", " ", "error: --wheelhouse is empty"),
        ("--root", "envs", "error: --root must be an absolute path, got 'envs'"),
        ("--wheelhouse", "./wh", "error: --wheelhouse must be an absolute path, got './wh'"),
    ],
)
def test_check_refuses_an_empty_or_relative_root_or_wheelhouse(tmp_path, monkeypatch, option, value, message):
    """Before: exit 0 with the prefix 'kt-kernel' (or envs/kt-kernel), relative to wherever it ran."""
    monkeypatch.chdir(tmp_path)
    paths = {"--root": str(tmp_path / "envs"), "--wheelhouse": str(tmp_path / "wh"), option: value}
    argv = ["profile", "check", "kt-0.7", "--env", "inference", *(x for kv in paths.items() for x in kv)]
    for extra in ([], ["--json"]):
        res = runner.invoke(app, [*argv, *extra])
        assert res.exit_code == 1 and res.stdout == "" and res.stderr == message + "\n", res.output


def test_check_and_drift_without_json_say_that_all_is_well(tmp_path, monkeypatch):
    """Before: a successful check or drift printed nothing at all without --json."""
    # whatever this host has: a python for the venv, room on the disk
    monkeypatch.setattr(envcheck.shutil, "which", lambda name: sys.executable)
    monkeypatch.setattr(envcheck, "_disk_problems", lambda needs: ([], []))
    argv = ["profile", "check", "kt-0.7", "--env", "inference", "--env", "sft", "--manager", "venv"]
    res = runner.invoke(app, [*argv, "--root", str(tmp_path / "envs"), "--wheelhouse", str(tmp_path / "wh")])
    assert res.exit_code == 0 and res.stderr == "", res.output
    assert res.stdout.splitlines() == [
        f"kt-0.7 inference: no problems (prefix {tmp_path / 'envs' / 'kt-kernel'})",
        f"kt-0.7 sft: no problems (prefix {tmp_path / 'envs' / 'kt-sft'})",
    ]
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("kt-kernel==0.7.2\nsglang-kt==0.7.2\ntorch==2.9.1\n")
    res = runner.invoke(app, ["profile", "drift", "kt-0.7", "--env", "inference", "--freeze", str(freeze)])
    assert res.exit_code == 0 and res.stderr == ""
    assert res.stdout == f"kt-0.7 inference: no drift ({freeze} matches the profile's 3 pins)\n"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.txt", None, "cannot be read (No such file or directory)"),
        ("adir", "dir", "cannot be read (Is a directory)"),
        ("latin1.txt", b"kt-kernel==0.7.2\ncaf\xe9==1\n", "not UTF-8 text (byte 20), not a pip freeze"),
    ],
)
def test_drift_names_a_freeze_it_cannot_read(tmp_path, name, content, message):
    """Before: '[Errno 2] No such file or directory: ...', or a codec error naming neither option nor file."""
    freeze = tmp_path / name
    if content == "dir":
        freeze.mkdir()
    elif content is not None:
        freeze.write_bytes(content)
    argv = ["profile", "drift", "kt-0.7", "--env", "inference", "--freeze"]
    for extra in ([], ["--json"]):
        res = runner.invoke(app, [*argv, str(freeze), *extra])
        assert res.exit_code == 1 and res.stdout == "", res.output
        assert res.stderr == f"error: --freeze {freeze}: {message}\n"
    res = runner.invoke(app, [*argv, ""])
    assert res.exit_code == 1 and res.stdout == "" and res.stderr == "error: --freeze is empty\n"


def test_shipped_profile_names_take_any_case():
    """--model and --cpu-format took any case, --stack KT-0.7 said "unknown stack profile"."""
    from ktinfra.profiles import load_profile

    assert load_profile("KT-0.7")["name"] == "kt-0.7"
    assert load_profile("Kt-0.4-AutoDL")["name"] == "kt-0.4-autodl"
    res = CliRunner().invoke(app, ["profile", "show", "KT-0.7", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["name"] == "kt-0.7"


def test_a_wheel_path_that_is_a_folder_is_named_so(tmp_path):
    """Before: a folder (named as a wheel: other names are refused earlier) was said not to exist."""
    folder = tmp_path / "flash_attn-2.8.3-cp311-cp311-linux_x86_64.whl"
    folder.mkdir()

    def problems(path):
        argv = ["profile", "check", "kt-0.4-autodl", "--env", "sft", "--root", str(tmp_path / "envs"),
                "--wheelhouse", str(tmp_path / "wh"), "--json",
                "--wheel", f"flash-attn={path}#sha256={'ab' * 32}"]  # fmt: skip
        res = runner.invoke(app, argv)
        assert res.exit_code == 2, res.output
        return json.loads(res.stdout)["problems"]

    said = problems(folder)
    assert f"wheel flash-attn: {folder} is not a file (the wheel itself, not its folder)" in said, said
    gone = tmp_path / "gone" / folder.name
    said = problems(gone)
    assert f"wheel flash-attn: {gone} does not exist" in said, said
