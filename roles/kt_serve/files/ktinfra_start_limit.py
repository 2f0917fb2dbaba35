#!/usr/bin/env python3
"""supervisord event listener: stop a program at the systemd unit's start limit (kt_serve, supervisor path).

supervisord counts only exits within startsecs against startretries; a server that dies later (loading
experts minutes in) is RUNNING -> EXITED -> restarted without end. Subscribed to PROCESS_STATE_STARTING, this
counts the program's starts that follow an exit (from EXITED or BACKOFF) within the last INTERVAL seconds; the
start that makes them more than BURST is stopped over supervisord's XML-RPC, the reason written to stderr and
to LOG. A start from any other state (by hand, an update) begins a new count, as `systemctl reset-failed` +
start does.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="ktinfra-start-limit",
        description="supervisord event listener (events=PROCESS_STATE_STARTING): stop PROGRAM when it is "
        "started more than BURST times within INTERVAL seconds, each start after an exit",
    )
    parser.add_argument("program", help="supervisord program name, e.g. ktinfra-serve-NAME")
    parser.add_argument(
        "burst", type=int, help="starts allowed within INTERVAL (the unit's StartLimitBurst=)"
    )
    parser.add_argument("interval", type=int, help="seconds (the unit's StartLimitIntervalSec=)")
    parser.add_argument("log", help="file the reason for a stop is appended to (the program's log)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from supervisor import childutils  # the supervisor venv's python runs this; --help works without it

    program, burst, interval, log = args.program, args.burst, args.interval, args.log
    rpc = childutils.getRPCInterface(os.environ)
    starts: list[float] = []
    while True:
        _headers, payload = childutils.listener.wait(sys.stdin, sys.stdout)
        event = childutils.get_headers(payload)
        if event.get("processname") == program:
            now = time.time()
            again = event.get("from_state") in ("EXITED", "BACKOFF")
            starts = [t for t in starts if t > now - interval] + [now] if again else [now]
            if len(starts) > burst:
                said = (
                    f"ktinfra: {program} started {len(starts)} times within {interval} s, more than the "
                    f"unit's StartLimitBurst={burst}: stopped; `supervisorctl start {program}` tries again"
                )
                # a TERM that reaches supervisord's child before it has exec'd the command is lost (the fork
                # still has supervisord's handlers), and the stop then waits stopwaitsecs for its SIGKILL
                time.sleep(1)
                try:
                    rpc.supervisor.stopProcess(program, False)
                    starts = []
                except Exception as e:
                    said = f"ktinfra: could not stop {program} at its start limit: {e}"
                print(said, file=sys.stderr, flush=True)
                with open(log, "a") as f:
                    f.write(said + "\n")
        childutils.listener.ok(sys.stdout)


if __name__ == "__main__":
    main()
