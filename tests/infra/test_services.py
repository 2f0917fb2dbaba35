"""Services: KT systemd units enabled and active; the serve health endpoint answers."""

import shlex

import pytest

UNIT_PATTERNS = ("ktinfra-*", "kt-*", "sglang*")
DEFAULT_HEALTH_URL = "http://127.0.0.1:30000/health"
HEALTH_CHECK = (
    "import sys,urllib.request\n"
    "try:\n"
    "    r = urllib.request.urlopen(sys.argv[1], timeout=10); print(r.status)\n"
    "except Exception as e:\n"
    "    print(type(e).__name__, e); sys.exit(1)\n"
)


@pytest.fixture(scope="module")
def init_name(host) -> str:
    return host.file("/proc/1/comm").content_string.strip()


@pytest.fixture(scope="module")
def units(host, pytestconfig, init_name) -> list[str]:
    named = pytestconfig.getoption("kt_unit")
    if named or init_name != "systemd":
        return named
    listed = host.run(f"systemctl list-unit-files --no-legend --plain {' '.join(UNIT_PATTERNS)}")
    return [line.split()[0] for line in listed.stdout.splitlines() if line.strip()]


def test_units_enabled_and_active(host, units, init_name):
    if init_name != "systemd":
        if units:
            pytest.fail(f"units {units} asked for, but PID 1 is {init_name!r}, not systemd", pytrace=False)
        pytest.skip(f"PID 1 is {init_name!r}, not systemd: no units installed")
    if not units:
        pytest.skip(f"no unit matching {' '.join(UNIT_PATTERNS)} installed")
    bad = []
    for unit in units:
        service = host.service(unit)
        if not service.is_enabled:
            bad.append(f"{unit} not enabled")
        if not service.is_running:
            state = host.run(f"systemctl is-active {unit}").stdout.strip()
            bad.append(f"{unit} {state}")
    assert not bad, "; ".join(bad)
    print(f"units enabled and active: {', '.join(units)}")


def test_health_endpoint_answers(host, pytestconfig, units):
    url = pytestconfig.getoption("kt_health_url")
    if url is None:
        if not any("serve" in u or "sglang" in u for u in units):
            pytest.skip("no serve unit installed and no --kt-health-url given")
        url = DEFAULT_HEALTH_URL
    answer = host.run(f"python3 -c {shlex.quote(HEALTH_CHECK)} {shlex.quote(url)}")
    said = answer.stdout.strip() or answer.stderr.strip()
    assert answer.rc == 0 and answer.stdout.strip() == "200", f"{url}: {said}"
