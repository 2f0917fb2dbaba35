"""kt_python_env's OS packages on Debian/Ubuntu (vars/Debian.yml, templated by real ansible on localhost):
the venv package of the python the envs are made with."""

from __future__ import annotations

import pytest
from role_play import REPO, run_play

SHOW = [
    {"ansible.builtin.include_vars": str(REPO / "roles" / "kt_python_env" / "vars" / "Debian.yml")},
    {"ansible.builtin.debug": {"msg": "PACKAGES={{ kt_python_env_os_packages | join(',') }}"}},
]


@pytest.mark.parametrize(
    ("manager", "python_exe", "wanted"),
    [
        ("venv", "/usr/bin/python3.11", "python3-venv,git,python3.11-venv"),
        ("venv", "/usr/local/bin/python3.11", "python3-venv,git"),  # built from source: its own ensurepip
        ("conda", None, "python3-venv,git"),
    ],
)
def test_the_venv_package_of_the_profiles_python_is_installed(tmp_path, manager, python_exe, wanted):
    """Before: python3-venv only, the ensurepip of the system's python3. On Ubuntu 22.04 (python3 3.10) with
    python3.11 installed for kt-0.7 as the profile check says ('install it (apt)'), the OS packages went in
    and then `python3.11 -m venv` stopped: ensurepip is not available (apt install python3.11-venv)."""
    install = {"manager": manager, "python": "3.11", "python_exe": python_exe}
    rc, output = run_play(tmp_path, SHOW, {"kt_python_env_install": install})
    assert rc == 0 and f"PACKAGES={wanted}" in output, output[-3000:]
