"""ktinfra_is_loopback: whether a bind address is loopback, as ktinfra's render (is_loopback) reads it.

    {{ kt_router__bind | ktinfra_is_loopback }}

True for the name localhost and every IP literal Python's ipaddress counts as loopback: all of 127.0.0.0/8
and ::1 however it is spelled (0:0:0:0:0:0:0:1, ::0:1, 0::1). A list of spellings in Jinja missed some, so
an instance ktinfra rendered as loopback was taken by the roles for a public address (and the reverse).
Anything else (a name, a wildcard, a public literal, null) is not loopback.
"""

from __future__ import annotations

import ipaddress

LOOPBACK_NAMES = frozenset({"localhost"})


def ktinfra_is_loopback(host: object) -> bool:
    if not isinstance(host, str):
        return False
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class FilterModule:
    def filters(self):
        return {"ktinfra_is_loopback": ktinfra_is_loopback}
