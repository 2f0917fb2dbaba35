"""--model spellings that reached the user as a traceback: a ~user path of no such user (pathlib's
expanduser raises RuntimeError, which nothing caught)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ktinfra import catalog

FACTS = Path(__file__).parents[1] / "fixtures" / "facts" / "h100-amx.json"
NO_USER = "~ktinfra-no-such-user-38"


@pytest.mark.parametrize("model", [f"{NO_USER}/models/Qwen3-30B-A3B", NO_USER])
def test_a_home_of_no_user_is_an_unknown_model(model):
    with pytest.raises(catalog.UnknownModelError) as err:
        catalog.resolve(model)
    assert str(err.value) == f"--model {model!r}: {NO_USER!r} is no user's home directory"


def test_the_cli_says_so_and_exits_1_without_a_traceback():
    args = ["plan", "--model", f"{NO_USER}/m", "--facts", str(FACTS)]
    proc = subprocess.run(
        [sys.executable, "-m", "ktinfra", *args], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert f"{NO_USER!r} is no user's home directory" in proc.stdout + proc.stderr


def test_the_own_home_still_expands(tmp_path, monkeypatch):
    model = tmp_path / "models" / "MyQwen"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps(catalog.entry_config("Qwen3-30B-A3B")))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert catalog.resolve("~/models/MyQwen").path == str(model.resolve())


def _resolve_as_another_user(model: str) -> str:
    """catalog.resolve(model) as a user other than the folder's owner: in a child process that drops root
    for nobody (a root process reads every file), or as this user when it is not root. Returns what it
    raised, as 'Type: message'."""
    if os.geteuid() != 0:
        try:
            catalog.resolve(model)
        except Exception as exc:  # noqa: BLE001 - the test looks at which one
            return f"{type(exc).__name__}: {exc}"
        return "no error"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        outcome = "no error"
        try:
            os.setgid(65534)
            os.setuid(65534)
            catalog.resolve(model)
        except BaseException as exc:  # noqa: BLE001
            outcome = f"{type(exc).__name__}: {exc}"
        os.write(write, outcome.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        outcome = pipe.read()
    os.waitpid(pid, 0)
    return outcome


def test_a_model_folder_this_user_may_not_search_is_a_clear_error():
    """A folder owned by another account with mode 0700 (a service user's model store): is_dir() sees it,
    but the stat of its config.json fails with EACCES, which Path.is_file() does not swallow."""
    top = Path(tempfile.mkdtemp(prefix="ktinfra-sizing-review2-"))  # /tmp: pytest's tmp_path is 0700
    top.chmod(0o755)
    model = top / "MyQwen"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(catalog.entry_config("Qwen3-30B-A3B")))
    model.chmod(0o700)
    if os.geteuid() != 0:
        model.chmod(0o600)  # searchable by nobody else; for this user, not even by itself
    try:
        outcome = _resolve_as_another_user(str(model))
    finally:
        model.chmod(0o755)
        shutil.rmtree(top)
    assert outcome == f"ModelConfigError: {model}/config.json: cannot read it (Permission denied)"


@pytest.mark.parametrize("model", ["Qwen3-30B-A3B", "Qwen/Qwen3-30B-A3B"])
def test_a_catalog_name_shadowed_by_a_folder_without_config_json_says_both(tmp_path, monkeypatch, model):
    """Run where a folder of that name is (a model store's models/ while its download runs), the catalog
    name reads as that folder; the error named only the folder, leaving the user to guess why the catalog
    model was not taken."""
    (tmp_path / model).mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(catalog.UnknownModelError) as err:
        catalog.resolve(model)
    assert str(err.value) == (
        f"{model} has no config.json; point --model at a Hugging Face model directory; {model!r} also names "
        "the catalog model Qwen3-30B-A3B, which --model takes from a directory without a folder of that name"
    )
    with pytest.raises(catalog.UnknownModelError) as err:  # a path is a path: no catalog note
        catalog.resolve(f"./{model}")
    assert "catalog" not in str(err.value)
