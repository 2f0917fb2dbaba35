"""Parse SGLang (sglang-kt) server log lines into typed events.

Formats follow the scheduler's log strings: `Decode batch. #running-req: …` (older releases print
`Decode batch.`, newer ones `Decode batch,`, optionally with ` [iter]`), the startup line
`max_total_num_tokens=… available_gpu_mem=… GB`, `KV cache pool is full. Retract requests. …`,
`KV Cache is allocated. #tokens: … KV size: … GB`, `Prefill/Decode out of memory. …`, CUDA OOM tracebacks
and the `server_args=ServerArgs(…)` dump.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime

_TS = re.compile(r"\[(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})")
BATCH_LINE = re.compile(r"(Decode|Prefill) batch(?: \[\d+\])?[.,] ")
_FIELD = re.compile(
    r"(#[a-z-]+|token usage|full token usage|swa token usage|[a-z]+ graph|gen throughput \(token/s\)): "
    r"([^,]+)"
)
_CONFIG = re.compile(r"max_total_num_tokens=(\d+).*?available_(gpu|cpu)_mem=([\d.]+) GB")
_CONFIG_FIELD = re.compile(
    r"\b(max_total_num_tokens|chunked_prefill_size|max_prefill_tokens|max_running_requests|context_len)=(-?\d+)"
)
_KV_POOL = re.compile(
    r"KV Cache is allocated\. #tokens: (\d+), "
    r"(?:KV size: ([\d.]+) GB|K size: ([\d.]+) GB, V size: ([\d.]+) GB)"
)
_RETRACT = re.compile(r"KV cache pool is full\. Retract requests\. #retracted_reqs: (\d+)")
SERVER_ARGS_MARK = "server_args=ServerArgs("  # printed once at every server start
_SERVER_ARGS = re.compile(re.escape(SERVER_ARGS_MARK) + r"(.*)\)")
_ARG = re.compile(r"\b([a-z_]+)=('[^']*'|\"[^\"]*\"|\[[^\]]*\]|[^,()]+)")
_CAPTURE_BS = re.compile(r"Capture (?:cuda|cpu|npu) graph bs \[([\d, ]+)\]")
_OOM_TEXT = re.compile(
    r"(Prefill|Decode) out of memory|CUDA out of memory|OutOfMemoryError|alloc_req_slots runs out of memory"
    # mem_cache/common.py alloc_token_slots (page size 1, since SGLang #11313 of 2025-10: no phase in it) and
    # schedule_batch.py retract_decode (a decode batch that retraction could not shrink enough)
    r"|Out of memory\. Try to lower your batch size|Out of memory even after retracting"
)
_GRAPH_OFF = re.compile(r"Cuda graph is disabled|disable_cuda_graph=True")
# Texts that every match of _OOM_TEXT, _GRAPH_OFF and _LOAD holds: a line without it is not searched. Those
# patterns begin with an alternation or \b, which the re module cannot scan for by their first letters, so
# each search tried every alternative at every character of every line (a third of parsing a long log).
_OOM_NEEDLE, _GRAPH_OFF_NEEDLE, _LOAD_NEEDLE = "emory", "isable", "Load weight "
_RUNTIME_OOM = re.compile(
    r"\bRuntimeError: (?:(?:Prefill|Decode) out of memory|Out of memory\. Try to lower)"
    r"|\bException: Capture cuda graph failed:"  # cuda_graph_runner.py re-raises the capture's OOM
)
# the frames of the KV allocation that failed (mem_cache/common.py, schedule_batch.py)
_DECODE_FRAMES = r"|alloc_for_decode|prepare_for_decode"
_PREFILL_FRAMES = r"|alloc_for_extend|prepare_for_extend"
# model_runner.py load_model: between these two lines the weights (GPU experts included) are being loaded
_LOAD = re.compile(r"\bLoad weight (begin|end)\b")
_LOAD_FRAME = re.compile(r"\bin load_model\b")
# (piecewise_)cuda_graph_runner.py capturing its graphs (at start, after the KV pool took its share): any
# frame of the runner but replay/can_run, which run a captured graph at decode time
_GRAPH_FRAME = re.compile(
    r'cuda_graph_runner\.py", line \d+, in (?!replay|can_run)|Capture cuda graph failed'
)
# the rank after the stamp; SGLANG_LOG_MS=1 adds milliseconds to the stamp (`[2025-11-11 13:00:50.123 TP0]`,
# utils/common.py configure_logger), which differ between two lines of one rank
_RANK = re.compile(r"\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d+)?([^\]]*)\]")
# model_runner_kv_cache_mixin.py init_memory_pool: after the weights no memory was left for any KV pool
_NO_POOL = re.compile(r"Not enough memory\. Please try to increase --mem-fraction-static")

OOM_SAME_EVENT_LINES = 30

# Server args whose current values the advisor needs; anything else in the dump is ignored.
TRACKED_ARGS = (
    "schedule_conservativeness",
    "mem_fraction_static",
    "chunked_prefill_size",
    "max_running_requests",
    "cuda_graph_max_bs",
    "kt_num_gpu_experts",
    "max_total_tokens",
    "page_size",
    "kt_gpu_prefill_token_threshold",
    "kt_gpu_experts_ratio",
    "disable_cuda_graph",
    # which batch sizes SGLang captures graphs for (server_args._generate_cuda_graph_batch_sizes)
    "disable_cuda_graph_padding",
    "speculative_algorithm",
    # a LoRA server (sglang-kt: every expert on the CPU, at least 2 running requests; ktinfra.plan's bounds)
    "enable_lora",
    "kt_lora_path",
    "kt_expert_lora_path",
    # the model, for its experts per MoE layer (the most --kt-num-gpu-experts can place)
    "model_path",
    # how many decode iterations pass between two decode lines: the peak #running-req is a sample
    "decode_log_interval",
)
DECODE_LOG_INTERVAL = 40  # SGLang's default --decode-log-interval (server_args.py)


@dataclass
class BatchLine:
    kind: str  # "decode" | "prefill"
    line: str
    ts: datetime | None
    running_req: int | None = None
    queue_req: int | None = None
    token_usage: float | None = None
    graph: bool | None = None
    gen_throughput: float | None = None


# where an OOM happened: load (the weights), cuda_graph (capturing the graphs at start), req_slots (the
# request pool), prefill, decode, or unknown
OOM_PHASES = ("prefill", "decode", "req_slots", "load", "cuda_graph", "unknown")


@dataclass
class OomEvent:
    phase: str  # one of OOM_PHASES
    line: str
    ts: datetime | None
    line_no: int = 0


@dataclass
class ServerLog:
    batches: list[BatchLine] = field(default_factory=list)
    retracts: list[tuple[str, datetime | None, int]] = field(default_factory=list)
    ooms: list[OomEvent] = field(default_factory=list)
    config: dict = field(default_factory=dict)
    config_line: str | None = None
    server_args: dict = field(default_factory=dict)
    server_args_line: str | None = None
    capture_bs: list[int] = field(default_factory=list)
    capture_line: str | None = None
    graph_off_line: str | None = None  # the server said CUDA graphs are off (KT LoRA, --disable-cuda-graph)
    kv_pool: dict = field(default_factory=dict)  # {"tokens", "gib"}: the pool SGLang allocated
    kv_pool_line: str | None = None
    # SGLang's start-up failure "Not enough memory. Please try to increase --mem-fraction-static": the weights
    # left no memory for a KV pool (the server never starts, so the log has no scheduler line)
    no_pool: list[str] = field(default_factory=list)
    lines_read: int = 0
    # Server starts (`server_args=` lines) before the last one. A start whose server args equal the run
    # before it is systemd's Restart=on-failure after a crash (an OOM) with the same flags: that run's events
    # (OOMs, retractions, batches) still describe these flags and are carried (earlier_runs_carried). A
    # start with other args drops everything before it (earlier_runs): an old run's OOM says nothing of them.
    earlier_runs: int = 0
    earlier_runs_carried: int = 0

    @property
    def decodes(self) -> list[BatchLine]:
        return [b for b in self.batches if b.kind == "decode"]

    @property
    def running_req_peak(self) -> int | None:
        """The most requests a logged batch line ran, None when none says. Both line kinds carry it
        (scheduler_metrics_mixin.py): a prefill line the requests decoding when it was scheduled, logged for
        every prefill batch; a decode line only every --decode-log-interval iterations. A sample, so the
        real peak may be higher."""
        return max((b.running_req for b in self.batches if b.running_req is not None), default=None)

    @property
    def first_ts(self) -> datetime | None:
        return next((t for t in self._all_ts()), None)

    @property
    def last_ts(self) -> datetime | None:
        return next((t for t in reversed(list(self._all_ts()))), None)

    def _all_ts(self):
        stamps = [b.ts for b in self.batches] + [r[1] for r in self.retracts] + [o.ts for o in self.ooms]
        return iter(sorted(t for t in stamps if t is not None))


def _timestamp(line: str) -> datetime | None:
    match = _TS.search(line)
    if not match:
        return None
    # datetime() from the stamp's numbers, not strptime: the same dates and the same refusals (month 13,
    # second 60), and strptime's per-call locale and format lookups were half of parsing a long log
    try:
        return datetime(*map(int, match.groups()))
    except ValueError:  # a garbled stamp such as 2025-13-45: no time for this line
        return None


def _number(text: str) -> float | None:
    """A finite number, or None: nan, inf (also a digit string too long for a float) and junk are unknown."""
    try:
        number = float(text.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None


MAX_COUNT = 2**53  # beyond it a count is damage: it would overflow float arithmetic (or int() itself)


def _count(text: str) -> int | None:
    """An integer of the log (tokens, requests, batch sizes), or None: unknown when it is no real count."""
    text = text.strip()
    if len(text.lstrip("-")) > 16:
        return None
    try:
        number = int(text)
    except ValueError:
        return None
    return number if abs(number) <= MAX_COUNT else None


def _requests(text: str) -> int:
    number = _number(text)
    return int(number) if number is not None and 0 <= number <= MAX_COUNT else 0


def _parse_batch(line: str, kind: str, ts: datetime | None) -> BatchLine:
    batch = BatchLine(kind=kind.lower(), line=line.strip(), ts=ts)
    swa = []  # a hybrid-SWA model's line: `full token usage: …, swa token usage: …`
    for key, raw in _FIELD.findall(line[line.find("batch") :]):
        value = raw.strip()
        if key == "#running-req":
            batch.running_req = _requests(value)
        elif key == "#queue-req":
            batch.queue_req = _requests(value)
        elif key == "swa token usage":
            swa.append(_number(value))
        elif key in ("token usage", "full token usage") and batch.token_usage is None:
            batch.token_usage = _number(value)
        elif key.endswith(" graph"):
            batch.graph = value == "True"
        elif key.startswith("gen throughput"):
            batch.gen_throughput = _number(value)
    if swa:
        # SGLang's own token usage of a hybrid-SWA pool is max(full, swa) (scheduler_metrics_mixin.py
        # log_decode_stats); unknown when either is. A mamba line (`full token usage: …, mamba usage: …`)
        # stays the full figure, as in SGLang.
        both = (batch.token_usage, swa[0])
        batch.token_usage = None if None in both else max(both)
    return batch


def _scalar(raw: str):
    """A server_args value as Python: None, bool, int, finite float, else the text. A non-finite number
    (nan, inf) is None, unknown; whether a value has the type a rule needs is the rule's check (advise.py)."""
    raw = raw.strip()
    if raw in ("None", "null"):
        return None
    if raw in ("True", "False"):
        return raw == "True"
    if re.fullmatch(r"-?\d+", raw):
        return _count(raw)
    try:
        number = float(raw)
    except ValueError:
        return raw.strip("'\"")
    if not math.isfinite(number):
        return None
    return int(number) if number.is_integer() and "." not in raw else number


