"""kt_serve's api_key as YAML gives it: unquoted digits are an int, a variable set to nothing is null."""

from __future__ import annotations

from test_kt_serve_role import instance, run_role


def test_an_api_key_of_digits_is_the_key_those_digits_spell(tmp_path):
    """`api_key: 20251130` passes the argument spec (type str), but before, resolving the serve list failed
    with "object of type '_AnsibleTaggedInt' has no len()"."""
    entry = instance(tmp_path, "k", 30000, host="0.0.0.0", api_key=20251130)
    rc, output = run_role(tmp_path, {"kt_serve_instances": [entry]})
    assert rc == 0, output[-3000:]
    assert (tmp_path / "cfg" / "k.api-key").read_text() == "20251130"
    env = (tmp_path / "render" / "k" / "ktinfra-serve-k.env").read_text()
    assert 'KT_API_KEY="20251130"' in env and "--host 0.0.0.0 " in env


def test_a_null_api_key_is_no_key(tmp_path):
    """Before: "object of type 'NoneType' has no len()" on loopback; now no key there, and elsewhere the
    role's own message."""
    rc, output = run_role(tmp_path, {"kt_serve_instances": [instance(tmp_path, "n", 30000, api_key=None)]})
    assert rc == 0, output[-3000:]
    assert not (tmp_path / "cfg" / "n.api-key").exists()
    assert "KT_API_KEY" not in (tmp_path / "render" / "n" / "ktinfra-serve-n.env").read_text()
    public = instance(tmp_path, "p", 30001, host="10.0.0.2", api_key=None)
    rc, output = run_role(tmp_path, {"kt_serve_instances": [public]})
    assert rc != 0 and "p: binds 10.0.0.2 without api_key" in output, output[-3000:]
