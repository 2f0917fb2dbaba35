"""kt_common's ktinfra_proxy filters, called directly: the one rule for proxy URLs and NO_PROXY entries and
the one environment of a task that downloads, which kt_preflight and kt_python_env both use (before, each
role wrote the regex and the environment). The roles' own runs against a real index, a recording proxy and a
self-signed mirror: test_kt_python_env_network.py, test_kt_preflight_network.py."""

from __future__ import annotations

import importlib.util
import subprocess

from role_play import ROLES

_SPEC = importlib.util.spec_from_file_location(
    "ktinfra_proxy_plugin", ROLES / "kt_common/filter_plugins/ktinfra_proxy.py"
)
plugin = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(plugin)


def test_proxies_without_a_scheme_or_host_are_named_and_empty_ones_pass():
    named = {
        "ok": "http://proxy.lab:3128",
        "with_password": "http://user:p%40ss@proxy.lab:3128/",
        "socks": "SOCKS5H://10.0.0.1:1080",
        "unset": "",
        "no_scheme": "proxy.lab:3128",
        "path": "http://proxy.lab:3128/path",
        "ftp": "ftp://proxy.lab",
        "space": "http://proxy lab:3128",
        "newline": "http://proxy.lab:3128\n",
    }
    assert plugin.ktinfra_not_proxy_urls(named) == ["no_scheme", "path", "ftp", "space", "newline"]


def test_no_proxy_entries_that_are_urls():
    entries = ["mirror.lab", ".lab.example", "10.0.0.0/8", "http://mirror.lab", "a b", "lab\t", 8080]
    assert plugin.ktinfra_not_no_proxy_hosts(entries) == ["http://mirror.lab", "a b", "lab\t"]


def test_the_environment_holds_what_is_given_in_both_spellings_and_the_bundle_under_every_name():
    settings = {
        "http_proxy": "http://p:3128",
        "https_proxy": "",
        "no_proxy": ["mirror.lab", "10.0.0.0/8"],
        "ca_bundle": "/etc/lab-ca.pem",
    }
    env = plugin.ktinfra_proxy_env(settings, ["GIT_SSL_CAINFO"])
    assert env == {
        "HTTP_PROXY": "http://p:3128",
        "http_proxy": "http://p:3128",
        "NO_PROXY": "mirror.lab,10.0.0.0/8",
        "no_proxy": "mirror.lab,10.0.0.0/8",
        **dict.fromkeys(
            ["PIP_CERT", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "GIT_SSL_CAINFO"],
            "/etc/lab-ca.pem",
        ),
    }
    unset = {"http_proxy": "", "https_proxy": "", "no_proxy": [], "ca_bundle": ""}
    assert plugin.ktinfra_proxy_env(unset) == {}


def test_the_pip_script_exports_the_environment_and_runs_pip_with_the_index_arguments(tmp_path):
    """Sourced by sh as the pip tasks run it: every value, quotes, $ and spaces included, arrives as given."""
    env = {"HTTP_PROXY": "http://lab:p'a$s s@proxy:3128", "NO_PROXY": "mirror.lab,10.0.0.0/8"}
    args = ["--index-url", "https://ci:t0k`en@mirror/simple", "--trusted-host=mirror.lab"]
    script = tmp_path / "settings.sh"
    script.write_text(plugin.ktinfra_pip_script(env, args))
    shown = 'printf "%s\\n" "$HTTP_PROXY" "$NO_PROXY" "$@"'
    run = ["sh", "-c", '. "$0" && ktinfra_pip "$@"', str(script), "sh", "-c", shown, "sh", "first arg"]
    out = subprocess.run(run, capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == [env["HTTP_PROXY"], env["NO_PROXY"], "first arg", *args]


def test_the_index_is_the_variable_else_the_hosts_own_else_the_profiles():
    profile = "https://pypi.org/simple"
    assert plugin.ktinfra_pip_index_url("https://mirror/simple", True, profile) == "https://mirror/simple"
    assert plugin.ktinfra_pip_index_url("", True, profile) == ""  # pip reads the host's configuration
    assert plugin.ktinfra_pip_index_url("", False, profile) == profile
    assert plugin.ktinfra_pip_index_url("", False, None) == ""  # pip's default


def test_the_profiles_index_is_read_from_its_text_and_anything_else_is_none():
    assert (
        plugin.ktinfra_profile_index_url("pip:\n  index_url: https://mirror/simple\n")
        == "https://mirror/simple"
    )
    for text in ["pip: {}\n", "name: x\n", "- a\n", "pip: [\n", "", None, "pip:\n  index_url: 3\n"]:
        assert plugin.ktinfra_profile_index_url(text) == "", text


def test_url_secrets_are_hidden_by_the_filter_as_by_ktinfra_profiles():
    """The roles print with ktinfra_url_secrets_hidden, ktinfra's drift messages with
    profiles.without_url_secrets: two copies of one rule (a filter plugin cannot import ktinfra on every
    controller). Both must leave out the same user:token@ and ?query, and keep everything else."""
    from ktinfra.profiles import without_url_secrets

    texts = [
        "git+https://oauth2:ghp_TOKEN@git.lab/kt/sglang.git@v0.7.2#egg=sglang",
        "kt-kernel @ https://files.lab/kt_kernel-0.7.2-cp312.whl?X-Amz-Signature=abc&t=1 is missing",
        'pip said "https://u:p@mirror.lab/simple/?key=1#frag" and http://plain.lab/simple',
        "HTTPS://User@Host/x http://a@b@c/d?e=f g",
        "no url here, user:token@host and ?query=1",
        "two: https://a:b@x.lab/p?q=1 https://c@y.lab?r#s",
        "",
    ]
    for text in texts:
        assert plugin.ktinfra_url_secrets_hidden(text) == without_url_secrets(text), text
    assert without_url_secrets(texts[0]) == "git+https://git.lab/kt/sglang.git@v0.7.2#egg=sglang"
    assert (
        without_url_secrets(texts[1]) == "kt-kernel @ https://files.lab/kt_kernel-0.7.2-cp312.whl is missing"
    )
    # a scheme is case-insensitive; a raw @ in a password: urllib (pip) takes the host after the last @
    assert without_url_secrets(texts[3]) == "HTTPS://Host/x http://c/d g"
