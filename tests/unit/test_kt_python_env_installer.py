"""kt_python_env's installer choice and its command lines, rendered by real ansible from the role's vars."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from role_play import run_play

ROLE = Path(__file__).resolve().parents[2] / "roles" / "kt_python_env"
CASES = {
    "default": {},
    "no-bytecode": {"kt_python_env_compile_bytecode": False},
    "pip-no-bytecode": {"kt_python_env_installer": "pip", "kt_python_env_compile_bytecode": False},
    "conda-auto": {"kt_python_env_install": {"manager": "conda"}},
    "pip": {"kt_python_env_installer": "pip"},
    "offline-no-uv-wheel": {"kt_python_env_uv_ready": "False"},  # uv.yml's set_fact gives a string too
    "conda-uv": {"kt_python_env_install": {"manager": "conda"}, "kt_python_env_installer": "uv"},
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, list[str]]:
    base = {
        "kt_preflight_ktinfra_exe": "/opt/ktinfra/tool/bin/ktinfra",
        "kt_python_env_spec": {"prefix": "/opt/kt/envs/kt-kernel"},
        "kt_python_env_requirements": {"dest": "/opt/kt/envs/kt-kernel/req.txt"},
        "kt_python_env_uv_ready": "True",
        "kt_python_env_installer": "auto",
        "kt_python_env_compile_bytecode": True,
    }
    install = {"wheelhouse": "/wh", "manager": "venv", "pip": {"index_url": "", "extra_index_urls": []}}
    tasks = []
    for name, case in CASES.items():
        facts = base | case | {"kt_python_env_install": install | case.get("kt_python_env_install", {})}
        # set_fact outranks the role files loaded as vars_files, as the role's own set_fact does
        tasks += [
            {"ansible.builtin.set_fact": facts},
            {"name": name, "ansible.builtin.debug": {"var": "argv"}},
        ]
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars_files": [str(ROLE / "defaults/main.yml"), str(ROLE / "vars/main.yml")],
            "vars": {"argv": "{{ kt_python_env_pip_install }}"},
            "tasks": tasks,
        }
    ]
    path = tmp_path_factory.mktemp("play") / "play.yml"
    path.write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOCALHOST_WARNING="false")
    out = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(path)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    results = json.loads(out.stdout)["plays"][0]["tasks"]
    return {t["task"]["name"]: t["hosts"]["localhost"]["argv"] for t in results if t["task"]["name"] in CASES}


def test_auto_installs_venvs_with_uv_offline_from_the_wheelhouse(rendered):
    argv = rendered["default"]
    assert argv[:3] == ["/opt/ktinfra/uv/bin/uv", "pip", "install"]
    for flag in ("--offline", "--no-index", "--no-cache", "--compile-bytecode"):
        assert flag in argv
    assert argv[argv.index("--find-links") + 1] == "/wh"
    assert argv[argv.index("--python") + 1] == "/opt/kt/envs/kt-kernel/bin/python"
    assert argv[argv.index("-r") + 1] == "/opt/kt/envs/kt-kernel/req.txt"


def test_no_bytecode_drops_the_compile_step(rendered):
    assert rendered["no-bytecode"][0].endswith("/uv") and "--compile-bytecode" not in rendered["no-bytecode"]
    assert rendered["pip-no-bytecode"][0].endswith("/pip") and "--no-compile" in rendered["pip-no-bytecode"]


@pytest.mark.parametrize("case", ["conda-auto", "pip", "offline-no-uv-wheel"])
def test_pip_where_uv_is_not_chosen_or_not_available(rendered, case):
    argv = rendered[case]
    assert argv[:2] == ["/opt/kt/envs/kt-kernel/bin/pip", "install"]
    assert "--no-index" in argv and "--no-compile" not in argv


def test_uv_forced_on_conda(rendered):
    assert rendered["conda-uv"][0] == "/opt/ktinfra/uv/bin/uv"


def test_every_default_is_an_argument_spec_and_back():
    defaults = set(yaml.safe_load((ROLE / "defaults/main.yml").read_text()))
    specs = yaml.safe_load((ROLE / "meta/argument_specs.yml").read_text())["argument_specs"]["main"]
    assert defaults == set(specs["options"])
    assert specs["options"]["kt_python_env_installer"]["choices"] == ["auto", "uv", "pip"]


INDEX_LISTS = {
    "strings": ({}, ["kt_python_env_pip_trusted_hosts=mirror.lab,10.0.0.5",
                     "kt_python_env_pip_extra_index_urls=http://mirror.lab/x"]),
    # -e splits key=value pairs on spaces: a value with spaces is quoted inside the -e argument
    "strings-with-spaces-and-empties": ({}, ["kt_python_env_pip_trusted_hosts=' mirror.lab , ,10.0.0.5,'",
                                             "kt_python_env_pip_extra_index_urls='http://mirror.lab/x ,'"]),
    "lists": ({"kt_python_env_pip_trusted_hosts": ["mirror.lab", "10.0.0.5"],
               "kt_python_env_pip_extra_index_urls": ["http://mirror.lab/x"]}, []),
}  # fmt: skip


# slow: [strings] is split by the same ktinfra_list as [strings-with-spaces-and-empties]
@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=pytest.mark.slow) if c == "strings" else c for c in sorted(INDEX_LISTS)]
)
def test_index_lists_given_on_the_command_line_are_split_on_commas(tmp_path, case):
    """-e kt_python_env_pip_trusted_hosts=mirror.lab is a string; the argument spec passes it. Before, pip got
    --trusted-host=m --trusted-host=i ... (and the plain-http mirror stayed untrusted), and a string
    kt_python_env_pip_extra_index_urls failed: "can only concatenate list (not _AnsibleTaggedStr) to list"."""
    out = tmp_path / "args.json"
    install = {"pip": {"index_url": "", "extra_index_urls": []}}
    tasks = [
        # the role's vars split with ktinfra_list, which the role gets from its dependency kt_common
        {"ansible.builtin.include_role": {"name": "kt_common"}},
        {"ansible.builtin.include_vars": str(ROLE / "defaults/main.yml")},
        {"ansible.builtin.include_vars": str(ROLE / "vars/main.yml")},
        {"ansible.builtin.set_fact": {"kt_python_env_install": install}},
        {"ansible.builtin.copy": {"content": "{{ kt_python_env_index_args | to_json }}", "dest": str(out)}},
    ]
    extra, cli = INDEX_LISTS[case]
    rc, output = run_play(tmp_path, tasks, extra, cli)
    assert rc == 0, output[-3000:]
    assert json.loads(out.read_text()) == [
        "--extra-index-url=http://mirror.lab/x",
        "--trusted-host=mirror.lab",
        "--trusted-host=10.0.0.5",
    ]
