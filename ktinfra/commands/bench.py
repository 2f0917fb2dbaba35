"""`ktinfra bench`: load and capacity benchmark against a running endpoint (server or router)."""

from __future__ import annotations

import importlib.util
import json
import math
import secrets
from decimal import Decimal
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ktinfra import bench
from ktinfra.bench.client import shown_url
from ktinfra.bench.deadline import socks_proxy_problem
from ktinfra.bench.metrics import slowest_user_tps
from ktinfra.bench.plot import check_plot_path, plot_levels
from ktinfra.commands import BearerKeyFileOpt, non_empty_path, non_empty_text
from ktinfra.render.common import RenderError, read_api_key_file

# One thread per user; SGLang's own --max-running-requests is in the hundreds at most
MAX_USERS = 4096
DEFAULT_MAX_USERS = 64
# 2^20 tokens: beyond any served context length (the prompt is built in memory before the first request)
MAX_TOKENS = 1 << 20
MAX_REQUESTS = 1_000_000
MAX_SEED = 2**31 - 1
DEFAULT_TIMEOUT_S = 600.0
# each level's prompts come from seed * stride + users: levels of one run never share a seed
LEVEL_SEED_STRIDE = 1_000_033


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def _positive(name: str, value: float | None, maximum: float | None = None, unit: str = "") -> None:
    if value is not None and (not math.isfinite(value) or value <= 0):
        _fail(f"{name} must be a finite number above 0, not {value:g}")
    if value is not None and maximum is not None and value > maximum:
        _fail(f"{name} must be at most {maximum:g}{unit}, not {value:g}")


def _finite(value: object) -> object:
    """The result with any non-finite float as null, so that --json prints strict JSON (no NaN/Infinity)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _slowest(tps: dict, min_tps: float | None) -> str:
    """The slowest user's tok/s rounded down, with as many decimals as --min-tps has (at least one): rounded
    half up, 19.996 showed as 20.0 beside a failed --min-tps 20, and 19.998 as 20.0 beside a met 19.995."""
    decimals = 1 if min_tps is None else min(9, max(1, -Decimal(repr(min_tps)).as_tuple().exponent))
    value = slowest_user_tps(tps)
    if value is None or not math.isfinite(value):  # a server's absurd token count: inf
        return f"{value}"
    return f"{math.floor(value * 10**decimals + 1e-9) / 10**decimals:.{decimals}f}"


def _level_table(levels: list[dict], min_tps: float | None) -> Table:
    table = Table(title="ktinfra bench")
    # requests cut at the end of a level, and those --level-timeout left unsent, are neither ok nor failed:
    # `3/0` alone reads as all fine
    extra = [name for name in ("cut", "not_sent") if any(lv.get(name) for lv in levels)]
    for col in (
        "users",
        "/".join(["ok", "failed", *(name.replace("_", " ") for name in extra)]),
        "req/s",
        "out tok/s",
        "user tok/s min/med",
        "TTFT ms med/p99",
        "TPOT ms med",
    ):
        table.add_column(col, justify="right")
    if min_tps is not None:
        table.add_column(f">= {min_tps:g} tok/s")
    for lv in levels:
        tps, ttft, tpot = lv["user_tps"], lv["ttft_ms"], lv["tpot_ms"]
        row = [
            str(lv["concurrency"]),
            "/".join(str(lv.get(name, 0)) for name in ("completed", "failed", *extra)),
            f"{lv['request_throughput']:.2f}",
            f"{lv['output_throughput']:.1f}",
            f"{_slowest(tps, min_tps)}/{tps['median']:.1f}" if tps else "-",
            f"{ttft['median']:.0f}/{ttft['p99']:.0f}" if ttft else "-",
            f"{tpot['median']:.1f}" if tpot else "-",
        ]
        if min_tps is not None:
            row.append("yes" if lv.get("pass") else "no")
        table.add_row(*row)
    return table


def _round_up(seconds: float) -> float:
    """`seconds` rounded up to 2 decimals: a suggested 33.33 for 33.333... would be refused again."""
    return math.ceil(seconds * 100 - 1e-9) / 100


def _capacity_timeout(timeout: float | None, target_s: float) -> float:
    """The request timeout of a --capacity run. A request at exactly --min-tps takes target_s (--gen-tokens /
    --min-tps): timed out sooner, it fails its level though it met the target. A --timeout given below that is
    refused; left out, the default is raised to it."""
    if target_s > bench.MAX_TIMEOUT_S:
        _fail(
            f"--gen-tokens / --min-tps is {target_s:g} s, the time a request at the target speed may take: "
            f"beyond the longest --timeout ({bench.MAX_TIMEOUT_S:g} s, one day); raise --min-tps or lower "
            "--gen-tokens"
        )
    if timeout is None:
        return max(DEFAULT_TIMEOUT_S, target_s)
    if timeout < target_s:
        _fail(
            f"--timeout {timeout:g} is shorter than --gen-tokens / --min-tps ({target_s:g} s, the time a "
            "request at the target speed may take): such a request would time out and fail its level; "
            f"give --timeout {_round_up(target_s):g} or more, or leave it out (with --capacity the default "
            f"is that, where above {DEFAULT_TIMEOUT_S:g} s)"
        )
    return timeout


def _capacity_level_timeout(level_timeout: float | None, requests: int, target_s: float) -> float:
    """The time limit of a --capacity --requests level. Each user sends its requests back to back, so a level
    whose every request meets the target ends within requests x target_s; one still running then has missed
    it. Left out, GRACE_S on top covers what a user does between requests; a shorter one given is refused."""
    needed = requests * target_s
    if level_timeout is None:
        return needed + bench.runner.GRACE_S
    if level_timeout < needed:
        _fail(
            f"--level-timeout {level_timeout:g} is shorter than --requests x --gen-tokens / --min-tps "
            f"({needed:g} s, the time a level meeting the target may take): its last requests would be cut "
            f"and fail the level; give --level-timeout {_round_up(needed):g} or more, or leave it out (the "
            f"default with --capacity is that + {bench.runner.GRACE_S:g} s)"
        )
    return level_timeout


def _check_capacity_grace(grace: float, target_s: float) -> None:
    """A request at --min-tps takes up to gen_tokens / min_tps: cut sooner, it fails its level though it might
    have met the target, and the search reports a capacity below the server's."""
    if grace < target_s:
        _fail(
            f"--grace {grace:g} is shorter than --gen-tokens / --min-tps ({target_s:g} s, the time a request "
            "at the target speed may take): a request still running at the end of --duration that would "
            f"meet the target is cut and fails its level; give --grace {_round_up(target_s):g} or more, or "
            "leave it out (that is the default with --capacity)"
        )


