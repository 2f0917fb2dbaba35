"""Shared pieces of the renderers: errors, value checks, templates, the rendered-file bundle."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from ktinfra import __version__

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates"

# systemd splits an unbraced $VAR at whitespace and does not re-parse quotes, so every value that travels
# inside an EnvironmentFile argument list must be one word that survives double quoting unchanged.
_UNSAFE_WORD = re.compile(r"[\s\x00-\x1f\"'\\$`]")
# instance names become file names and the %i of a template unit: keep them plain.
_INSTANCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class RenderError(ValueError):
    """Bad input for a renderer; raised before anything is written."""


@dataclass
class Rendered:
    """What one render produced: file name -> (content, mode), plus facts for the caller."""

    files: dict[str, tuple[str, int]] = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    def add(self, name: str, content: str, mode: int = 0o644) -> None:
        self.files[name] = (content, mode)


def check_word(what: str, value: object) -> str:
    text = str(value)
    if not text:
        raise RenderError(f"{what} must not be empty")
    bad = _UNSAFE_WORD.search(text)
    if bad:
        raise RenderError(
            f"{what} {text!r} contains {bad.group()!r}: systemd passes it as one unquoted word, "
            "so whitespace, quotes, backslashes, '$' and backticks are not allowed"
        )
    return text


def check_secret(what: str, value: str) -> str:
    """check_word for a secret: the error says which kind of character is refused, never the value."""
    if not value:
        raise RenderError(f"{what} must not be empty")
    bad = _UNSAFE_WORD.search(value)
    if bad:
        control = bad.group() <= " "
        kind = "whitespace or a control character" if control else "a quote, backslash, '$' or backtick"
        raise RenderError(
            f"{what} contains {kind}: systemd passes it as one unquoted word, so whitespace, quotes, "
            "backslashes, '$' and backticks are not allowed (the key is not shown)"
        )
    return value


def read_api_key_file(path: Path | None) -> str | None:
    """The API key in `path` (surrounding whitespace dropped), or None without a path."""
    if path is None:
        return None
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise RenderError(f"cannot read --api-key-file {path}: {reason}") from exc
    if not secret:
        raise RenderError(f"--api-key-file {path} is empty")
    return check_secret(f"the key in --api-key-file {path}", secret)


def check_abs_path(what: str, value: str | None) -> str:
    if not value:
        raise RenderError(f"{what} is required")
    check_word(what, value)
    if not value.startswith("/"):
        raise RenderError(f"{what} must be an absolute path, got {value!r}")
    return value


def check_instance_name(what: str, value: str | None) -> str:
    if not value or not _INSTANCE_NAME.match(value):
        raise RenderError(
            f"{what} {value!r} must be 1-64 characters of letters, digits, '.', '_' or '-' "
            "(it names the systemd instance and its files)"
        )
    return value


def check_env_name(name: str) -> str:
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", str(name)):
        raise RenderError(f"{name!r} is not a valid environment variable name")
    return name


def env_line(key: str, value: str) -> str:
    """One EnvironmentFile assignment; values are already checked to hold no quotes or '$'."""
    if '"' in value or "\\" in value or "$" in value or "\n" in value:
        raise RenderError(f"value of {key} contains a quote, backslash, '$' or newline")
    return f'{key}="{value}"'


def gpu_visibility(indices: object, where: str) -> dict[str, str]:
    """CUDA_DEVICE_ORDER + CUDA_VISIBLE_DEVICES for a plan's gpu_indices (None: no such key, nothing to set),
    numbered as nvidia-smi and the facts number them: CUDA's own order is fastest-first."""
    if indices is None:
        return {}
    if (
        not isinstance(indices, list)
        or not indices
        or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in indices)
    ):
        raise RenderError(f"plan {where} must be a list of GPU indices, not {indices!r}")
    return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(map(str, indices))}


def render_template(name: str, **context: object) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    return env.get_template(name).render(version=__version__, **context)
