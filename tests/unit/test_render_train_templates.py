"""render train refuses a chat template the stack's LLaMA-Factory does not have. LLaMA-Factory raises
"Template X does not exist." (data/template.py get_template_and_fix_tokenizer) only once the unit has started
and the tokenizer loaded; before, a misspelt --template rendered, installed and started a run that failed.

The names: the stack's own data/template.py where it is on this machine, else the record of the pinned
versions (ktinfra/data/llamafactory-templates.yaml: llamafactory-kt 0.9.6.dev0 for the current stack,
LLaMA-Factory 000526908ae9 for the legacy one)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from test_render_support import load_fixture_plan

from ktinfra.render import RenderError
from ktinfra.render import chat_templates as ct
from ktinfra.render.train import TEMPLATES, render_train

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "llamafactory_templates.py"
CATALOG = ROOT / "ktinfra" / "data" / "models.yaml"
CURRENT = "h100-qwen3-30b-a3b-sft-current.json"
LEGACY = "seed002-qwen3-30b-a3b-sft-legacy.json"
WHEEL = "llamafactory_kt-0.9.6.dev0-py3-none-any.whl"
WHEELHOUSE = Path("/var/cache/ktinfra/wheelhouse")


def _render(plan: str | dict, tmp_path: Path, **overrides):
    """PLAN: a fixture plan's name, or the plan."""
    args = {"name": "r", "model_path": "/m", "dataset": "d", "dataset_dir": "/d", "output_dir": "/o"}
    # an environment and a checkout that are not on this machine: the recorded names judge
    args |= {"python": str(tmp_path / "absent" / "bin" / "python"), "llamafactory_dir": str(tmp_path / "lf")}
    plan = load_fixture_plan(plan) if isinstance(plan, str) else plan
    return render_train(plan, **{**args, **overrides})


def _template_py(path: Path, *names: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    calls = "".join(f'register_template(\n    name="{name}",\n    format_user=None,\n)\n' for name in names)
    path.write_text(f"def register_template(name, **kwargs):\n    pass\n\n\n{calls}")
    return path


@pytest.mark.parametrize(
    ("plan_name", "name", "close"),
    [
        (CURRENT, "qwen3-moe", "close: qwen3"),  # the model_type spelling
        (CURRENT, "deepseekv3", "close: deepseek3"),
        (LEGACY, "qwen3_5", "close: qwen3, qwen"),  # a current-stack template, newer than the legacy pin
        (LEGACY, "Qwen3_nothink", "close: qwen3_nothink"),
    ],
)
def test_a_template_the_stack_lacks_is_refused_with_close_names(tmp_path, plan_name, name, close):
    with pytest.raises(RenderError, match=f"--template {name!r} is not a chat template of ") as refused:
        _render(plan_name, tmp_path, template=name)
    assert close in str(refused.value) and f"Template {name} does not exist." in str(refused.value)
    source = "llamafactory-kt 0.9.6.dev0" if plan_name == CURRENT else "LLaMA-Factory 000526908ae9"
    assert source in str(refused.value)


def test_each_generation_takes_its_own_names(tmp_path):
    assert _render(CURRENT, tmp_path, template="qwen3_5")  # llamafactory-kt only
    assert _render(LEGACY, tmp_path, template="baichuan2")  # dropped after 0.9.4
    with pytest.raises(RenderError, match="'baichuan2' is not a chat template of llamafactory-kt"):
        _render(CURRENT, tmp_path, template="baichuan2")


def test_a_plans_template_is_checked_too(tmp_path):
    plan = load_fixture_plan(CURRENT)
    plan["sft"]["template"] = "qwen_3"
    with pytest.raises(RenderError, match="plan sft.template 'qwen_3' is not a chat template"):
        _render(plan, tmp_path)


def test_every_template_ktinfra_picks_is_one_of_its_stack():
    """The architecture defaults of each stack, and the catalog's (plan sft.template), on both stacks."""
    catalog = {m["template"] for m in yaml.safe_load(CATALOG.read_text())["models"] if m.get("template")}
    assert catalog
    for generation, picks in TEMPLATES.items():
        names = set(ct.recorded()[generation]["names"])
        assert set(picks.values()) <= names, generation
        assert catalog <= names, generation


def test_the_installed_template_py_is_read_before_the_record(tmp_path):
    env = tmp_path / "env"
    installed = _template_py(env / "lib" / "python3.12" / "site-packages" / ct.TEMPLATE_PY, "house_chat")
    python = str(env / "bin" / "python")
    assert _render(CURRENT, tmp_path, template="house_chat", python=python)
    with pytest.raises(RenderError, match=f"'qwen3' is not a chat template of {installed} \\(1 templates"):
        _render(CURRENT, tmp_path, template="qwen3", python=python)
    checkout = tmp_path / "LLaMA-Factory"
    rules = checkout / "examples" / "kt_optimize_rules"
    rules.mkdir(parents=True)
    (rules / "Qwen3Moe-sft-amx.yaml").write_text("- match: {}\n")
    _template_py(checkout / "src" / ct.TEMPLATE_PY, "qwen3_nothink", "lab")
    assert _render(LEGACY, tmp_path, template="lab", llamafactory_dir=str(checkout))
    with pytest.raises(RenderError, match="'baichuan2' is not a chat template of .*LLaMA-Factory/src"):
        _render(LEGACY, tmp_path, template="baichuan2", llamafactory_dir=str(checkout))


def test_an_unreadable_template_py_falls_back_to_the_record(tmp_path):
    env = tmp_path / "env"
    broken = env / "lib" / "python3.12" / "site-packages" / ct.TEMPLATE_PY
    broken.parent.mkdir(parents=True)
    for text in ("TEMPLATES = {}\n", "def (:\n"):  # no register_template call; not Python
        broken.write_text(text)
        names, source = ct.known("current", str(env / "bin" / "python"), str(tmp_path))
        assert source == "llamafactory-kt 0.9.6.dev0" and "qwen3" in names


def _wheel(tmp_path: Path) -> Path:
    if (WHEELHOUSE / WHEEL).is_file():
        return WHEELHOUSE / WHEEL
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(tmp_path)]
    subprocess.run([*pip, "llamafactory-kt==0.9.6.dev0"], check=True)
    return tmp_path / WHEEL


