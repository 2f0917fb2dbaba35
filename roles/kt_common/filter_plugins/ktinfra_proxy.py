"""ktinfra_proxy: the proxy, CA and index settings of the tasks that download, and the rules they must meet.

kt_preflight (ktinfra's own dependencies) and kt_python_env (the envs) take the same four settings and each
wrote the same regex and the same environment; each role still names its own variables:

    {{ {'kt_python_env_http_proxy': kt_python_env_http_proxy, ...} | ktinfra_not_proxy_urls }}
    {{ kt_python_env__no_proxy | ktinfra_not_no_proxy_hosts }}
    {{ {'http_proxy': ..., 'https_proxy': ..., 'no_proxy': [...], 'ca_bundle': ...}
       | ktinfra_proxy_env(['GIT_SSL_CAINFO']) }}

- a proxy is a URL with its scheme (http, https, socks5, socks5h) and a host, maybe user:password@, and no
  white space (a newline from a vault file too);
- NO_PROXY holds hosts, .domains and CIDRs: a URL there matches no host, so the mirror was asked through the
  proxy;
- requests (pip, conda) lets REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE win over pip's own --cert, so a host that
  sets them (Debian's) ignored PIP_CERT alone: the bundle goes in under every name read.

The pip downloads read that environment and their index arguments from a file of the run (0600, removed
after), not from the task: a task's environment is printed in Ansible's -vvv connection lines and its argv in
the result, and a proxy or index URL may hold a password. pip's own --proxy (or proxy= of a pip config
file) would not do: it makes pip ignore NO_PROXY and REQUESTS_CA_BUNDLE, and PIP_CONFIG_FILE hides the
user's pip.conf.

    {{ kt_python_env__network_env | ktinfra_pip_script(kt_python_env_index_args) }}    -> the file's text
    argv: [sh, -c, '. "$0" && ktinfra_pip "$@"', FILE, pip, wheel, ...]
    argv: [sh, -c, '. "$0" && exec "$@"', FILE, conda, create, ...]    -> the environment only, no index

The index the downloads pass, one decision for both roles (kt_python_env, kt_preflight):

    {{ kt_python_env_pip_index_url | ktinfra_pip_index_url(host_names_an_index, profile_index_url) }}
"""

from __future__ import annotations

import re
import shlex

import yaml

_PROXY = re.compile(r"(?i)(https?|socks5h?)://([^\s@]+@)?[^/\s@]+/?")
_NOT_A_HOST = re.compile(r"://|\s")
_URL_USERINFO = re.compile(r"(?i)(https?://)[^/\"\s?#]*@")
_URL_QUERY = re.compile(r"(?i)(https?://[^\"\s?#]*)[?][^\"\s#]*")
CA_NAMES = ("PIP_CERT", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE")


def ktinfra_not_proxy_urls(named: dict) -> list[str]:
    """The names of `named` (variable name -> value) whose value is set and is no proxy URL."""
    return [name for name, value in named.items() if value and not _PROXY.fullmatch(str(value))]


def ktinfra_not_no_proxy_hosts(entries: list) -> list[str]:
    """The NO_PROXY entries that are URLs or hold white space (each as a string)."""
    return [str(entry) for entry in entries if _NOT_A_HOST.search(str(entry))]


def ktinfra_proxy_env(settings: dict, more_ca_names: list | tuple = ()) -> dict[str, str]:
    """The environment of a task that downloads: the proxies (both spellings), NO_PROXY joined by commas and
    the CA bundle under CA_NAMES plus `more_ca_names`; nothing for a setting left empty."""
    env: dict[str, str] = {}
    for key in ("http_proxy", "https_proxy"):
        if settings.get(key):
            env |= {key.upper(): settings[key], key: settings[key]}
    if settings.get("no_proxy"):
        joined = ",".join(str(entry) for entry in settings["no_proxy"])
        env |= {"NO_PROXY": joined, "no_proxy": joined}
    if settings.get("ca_bundle"):
        env |= dict.fromkeys((*CA_NAMES, *more_ca_names), settings["ca_bundle"])
    return env


def ktinfra_pip_script(env: dict, pip_args: list | tuple = ()) -> str:
    """A POSIX sh file that exports `env` and defines ktinfra_pip, which runs its arguments (a pip command)
    with `pip_args` after them; sourced by `sh -c '. "$0" && ktinfra_pip "$@"' FILE pip ...`."""
    lines = [f"export {name}={shlex.quote(str(value))}" for name, value in env.items()]
    args = "".join(f" {shlex.quote(str(arg))}" for arg in pip_args)
    return "\n".join([*lines, f'ktinfra_pip() {{ exec "$@"{args}; }}', ""])


def ktinfra_pip_index_url(chosen: str, host_names_one: bool, profile_index: str | None) -> str:
    """The --index-url of the downloads: `chosen` (the role's variable) when set; else none where the host's
    own pip configuration names an index (PIP_INDEX_URL, a pip.conf: pip reads it, a lab's mirror is kept);
    else the profile's index_url; '' for none (pip's default)."""
    if chosen:
        return str(chosen)
    return "" if host_names_one else str(profile_index or "")


def ktinfra_profile_index_url(text: object) -> str:
    """The pip.index_url of a profile's YAML `text`; '' where it has none or is no profile (ktinfra's profile
    check says what is wrong with it, later)."""
    try:
        data = yaml.safe_load(text) if isinstance(text, str) else None
    except yaml.YAMLError:
        return ""
    pip = data.get("pip") if isinstance(data, dict) else None
    index = pip.get("index_url") if isinstance(pip, dict) else None
    return index if isinstance(index, str) else ""


def ktinfra_url_secrets_hidden(text: str) -> str:
    """`text` with every http(s) URL's user:token@ and ?query left out (a wheel URL may carry a token)."""
    return _URL_QUERY.sub(r"\1", _URL_USERINFO.sub(r"\1", str(text)))


class FilterModule:
    """Proxy, CA and index rules, for every role that lists kt_common in its meta dependencies."""

    def filters(self) -> dict:
        return {
            "ktinfra_not_proxy_urls": ktinfra_not_proxy_urls,
            "ktinfra_not_no_proxy_hosts": ktinfra_not_no_proxy_hosts,
            "ktinfra_proxy_env": ktinfra_proxy_env,
            "ktinfra_pip_script": ktinfra_pip_script,
            "ktinfra_pip_index_url": ktinfra_pip_index_url,
            "ktinfra_profile_index_url": ktinfra_profile_index_url,
            "ktinfra_url_secrets_hidden": ktinfra_url_secrets_hidden,
        }
