"""`ktinfra provision -e` put each value on ansible-playbook's command line.

An API key or a proxy password given with -e lay in /proc/PID/cmdline of ansible-playbook (and of each of its
forked workers), which every user of the controller reads with ps, for as long as the run went. Each key=value
or JSON/YAML -e now goes through a 0600 file in the run's private 0700 folder (removed when the run ends) and
ansible-playbook gets `-e @FILE`; it must read exactly the same variables, with the same types, as from the
command line. Real ansible-runner runs against localhost.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from ktinfra import provision
from ktinfra.provision import ProvisionError, ProvisionRequest, ansible_playbook, run

# every process's command line, and the modes of the run's private folder, written while the run goes
SNOOP = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Check the values Ansible got
      ansible.builtin.assert:
        that: [api_key == expected_key, proxy_password == expected_password]
        quiet: true
    - name: Read every process's command line and the private folder's modes
      ansible.builtin.shell: |
        for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < "$f" 2>/dev/null; echo; done > {{ out }}/cmdlines
        find {{ out }}/tmp -printf '%m %P\\n' > {{ out }}/modes
      changed_when: false
"""

NAMES = ["http_port", "flag", "empty", "spaced", "escaped", "tpl", "unicode", "n", "f", "b", "z", "l", "d",
         "s", "yaml_octal", "yaml_bool", "yaml_date", "unsafe", "__ansible_unsafe", "later"]  # fmt: skip
# each variable's value and type_debug, written where `out` says
REPORT = f"""
- hosts: all
  gather_facts: false
  vars:
    names: {json.dumps(NAMES)}
  tasks:
    - name: Write what Ansible got
      ansible.builtin.copy:
        dest: "{{{{ out }}}}"
        mode: "0600"
        content: >-
          {{{{ {{'types': names | map('extract', hostvars[inventory_hostname]) | map('type_debug') | list,
               'values': names | map('extract', hostvars[inventory_hostname]) | list}} | to_json }}}}
"""
EXTRA_VARS = [
    "http_port=8080 flag=true empty= spaced='a b' escaped=tab\\there tpl='{{ 1 + 1 }}' unicode=ключ later=1",
    '{"n": 3, "f": 1.5, "b": false, "z": null, "l": [1, "2"], "d": {"k": "v"}, "s": "7"}',
    '{yaml_octal: 010, yaml_bool: yes, yaml_date: 2001-02-03, unsafe: !unsafe "{{ 9 }}"}',
    "__ansible_unsafe=plain",  # a lone key that Ansible's JSON reading takes as a marker
    "later=2",  # the later -e wins, as on the command line
]


def _site(tmp_path: Path, play: str) -> Path:
    (tmp_path / "play.yml").write_text(play)
    python = shutil.which("python3")
    (tmp_path / "hosts").write_text(
        f"localhost ansible_connection=local ansible_python_interpreter={python}\n"
    )
    return tmp_path


@pytest.fixture()
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No ANSIBLE_* of the caller; temporary folders (the run's private one) under tmp_path/tmp."""
    for name in [n for n in os.environ if n.startswith("ANSIBLE_")]:
        monkeypatch.delenv(name)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_no_extra_vars_value_is_on_a_command_line(clean: Path) -> None:
    site = _site(clean, SNOOP)
    key, password = f"sk-{secrets.token_hex(8)}", f"pw{secrets.token_hex(8)}"
    extra_vars = [
        f"api_key={key} expected_key={key}",
        json.dumps({"proxy_password": password, "expected_password": password}),
        f"out={site}",
    ]
    result = run(
        ProvisionRequest(site / "play.yml", site / "hosts", extra_vars=extra_vars, artifacts=site / "runs")
    )
    assert result["ok"], result["errors"] + result["failures"]
    cmdlines = (site / "cmdlines").read_text(errors="replace")
    assert "ansible-playbook" in cmdlines  # the snapshot holds the run's processes
    leaked = [line for line in cmdlines.splitlines() if key in line or password in line]
    assert leaked == []
    modes = dict(
        reversed(line.split(" ", 1)) for line in (site / "modes").read_text().splitlines() if " " in line
    )
    written = {name: mode for name, mode in modes.items() if name.endswith(".yml")}
    assert len(written) == 3 and set(written.values()) == {"600"}, modes
    folders = {name.split("/")[0] for name in written}
    assert all(modes[folder] == "700" for folder in folders), modes
    assert list((site / "tmp").iterdir()) == []  # removed with the run's private folder
    # the artifacts keep the -e as given, values hidden, not a path to a file that is gone
    command = json.loads((Path(result["artifacts"]) / "command").read_text())["command"]
    hidden = "(hidden by ktinfra)"
    assert command[command.index("-e") + 1] == f"api_key={hidden} expected_key={hidden}"
    assert not any(key in arg or password in arg or "extra-vars-" in arg for arg in command)


def _reference(site: Path, out: Path) -> dict:
    """What ansible-playbook itself reads from the same -e values on its command line."""
    args = [arg for value in [*EXTRA_VARS, f"out={out}"] for arg in ("-e", value)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    done = subprocess.run(
        [ansible_playbook(), "play.yml", "-i", "hosts", *args],
        cwd=site,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(out.read_text())


def test_the_playbook_gets_the_same_values_and_types_as_from_the_command_line(clean: Path) -> None:
    site = _site(clean, REPORT)
    expected = _reference(site, site / "reference.json")
    extra_vars = [*EXTRA_VARS, f"out={site / 'provisioned.json'}"]
    result = run(
        ProvisionRequest(site / "play.yml", site / "hosts", extra_vars=extra_vars, artifacts=site / "runs")
    )
    assert result["ok"], result["errors"] + result["failures"]
    got = json.loads((site / "provisioned.json").read_text())
    assert got == expected
    values = dict(zip(NAMES, zip(got["values"], got["types"], strict=True), strict=True))
    assert values["http_port"] == ("8080", "str") and values["flag"] == ("true", "str")
    assert values["n"] == (3, "int") and values["yaml_bool"] == (True, "bool")
    assert values["tpl"][0] == 2 and values["unsafe"][0] == "{{ 9 }}" and values["later"] == ("2", "str")
    assert values["escaped"] == ("tab\there", "str") and values["__ansible_unsafe"] == ("plain", "str")


def test_a_file_that_cannot_be_written_is_an_error_and_leaves_no_run(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = _site(clean, SNOOP)
    real_open = os.open

    def full_disk(path, flags, mode=0o777, **kw):
        if "extra-vars-" in str(path):
            raise OSError(28, "No space left on device")
        return real_open(path, flags, mode, **kw)

    monkeypatch.setattr(provision.os, "open", full_disk)
    request = ProvisionRequest(site / "play.yml", site / "hosts", extra_vars=["a=1"], artifacts=site / "runs")
    with pytest.raises(ProvisionError, match="cannot write the -e values .*No space left on device"):
        run(request)
    assert list((site / "runs" / "artifacts").iterdir()) == []
    assert list((site / "tmp").iterdir()) == []


def test_no_usable_temporary_folder_is_an_error_and_leaves_no_run(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tempfile.TemporaryDirectory raising (TMPDIR full, read-only or gone) was a traceback."""
    site = _site(clean, SNOOP)
    (clean / "not-a-folder").write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(clean / "not-a-folder" / "tmp"))
    request = ProvisionRequest(site / "play.yml", site / "hosts", extra_vars=["a=1"], artifacts=site / "runs")
    with pytest.raises(ProvisionError, match="cannot make ansible-runner's private folder in .*not-a-folder"):
        run(request)
    assert list((site / "runs" / "artifacts").iterdir()) == []