def _oom_phase(lines: list[str], index: int, run_start: int = 0) -> str:
    line = lines[index]
    if "alloc_req_slots runs out of memory" in line:  # the request pool: --max-running-requests
        return "req_slots"
    if "Prefill out of memory" in line:
        return "prefill"
    if "Decode out of memory" in line or "Out of memory even after retracting" in line:
        return "decode"
    # A CUDA OOM traceback names the forward pass a few frames above the error line (never an earlier run's).
    context = "\n".join(lines[max(run_start, index - 30) : index + 1])
    if _LOAD_FRAME.search(context):  # ModelRunner.load_model: the weights did not fit
        return "load"
    if _GRAPH_FRAME.search(context):  # before decode: a capture runs the attention backend's forward_decode
        return "cuda_graph"
    if re.search(r"forward_decode|Decode out of memory" + _DECODE_FRAMES, context):
        return "decode"
    # chunked_prefill, but not the chunked_prefill_size= of the startup lines (server_args, the config line)
    if re.search(
        r"forward_extend|Prefill out of memory|chunked_prefill(?!_size=)" + _PREFILL_FRAMES, context
    ):
        return "prefill"
    return "unknown"


def _same_args(dump: str, previous: str | None) -> bool:
    """Two `server_args=ServerArgs(...)` dumps of the same flags. SGLang draws random_seed at every start
    when none is given (server_args.py), so it is left out."""
    if previous is None:
        return False
    seedless = [re.sub(r"\brandom_seed=-?\d+", "random_seed=", text) for text in (dump, previous)]
    return seedless[0] == seedless[1]


