"""docs/readme/facts.md gives the number of keys `make facts-docker` compares as the facts hold them now.

The page said tests/integration/facts_round_trip.py finds "53 keys, all equal in both containers"; the facts
have gained keys since (memory.hugetlb_bytes, cpu.amx_permission, cpu.memory_nodes_allowed,
cuda_visible_devices, ...), and the stage's two containers, run by hand on this host, now print "59 keys
equal, 0 differ" each. The count does not depend on the host where it has one memory node and no more than a
node's bytes (a list counts as one key): the development VM's capture (epyc-2c-nogpu, numa_node_bytes null)
flattens to the containers' 59 (they carry {"0": bytes}, one key either way). The page's number must be what
the script's own flatten() counts on that capture."""

import re
from pathlib import Path

from ktinfra.facts import from_capture

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "readme" / "facts.md"
SCRIPT = ROOT / "tests" / "integration" / "facts_round_trip.py"
CAPTURE = ROOT / "tests" / "fixtures" / "hosts" / "epyc-2c-nogpu"


def _script() -> dict:
    """The script's definitions (flatten, VOLATILE): it compares its argv files at module level, so only the
    part before that is run."""
    source = SCRIPT.read_text(encoding="utf-8")
    assert "\nlive, back = " in source
    names: dict = {}
    exec(compile(source.split("\nlive, back = ", 1)[0], str(SCRIPT), "exec"), names)
    return names


def test_the_page_gives_the_number_of_keys_the_round_trip_compares():
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    quoted = re.findall(r"answered in the same container: (\d+) keys, all equal", text)
    script = _script()
    compared = set(dict(script["flatten"](from_capture(CAPTURE)))) - script["VOLATILE"]
    assert quoted == [str(len(compared))]
