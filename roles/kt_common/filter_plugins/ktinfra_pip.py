"""ktinfra_pip: the pip index URLs and trusted hosts pip cannot use, and ktinfra's rule for a directory.

kt_preflight and kt_python_env both take pip settings from the user and refuse bad ones before anything
changes on the host; before, each role wrote the same regexes. Each role still names its own variable:

    {{ kt_python_env__trusted_hosts | ktinfra_pip_not_hosts }}      -> ["http://mirror.lab"]
    {{ [kt_preflight_pip_index_url] | ktinfra_pip_not_indexes }}    -> ["pypi.mirror.example/simple"]
    {{ kt_preflight_tool_dir | ktinfra_absolute_dir }}              -> true / false

- an index must start with its scheme and a host (https://mirror/simple) or be file:///...: pip takes one
  without a scheme as a local path and stops with a traceback ("Can't mix absolute and relative paths");
- a trusted host is a host or host:port, never a URL: pip's --trusted-host http://mirror.lab trusts a host
  named 'http' (and http://10.0.0.5:8080/simple stops pip with "Invalid IPv6 URL");
- an absolute directory starts with /, is not / itself and has no . or .. parts (a role that removes what it
  made must not remove /, or somewhere a .. part leads).
"""

from __future__ import annotations

import re

_INDEX = re.compile(r"(https?://[^/\s]+|file:///)")
_HOST = re.compile(r"[^/\s]+")
_PART = r"(?![.][.]?(?:/|$))[^/]+"
_ABSOLUTE_DIR = re.compile(rf"/{_PART}(?:/+{_PART})*/*")


def ktinfra_pip_not_indexes(urls: list) -> list[str]:
    """The items of `urls` that are not index URLs pip can use (each as a string)."""
    return [str(url) for url in urls if not _INDEX.match(str(url))]


def ktinfra_pip_not_hosts(hosts: list) -> list[str]:
    """The items of `hosts` that are not a host or host:port for pip's --trusted-host (each as a string)."""
    return [str(host) for host in hosts if not _HOST.fullmatch(str(host))]


def ktinfra_absolute_dir(path: object) -> bool:
    """Whether `path` is a string naming an absolute directory other than /, without . or .. parts."""
    return isinstance(path, str) and _ABSOLUTE_DIR.fullmatch(path) is not None


class FilterModule:
    """pip settings' and directories' rules, for every role that lists kt_common in its meta dependencies."""

    def filters(self) -> dict:
        return {
            "ktinfra_pip_not_indexes": ktinfra_pip_not_indexes,
            "ktinfra_pip_not_hosts": ktinfra_pip_not_hosts,
            "ktinfra_absolute_dir": ktinfra_absolute_dir,
        }