def _seen_anything(log: ServerLog) -> bool:
    events = (
        log.batches,
        log.retracts,
        log.ooms,
        log.config,
        log.server_args_line,
        log.capture_bs,
        log.no_pool,
    )
    return any(events)


def _parse_event(log: ServerLog, line: str, ts: datetime | None) -> bool:
    """Record LINE when it is a scheduler event other than an OOM (a batch, a retraction, a startup line)."""
    if head := BATCH_LINE.search(line):
        log.batches.append(_parse_batch(line, head.group(1), ts))
        return True
    if (match := _RETRACT.search(line)) and (retracted := _count(match.group(1))) is not None:
        log.retracts.append((line.strip(), ts, retracted))
        return True
    if mem := _CONFIG.search(line):
        fields = {k: _count(v) for k, v in _CONFIG_FIELD.findall(line)}
        log.config = {k: v for k, v in fields.items() if v is not None}
        # `[\d.]+` also matches 1.2.3 or a digit run too long for a float: then the free memory is unknown
        if (free := _number(mem.group(3))) is not None:
            log.config[f"available_{mem.group(2)}_mem_gb"] = free
        log.config_line = line.strip()
        return True
    if _GRAPH_OFF_NEEDLE in line and _GRAPH_OFF.search(line):
        log.graph_off_line = line.strip()
    if match := _SERVER_ARGS.search(line):
        found = dict(_ARG.findall(match.group(1)))
        log.server_args = {k: _scalar(found[k]) for k in TRACKED_ARGS if k in found}
        log.server_args_line = line.strip()
        return True
    if match := _KV_POOL.search(line):
        if match.group(2):
            gib = _number(match.group(2))
        else:
            k_gib, v_gib = _number(match.group(3)), _number(match.group(4))
            gib = None if k_gib is None or v_gib is None else k_gib + v_gib
        tokens = _count(match.group(1))
        if gib is not None and tokens is not None:  # an unreadable size (1..2 GB) leaves the pool unknown
            log.kv_pool = {"tokens": tokens, "gib": gib}
            log.kv_pool_line = line.strip()
        return True
    if _NO_POOL.search(line):
        log.no_pool.append(line.strip())
        return True
    if match := _CAPTURE_BS.search(line):
        sizes = [_count(x) for x in match.group(1).replace(" ", "").split(",") if x]
        if None not in sizes:  # a damaged list is no list
            log.capture_bs = sizes
            log.capture_line = line.strip()
        return True
    return False


