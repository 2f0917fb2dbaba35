"""ktinfra_list: a list variable that may also come as a comma-separated string (`-e name=a,b`).

`-e kt_router_workers=URL,URL` gives the string "URL,URL". A role's argument spec passes it (it validates a
copy split on commas), but the role itself then took the string letter by letter. This filter is the one
place that turns such a string into the list it stands for:

    {{ kt_router_workers | ktinfra_list('kt_router_workers') }}

- a string is split on commas, each item trimmed, empty items dropped ("a, b,," -> ["a", "b"]; "" -> []);
- a list is returned unchanged;
- anything else (a mapping, a number, a boolean, null) fails, naming the variable when it is given.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError


def _kind(value: object) -> str:
    """What the value is, in words (Ansible 2.19 hands tagged subclasses whose class names mean nothing)."""
    if value is None:
        return "null (no value)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, Mapping):
        return "a mapping"
    return f"a {type(value).__name__}"


def ktinfra_list(value: object, name: str = "") -> list:
    """`value` as a list: a string split on commas (trimmed, empty items dropped); a list as it is."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    if isinstance(value, list):
        return value
    shown = "" if value is None else f": {value!r}"
    if len(shown) > 200:
        shown = shown[:200] + "..."
    raise AnsibleFilterError(
        f"{name or 'the value'} must be a list or a comma-separated string, not {_kind(value)}{shown}"
    )


class FilterModule:
    """ktinfra's filters, for every role that lists kt_common in its meta dependencies."""

    def filters(self) -> dict:
        return {"ktinfra_list": ktinfra_list}
