"""docs/readme/roles1.md names the governor daemons kt_host_tuning refuses as the role now decides them.

The page said a unit that sets the governor again "(tuned, power-profiles-daemon, TLP, auto-cpufreq,
cpupower.service) running or enabled" fails the play, while since 44ccfc6 TLP and cpupower.service count only
where their config sets a governor (vars/main.yml kt_host_tuning__governor_daemon_configs, read by
library/kt_governor_config.py) and then TLP's udev rule counts too: a lab server with TLP for its disks,
refused by the page's rule, passes. The page's list must put every daemon of
kt_host_tuning__governor_daemons that has a config entry after the ';' ("only where their config sets a
governor") and every other one before."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "readme" / "roles1.md"
ROLE_VARS = ROOT / "roles" / "kt_host_tuning" / "vars" / "main.yml"


def _stem(unit: str) -> str:
    return unit.removeprefix("snap.").split(".", 1)[0].lower()


def _page_groups() -> tuple[str, str]:
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    inner = text.split("a unit that sets it again (", 1)[1].split(") running or enabled", 1)[0]
    always, _, conditional = inner.partition(";")
    return always.lower(), conditional.lower()


def test_the_page_tells_config_dependent_daemons_from_the_others():
    role = yaml.safe_load(ROLE_VARS.read_text(encoding="utf-8"))
    configs = role["kt_host_tuning__governor_daemon_configs"]
    always = {_stem(u) for u in role["kt_host_tuning__governor_daemons"] if u not in configs}
    conditional = set(configs.values())
    assert always == {"tuned", "power-profiles-daemon", "auto-cpufreq"} and conditional == {"tlp", "cpupower"}
    page_always, page_conditional = _page_groups()
    assert "only where their config sets a governor" in page_conditional, page_conditional
    assert all(name in page_always for name in always), page_always
    assert all(name in page_conditional and name not in page_always for name in conditional), page_always
