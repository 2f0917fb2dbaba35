"""kt_common's kt_stat_paths module: ansible.builtin.stat of several paths in one module run, answered in a
stat loop's shape. Real ansible-playbook: the module and a stat loop over the same paths (a file, a folder,
a dangling symlink, a missing path) give the same stat keys, in order; a path under a file fails both."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from role_play import ROLES, run_play

KEYS = ("exists", "path", "mtime", "size", "isdir", "isreg", "islnk", "checksum")


def _tree(tmp: Path) -> list[str]:
    (tmp / "t").mkdir()
    (tmp / "t" / "file.txt").write_text("kt\n")
    (tmp / "t" / "folder").mkdir()
    (tmp / "t" / "dangling").symlink_to(tmp / "t" / "nowhere")
    return ["file.txt", "folder", "dangling", "missing"]


def _both(tmp: Path, names: list[str], algorithm: str) -> tuple[int, str, dict]:
    base = str(tmp / "t")
    tasks = [
        {
            "name": "stat loop",
            "ansible.builtin.stat": {"path": f"{base}/{{{{ item }}}}", "checksum_algorithm": algorithm},
            "loop": names,
            "register": "looped",
        },  # fmt: skip
        {
            "name": "one run",
            "kt_stat_paths": {
                "base": base,
                "paths": names,
                "checksum": names,
                "checksum_algorithm": algorithm,
            },
            "register": "batched",
        },  # fmt: skip
    ]
    return _play(tmp, tasks, "{'looped': looped.results, 'batched': batched}")


def _play(tmp: Path, tasks: list, answer: str) -> tuple[int, str, object]:
    """Run `tasks` with kt_common's library, then read back the Jinja expression `answer` as JSON."""
    saved = {"ansible.builtin.copy": {"dest": str(tmp / "out.json"), "mode": "0644",
             "content": f"{{{{ {answer} | to_json }}}}"}}  # fmt: skip
    rc, output = run_play(tmp, [*tasks, saved], env={"ANSIBLE_LIBRARY": str(ROLES / "kt_common" / "library")})
    return rc, output, json.loads((tmp / "out.json").read_text()) if rc == 0 else None


def test_one_run_answers_as_a_stat_loop(tmp_path):
    names = _tree(tmp_path)
    rc, output, answer = _both(tmp_path, names, "sha256")
    assert rc == 0, output[-3000:]
    batched = answer["batched"]
    assert batched["changed"] is False
    assert [r["item"] for r in batched["results"]] == names
    for looped, one in zip(answer["looped"], batched["results"], strict=True):
        want = {key: looped["stat"][key] for key in KEYS if key in looped["stat"]}
        assert {key: one["stat"][key] for key in want if key in one["stat"]} == want, (looped["item"], one)
        assert set(want) <= set(one["stat"]), (looped["item"], one["stat"])
    stats = {r["item"]: r["stat"] for r in batched["results"]}
    assert stats["file.txt"]["checksum"] == hashlib.sha256(b"kt\n").hexdigest()
    assert stats["folder"]["isdir"] and stats["dangling"]["islnk"] and "checksum" not in stats["dangling"]
    assert not stats["missing"]["exists"]


def test_a_path_under_a_file_fails_as_stat_does(tmp_path):
    names = [*_tree(tmp_path), "file.txt/under"]
    tasks = [{"kt_stat_paths": {"base": str(tmp_path / "t"), "paths": names}}]
    rc, output, _ = _play(tmp_path, tasks, "none")
    assert rc == 2, output[-3000:]
    assert f"cannot stat {tmp_path / 't' / 'file.txt' / 'under'}: Not a directory" in output, output[-3000:]


def test_checksums_only_where_asked_and_absolute_paths_as_given(tmp_path):
    _tree(tmp_path)
    file, other = str(tmp_path / "t" / "file.txt"), str(tmp_path / "t" / "folder")
    tasks = [{"kt_stat_paths": {"paths": [file, other], "checksum": [other]}, "register": "batched"}]
    rc, output, results = _play(tmp_path, tasks, "batched.results")
    assert rc == 0, output[-3000:]
    assert [r["item"] for r in results] == [file, other]
    assert "checksum" not in results[0]["stat"] and results[0]["stat"]["isreg"]
    assert "checksum" not in results[1]["stat"]  # a folder has none, asked or not
