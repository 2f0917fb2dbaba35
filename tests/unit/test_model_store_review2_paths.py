"""kt_model_store run by real ansible on localhost: paths and conversion settings the argument spec accepts
(it checks types only) but the role cannot use are refused before anything on the host changes.

Before, an empty or '/' kt_model_store_prefix made /libexec and chmod'ed /etc to 0700 (seen in the
debian12-systemd container; not run here: it would change this machine's /etc); a relative path landed in
the directory ansible's modules ran in, and store.json named relative model paths. Here ansible-playbook
runs in a folder of its own (cwd), which must stay empty."""

from __future__ import annotations

import subprocess

import pytest
from role_play import _playbook
from test_kt_model_store_role import TASKS, converting, role_vars, source


def run_in(tmp, extra):
    """run_play, with ansible-playbook started in tmp/cwd (where relative paths land): (rc, output, cwd)."""
    cwd = tmp / "cwd"
    cwd.mkdir()
    command, env = _playbook(tmp, TASKS, extra, None, "localhost,", None, None)
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, cwd=cwd)
    return proc.returncode, proc.stdout + proc.stderr, cwd


ABSOLUTE_DIR = "must be an absolute directory other than /"
ABSOLUTE_FILE = "kt_model_store_state_file must be an absolute file path"


@pytest.mark.parametrize(
    ("setting", "value", "said"),
    [
        ("kt_model_store_root", "store", f"kt_model_store_root {ABSOLUTE_DIR}"),
        ("kt_model_store_prefix", "prefix", f"kt_model_store_prefix {ABSOLUTE_DIR}"),
        ("kt_model_store_tool_venv", "venv", f"kt_model_store_tool_venv {ABSOLUTE_DIR}"),
        ("kt_model_store_state_file", "store.json", ABSOLUTE_FILE),
        ("kt_model_store_state_file", "/etc/ktinfra/", ABSOLUTE_FILE),
        ("kt_model_store_convert_script", "conv.py", "convert_script must be an absolute path"),
        # '/opt/..' is / and '/srv/../etc' is /etc: the role would have chowned and chmod'ed them
        # slow: the same ktinfra_absolute_dir check of the prefix as the "prefix" case above; . and .. parts:
        # test_kt_common_pip_filters.py::test_not_absolute_dirs
        pytest.param(
            "kt_model_store_prefix",
            "/opt/..",
            f"kt_model_store_prefix {ABSOLUTE_DIR}, without . or .. parts",
            marks=pytest.mark.slow,
        ),
        # slow: the same ktinfra_absolute_dir check of the root as the "store" case above; . and .. parts:
        # test_kt_common_pip_filters.py::test_not_absolute_dirs
        pytest.param(
            "kt_model_store_root",
            "/srv/../etc",
            f"kt_model_store_root {ABSOLUTE_DIR}, without . or .. parts",
            marks=pytest.mark.slow,
        ),
        # slow: the same ktinfra_absolute_dir check of the venv as the "venv" case above; . and .. parts:
        # test_kt_common_pip_filters.py::test_not_absolute_dirs
        pytest.param(
            "kt_model_store_tool_venv",
            "/opt/./venv",
            f"kt_model_store_tool_venv {ABSOLUTE_DIR}",
            marks=pytest.mark.slow,
        ),
        # slow: the same ktinfra_absolute_dir check of the state file as the "store.json" case above; . and ..
        # parts: test_kt_common_pip_filters.py::test_not_absolute_dirs
        pytest.param("kt_model_store_state_file", "/etc/ktinfra/..", ABSOLUTE_FILE, marks=pytest.mark.slow),
    ],
)
def test_a_path_the_role_cannot_use_is_refused_before_any_change(tmp_path, setting, value, said):
    repo = source(tmp_path, "src", b"W")
    extra = role_vars(tmp_path, [{"name": "m", "source": "local", "repo": str(repo)}], **{setting: value})
    rc, output, cwd = run_in(tmp_path, extra)
    assert rc != 0, output[-3000:]
    assert said in output, output[-3000:]
    assert list(cwd.iterdir()) == [], output[-3000:]
    assert not (tmp_path / "store").exists() and not (tmp_path / "prefix").exists()
    assert not (tmp_path / "venv").exists() and not (tmp_path / "store.json").exists()


@pytest.mark.parametrize("subdir", ["..", "", "/srv", "a/../.."])
def test_a_subdirectory_outside_the_root_is_refused_before_any_change(tmp_path, subdir):
    """'..' chowned and chmod'ed the root's parent; '' and '/srv' made the root itself (or /srv) again."""
    subdirs = ["models", "cpu-weights", "gguf", "loras", "datasets", "outputs", subdir]
    extra = role_vars(tmp_path, [], kt_model_store_subdirs=subdirs)
    rc, output, _ = run_in(tmp_path, extra)
    assert rc != 0, output[-3000:]
    assert f"kt_model_store_subdirs: '{subdir}' is not a folder name under the root" in output, output[-3000:]
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("kt_model_store_convert_threads", -1),
        ("kt_model_store_convert_threadpools", -2),
        ("kt_model_store_convert_min_shm_bytes", -1),
        ("kt_model_store_convert_timeout", 0),
    ],
)
def test_a_conversion_setting_that_cannot_work_is_refused_before_the_fetch(tmp_path, setting, value):
    """Before: the local model was copied (a download of hours for a hub model), then kt_store_convert.py
    refused '--cpuinfer-threads must be at least 1'."""
    extra = converting(tmp_path, source(tmp_path, "base", b"W"), **{setting: value})
    rc, output, _ = run_in(tmp_path, extra)
    assert rc != 0, output[-3000:]
    assert "0 or more (0: the converter's default" in output, output[-3000:]
    assert not (tmp_path / "store").exists(), output[-3000:]


def test_absolute_paths_still_lay_out_the_store(tmp_path):
    """The defaults' shape (absolute paths, subdirectories with dots and dashes) passes."""
    extra = role_vars(tmp_path, [], kt_model_store_subdirs=[*role_subdirs(), "hf-cache", "extra/.cache"])
    rc, output, cwd = run_in(tmp_path, extra)
    assert rc == 0, output[-3000:]
    assert (tmp_path / "store" / "extra" / ".cache").is_dir() and list(cwd.iterdir()) == []


def role_subdirs() -> list[str]:
    return ["models", "cpu-weights", "gguf", "loras", "datasets", "outputs"]
