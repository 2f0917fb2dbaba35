#!/usr/bin/python
"""Ansible module: stage a run's sft plan (0600) and return it with its launcher env's secrets hidden.

The plan's sft.launcher.env becomes the run's 0600 env file, so it may hold a token (HF_TOKEN,
WANDB_API_KEY) or a proxy with a password. A plan read into a fact reached -v/-vvv output and every
callback (ansible-runner's job_events) whole. This module writes the plan as given into the scratch file
`ktinfra render train --plan` reads, and returns only a copy for the play: each env value shown where its name
is one of the runtime knobs below (or a proxy URL, without its user and password), "(hidden)" otherwise.
"""

from __future__ import annotations

import json
import os
import re

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: kt_train_plan
short_description: Stage an sft plan and return it with its launcher env's secret values hidden
options:
  path:
    description: A plan file on the host (a run's plan_file). One of path and text.
    type: path
  text:
    description: The plan as JSON text (`ktinfra plan --json` output). One of path and text.
    type: str
  dest:
    description: Where the plan is written as given (0600), for `ktinfra render train --plan`.
    type: path
    required: true
"""

RETURN = r"""
plan:
  description: The plan, each sft.launcher.env value not shown replaced by "(hidden)".
  type: dict
  returned: success
"""

HIDDEN = "(hidden)"
# Names whose values are runtime knobs (ktinfra's own, the GPU and thread runtimes', W&B's non-secret
# settings), unless the name also says it holds a secret.
_SHOWN = re.compile(
    r"(USE_KT|KT_[A-Z0-9_]+|ACCELERATE_[A-Z0-9_]+|CUDA_[A-Z0-9_]+|NCCL_[A-Z0-9_]+|OMP_[A-Z0-9_]+|MKL_[A-Z0-9_]+"
    r"|KMP_[A-Z0-9_]+|PYTORCH_[A-Z0-9_]+|TORCH_[A-Z0-9_]+|TOKENIZERS_PARALLELISM|HF_HUB_OFFLINE"
    r"|HF_DATASETS_OFFLINE|TRANSFORMERS_OFFLINE|WANDB_(PROJECT|ENTITY|MODE|NAME|DIR|RUN_GROUP|DISABLED))"
)
_SECRET_WORD = re.compile(r"TOKEN|KEY|SECRET|PASS|AUTH|CRED|COOKIE|SESSION")
_PROXY = re.compile(r"(https?|ftp|all)_proxy", re.IGNORECASE)


def _userinfo(text: str) -> str:
    """The user (and password) of a URL, scheme or not: what comes before its last '@'; '' for none."""
    rest = text.split("://", 1)[1] if "://" in text else text
    return rest.rsplit("@", 1)[0] if "@" in rest else ""


def _shown_value(name: str, value: object) -> str:
    text = str(value)
    if (_SHOWN.fullmatch(name) and not _SECRET_WORD.search(name)) or name.lower() == "no_proxy":
        return text
    if _PROXY.fullmatch(name):  # the proxy's host stays visible, not who logs in to it
        who = _userinfo(text)
        return text.replace(who + "@", HIDDEN + "@", 1) if who else text
    return HIDDEN


def _replace(value: object, secrets: list[str]) -> object:
    """`value` with every secret string in it replaced (a secret repeated elsewhere in the plan)."""
    if isinstance(value, dict):
        return {key: _replace(item, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [_replace(item, secrets) for item in value]
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, HIDDEN)
    return value


def shown(plan: dict) -> dict:
    """The plan with each launcher env value hidden that _shown_value does not show, wherever it is."""
    sft = plan.get("sft")
    launcher = sft.get("launcher") if isinstance(sft, dict) else None
    env = launcher.get("env") if isinstance(launcher, dict) else None
    if not isinstance(env, dict) or not env:
        return plan
    values = {name: _shown_value(str(name), value) for name, value in env.items()}
    secrets = {str(env[name]) for name, value in values.items() if value == HIDDEN}
    for name, value in env.items():
        if _PROXY.fullmatch(str(name)) and (who := _userinfo(str(value))):
            secrets |= {who, who.partition(":")[2]}
    # one too short to be a secret ("1", "true") would hide every such part of the plan; longest first
    copy = _replace(plan, sorted((s for s in secrets if len(s) >= 6), key=len, reverse=True))
    copy["sft"]["launcher"]["env"] = values
    return copy


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path"},
            "text": {"type": "str"},
            "dest": {"type": "path", "required": True},
        },
        required_one_of=[("path", "text")],
        mutually_exclusive=[("path", "text")],
        supports_check_mode=True,
    )
    path, text = module.params["path"], module.params["text"]
    where = f"plan_file {path}" if path else "the plan `ktinfra plan` printed"
    if path:
        try:
            with open(path, "rb") as handle:
                text = handle.read().decode("utf-8")
        except (OSError, UnicodeDecodeError) as err:
            module.fail_json(msg=f"{where} cannot be read: {err}")
    try:
        plan = json.loads(text)
    except ValueError as err:  # the message names the position, not the text
        module.fail_json(msg=f"{where} is not JSON: {err}")
    if not isinstance(plan, dict):
        module.fail_json(msg=f"{where} must be a JSON object (a `ktinfra plan --json` document)")
    # as the filter to_nice_json wrote it before, so an installed RUN.plan.json does not change on upgrade
    data = json.dumps(plan, indent=4, sort_keys=True, separators=(",", ": ")) + "\n"
    dest = module.params["dest"]
    try:
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(data)
    except OSError as err:
        module.fail_json(msg=f"cannot stage the plan at {dest}: {err}")
    module.exit_json(changed=False, plan=shown(plan))


if __name__ == "__main__":
    main()
