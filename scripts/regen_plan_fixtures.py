"""Regenerate tests/fixtures/plans/*.json with the real planner: `python scripts/regen_plan_fixtures.py`.

The render tests (tests/unit/test_render_*.py, test_kt_train_role.py, tests/integration/test_render_systemd.py
and others) read these plans; they were hand-written once and drifted from what `ktinfra plan` produces.
Each fixture is now the stdout of `ktinfra plan --json` (run as `sys.executable -m ktinfra`, from the
repository root) on a host capture under tests/fixtures/hosts/, with the flags recorded in FIXTURES below.
tests/unit/test_plan_fixtures_fresh.py runs the same commands and fails when a fixture differs: after a
planner change, run this script and review the diff of the fixtures (and of the tests it breaks).

Output: the CLI's own JSON (its key order, indent 2) and the newline `typer.echo` ends it with; nothing is
re-sorted or rewritten, so a fixture is byte for byte what the CLI prints. A plan carries no timestamp, no
ktinfra version and no path of the checkout (the capture is read by the CLI, the plan does not name it);
this script refuses output that holds the checkout's path or the temporary facts file's, so a volatile field
added to plans later shows up here instead of in a flaky test. Only feasible plans are written (exit 0):
`ktinfra render` refuses the others.

Where a fixture needs a decision the capture alone would not give, the entry says so with a flag of the CLI
(--cpu-format, --port, --stack) or, where the CLI has no flag, with `disk_avail_bytes`: the capture's facts
(`ktinfra.facts.from_capture`, what `plan --from` reads) with that filesystem's free space replaced, written
to a temporary file and passed as `plan --facts` (tests/unit/test_plan.py's
test_h100_with_room_on_disk_uses_amxint8_where_kt_kernel_runs_experts does the same). Why: the real H100
capture has 68.7 GB free on /, and the planner rightly finds that too small for an AMXINT8 conversion
(91.1 GB) or for SFT of Qwen3-30B-A3B
(83.3 GB with three saved LoRA checkpoints), which would leave no feasible H100 plan to render.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PLANS = REPO / "tests" / "fixtures" / "plans"
HOSTS = REPO / "tests" / "fixtures" / "hosts"

# 500 GB free: test_plan.py's "room on disk" for the H100 capture
ROOMY_DISK = {"/": 500 * 10**9}


@dataclass(frozen=True)
class Fixture:
    file: str  # under tests/fixtures/plans/
    capture: str  # a folder under tests/fixtures/hosts/
    model: str
    mode: str
    flags: tuple[str, ...] = ()  # more `ktinfra plan` options
    # mount -> free bytes, in place of the capture's (then planned from `--facts`, not `--from`)
    disk_avail_bytes: dict[str, int] = field(default_factory=dict)
    why: str = ""


FIXTURES: tuple[Fixture, ...] = (
    Fixture(
        "h100-qwen3-30b-a3b-serve.json",
        "h100-xeon-amx-16c",
        "Qwen3-30B-A3B",
        "serve",
        ("--cpu-format", "AMXINT8"),
        ROOMY_DISK,
        why="the AMXINT8 (int8 conversion) H100 plan the render tests use as `amx8`; on the capture's own "
        "68.7 GB disk the planner reads BF16 in place, and an AMXINT8 asked for is infeasible",
    ),
    Fixture(
        "h100-qwen3-30b-a3b-sft-current.json",
        "h100-xeon-amx-16c",
        "Qwen3-30B-A3B",
        "sft",
        (),
        ROOMY_DISK,
        why="current-stack (kt_config, accelerate) SFT; the capture's 68.7 GB disk is short of the 83.3 GB",
    ),
    Fixture(
        "seed002-qwen3-30b-a3b-serve.json",
        "synthetic-autodl-6430-4090",
        "Qwen3-30B-A3B",
        "serve",
        ("--stack", "kt-0.4-autodl", "--port", "8000"),
        why="seed 002 section 4.3.1's host and stack; --port 8000 as its launch line (the golden argv tests)",
    ),
    Fixture(
        "seed002-qwen3-30b-a3b-sft-legacy.json",
        "synthetic-autodl-6430-4090",
        "Qwen3-30B-A3B",
        "sft",
        ("--stack", "kt-0.4-autodl"),
        why="legacy-stack (use_kt, kt_optimize_rule, llamafactory-cli) SFT on the seed 002 host",
    ),
)


class RegenError(RuntimeError):
    pass


def _facts_file(fixture: Fixture, directory: Path) -> Path:
    """The capture's facts with the recorded free space, as a file for `plan --facts`."""
    from ktinfra import facts

    host = facts.from_capture(HOSTS / fixture.capture)
    mounts = {disk["mount"]: disk for disk in host["disks"]}
    for mount, avail in fixture.disk_avail_bytes.items():
        if mount not in mounts:
            raise RegenError(f"{fixture.file}: capture {fixture.capture} has no filesystem {mount}")
        mounts[mount]["avail_bytes"] = avail
    path = directory / "facts.json"
    path.write_text(json.dumps(host, indent=2) + "\n")
    return path


def command(fixture: Fixture, facts_file: Path | None = None) -> list[str]:
    capture = f"tests/fixtures/hosts/{fixture.capture}"
    source = ["--facts", str(facts_file)] if facts_file else ["--from", capture]
    return [
        sys.executable, "-m", "ktinfra", "plan", "--model", fixture.model, "--mode", fixture.mode,
        *source, *fixture.flags, "--json",
    ]  # fmt: skip


def plan_text(fixture: Fixture) -> str:
    """What the fixture must hold: `ktinfra plan --json`'s stdout for it, as the CLI printed it."""
    with tempfile.TemporaryDirectory(prefix="ktinfra-plan-fixture-") as tmp:
        facts_file = _facts_file(fixture, Path(tmp)) if fixture.disk_avail_bytes else None
        argv = command(fixture, facts_file)
        proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RegenError(
                f"{fixture.file}: `{' '.join(argv[1:])}` exited {proc.returncode} (only feasible plans, "
                f"exit 0, are rendered):\n{proc.stderr}{proc.stdout[-2000:]}"
            )
        for volatile in (str(REPO), tmp):
            if volatile in proc.stdout:
                raise RegenError(f"{fixture.file}: the plan holds the path {volatile}: not a stable fixture")
    json.loads(proc.stdout)  # one JSON document, nothing else on stdout
    return proc.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a fixture is stale")
    args = parser.parse_args(argv)
    stale = []
    for fixture in FIXTURES:
        text = plan_text(fixture)
        path = PLANS / fixture.file
        if path.exists() and path.read_text() == text:
            print(f"up to date  {path.relative_to(REPO)}")
            continue
        stale.append(fixture.file)
        if args.check:
            print(f"stale       {path.relative_to(REPO)}")
        else:
            path.write_text(text)
            print(f"written     {path.relative_to(REPO)}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
