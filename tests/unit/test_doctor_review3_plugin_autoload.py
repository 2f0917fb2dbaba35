"""doctor under PYTEST_DISABLE_PLUGIN_AUTOLOAD (set by many developers' and CI environments): the suite's
pytest loaded no pytest-testinfra and the run ended in 'error: the suite did not run (pytest exit 4) ...
unrecognized arguments: --hosts=local://'. Real suite run over local://."""

from __future__ import annotations

from ktinfra import doctor


def test_the_suite_runs_with_plugin_autoload_disabled(monkeypatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    report = doctor.run(["local://"], role="any", select="amx_cpu_flags")
    assert [(c.id, c.host) for c in report.checks] == [("cpu.amx_cpu_flags", "local://")]


def test_the_plugin_is_named_only_where_autoload_is_off(monkeypatch):
    """Beside the autoloaded plugin pytest refuses a second registration of testinfra.plugin."""
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    report = doctor.run(["local://"], role="any", select="amx_cpu_flags")
    assert [c.id for c in report.checks] == ["cpu.amx_cpu_flags"]
