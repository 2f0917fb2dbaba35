"""kt_common's tasks/started_with.yml and started_with_record.yml, run for real on localhost: a service whose
files changed after it was last (re)started is named stale, also when the run that changed them stopped before
its restart handler. The whole flow: molecule/serve/tests/test_bad_inputs.py (systemd) and
molecule/serve-supervisor/tests/test_supervisor.py (supervisord)."""

from __future__ import annotations

import json
import re

from role_play import run_play

SERVICE = "ktinfra-serve@a"


def _play(records, files: dict[str, list], record: list[str] | None) -> list:
    """started_with over `files`, the stale names printed, then (record not None) the records written."""
    common = {"kt_common_started_with_dir": str(records)}
    tasks = [
        {
            "name": "started with",
            "ansible.builtin.include_role": {"name": "kt_common", "tasks_from": "started_with"},
            "vars": common | {"kt_common_started_with_files": files},
        },
        {"name": "show", "ansible.builtin.debug": {"msg": "STALE={{ kt_common_stale | to_json }}"}},
    ]
    if record is not None:
        tasks.append(
            {
                "name": "record",
                "ansible.builtin.include_role": {"name": "kt_common", "tasks_from": "started_with_record"},
                "vars": common | {"kt_common_started_with_names": record},
            }
        )
    return tasks


def _stale(output: str) -> list[str]:
    found = re.search(r'"STALE=(.*)"\n', output)
    assert found, output[-3000:]
    return json.loads(found.group(1).replace('\\"', '"'))


def test_a_service_left_on_older_files_is_named_until_its_record_is_written(tmp_path):
    records, unit, env = tmp_path / "records", tmp_path / "unit.service", tmp_path / "a.env"
    records.mkdir()
    unit.write_text("[Service]\nExecStart=/bin/true\n")
    env.write_text("ARGS=--x 1\n")
    files = {SERVICE: [str(unit), str(env)], "other": [str(env)]}

    rc, output = run_play(tmp_path, _play(records, files, [SERVICE, "other"]))
    assert rc == 0 and _stale(output) == [], output[-3000:]  # no record yet: taken as running on its files
    record = (records / f"{SERVICE}.started-with").read_text()
    assert record.splitlines()[0].startswith(f"{unit} ") and len(record.splitlines()[0].split()[1]) == 64

    rc, output = run_play(tmp_path, _play(records, files, [SERVICE, "other"]))
    assert rc == 0 and _stale(output) == [] and "changed=0" in output, output[-3000:]

    # a run wrote the new environment, then a later task failed: no handler ran, no record was written
    env.write_text("ARGS=--x 2\n")
    rc, output = run_play(tmp_path, _play(records, files, None))
    assert rc == 0 and sorted(_stale(output)) == sorted([SERVICE, "other"]), output[-3000:]

    # --check names them and writes no record
    rc, output = run_play(tmp_path, _play(records, files, [SERVICE, "other"]), flags=["--check"])
    assert rc == 0 and sorted(_stale(output)) == sorted([SERVICE, "other"]), output[-3000:]
    assert (records / f"{SERVICE}.started-with").read_text() == record

    # the run that restarts them records the new files: the next one names none
    rc, output = run_play(tmp_path, _play(records, files, [SERVICE]))
    assert rc == 0 and sorted(_stale(output)) == sorted([SERVICE, "other"]), output[-3000:]
    assert (records / f"{SERVICE}.started-with").read_text() != record
    rc, output = run_play(tmp_path, _play(records, files, None))
    assert rc == 0 and _stale(output) == ["other"], output[-3000:]  # "other" was not recorded


def test_a_file_removed_since_the_start_makes_the_service_stale(tmp_path):
    records, unit, dropin = tmp_path / "records", tmp_path / "unit.service", tmp_path / "50-site.conf"
    records.mkdir()
    unit.write_text("[Service]\n")
    dropin.write_text("[Service]\nRestartSec=3\n")
    files = {SERVICE: [str(unit), str(dropin)]}
    rc, output = run_play(tmp_path, _play(records, files, [SERVICE]))
    assert rc == 0, output[-3000:]
    dropin.unlink()
    rc, output = run_play(tmp_path, _play(records, files, [SERVICE]))
    assert rc == 0 and _stale(output) == [SERVICE], output[-3000:]
    assert f"{dropin} absent" in (records / f"{SERVICE}.started-with").read_text()


def test_no_services_is_no_work(tmp_path):
    rc, output = run_play(tmp_path, _play(tmp_path, {}, []))
    assert rc == 0 and _stale(output) == [] and "changed=0" in output, output[-3000:]
