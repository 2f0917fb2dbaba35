"""`ktinfra provision` keeps the fact cache ansible.cfg names.

ansible-runner sets ANSIBLE_CACHE_PLUGIN=jsonfile and ANSIBLE_CACHE_PLUGIN_CONNECTION to a folder of the run's
artifacts, and environment variables beat ansible.cfg: a site's `fact_caching = jsonfile` cache (shared across
runs, read back with `gathering = smart`) was never written or read by ktinfra provision, where
ansible-playbook, run by hand with the same ansible.cfg, uses it; even the caller's own
ANSIBLE_CACHE_PLUGIN_CONNECTION was replaced. Real runs of a local play whose
set_fact (cacheable) writes the cache, and of a second one that reads it back without gathering.
"""

from __future__ import annotations

import shutil

from ktinfra import provision

WRITE = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Cache a fact
      ansible.builtin.set_fact: {ktinfra_cached: from-the-first-run, cacheable: true}
"""
READ = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Read it back from the cache
      ansible.builtin.assert: {that: ktinfra_cached | default('') == 'from-the-first-run'}
"""


def cached(folder) -> str:
    """The jsonfile cache's file of localhost (ansible-core 2.19 names it s1_localhost)."""
    (found,) = folder.glob("*localhost")
    return found.read_text()


def test_the_ansible_cfg_fact_cache_is_written_and_read(tmp_path, monkeypatch):
    cache = tmp_path / "facts"
    (tmp_path / "ansible.cfg").write_text(
        f"[defaults]\nfact_caching = jsonfile\nfact_caching_connection = {cache}\nfact_caching_timeout = 0\n"
    )
    (tmp_path / "write.yml").write_text(WRITE)
    (tmp_path / "read.yml").write_text(READ)
    (tmp_path / "hosts").write_text(
        f"localhost ansible_connection=local ansible_python_interpreter={shutil.which('python3')}\n"
    )
    for name in ("ANSIBLE_CACHE_PLUGIN", "ANSIBLE_CACHE_PLUGIN_CONNECTION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANSIBLE_CONFIG", str(tmp_path / "ansible.cfg"))
    monkeypatch.chdir(tmp_path)
    for play in ("write.yml", "read.yml"):
        request = provision.ProvisionRequest(
            playbook=tmp_path / play, inventory=tmp_path / "hosts", artifacts=tmp_path / "runs"
        )
        report = provision.run(request)
        assert report["ok"], (play, report["errors"], report["failures"])
    assert "from-the-first-run" in cached(cache)
    assert not list((tmp_path / "runs").glob("artifacts/*/fact_cache/*"))


def test_an_environment_cache_setting_still_wins(tmp_path, monkeypatch):
    cache = tmp_path / "env-facts"
    (tmp_path / "write.yml").write_text(WRITE)
    (tmp_path / "hosts").write_text(
        f"localhost ansible_connection=local ansible_python_interpreter={shutil.which('python3')}\n"
    )
    monkeypatch.setenv("ANSIBLE_CACHE_PLUGIN", "jsonfile")
    monkeypatch.setenv("ANSIBLE_CACHE_PLUGIN_CONNECTION", str(cache))
    monkeypatch.chdir(tmp_path)
    request = provision.ProvisionRequest(
        playbook=tmp_path / "write.yml", inventory=tmp_path / "hosts", artifacts=tmp_path / "runs"
    )
    assert provision.run(request)["ok"]
    assert "from-the-first-run" in cached(cache)
