"""Shared pieces of the renderers: errors, value checks, templates, the rendered-file bundle."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from ktinfra import __version__
from ktinfra.facts.gpus import MIG_UUID
from ktinfra.profiles import UnknownProfileError, checkout_dir
from ktinfra.shown import json_shown

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates"

# systemd splits an unbraced $VAR at whitespace and does not re-parse quotes, so every value that travels
# inside an EnvironmentFile argument list must be one word that survives double quoting unchanged.
# '%' is allowed: values written into a unit file go through unit_literal, EnvironmentFiles take it as is.
_UNSAFE_WORD = re.compile(r"[\s\x00-\x1f\"'\\$`]")
# instance names become file names and the %i of a template unit: keep them plain.
INSTANCE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # fullmatch: '$' would allow a final \n
# User=: a POSIX-ish user name (systemd's relaxed check also takes '.'), or a numeric uid.
_USER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")
MAX_UID = 4294967294  # (uid_t) -1 means "no uid"
NO_UID = 65535  # (uint16_t) -1, refused by systemd like -1


class RenderError(ValueError):
    """Bad input for a renderer; raised before anything is written."""


@dataclass
class Rendered:
    """What one render produced: file name -> (content, mode), plus facts for the caller."""

    files: dict[str, tuple[str, int]] = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    def add(self, name: str, content: str, mode: int = 0o644) -> None:
        self.files[name] = (content, mode)


def _check_utf8(what: str, text: str) -> None:
    """Refuse text that cannot be written as UTF-8 (undecodable bytes from argv arrive as lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RenderError(f"{what} {text!r} is not valid UTF-8 text") from exc


def check_word(what: str, value: object) -> str:
    text = str(value)
    if not text:
        raise RenderError(f"{what} must not be empty")
    _check_utf8(what, text)
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
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise RenderError(f"{what} is not valid UTF-8 text (the key is not shown)") from None
    bad = _UNSAFE_WORD.search(value)
    if bad:
        control = bad.group().isspace() or bad.group() < " "  # U+00A0 and other Unicode spaces too
        kind = "whitespace or a control character" if control else "a quote, backslash, '$' or backtick"
        raise RenderError(
            f"{what} contains {kind}: systemd passes it as one unquoted word, so whitespace, quotes, "
            "backslashes, '$' and backticks are not allowed (the key is not shown)"
        )
    if not value.isascii():
        raise RenderError(
            f"{what} contains a character outside ASCII: HTTP clients send the key in the Authorization "
            "header, which they encode as Latin-1 or ASCII (the key is not shown)"
        )
    return value


MAX_KEY_BYTES = 4096


def read_api_key_file(path: Path | None) -> str | None:
    """The API key in `path` (surrounding whitespace dropped), or None without a path."""
    if path is None:
        return None
    try:
        with path.open("rb") as handle:  # a bounded read: --api-key-file /dev/zero would never end
            raw = handle.read(MAX_KEY_BYTES + 1)
        if len(raw) > MAX_KEY_BYTES:
            raise RenderError(f"--api-key-file {path} is longer than {MAX_KEY_BYTES} bytes: not a key file")
        secret = raw.decode("utf-8").strip()
    except UnicodeDecodeError:  # its message quotes the byte: part of the key
        raise RenderError(f"--api-key-file {path} is not UTF-8 text (the key is not shown)") from None
    except OSError as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise RenderError(f"cannot read --api-key-file {path}: {reason}") from exc
    if not secret:
        raise RenderError(f"--api-key-file {path} is empty")
    return check_secret(f"the key in --api-key-file {path}", secret)


def refuse_empty(option: str, value: object, instead: str) -> None:
    """An option given as "" (or blanks): callers read it as not given, so say so rather than fall back."""
    if value is not None and not str(value).strip():
        raise RenderError(f"{option} is empty (leave it out to {instead})")


def check_abs_path(what: str, value: str | None) -> str:
    if not value:
        raise RenderError(f"{what} is required")
    if not isinstance(value, str):
        raise RenderError(f"{what} must be an absolute path, got {value!r}")
    check_word(what, value)
    if not value.startswith("/"):
        raise RenderError(f"{what} must be an absolute path, got {value!r}")
    return value


def check_program(what: str, value: str | None) -> str:
    """check_abs_path for a file the unit runs or a job executes: a path ending in '/' (or '/.', '/..') names
    a directory. systemd refuses such an Exec*= program outright ("Executable path specifies a directory":
    the unit does not load), and as an argument (a script, a finishing command) it fails only when run."""
    path = check_abs_path(what, value)
    if path.rsplit("/", 1)[1] in ("", ".", ".."):
        raise RenderError(f"{what} {path!r} ends in '/', '.' or '..': it names a directory, not a program")
    return path


def check_env_dir(value: str | None) -> str:
    """--env-dir: where the instance's EnvironmentFile (and a run's recipe) is installed on the target; the
    unit template names it in EnvironmentFile=, so it is written into the unit. Normalized ('..', '//',
    a trailing '/'); the root itself is refused."""
    path = posixpath.normpath("/" + check_abs_path("--env-dir", value).lstrip("/"))
    if path == "/":
        raise RenderError("--env-dir must be a directory below /, not / itself")
    return path


def legacy_checkout(repository: str, src_dir: str, instead: str) -> str:
    """Where kt_python_env checks out the legacy profile's git source of REPOSITORY under --src-dir."""
    try:
        return checkout_dir(repository, check_abs_path("--src-dir", src_dir))
    except UnknownProfileError as exc:
        raise RenderError(f"{exc}: pass {instead}") from exc


def check_apart(output_opt: str, output: str, source_opt: str, source: str, why: str) -> None:
    """The output directory neither is nor nests with the source one (either way: `/` holds every path),
    both absolute; compared normalized ('..', '//', trailing '/'). `why`: why the two must differ."""

    def norm(path: str) -> str:  # normpath keeps a leading "//"; Linux reads it as "/"
        return posixpath.normpath("/" + path.lstrip("/"))

    out, src = norm(output), norm(source)
    if out == src:
        raise RenderError(f"{output_opt} must differ from {source_opt} ({why})")
    if out.startswith(src.rstrip("/") + "/") or src.startswith(out.rstrip("/") + "/"):
        raise RenderError(f"{output_opt} {out} and {source_opt} {src} must not lie inside one another")


def unit_literal(value: str) -> str:
    """A value for a unit file setting, taken literally: systemd expands %-specifiers (%i, %n, %h, ...) in
    ExecStart=, User=, WorkingDirectory=, Description= and most other settings, and reads '%%' as '%'.
    EnvironmentFile contents are not expanded, so values that travel there are written as they are."""
    return value.replace("%", "%%")


def check_user(value: str | None) -> str | None:
    """--user for the unit's User= (None: no User=, the job runs as root): a user name or a numeric uid."""
    if value is None:
        return None
    if isinstance(value, str) and value.isascii() and value.isdigit():
        if len(value) > 1 and value.startswith("0"):
            raise RenderError(f"--user {value}: write a numeric uid without leading zeros")
        if len(value) > len(str(MAX_UID)) or int(value) > MAX_UID or int(value) == NO_UID:
            raise RenderError(
                f"--user {value}: a numeric uid must be 0-{MAX_UID} and not {NO_UID} (systemd refuses it)"
            )
        return value
    if not isinstance(value, str) or not _USER_NAME.fullmatch(value):
        raise RenderError(
            f"--user {value!r} is not a user name (1-32 letters, digits, '_', '.' or '-', not starting with "
            f"a digit, '.' or '-') or a numeric uid 0-{MAX_UID}"
        )
    return value


def check_instance_name(what: str, value: str | None) -> str:
    if not isinstance(value, str) or not INSTANCE_NAME.fullmatch(value):
        raise RenderError(
            f"{what} {value!r} must be 1-64 characters of letters, digits, '.', '_' or '-', starting with a "
            "letter or digit (it names the systemd instance and its files)"
        )
    return value


def check_env_name(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(name)):
        raise RenderError(f"{name!r} is not a valid environment variable name")
    return name


def env_line(key: str, value: str) -> str:
    """One EnvironmentFile assignment; values are already checked to hold no quotes or '$'."""
    if '"' in value or "\\" in value or "$" in value or "\n" in value:
        raise RenderError(f"value of {key} contains a quote, backslash, '$' or newline")
    return f'{key}="{value}"'


def gpu_visibility(
    indices: object, where: str, mig_uuids: object = None, mig_where: str = ""
) -> dict[str, str]:
    """CUDA_DEVICE_ORDER + CUDA_VISIBLE_DEVICES for a plan's gpu_indices (None: no such key, nothing to set),
    numbered as nvidia-smi and the facts number them: CUDA's own order is fastest-first.

    `mig_uuids` (the plan's key `mig_where`; None: none) names the MIG instance planned on each of those
    GPUs: CUDA_VISIBLE_DEVICES then lists the instances, since on a MIG-enabled GPU the index does not choose
    the instance a process gets."""
    if indices is None:
        if mig_uuids is not None:
            raise RenderError(
                f"plan {mig_where} needs {where}: it names the MIG instance of each GPU listed there"
            )
        return {}
    if (
        not isinstance(indices, list)
        or not indices
        or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in indices)
    ):
        raise RenderError(f"plan {where} must be a list of GPU indices, not {indices!r}")
    if len(set(indices)) != len(indices):
        twice = sorted({i for i in indices if indices.count(i) > 1})
        raise RenderError(f"plan {where} {indices!r} lists GPU {', '.join(map(str, twice))} more than once")
    visible = ",".join(map(str, indices))
    if mig_uuids is not None:
        visible = ",".join(_mig_devices(mig_uuids, mig_where, indices, where))
    return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": visible}


