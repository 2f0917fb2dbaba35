"""kt_common's ktinfra_is_loopback filter, and the two roles that ask it.

Before, kt_serve and kt_router listed loopback spellings in Jinja (127.x.y.z, localhost, ::1,
0:0:0:0:0:0:0:1): an instance bound to ::0:1 (loopback, as ktinfra's render reads it) was taken for a public
address — kt_serve refused it without a key, and kt_router sent the router's requests for it to [::0:1] on
the router's own host, where another host's server never listens.
"""

from __future__ import annotations

import sys

import pytest
from role_play import ROLES
from test_kt_router_role import _worker_urls

from ktinfra.render.serve import is_loopback

sys.path.insert(0, str(ROLES / "kt_common" / "filter_plugins"))
from ktinfra_address import FilterModule, ktinfra_is_loopback  # noqa: E402

SPELLINGS = [
    "127.0.0.1", "127.0.0.2", "127.255.255.254", "localhost", "::1", "0:0:0:0:0:0:0:1", "::0:1", "0::1",
    "0000:0000::0001", "0.0.0.0", "::", "10.0.0.7", "fd00::5", "::2", "128.0.0.1", "host.lab", "", "[::1]",
    "::ffff:127.0.0.1", "127.1", "LOCALHOST",
]  # fmt: skip


@pytest.mark.parametrize("host", SPELLINGS)
def test_the_filter_reads_loopback_as_ktinfra_render_does(host):
    assert ktinfra_is_loopback(host) is is_loopback(host)


def test_the_filter_is_registered_and_refuses_nothing():
    assert FilterModule().filters()["ktinfra_is_loopback"] is ktinfra_is_loopback
    assert [ktinfra_is_loopback(v) for v in (None, 1, ["::1"])] == [False, False, False]


def test_a_worker_on_an_unusual_loopback_spelling_is_not_routed_from_another_host(tmp_path):
    """gpu-b's instance binds ::0:1 (with a key): only gpu-b reaches it, so the router on localhost leaves it
    out; its own ::0:1 instance is reached over [::1]."""
    inventory = "[kt_serve]\nlocalhost ansible_connection=local\ngpu-b ansible_host=10.0.0.8\n"
    hostvars = {
        "localhost": [{"name": "a", "port": 30010, "host": "::0:1"}],
        "gpu-b": [{"name": "b", "port": 30011, "host": "::0:1"}, {"name": "c", "port": 30012, "host": "::"}],
    }
    assert _worker_urls(tmp_path, inventory, hostvars) == ["http://[::1]:30010", "http://10.0.0.8:30012"]


def test_kt_serve_binds_an_unusual_loopback_spelling_without_a_key(tmp_path):
    """ktinfra renders ::0:1 as loopback; before, the role refused it ('binds ::0:1 without api_key')."""
    from test_kt_serve_role import instance, run_role, serve_args

    rc, output = run_role(tmp_path, {"kt_serve_instances": [instance(tmp_path, "lo6", 30007, host="::0:1")]})
    assert rc == 0, output[-3000:]
    assert "--host ::0:1 " in serve_args(tmp_path, "lo6")
