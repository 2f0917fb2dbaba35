"""LLaMA-Factory's chat template names, so that a misspelt `--template` is refused at render time:
LLaMA-Factory itself raises "Template X does not exist." only once the run has started (data/template.py
get_template_and_fix_tokenizer), after systemd started the unit and the model began to load.

The names come from the stack's own data/template.py where it is on this machine (the kt_train role renders on
the host), else from the list recorded for the stack's pinned version (llamafactory-templates.yaml, written by
scripts/llamafactory_templates.py)."""

from __future__ import annotations

import ast
import difflib
from functools import cache
from pathlib import Path, PurePosixPath

import yaml

RECORDED = Path(__file__).resolve().parent.parent / "data" / "llamafactory-templates.yaml"
TEMPLATE_PY = PurePosixPath("llamafactory") / "data" / "template.py"


class TemplateSourceError(ValueError):
    """A data/template.py that names no template: not LLaMA-Factory's, or one this reader cannot follow."""


def registered(source: str) -> list[str]:
    """The names data/template.py registers: `register_template(name="...", ...)` calls at any depth."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "register_template"):
            continue
        given = [k.value for k in node.keywords if k.arg == "name"] or node.args[:1]
        if given and isinstance(given[0], ast.Constant) and isinstance(given[0].value, str):
            names.add(given[0].value)
    if not names:
        raise TemplateSourceError("no register_template(name=...) call found")
    return sorted(names)


@cache
def recorded() -> dict:
    """{generation: {"source": text, "names": [...]}}"""
    return yaml.safe_load(RECORDED.read_text())


def installed_template_py(generation: str, python: str, llamafactory_dir: str) -> Path | None:
    """The stack's data/template.py on this machine: the legacy stack's LLaMA-Factory checkout, or the
    current stack's package in the environment of --python (PREFIX/bin/python)."""
    if generation == "legacy":
        found = [Path(llamafactory_dir) / "src" / TEMPLATE_PY]
    else:
        prefix = Path(python).parent.parent
        found = sorted(prefix.glob(f"lib/python3*/site-packages/{TEMPLATE_PY}"))
    return next((path for path in found if path.is_file()), None)


def known(generation: str, python: str, llamafactory_dir: str) -> tuple[list[str], str]:
    """(template names, where they were read)."""
    path = installed_template_py(generation, python, llamafactory_dir)
    if path is not None:
        try:
            return registered(path.read_text(encoding="utf-8")), str(path)
        except (OSError, UnicodeDecodeError, SyntaxError, TemplateSourceError):
            pass  # unreadable here: judge by the pinned version's list
    entry = recorded()[generation]
    return entry["names"], entry["source"]


def unknown_template(name: str, generation: str, python: str, llamafactory_dir: str) -> str | None:
    """Why NAME is no template of the stack, or None when it is one."""
    names, source = known(generation, python, llamafactory_dir)
    if name in names:
        return None
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    hint = f"; close: {', '.join(close)}" if close else ""
    return (
        f"{name!r} is not a chat template of {source} ({len(names)} templates; LLaMA-Factory would stop the "
        f"run with 'Template {name} does not exist.'){hint}"
    )
