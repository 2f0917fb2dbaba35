"""Where the LoRA converter is found: inside the converter python's env (kt-kernel wheel), explicit paths,
the checkouts. A real python subprocess looks at a package tree laid out like the kt-kernel wheel's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ktinfra import lora
from ktinfra.render import RenderError
from ktinfra.render.convert import KT_LORA_SCRIPT, render_lora_convert


@pytest.fixture
def kt_env(tmp_path, monkeypatch) -> Path:
    """A site-packages dir with kt_kernel/sft/convert_kt_to_sglang_adapter.py, on this python's PYTHONPATH.
    Its __init__ exits the interpreter: importing the package (instead of locating it) would be caught."""
    site = tmp_path / "site-packages"
    sft = site / "kt_kernel" / "sft"
    sft.mkdir(parents=True)
    (site / "kt_kernel" / "__init__.py").write_text("raise SystemExit('kt_kernel was imported')\n")
    (sft / "convert_kt_to_sglang_adapter.py").write_text("print('converter')\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.delenv(lora.CONVERTER_ENV, raising=False)
    return sft / "convert_kt_to_sglang_adapter.py"


def test_installed_converter_is_found_without_importing_kt_kernel(kt_env):
    assert lora.installed_converter(sys.executable) == kt_env.resolve()
    assert lora.installed_converter(Path(sys.executable)) == kt_env.resolve()


def test_no_installed_converter(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert lora.installed_converter(sys.executable) is None  # no kt_kernel in that env
    assert lora.installed_converter(tmp_path / "no-such-python") is None
    (tmp_path / "kt_kernel").mkdir()
    (tmp_path / "kt_kernel" / "__init__.py").write_text("")
    assert lora.installed_converter(sys.executable) is None  # a kt-kernel without sft/


def test_find_converter_prefers_explicit_then_installed(kt_env, tmp_path, monkeypatch):
    assert lora.find_converter(False, python=sys.executable) == kt_env.resolve()
    explicit = tmp_path / "mine.py"
    explicit.write_text("")
    assert lora.find_converter(False, explicit, python=sys.executable) == explicit.resolve()
    monkeypatch.setenv(lora.CONVERTER_ENV, str(explicit))
    assert lora.find_converter(False, python=sys.executable) == explicit.resolve()
    with pytest.raises(lora.LoraError, match="from --converter not found"):
        lora.find_converter(False, tmp_path / "gone.py", python=sys.executable)


def test_missing_current_converter_names_every_place_looked(tmp_path, monkeypatch):
    monkeypatch.delenv(lora.CONVERTER_ENV, raising=False)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setitem(lora.CONVERTER_SEARCH, "current", [tmp_path / "checkout.py"])
    with pytest.raises(lora.LoraError) as err:
        lora.find_converter(False, python=sys.executable)
    message = str(err.value)
    assert f"kt_kernel/sft/convert_kt_to_sglang_adapter.py in the env of {sys.executable}" in message
    assert str(tmp_path / "checkout.py") in message


def test_render_defaults_to_the_installed_converter(kt_env):
    rendered = render_lora_convert(
        adapter="/runs/med", output="/srv/lora/med", model_path="/models/q", python=sys.executable
    )
    assert rendered.info["argv"][:2] == [sys.executable, str(kt_env.resolve())]
    assert rendered.info["converter_source"] == "installed"
    unit = rendered.files["ktinfra-lora-convert@.service"][0]
    assert f"ExecStart={sys.executable} {kt_env.resolve()} $KT_LORA_CONVERT_ARGS" in unit


def test_render_explicit_script_and_other_hosts_keep_working(kt_env):
    explicit = render_lora_convert(
        adapter="/runs/med", output="/srv/lora/med", model_path="/m", python=sys.executable, script="/x/c.py"
    )
    assert (explicit.info["argv"][1], explicit.info["converter_source"]) == ("/x/c.py", "explicit")
    # A python that is not on this machine: rendering for another host keeps the checkout default.
    remote = render_lora_convert(
        adapter="/runs/med", output="/srv/lora/med", model_path="/m", python="/opt/elsewhere/bin/python"
    )
    assert (remote.info["argv"][1], remote.info["converter_source"]) == (KT_LORA_SCRIPT, "checkout")


def test_render_fails_when_the_local_env_has_no_converter(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    with pytest.raises(RenderError, match=f"{sys.executable} has no kt_kernel/sft/convert_kt_to_sglang"):
        render_lora_convert(adapter="/runs/a", output="/srv/lora/a", model_path="/m", python=sys.executable)


@pytest.mark.parametrize("folder", ["pkg dir", "pkg$HOME"])
def test_an_installed_converter_systemd_would_split_or_expand_is_refused(tmp_path, monkeypatch, folder):
    """Before: an editable kt-kernel under "pkg dir" reached ExecStart= unchecked (split at the space, $HOME
    expanded by systemd)."""
    site = tmp_path / folder
    (site / "kt_kernel" / "sft").mkdir(parents=True)
    (site / "kt_kernel" / "__init__.py").write_text("")
    (site / "kt_kernel" / "sft" / "convert_kt_to_sglang_adapter.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(site))
    with pytest.raises(RenderError, match=f"the converter installed in {sys.executable} .* contains"):
        render_lora_convert(adapter="/runs/a", output="/srv/lora/a", model_path="/m", python=sys.executable)