def bench_command(
    url: str = typer.Option(
        ..., "--url", help="Endpoint base URL, e.g. http://127.0.0.1:30000 (server or router)."
    ),
    model: str = typer.Option(
        ...,
        "--model",
        callback=non_empty_text,
        help="Model name sent in OpenAI requests (served-model-name).",
    ),
    api: str = typer.Option("openai", "--api", help="openai (/v1/chat/completions) or sglang (/generate)."),
    users: int | None = typer.Option(
        None, "--users", min=1, max=MAX_USERS, help="Run one level with N concurrent users."
    ),
    capacity: bool = typer.Option(
        False, "--capacity", help="Search the largest concurrency meeting --min-tps."
    ),
    min_tps: float | None = typer.Option(
        None, "--min-tps", help="Output tok/s every user must get (--capacity only)."
    ),
    max_users: int | None = typer.Option(
        None,
        "--max-users",
        min=1,
        max=MAX_USERS,
        help=f"Upper bound for the capacity search (default {DEFAULT_MAX_USERS}).",
    ),
    prompt_tokens: int = typer.Option(
        500, "--prompt-tokens", min=1, max=MAX_TOKENS, help="Prompt length in tokens (approx.)."
    ),
    gen_tokens: int = typer.Option(
        500, "--gen-tokens", min=1, max=MAX_TOKENS, help="Tokens to generate per request."
    ),
    stream: bool = typer.Option(True, "--stream/--no-stream", help="Stream tokens (needed for TTFT/ITL)."),
    ignore_eos: bool | None = typer.Option(
        None,
        "--ignore-eos/--no-ignore-eos",
        help="Ask SGLang to ignore EOS (fixed output length). Default: on with --capacity, where a reply "
        "that stops early would count as a slow user; off with --users.",
        show_default=False,
    ),
    requests_per_user: int | None = typer.Option(
        None, "--requests", min=1, max=MAX_REQUESTS, help="Requests per user (default 2)."
    ),
    seed: int | None = typer.Option(
        None,
        "--seed",
        min=0,
        max=MAX_SEED,
        help="Seed of the prompts (default: a new one each run, so a second run against the same server "
        "does not hit its prefix cache; the results record it, and --seed repeats a run's prompts).",
        show_default=False,
    ),
    duration: float | None = typer.Option(None, "--duration", min=0.1, help="Seconds per level instead."),
    grace: float | None = typer.Option(
        None,
        "--grace",
        min=0.0,
        help=f"With --duration: seconds the requests in flight at its end may take to finish (default "
        f"{bench.runner.GRACE_S:g}; with --capacity at least --gen-tokens / --min-tps, also when given); "
        "those still running then are cut, counted apart from completed and failed (and failing a --capacity "
        "level).",
        show_default=False,
    ),
    timeout: float | None = typer.Option(
        None,
        "--timeout",
        min=1.0,
        help=f"Seconds one request may take in all (and at most between two reads). Default "
        f"{DEFAULT_TIMEOUT_S:g}; with --capacity at least --gen-tokens / --min-tps (a request at the target "
        "speed takes that long), and a shorter --timeout is refused.",
        show_default=False,
    ),
    level_timeout: float | None = typer.Option(
        None,
        "--level-timeout",
        help="With --requests (the default): seconds one level may run in all; then no user starts another "
        "request, those in flight are cut and the rest counted as not sent (both fail a --capacity level). "
        "Default: none with --users; with --capacity --requests x --gen-tokens / --min-tps (the longest a "
        f"level meeting the target takes) + {bench.runner.GRACE_S:g} s, and a shorter one is refused.",
        show_default=False,
    ),
    api_key_file: BearerKeyFileOpt = None,
    as_json: bool = typer.Option(False, "--json", help="Print machine JSON on stdout."),
    plot: Annotated[
        str | None,
        typer.Option(
            "--plot",
            callback=non_empty_path,
            help="Write a plot (.png, .svg or .pdf): tok/s per user and TTFT vs users.",
        ),
    ] = None,
) -> None:
    """Benchmark an OpenAI-compatible or SGLang endpoint: one level (--users) or a capacity search."""
    if (users is None) == (not capacity):
        _fail("give exactly one of --users N or --capacity")
    if capacity and min_tps is None:
        _fail("--capacity needs --min-tps")
    if not capacity and min_tps is not None:
        _fail("--min-tps is the target of --capacity; with --users the table shows each user's tok/s")
    if not capacity and max_users is not None:
        _fail("--max-users bounds the --capacity search; --users N runs that one level")
    if max_users is None:
        max_users = DEFAULT_MAX_USERS
    if requests_per_user is not None and duration is not None:
        _fail("give at most one of --requests or --duration")
    _positive("--min-tps", min_tps)
    _positive("--timeout", timeout, bench.MAX_TIMEOUT_S, " s (one day)")
    _positive("--duration", duration)
    if grace is not None and duration is None:
        _fail("--grace is the time a --duration level's last requests get to finish; give --duration too")
    if grace is not None and not math.isfinite(grace):
        _fail(f"--grace must be a finite number of seconds, not {grace:g}")
    _positive("--level-timeout", level_timeout)
    if level_timeout is not None and duration is not None:
        _fail("--level-timeout bounds a --requests level; a --duration level ends at --duration and --grace")
    if requests_per_user is None and duration is None:
        requests_per_user = 2
    if capacity:
        timeout = _capacity_timeout(timeout, gen_tokens / min_tps)
        if grace is not None:
            _check_capacity_grace(grace, gen_tokens / min_tps)
        if requests_per_user is not None:
            level_timeout = _capacity_level_timeout(level_timeout, requests_per_user, gen_tokens / min_tps)
    elif timeout is None:
        timeout = DEFAULT_TIMEOUT_S
    if plot is not None:
        if importlib.util.find_spec("matplotlib") is None:
            _fail("--plot needs matplotlib: pip install 'ktinfra[plot]'")
        try:
            check_plot_path(plot)
        except ValueError as exc:
            _fail(str(exc))
    if capacity and duration is not None and grace is None:
        # a request at --min-tps takes up to gen_tokens / min_tps: one cut before then (and so failing its
        # level) might have met the target
        grace = max(bench.runner.GRACE_S, gen_tokens / min_tps)
    if seed is None:
        seed = secrets.randbelow(MAX_SEED + 1)
    eos_by_default = ignore_eos is None and capacity
    if ignore_eos is None:
        ignore_eos = capacity
    try:
        api_key = read_api_key_file(api_key_file)
    except RenderError as exc:
        _fail(str(exc))
    try:
        sc = bench.Scenario(
            url=url,
            model=model,
            api=api,
            prompt_tokens=prompt_tokens,
            gen_tokens=gen_tokens,
            stream=stream,
            ignore_eos=ignore_eos,
            timeout_s=timeout,
            api_key=api_key,
        )
    except ValueError as exc:
        _fail(str(exc))
    problem = socks_proxy_problem(sc.url)
    if problem:
        _fail(problem)

    console = Console(stderr=True)
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=as_json,
    )

    def level(n: int) -> dict:
        total = n * requests_per_user if requests_per_user is not None else None
        task = progress.add_task(f"{n} users", total=total)
        result = bench.run_level(
            sc,
            n,
            requests_per_user,
            duration,
            on_result=lambda _r: progress.advance(task),
            seed=seed * LEVEL_SEED_STRIDE + n,
            grace_s=grace,
            time_limit_s=level_timeout,
        )
        progress.update(task, total=result["completed"] + result["failed"] + result["cut"])
        return result

    finished: list[dict] = []
    stopped: str | None = None  # why the load stopped before its end, other than Ctrl-C
    try:
        with progress:
            if capacity:
                result = bench.search(level, min_tps=min_tps, max_users=max_users, on_level=finished.append)
                levels = result["levels"]
            else:
                levels = [level(users)]
                result = {"levels": levels}
    except (KeyboardInterrupt, bench.ThreadLimit) as exc:
        if isinstance(exc, bench.ThreadLimit):
            # e.g. --max-users 4096 in a container with a pids limit: a clear error, not a traceback that
            # loses the levels already measured
            stopped = f"{exc}; lower --{'max-users' if capacity else 'users'}"
        if not finished:
            if stopped:
                _fail(stopped)
            typer.echo("error: interrupted: no result (requests in flight were abandoned)", err=True)
            raise typer.Exit(130) from None
        # minutes of load already measured: show them, then exit as interrupted
        levels = sorted(finished, key=lambda lv: lv["concurrency"])
        result = {"interrupted": True, "min_tps": min_tps, "levels": levels}
        if stopped:
            result["error"] = stopped
        passed = [lv["concurrency"] for lv in levels if lv.get("pass")]
        result["capacity_at_least"] = max(passed, default=0)
    result["scenario"] = {
        "url": shown_url(url),
        "api": api,
        "model": model,
        "prompt_tokens": prompt_tokens,
        "gen_tokens": gen_tokens,
        "stream": stream,
        "ignore_eos": ignore_eos,
        "requests_per_user": requests_per_user,
        "seed": seed,
        "duration_s": duration,
        "grace_s": (bench.runner.GRACE_S if grace is None else grace) if duration is not None else None,
        "timeout_s": timeout,
        "level_timeout_s": level_timeout,
    }
    if capacity:  # "limited_by_max_users" says the search hit it; this says where it was
        result["scenario"]["max_users"] = max_users
    plot_error = None
    plot_interrupted = False
    if plot is not None:
        try:  # the results are printed either way: a failed plot must not lose minutes of load
            plot_levels(levels, plot, min_tps=min_tps, title=f"{model} @ {shown_url(url)}")
            result["plot"] = str(plot)
        except (ValueError, OSError, RuntimeError) as exc:
            plot_error = f"no plot written to {plot}: {exc}"
            plot = None
        except KeyboardInterrupt:  # a second or more: Ctrl-C then must not lose the levels either
            plot_error = f"interrupted while plotting: no plot written to {plot}"
            plot_interrupted = True
            plot = None
    if as_json:
        typer.echo(json.dumps(_finite(result), indent=2, allow_nan=False))
    else:
        _report(result, levels, capacity, min_tps, plot)
    refused = [e for lv in levels for e in lv["errors"] if e.startswith("HTTP 4")]
    if eos_by_default and refused and not any(lv["completed"] for lv in levels):
        typer.echo(
            f"error: the server refused every request ({refused[0][:120]}): --capacity asks for fixed-length "
            "replies with SGLang's ignore_eos by default; pass --no-ignore-eos to a server without it",
            err=True,
        )
    if plot_error is not None:
        if plot_interrupted:
            typer.echo(f"error: {plot_error}", err=True)
            raise typer.Exit(130)
        _fail(plot_error)
    if stopped:
        _fail(f"{stopped}: the search stopped after {len(levels)} finished level(s)")
    if result.get("interrupted"):
        typer.echo(
            f"error: interrupted after {len(levels)} finished level(s); the search did not end "
            "(requests in flight were abandoned)",
            err=True,
        )
        raise typer.Exit(130)
    if not any(lv["completed"] for lv in levels):
        raise typer.Exit(1)  # nothing got through: endpoint down or rejecting requests


