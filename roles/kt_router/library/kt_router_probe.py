#!/usr/bin/python
"""Ansible module: ask several workers for one path at once, each within the same timeout.

The role asked its workers (/health, /get_model_info) one after another with ansible.builtin.uri, so N
workers that did not answer held the run N x kt_router_worker_probe_timeout s. Here each URL is asked in a
thread of its own with fetch_url, as uri asks (its defaults: safe redirects, certificates checked, proxies
and .netrc used), and answers as a uri loop's results did: the URL (item), the status (-1: no answer) and
uri's message.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url

DOCUMENTATION = r"""
module: kt_router_probe
short_description: Ask several HTTP(S) workers for one path concurrently
options:
  urls:
    description: The workers' base URLs (a trailing / is dropped); each answer names its URL as item.
    type: list
    elements: str
    required: true
  path:
    description: The path asked of each, as /health.
    type: str
    required: true
  api_key:
    description: Sent as Authorization Bearer when not empty.
    type: str
    default: ""
  timeout:
    description: Seconds each request may take (connect, and each read), as uri's timeout.
    type: int
    required: true
"""

RETURN = r"""
answers:
  description: One per URL, in the order given.
  type: list
  elements: dict
  returned: always
  sample: [{item: "http://10.0.0.11:30000", status: -1,
            msg: "Status code was -1 and not [200]: Request failed: <urlopen error [Errno 111] ..."}]
"""


class _Failed(Exception):
    def __init__(self, result: dict):
        super().__init__(result.get("msg", ""))
        self.result = result


class _Asker:
    """What fetch_url reads of a module, with uri's defaults. Its fail_json (an invalid URL, a TLS error)
    raises, so that one worker's failure is its answer instead of the end of the module: uri stopped there
    with the message and status -1."""

    def __init__(self, tmpdir: str):
        self.tmpdir = tmpdir
        self.params = {"follow_redirects": "safe", "http_agent": "ansible-httpget", "validate_certs": True,
                       "use_proxy": True, "force_basic_auth": False, "use_gssapi": False}  # fmt: skip

    def fail_json(self, **result):
        raise _Failed(result)


def ask(asker: _Asker, url: str, path: str, headers: dict, timeout: int) -> dict:
    try:
        response, info = fetch_url(asker, url.rstrip("/") + path, headers=headers, timeout=timeout)
    except _Failed as failed:
        return {"item": url, "status": int(failed.result.get("status", -1)), "msg": str(failed)}
    if response is not None:
        response.close()
    status = int(info.get("status", -1))
    msg = info.get("msg", "")
    if status != 200:
        msg = f"Status code was {status} and not [200]: {msg}"
    return {"item": url, "status": status, "msg": msg}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "urls": {"type": "list", "elements": "str", "required": True},
            "path": {"type": "str", "required": True},
            "api_key": {"type": "str", "default": "", "no_log": True},
            "timeout": {"type": "int", "required": True},
        },
        supports_check_mode=False,  # as uri: --check asks nothing
    )
    urls, path, key = module.params["urls"], module.params["path"], module.params["api_key"]
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    asker = _Asker(module.tmpdir)  # made here once, not by the threads at the same time
    answers = []
    if urls:
        with ThreadPoolExecutor(max_workers=len(urls)) as pool:
            asked = [pool.submit(ask, asker, url, path, headers, module.params["timeout"]) for url in urls]
            answers = [future.result() for future in asked]
    module.exit_json(changed=False, answers=answers)


if __name__ == "__main__":
    main()
