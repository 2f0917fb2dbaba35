"""Capture files are UTF-8 whatever the capturing shell's locale: a zh_CN.GBK session (a real locale, built
here with localedef) must neither fail the capture on a byte GBK cannot hold nor write a file that another
host reads differently."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

KERNEL = "6.8.0-模型"  # a UTF-8 release string, then a byte that is no character in UTF-8 or GBK
UNAME = b"#!/bin/sh\nprintf 'Linux host " + KERNEL.encode() + b"\\377 x86_64\\n'\n"


@pytest.fixture(scope="module")
def gbk_env(tmp_path_factory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("gbk")
    locales = base / "locales"
    locales.mkdir()
    made = subprocess.run(
        ["localedef", "-i", "zh_CN", "-f", "GBK", str(locales / "zh_CN.GBK")], capture_output=True, text=True
    )
    assert (locales / "zh_CN.GBK").is_dir(), f"localedef could not build zh_CN.GBK: {made.stderr}"
    bindir = base / "bin"
    bindir.mkdir()
    (bindir / "uname").write_bytes(UNAME)
    (bindir / "uname").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG", "PYTHONUTF8"))}
    env.update(LOCPATH=str(locales), LC_ALL="zh_CN.GBK", PATH=f"{bindir}:{os.environ['PATH']}", COLUMNS="200")
    check = [sys.executable, "-c", "import locale; print(locale.getpreferredencoding(False))"]
    assert subprocess.run(check, capture_output=True, text=True, env=env).stdout.strip() == "GBK"
    return env


def _facts(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ktinfra", "facts", *args], capture_output=True, env=env)


@pytest.fixture(scope="module")
def capture(gbk_env, tmp_path_factory):
    folder = tmp_path_factory.mktemp("gbk-capture") / "cap"
    done = _facts(gbk_env, "--capture", str(folder))
    # before: "error: 'gbk' codec can't encode character '\ufffd'" and no capture at all
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return folder


def test_a_capture_in_a_gbk_locale_is_written_in_utf8(capture):
    assert (capture / "uname.txt").read_bytes() == f"Linux host {KERNEL}\ufffd x86_64\n".encode()


def test_live_facts_and_the_capture_agree_in_either_locale(gbk_env, capture):
    live = json.loads(_facts(gbk_env, "--json").stdout)
    assert live["os"]["kernel"] == f"{KERNEL}\ufffd"  # before: the UTF-8 bytes read as GBK, 妯″瀷
    utf8_env = {**gbk_env, "LC_ALL": "C.UTF-8"}
    for env in (gbk_env, utf8_env):  # read back on this host, and on one whose locale is UTF-8
        back = json.loads(_facts(env, "--from", str(capture), "--json").stdout)
        assert back["os"]["kernel"] == live["os"]["kernel"]


def test_a_facts_json_with_raw_utf8_loads_in_a_gbk_locale(gbk_env, capture, tmp_path):
    """`jq` writes non-ASCII raw: such a facts file is UTF-8 JSON, whatever the reading shell's locale."""
    facts = json.loads(_facts(gbk_env, "--from", str(capture), "--json").stdout)
    path = tmp_path / "facts.json"
    path.write_bytes(json.dumps(facts, ensure_ascii=False).encode())
    code = "import sys, ktinfra.facts as f; print(ascii(f.load(sys.argv[1])['os']['kernel']))"
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=gbk_env
    )
    # before: "... is not a facts JSON file: 'gbk' codec can't decode byte ..."
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ascii(f"{KERNEL}\ufffd")