def _report(
    result: dict, levels: list[dict], capacity: bool, min_tps: float | None, plot: Path | None
) -> None:
    out = Console()
    out.print(_level_table(levels, min_tps if capacity else None))
    if result.get("interrupted"):
        why = "stopped by an error below" if result.get("error") else "interrupted"
        out.print(
            f"capacity: [bold]>= {result['capacity_at_least']}[/bold] users at >= {min_tps:g} tok/s each "
            f"({why}: the search did not finish)"
        )
    elif capacity and result["limited_by_max_users"]:
        out.print(
            f"capacity: [bold]>= {result['capacity']}[/bold] users at >= {min_tps:g} tok/s each "
            "(stopped at --max-users; raise it to search further)"
        )
    elif capacity:
        out.print(f"capacity: [bold]{result['capacity']}[/bold] users at >= {min_tps:g} tok/s each")
    estimated = sum(lv.get("output_tokens_estimated", 0) for lv in levels)
    if estimated:
        out.print(
            f"{estimated} completed request(s) came without usage from the server: "
            "output tokens estimated from the reply (~4 characters a token, at least 1 a streamed chunk)"
        )
    estimated = sum(lv.get("input_tokens_estimated", 0) for lv in levels)
    if estimated:
        out.print(
            f"{estimated} completed request(s) came without usage.prompt_tokens: input tokens are the "
            "requested prompt length (--prompt-tokens, counted in words)"
        )
    if plot is not None:
        out.print(f"plot written to {escape(str(plot))}")
    if any(lv["failed"] for lv in levels):
        out.print(f"[red]failed requests: {escape('; '.join(_counted_errors(levels)))}")
    cut = sum(lv["cut"] for lv in levels)
    not_sent = sum(lv.get("not_sent", 0) for lv in levels)
    grace, level_timeout = result["scenario"]["grace_s"], result["scenario"]["level_timeout_s"]
    if cut and grace is not None:
        out.print(
            f"{cut} request(s) still running {grace:g} s after the end of --duration were cut: counted "
            "neither completed nor failed (a longer --duration or --grace lets them finish)"
        )
    elif cut or not_sent:
        out.print(
            f"{cut} request(s) still running at the level's time limit (--level-timeout {level_timeout:g} s) "
            f"were cut and {not_sent} not sent: counted neither completed nor failed (a longer "
            "--level-timeout lets them finish)"
        )
    for line in _pause_notes(levels):
        out.print(escape(line))


