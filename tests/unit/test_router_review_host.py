"""kt_router_host given as an IPv6 literal: the role lets through what sglang-router 0.3.2 can bind and
refuses the rest before any change, run by real ansible on localhost (-c local). Probed with the real
sglang-router 0.3.2 wheel: --host [fd00:::1], [1:2:3:4:5:6:7:8:9] and [1:2:3:4:5:6:7::8] exit with "Invalid
address: invalid socket address syntax"; [1::1.2.3.4] and [::2:3:4:5:6:7:8] are parsed (and bound where the
host has them)."""

from __future__ import annotations

import ipaddress
import random
import re

import pytest
from role_play import run_play
from test_kt_router_role import _refused_before_any_change
from test_kt_router_settings import HOST_REFUSED

ROLE_TASKS = [{"ansible.builtin.include_role": {"name": "kt_router"}}]


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return "%" not in text  # a %zone: not taken (router.env, ExecStart)


def _candidates() -> set[str]:
    """Group counts 1-9, with and without '::' anywhere, an IPv4 literal (some out of range) at the end."""
    rng = random.Random(7)
    found = {"::", "::1", "1::", "fd00:::1", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7::8", "::2:3:4:5:6:7:8",
             "::ffff:10.0.0.1", "1::1.2.3.4", "::1.2.3.4", "1:2:3:4:5:6:1.2.3.4", "1::2::3", ":1", "1:",
             "fd00::gg", "::ffff:10.0.0.300", "0:0:0:0:0:0:0:0", "::0:0:0:0:0:0:0"}  # fmt: skip
    for _ in range(20000):
        groups = [format(rng.randrange(0x10000), "x")[: rng.randint(1, 4)] for _ in range(rng.randint(1, 9))]
        if rng.random() < 0.3:
            groups[-1] = ".".join(str(rng.randint(0, 300)) for _ in range(4))
        cut = rng.randint(0, len(groups))
        text = (
            ":".join(groups[:cut]) + "::" + ":".join(groups[cut:]) if rng.random() < 0.7 else ":".join(groups)
        )
        found.add(text)
    return found


def test_the_ipv6_pattern_takes_exactly_the_literals_python_takes(tmp_path):
    """Before: '^[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*$', any mix of hex digits, dots and colons."""
    out = tmp_path / "ipv6.txt"
    tasks = [
        {"ansible.builtin.include_role": {"name": "kt_router", "tasks_from": "workers", "public": True}},
        {"ansible.builtin.copy": {"content": "{{ kt_router__ipv6 }}", "dest": str(out), "mode": "0644"}},
    ]
    rc, output = run_play(tmp_path, tasks, {"kt_router_workers": ["http://10.0.0.11:30000"]})
    assert rc == 0, output[-3000:]
    pattern = re.compile(out.read_text())
    wrong = [text for text in sorted(_candidates()) if bool(pattern.match(text)) != _is_ipv6(text)]
    assert wrong == []


@pytest.mark.parametrize("host", ["fd00:::1", "[1:2:3:4:5:6:7:8:9]"])
def test_a_malformed_ipv6_bind_is_refused_before_any_change(tmp_path, host):
    fresh, extra = _refused_before_any_change(tmp_path)
    extra["kt_router_host"] = host
    rc, output = run_play(tmp_path, ROLE_TASKS, extra)
    assert rc != 0
    assert "sglang-router would not start: " + HOST_REFUSED in output, output[-3000:]
    assert not fresh.exists()


def test_an_ipv6_bind_with_an_ipv4_tail_passes_the_check(tmp_path):
    _, extra = _refused_before_any_change(tmp_path)
    extra["kt_router_host"] = "[::ffff:10.0.0.1]"
    rc, output = run_play(tmp_path, ROLE_TASKS, extra)
    assert "sglang-router would not start" not in output, output[-3000:]
    assert "Make the router's virtual environment" in output, output[-3000:]