def parse_lines(lines: list[str]) -> ServerLog:
    """Events of the last server run: a `server_args=` line (printed once per start) begins a new run; runs
    before it with the same server args (restarts after a crash) count with it."""
    log = ServerLog(lines_read=len(lines))
    run_start = 0
    args_dump = None  # the current run's server_args=ServerArgs(...) text
    oom_open = False  # the last OOM event was followed by no other event yet (its traceback may follow)
    loading: set[str] = set()  # ranks ("TP0", "DP0 TP1", ...) that began loading weights and did not end
    for index, line in enumerate(lines):
        if _LOAD_NEEDLE in line and (load := _LOAD.search(line)):
            rank = match.group(1).strip() if (match := _RANK.search(line)) else ""
            (loading.add if load.group(1) == "begin" else loading.discard)(rank)
        if match := _SERVER_ARGS.search(line):
            loading.clear()
            if _seen_anything(log):
                if _same_args(match.group(1), args_dump):
                    log.earlier_runs_carried += 1
                else:
                    dropped = log.earlier_runs + log.earlier_runs_carried + 1
                    log = ServerLog(lines_read=len(lines), earlier_runs=dropped)
                run_start = index
            args_dump = match.group(1)
        ts = _timestamp(line)
        if _parse_event(log, line, ts):
            oom_open = False
            continue
        if _OOM_NEEDLE in line and _OOM_TEXT.search(line):
            # while the weights load there is no KV pool, no prefill and no decode yet
            phase = "load" if loading else _oom_phase(lines, index, run_start)
            # SGLang logs one OOM as an allocator error, then (mem_cache/common.py) the radix tree, one line a
            # node, then the scheduler's traceback ending in `RuntimeError: <Phase> out of memory`; a CUDA
            # OOM's traceback may follow a few lines after an allocator error: count each once.
            last = log.ooms[-1] if oom_open else None
            if last and _RUNTIME_OOM.search(line) and last.phase == "unknown" and phase != "unknown":
                last.phase = phase  # the traceback names the step its allocator's error line did not
                continue
            if last and (
                (_RUNTIME_OOM.search(line) and phase == last.phase)
                or (index - last.line_no <= OOM_SAME_EVENT_LINES and phase in (last.phase, "unknown"))
            ):
                continue
            log.ooms.append(OomEvent(phase=phase, line=line.strip(), ts=ts, line_no=index))
            oom_open = True
    return log


def parse_text(text: str) -> ServerLog:
    return parse_lines(text.splitlines())