def _mig_devices(uuids: object, where: str, indices: list[int], indices_where: str) -> list[str]:
    """A plan's mig_uuids, checked: MIG device UUIDs as `nvidia-smi -L` prints them, one for one GPU."""
    form = "MIG-<uuid>, or MIG-GPU-<uuid>/<gi>/<ci> before R470, as `nvidia-smi -L` prints them"
    if not isinstance(uuids, list) or not uuids:
        raise RenderError(
            f"plan {where} must be a list of MIG device UUIDs ({form}), not {json_shown(uuids)}"
        )
    for n, uuid in enumerate(uuids):
        if not isinstance(uuid, str) or MIG_UUID.fullmatch(uuid) is None:
            raise RenderError(
                f"plan {where}[{n}] {json_shown(uuid, 80)} is not a MIG device UUID ({form}: hex digits and "
                "dashes, no quotes, commas or spaces); CUDA_VISIBLE_DEVICES would not select the instance"
            )
    if len(uuids) != len(indices):
        raise RenderError(
            f"plan {where} lists {len(uuids)} MIG device(s) for the {len(indices)} GPU(s) of {indices_where} "
            f"{indices!r}: one instance per listed GPU"
        )
    if len(uuids) > 1:
        raise RenderError(
            f"plan {where} lists {len(uuids)} MIG devices: a process sees one MIG instance, so no ranks span "
            "instances (`ktinfra plan` puts a run on one)"
        )
    return uuids


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
