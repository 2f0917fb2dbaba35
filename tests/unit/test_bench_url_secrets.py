"""`ktinfra bench --url http://user:password@host/` (a server behind a proxy with basic auth): the credentials
go to the server, but the results do not print them. Before, --json's scenario.url and the plot's title
carried the password, while the API key of --api-key-file is never printed."""

from __future__ import annotations

import base64
import json

import pytest
from test_bench_http import DONE, USAGE, delta, sse
from typer.testing import CliRunner

from ktinfra.cli import app

SECRET = "s3cret-pw"


def _bench_with_password(server, *extra: str):
    """One request to the loopback server through a URL carrying alice's password."""
    url = server.url.replace("http://", f"http://alice:{SECRET}@")
    args = ["--users", "1", "--requests", "1", "--prompt-tokens", "4", "--gen-tokens", "7"]
    return CliRunner().invoke(app, ["bench", "--url", url, "--model", "m", *args, *extra])


def test_the_password_reaches_the_server_but_not_the_json(server):
    seen = []

    def reply(h, _body):
        seen.append(h.headers.get("Authorization"))
        sse(h, [delta("a"), delta("b"), USAGE, DONE])

    server.reply = reply
    res = _bench_with_password(server, "--json")
    assert res.exit_code == 0, res.output
    assert seen == ["Basic " + base64.b64encode(f"alice:{SECRET}".encode()).decode()]
    result = json.loads(res.stdout)
    assert result["levels"][0]["completed"] == 1
    assert result["scenario"]["url"] == server.url.replace("http://", "http://***@")
    assert SECRET not in res.output and "alice" not in res.output


def test_the_plot_title_leaves_the_password_out(server, tmp_path, monkeypatch):
    import matplotlib

    monkeypatch.setitem(matplotlib.rcParams, "svg.fonttype", "none")  # text as <text>, not as paths
    server.reply = lambda h, _body: sse(h, [delta("a"), delta("b"), USAGE, DONE])
    plot = tmp_path / "cap.svg"
    res = _bench_with_password(server, "--plot", str(plot))
    assert res.exit_code == 0, res.output
    svg = plot.read_text()
    assert f"m @ {server.url.replace('http://', 'http://***@')}" in svg
    assert SECRET not in svg and "alice" not in svg


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://127.0.0.1:30000", "http://127.0.0.1:30000"),
        ("http://u:p@h:1/api/", "http://***@h:1/api/"),
        ("https://token@[::1]:8443/", "https://***@[::1]:8443/"),
        ("http://a@b:c@h/", "http://***@h/"),  # an @ inside the password: the host is after the last one
        # a secret in the query (a health URL behind a gateway): its value only; before, shown as given
        ("http://h:1/health?api_key=s3&x=1", "http://h:1/health?api_key=***&x=1"),
        ("https://u:p@h/health?Token=a%3Db&sig=&flag", "https://***@h/health?Token=***&sig=***&flag"),
        ("http://h/health?model=qwen#frag", "http://h/health?model=qwen#frag"),
    ],
)
def test_shown_url(url, shown):
    from ktinfra.bench.client import shown_url

    assert shown_url(url) == shown


def test_url_credentials_beside_an_api_key_are_refused_before_any_request(server, tmp_path):
    """requests sends the URL's user:password as basic auth in place of the Bearer key: the key would never
    reach the server. Before, the run went on and every request carried Basic alice:..."""
    seen = []
    server.reply = lambda h, _body: (seen.append(h.headers.get("Authorization")), sse(h, [USAGE, DONE]))
    key = tmp_path / "key"
    key.write_text("sk-test\n")
    key.chmod(0o600)
    res = _bench_with_password(server, "--api-key-file", str(key))
    assert res.exit_code == 1, res.output
    assert "url carries credentials (user:password@) and an API key is given" in res.output
    assert SECRET not in res.output and seen == []