def _counted_errors(levels: list[dict]) -> list[str]:
    """Each level's errors, the most frequent first, with how many requests failed so."""
    shown = []
    for lv in levels:
        shown += [f"{error} (x{n})" for error, n in zip(lv["errors"], lv["error_counts"], strict=True)]
        if lv.get("other_errors"):
            shown.append(f"{lv['other_errors']} more with other errors")
    return shown


def _pause_notes(levels: list[dict]) -> list[str]:
    """Why users paused: replies that are not the API's, and the server's Retry-After values."""
    notes = []
    unexpected = sum(lv.get("unexpected_replies", 0) for lv in levels)
    if unexpected:
        notes.append(
            f"{unexpected} request(s) got a 200 that is not an {'/'.join(bench.APIS)} API reply (see "
            "'unexpected reply' above): --url (or --api) likely points at another service or a proxy's "
            "page; each user paused after it (backoff) rather than re-sending at once"
        )
    asked = [lv["retry_after"] for lv in levels if lv.get("retry_after")]
    honoured = sum(ra["honoured"] for ra in asked)
    if honoured:
        longest = max(ra["longest_s"] for ra in asked)
        notes.append(f"the server asked {honoured} time(s) to retry later (Retry-After, up to {longest:g} s)")
    capped = sum(ra["capped"] for ra in asked)
    ignored = sum(ra["ignored"] for ra in asked)
    if capped or ignored:
        odd = sorted({v for ra in asked for v in ra["odd_values"]})[:5]
        notes.append(
            f"Retry-After values the bench did not follow ({', '.join(repr(v) for v in odd)}): {capped} "
            f"over {asked[0]['max_s']:g} s ({bench.runner.RETRY_AFTER_MAX_S:g} s, or --timeout if less) "
            f"paused only that long, {ignored} not a delay ignored "
            "(the usual backoff applied)"
        )
    return notes


def register(app: typer.Typer) -> None:
    app.command("bench")(bench_command)
