"""Every bad input failed preflight with a clear message and left the host unchanged."""

import json
import os
from pathlib import Path

import pytest

MESSAGES = json.loads(
    (Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "bad-input-messages.json").read_text()
)

EXPECTED = {
    "unknown_profile": ["unknown stack profile 'kt-9.9'", "known: kt-0.4-autodl, kt-0.7"],
    "wrong_wheel_sha256": [
        "wheel ktprobe: sha256 of /srv/wheels/ktprobe-0.4.2+cpu-py3-none-any.whl is",
        "expected 0000",
    ],
    # no CI machine has a GPU; an AMX-less one (AMD EPYC) also gets the AMX problem (see the test below)
    "sft_without_amx": ["Qwen3-30B-A3B (sft)", "no NVIDIA GPU found"],
    "disk_too_small": ["disk too small: /mnt/tiny has 0.0 GB free"],
    "conda_requested_without_conda": ["env manager conda requested but no conda found"],
    "bad_argument": ["kt_python_env_manager", "auto, conda, venv"],
    "legacy_profile_without_conda": [
        "wheel ktransformers (ktransformers-0.4.2+cu128torch27fancy-cp311-cp311-linux_x86_64.whl) has no",
        "wheel flash-attn (flash_attn-2.8.3+cu12torch2.7cxx11abiTRUE-cp311-cp311-linux_x86_64.whl) has no",
        "profile kt-0.4-autodl patches the env with conda (libstdcxx-ng, gcc_impl_linux-64, cuda-runtime)",
    ],
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_case_failed_with_a_clear_message(case):
    message = MESSAGES[case]
    assert message.startswith("preflight failed: "), message
    for fragment in EXPECTED[case]:
        assert fragment in message, message


def test_sft_names_amx_exactly_when_this_cpu_lacks_it(host):
    has_amx = " amx_tile" in host.file("/proc/cpuinfo").content_string
    assert ("KT fine-tuning needs AMX" in MESSAGES["sft_without_amx"]) is not has_amx, MESSAGES[
        "sft_without_amx"
    ]


def test_nothing_was_installed(host):
    for path in ("/opt/ktinfra", "/opt/kt", "/var/cache/ktinfra", "/mnt/tiny/envs", "/var/lib/ktinfra"):
        assert not host.file(path).exists, path
    for path in ("/etc/sysctl.d/90-ktinfra.conf", "/etc/security/limits.d/90-ktinfra.conf"):
        assert not host.file(path).exists, path


def test_no_file_changed_since_prepare(host):
    """Files under the system and root's home, except systemd's/ansible's own runtime state (directories
    are left out: removing what a failed run created still bumps the parent's mtime)."""
    changed = host.check_output(
        "find /etc /opt /usr /var /srv /root /mnt/tiny -xdev -newer /srv/unchanged-since "
        "-not -path '/var/log/*' -not -path '/var/lib/systemd/*' -not -path '/root/.ansible*' "
        "-not -path '/var/tmp/*' -not -type d -print"
    )
    assert changed.split() == [], changed
