"""`make facts-docker`: the facts a capture gives back must be the facts the live host gave.

usage: facts_round_trip.py LIVE.json FROM_CAPTURE.json; exits 1 naming every key that differs. Free memory,
the disks' free and used bytes and the capture's own path change between two reads: not compared.
"""

import json
import sys

VOLATILE = {"source", "memory.available_bytes"}
DISK_VOLATILE = ("avail_bytes", "used_bytes")


def flatten(value, prefix=""):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from flatten(item, f"{prefix}{key}.")
    elif isinstance(value, list) and prefix.startswith("disks."):
        yield prefix[:-1], [{k: v for k, v in d.items() if k not in DISK_VOLATILE} for d in value]
    else:
        yield prefix[:-1], value


live, back = (dict(flatten(json.load(open(path)))) for path in sys.argv[1:3])
keys = (set(live) | set(back)) - VOLATILE
differ = sorted(k for k in keys if live.get(k) != back.get(k))
for key in differ:
    print(f"{key}: live {live.get(key)!r} != capture {back.get(key)!r}")
print(f"{len(keys) - len(differ)} keys equal, {len(differ)} differ ({sys.argv[2]})")
sys.exit(1 if differ else 0)
