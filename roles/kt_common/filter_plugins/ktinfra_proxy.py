"""ktinfra_proxy: the proxy and CA settings of the tasks that download, and the rules they must meet.

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
"""

from __future__ import annotations

import re

_PROXY = re.compile(r"(?i)(https?|socks5h?)://([^\s@]+@)?[^/\s@]+/?")
_NOT_A_HOST = re.compile(r"://|\s")
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


class FilterModule:
    """Proxy and CA rules, for every role that lists kt_common in its meta dependencies."""

    def filters(self) -> dict:
        return {
            "ktinfra_not_proxy_urls": ktinfra_not_proxy_urls,
            "ktinfra_not_no_proxy_hosts": ktinfra_not_no_proxy_hosts,
            "ktinfra_proxy_env": ktinfra_proxy_env,
        }