def test_the_current_record_is_the_wheels_list(tmp_path):
    """The record is what the script reads from the llamafactory-kt wheel that ktransformers[sft]==0.7.2
    installs; --check fails on a template.py with other names and writes nothing."""
    wheel = _wheel(tmp_path)
    with zipfile.ZipFile(wheel) as opened:
        names = ct.registered(opened.read(str(ct.TEMPLATE_PY)).decode())
    assert names == ct.recorded()["current"]["names"] and len(names) > 100
    run = [sys.executable, str(SCRIPT), "current"]
    assert subprocess.run([*run, str(wheel), "--check"], capture_output=True).returncode == 0
    before = ct.RECORDED.read_bytes()
    other = _template_py(tmp_path / "template.py", "qwen3", "lab")
    out = subprocess.run([*run, str(other), "--check"], capture_output=True, text=True)
    assert out.returncode == 1 and "not recorded ['lab']" in out.stdout
    assert ct.RECORDED.read_bytes() == before


def test_the_script_writes_a_record_the_renderer_reads(tmp_path, monkeypatch):
    record = tmp_path / "record.yaml"
    shutil.copy(ct.RECORDED, record)
    monkeypatch.setattr(ct, "RECORDED", record)
    ct.recorded.cache_clear()
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import llamafactory_templates

        monkeypatch.setattr(llamafactory_templates, "RECORDED", record)
        other = _template_py(tmp_path / "template.py", "lab", "qwen3_nothink")
        assert llamafactory_templates.main(["legacy", str(other)]) == 0
        ct.recorded.cache_clear()
        assert ct.recorded()["legacy"] == {"source": "LLaMA-Factory 000526908ae9 (0.9.4.dev0)",
                                           "names": ["lab", "qwen3_nothink"]}  # fmt: skip
        assert ct.recorded()["current"]["source"] == "llamafactory-kt 0.9.6.dev0"
    finally:
        sys.path.remove(str(SCRIPT.parent))
        ct.recorded.cache_clear()
