"""A site profile that shares env settings through a YAML merge key (`<<: *base`) was refused with the
parser's 'could not determine a constructor for the tag tag:yaml.org,2002:merge' (the duplicate-key check
constructed the merge key itself). It loads now, the env's own keys over the merged ones, as YAML says;
a key given twice, `<<` included, is still refused."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ktinfra.cli import app

HEAD = 'name: site\ngeneration: current\npython: "3.11"\n'
MERGED = (
    HEAD
    + """\
base: &base {name: kt-kernel, packages: [kt-kernel==0.7.2, torch==2.9.1], download_bytes: 5}
extra: &extra {exclude: [sglang-kt]}
envs:
  inference:
    <<: *base
  sft:
    <<: [*base, *extra]
    name: kt-sft
    packages: [torch==2.9.1]
"""
)


def _show(tmp_path, text):
    profile = tmp_path / "site.yaml"
    profile.write_text(text)
    return CliRunner().invoke(app, ["profile", "show", str(profile), "--json"])


def test_a_merge_key_loads_with_the_envs_own_keys_over_the_merged_ones(tmp_path):
    result = _show(tmp_path, MERGED)
    assert result.exit_code == 0, result.output
    envs = json.loads(result.stdout)["envs"]
    assert envs["inference"]["name"] == "kt-kernel"
    assert envs["inference"]["packages"] == ["kt-kernel==0.7.2", "torch==2.9.1"]
    assert envs["sft"]["name"] == "kt-sft"
    assert envs["sft"]["packages"] == ["torch==2.9.1"]
    assert envs["sft"]["exclude"] == ["sglang-kt"]
    assert envs["sft"]["download_bytes"] == 5


def test_a_merge_key_given_twice_is_refused(tmp_path):
    text = HEAD + "b: &b {name: kt-kernel}\nenvs:\n  inference:\n    <<: *b\n    <<: {packages: [a==1]}\n"
    result = _show(tmp_path, text)
    assert result.exit_code == 1
    assert "key '<<' is given twice in one mapping" in result.output


def test_a_plain_key_given_twice_is_still_refused(tmp_path):
    text = HEAD + "envs:\n  inference:\n    name: kt-kernel\n    name: kt-other\n"
    result = _show(tmp_path, text)
    assert result.exit_code == 1
    assert "key 'name' is given twice in one mapping" in result.output
