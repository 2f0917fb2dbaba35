"""The kt-kernel probe ran with the KT_KERNEL_CPU_VARIANT of the shell the suite's commands run in (a
developer's export, inherited over local://), so kt-kernel loaded the library it names, which no serve
instance loads (the unit and supervisord program read the variable from the instance's env file only), and
test_kt_kernel_loads_best_variant failed on a sound host: "kt-kernel loaded 'avx2', this host runs ...".
Real suite over local://; the env's python is this python with a kt_kernel stand-in that loads what the
variable names, else the host's best library."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import testinfra

from ktinfra import doctor

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
kthost = importlib.import_module("kthost")

STANDIN = """import os
__cpu_variant__ = os.environ.get("KT_KERNEL_CPU_VARIANT") or {best!r}
__version__ = "0.0+standin"
class _Ext:
    __file__ = "standin.so"
kt_kernel_ext = _Ext()
"""


def test_the_callers_variant_override_does_not_reach_the_probe(tmp_path, monkeypatch):
    host = testinfra.get_host("local://")
    best, forced = kthost.planned_kt_variant(
        kthost.facts_cores(kthost.run_probe(host, sys.executable, "cpu"))
    )
    site = tmp_path / "site"
    (site / "kt_kernel").mkdir(parents=True)
    (site / "kt_kernel" / "__init__.py").write_text(STANDIN.format(best=best))
    env_bin = tmp_path / "env" / "bin"
    env_bin.mkdir(parents=True)
    (env_bin / "python3").write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    (env_bin / "python3").chmod(0o755)
    monkeypatch.setenv("PATH", f"{env_bin}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CONDA_EXE", raising=False)
    other = "avx2" if best != "avx2" else "avx512"
    monkeypatch.setenv("KT_KERNEL_CPU_VARIANT", other)
    report = doctor.run(["local://"], role="any", select="kt_kernel_loads_best_variant")
    [check] = report.checks
    assert check.status == "passed", check
    assert f"kt-kernel variant {best} (host best: {best}" in check.output
