"""One benchmark request against an OpenAI-compatible or SGLang-native endpoint, timed token by token."""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import requests
import urllib3

from ktinfra.bench.deadline import request_deadline
from ktinfra.bench.reply import (
    CutOff,
    ServerFailed,
    Stream,
    UnexpectedReply,
    _failure,
    _json,
    _object,
    _usage,
    _whole_text,
    estimate_from_chars,
    estimate_tokens,
)

APIS = ("openai", "sglang")
MAX_TIMEOUT_S = 86400.0  # one day: larger values overflow socket and clock arithmetic (OverflowError)
ERROR_BODY_BYTES = 4096  # what is read of a non-200 reply's body, for its message
# A whole (non-streamed) reply, and one streamed line or event, beyond which a reply is not an answer to a
# benchmark prompt: SGLang's cumulative-text events for 100k tokens are under 1 MiB. Reading stops there,
# so a server that streams without end cannot fill this process's memory.
MAX_REPLY_BYTES = 64 << 20
# Short common words: each is about one token for BPE vocabularies (Qwen, Llama), so N words ~ N tokens.
_WORDS = (
    "the of and to in is was for on are with as by at be this from or an have not they which one you "
    "were all we when there can been has more if will no out so what up about than into them only other "
    "time some could these two may first then do any like my now over such our man me even most made after "
    "also did many before must through back years where much your way well down should because each just"
).split()


@dataclass(frozen=True)
class Scenario:
    url: str
    model: str
    api: str = "openai"
    prompt_tokens: int = 500
    gen_tokens: int = 500
    stream: bool = True
    ignore_eos: bool = False  # SGLang extension; other OpenAI servers reject the unknown field
    timeout_s: float = 600.0
    api_key: str | None = field(default=None, repr=False)  # sent as "Authorization: Bearer KEY"

    def __post_init__(self) -> None:
        if self.api not in APIS:
            raise ValueError(f"api must be one of {', '.join(APIS)}, not {self.api!r}")
        check_url(self.url)
        if self.api_key and "@" in urlsplit(self.url).netloc:
            # requests turns the URL's user:password into an Authorization header that replaces the Bearer one
            raise ValueError(
                "url carries credentials (user:password@) and an API key is given: the server would get the "
                "URL's basic auth in place of the key; give one of them"
            )
        if self.api == "openai":
            check_not_v1(self.url, "bench")
        if self.prompt_tokens < 1 or self.gen_tokens < 1:
            raise ValueError("prompt and generated token counts must be at least 1")
        if not (isinstance(self.timeout_s, int | float) and math.isfinite(self.timeout_s)) or (
            self.timeout_s <= 0
        ):
            raise ValueError(f"timeout must be a finite number of seconds above 0, not {self.timeout_s!r}")
        if self.timeout_s > MAX_TIMEOUT_S:
            raise ValueError(f"timeout must be at most {MAX_TIMEOUT_S:g} s (one day), not {self.timeout_s:g}")


def check_not_v1(url: str, who: str) -> None:
    """An OpenAI client's base_url (.../v1): every request would go to .../v1/v1/chat/completions, a 404."""
    if urlsplit(url).path.rstrip("/").endswith("/v1"):
        raise ValueError(
            f"url {url!r} ends in /v1: give the server's base URL without it "
            f"({who} appends /v1/chat/completions)"
        )


def check_url(url: str, base: bool = True) -> None:
    """An http(s) URL with a host (and a valid port, if any): caught here rather than once per request.
    A base URL (paths are appended to it) may not carry a ?query or #fragment; a whole URL may."""
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError on a port that is not a number in 0-65535
    except ValueError as exc:
        raise ValueError(f"url {url!r} is not a valid URL: {exc}") from None
    if port == 0:  # urllib3 reads ":0" as no port at all and would load port 80 (443)
        raise ValueError(f"url {url!r}: port must be 1-65535")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"url must be http:// or https:// followed by a host, got {url!r}")
    if base and (parts.query or parts.fragment):
        raise ValueError(f"url must be a base URL without ?query or #fragment, got {url!r}")
    if ":" not in parts.hostname:  # not an IPv6 literal: urllib3 encodes the name with IDNA when connecting
        try:
            parts.hostname.encode("idna")
        except UnicodeError:
            raise ValueError(
                f"url {url!r}: host {parts.hostname!r} has an empty or over-long (> 63 characters) label"
            ) from None
    # what requests itself refuses when it prepares the request (a space or control character in the host,
    # a '*' label): otherwise every request of the run failed 'InvalidURL', for the whole of a --duration
    try:
        requests.models.PreparedRequest().prepare_url(url, None)
    except requests.RequestException as exc:
        raise ValueError(f"url {url!r} is not a valid URL: {exc}") from None


# query parameters that carry a secret (?api_key=, ?token=, ?access_token=, ?sig=, ?password=, ...)
_SECRET_PARAM = re.compile(r"key|token|secret|pass|auth|sig|cred", re.IGNORECASE)


def _shown_query(query: str) -> str:
    fields = (field.partition("=") for field in query.split("&"))
    return "&".join(
        f"{name}{eq}***" if eq and _SECRET_PARAM.search(name) else f"{name}{eq}{value}"
        for name, eq, value in fields
    )


def shown_url(url: str) -> str:
    """URL as printed in results: credentials in it (http://user:password@host/, ?api_key=...) replaced by
    ***, as the API key is never printed; the request itself still sends them."""
    parts = urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    shown = parts._replace(netloc=f"***@{hostport}") if at else parts
    if parts.query:
        shown = shown._replace(query=_shown_query(parts.query))
    return shown.geturl() if shown is not parts else url


class TimedOut(Exception):
    pass


@dataclass
class RequestResult:
    ok: bool
    start: float
    latency_s: float = 0.0
    ttft_s: float | None = None
    output_tokens: int = 0
    prompt_tokens: int = 0
    itl_s: list[float] = field(default_factory=list)
    error: str | None = None
    tokens_estimated: bool = False  # the server sent no usage: output tokens counted from the reply
    prompt_estimated: bool = False  # no usage.prompt_tokens: the requested prompt length (words, not tokens)
    answered: bool = False  # the server sent a status line (any code): it is there
    status: int | None = None  # that status code
    server_failed: bool = False  # a reply the server broke off: an error in it, cut off, connection lost
    # a 200 that is not the API's reply (an HTML page from a proxy, JSON without choices, an empty stream):
    # --url or --api points at something else, and the next request gets the same
    bad_reply: bool = False
    retry_after: str | None = None  # a non-200 reply's Retry-After header, as sent
    # still running when its --duration level ended and the grace after it ran out: ended by the bench, not
    # the server, so it is neither completed nor failed (error stays None)
    cut: bool = False

    @property
    def retry_later(self) -> bool:
        """The user pauses before the next request: no answer, one saying to come back later (429), a server
        error (5xx), a reply the server failed or broke off, or a 200 that is not the API's reply (it fails
        the same way each time: unpaused, every user hammered a misconfigured URL as fast as it answered).
        A client error (400: the prompt too long, an unknown model) does not pause: the server is up and
        answers at once, and waiting changes nothing."""
        return (
            not self.answered
            or self.status == 429
            or (self.status or 0) >= 500
            or self.server_failed
            or self.bad_reply
        )

    @property
    def user_tps(self) -> float:
        """Output tokens per second this user saw, first byte wait included."""
        return self.output_tokens / self.latency_s if self.ok and self.latency_s > 0 else 0.0


def make_prompt(tokens: int, seed: int | str) -> str:
    rng = random.Random(seed)  # a str seed is hashed with SHA-512: the same prompt in every process
    return " ".join(rng.choice(_WORDS) for _ in range(tokens))


def _payload(sc: Scenario, prompt: str) -> tuple[str, dict]:
    if sc.api == "sglang":
        params = {"max_new_tokens": sc.gen_tokens, "temperature": 0.0, "ignore_eos": sc.ignore_eos}
        return "/generate", {"text": prompt, "sampling_params": params, "stream": sc.stream}
    body = {
        "model": sc.model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": sc.gen_tokens,
        "temperature": 0.0,
        "stream": sc.stream,
    }
    if sc.stream:
        body["stream_options"] = {"include_usage": True}
    if sc.ignore_eos:
        body["ignore_eos"] = True  # keeps the output length fixed on SGLang
    return "/v1/chat/completions", body


def _one_line(text: str, limit: int = 200) -> str:
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _reads(resp: requests.Response, timeout_s: float, deadline: float, size: int = 65536) -> Iterator[bytes]:
    """The body as the network delivers it: each piece comes out as soon as it arrived.

    ``iter_lines()`` waits until 512 bytes piled up (every SSE event then seems to come at once), and
    ``iter_content(None)`` reads a body without Content-Length or chunking to its end. ``read1`` returns
    what one read gets (at most ``size`` bytes). Every read waits at most until the request's deadline
    (``timeout_s`` after it started), so a server that keeps dripping cannot hold a request past --timeout.
    """
    raw = resp.raw
    sock = getattr(getattr(raw, "connection", None), "sock", None)
    if hasattr(raw, "read1"):  # urllib3 >= 2

        def read() -> bytes:
            return raw.read1(size, decode_content=True) or b""
    else:  # urllib3 1.x: per HTTP chunk for chunked bodies (SGLang's), buffered otherwise
        pieces = raw.stream(None, decode_content=True)

        def read() -> bytes:
            return next(pieces, b"")

    try:
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimedOut
            if sock is not None:
                sock.settimeout(min(timeout_s, left))
            try:
                data = read()
            except (TimeoutError, urllib3.exceptions.ReadTimeoutError):
                raise TimedOut from None
            if not data:
                return
            yield data
    finally:
        if sock is not None:
            try:
                sock.settimeout(timeout_s)  # back to the per-read timeout for a reused connection
            except OSError:
                pass


def error_body(resp: requests.Response, timeout_s: float, deadline: float) -> str:
    """The first ERROR_BODY_BYTES of a non-200 reply, as one line: read under the request's deadline, the
    rest is never read (closing the response drops the connection), so a huge or dripping error body can
    neither fill memory nor hold the request past --timeout."""
    body = b""
    pieces = _reads(resp, timeout_s, deadline, size=ERROR_BODY_BYTES)
    try:
        for piece in pieces:
            body += piece
            if len(body) >= ERROR_BODY_BYTES:
                break
    except TimedOut:
        pass  # the status is the answer; what arrived of the body before the deadline is its message
    finally:
        pieces.close()
    text = body[:ERROR_BODY_BYTES].decode("utf-8", "replace").replace("\r", "\\r").replace("\n", "\\n")
    return text if len(text) <= 200 else text[:197] + "..."


_LINE_END = re.compile(rb"\r\n|\r|\n")  # what ends an SSE line: CRLF, LF, or a CR alone
_BOM = b"\xef\xbb\xbf"


def _lines(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """The body's lines as they complete, as the SSE spec reads them: CRLF, LF and a lone CR each end a line,
    and a UTF-8 byte-order mark at the stream's start is dropped (once). Only each new piece is searched
    for a line end, and a line's start waits in a bytearray: joining and splitting the whole pending line at
    every read (each 64 KiB) was quadratic, 134 s of CPU (the GIL held, every other user's timing with it)
    for one 64 MiB line."""
    buf = bytearray()
    after_cr = False  # the last piece ended in CR: an LF opening the next one is the same line end
    first = True
    for piece in pieces:
        if not piece:
            continue
        start = 1 if after_cr and piece.startswith(b"\n") else 0
        after_cr = False
        for end in _LINE_END.finditer(piece, start):
            if buf:
                buf += piece[start : end.start()]
                line = bytes(buf)
                buf.clear()
            else:
                line = piece[start : end.start()]
            if first:
                line, first = line.removeprefix(_BOM), False
            yield line
            start = end.end()
            after_cr = end.group() == b"\r" and start == len(piece)
        buf += piece[start:]
        if len(buf) > MAX_REPLY_BYTES:
            raise UnexpectedReply(f"a streamed line ran past {MAX_REPLY_BYTES >> 20} MiB without a newline")
    if buf:
        yield bytes(buf).removeprefix(_BOM) if first else bytes(buf)


def whole_body(resp: requests.Response, timeout_s: float, deadline: float) -> bytes:
    """A 200 reply's whole body, read under the request's deadline (TimedOut) and at most MAX_REPLY_BYTES
    of it (UnexpectedReply)."""
    return _joined(_reads(resp, timeout_s, deadline))


def _joined(pieces: Iterator[bytes]) -> bytes:
    body = bytearray()
    for piece in pieces:
        body += piece
        if len(body) > MAX_REPLY_BYTES:
            raise UnexpectedReply(f"the reply ran past {MAX_REPLY_BYTES >> 20} MiB")
    return bytes(body)


def send(session: requests.Session, sc: Scenario, prompt: str, cut_at: float | None = None) -> RequestResult:
    """One request, timed; never raises for what the server does (refusal, timeout, odd reply).
    `cut_at` (a time.perf_counter() value) ends the request there if its --timeout would end it later: it
    comes back with `cut` set, not as a timeout."""
    path, body = _payload(sc, prompt)
    headers = {"Authorization": f"Bearer {sc.api_key}"} if sc.api_key else None
    result = RequestResult(ok=False, start=time.time())
    t0 = time.perf_counter()
    deadline = t0 + sc.timeout_s
    cut = cut_at is not None and cut_at < deadline
    if cut:
        deadline = cut_at
    timed_out = False
    content_type = ""
    try:
        # stream=True also without --stream: the body is read by _reads, under the request's deadline;
        # the headers are too, in a session from deadline.new_session().
        with (
            request_deadline(deadline),
            session.post(
                sc.url.rstrip("/") + path,
                json=body,
                headers=headers,
                stream=True,
                timeout=max(0.001, deadline - t0),  # the connect too, where cut_at comes first
            ) as resp,
        ):
            result.answered, result.status = True, resp.status_code
            content_type = resp.headers.get("Content-Type", "")
            if resp.status_code != 200:
                result.retry_after = resp.headers.get("Retry-After")
                result.error = f"HTTP {resp.status_code}: {error_body(resp, sc.timeout_s, deadline)}"
                return result
            prompt_toks = completion_toks = None
            chunks = 0
            pieces = _reads(resp, sc.timeout_s, deadline)
            if sc.stream:
                stream, last = Stream(sc, max_event_bytes=MAX_REPLY_BYTES), None
                for tokens in stream.outputs(_lines(pieces)):
                    now = time.perf_counter()
                    if last is None:
                        result.ttft_s = now - t0
                    else:  # a chunk of n tokens: n gaps of 1/n each, as SGLang's bench_serving counts
                        # at most as many gaps as tokens were asked for: a server's count may say up to 10^9
                        # (a list of that many floats is gigabytes, one per request); one that keeps to
                        # max_tokens never reaches this bound, and each chunk still adds a gap
                        gaps = min(tokens, max(1, sc.gen_tokens - len(result.itl_s)))
                        result.itl_s.extend([(now - last) / tokens] * gaps)
                    last = now
                    chunks += 1
                prompt_toks, completion_toks = stream.prompt_tokens, stream.completion_tokens
                # a chunk is at least one token, and several with SGLang's --stream-interval above 1
                chunks = max(chunks, estimate_from_chars(stream.chars)) if chunks else 0
            else:
                reply = _object(_json(_joined(pieces)), "reply")
                failure = _failure(sc, reply)
                if failure:
                    raise ServerFailed(failure)
                text = _whole_text(sc, reply)  # checks the reply's shape, counted or not
                prompt_toks, completion_toks = _usage(sc, reply)
                if not completion_toks:
                    chunks = estimate_tokens(text)
            result.latency_s = time.perf_counter() - t0
            if result.latency_s > sc.timeout_s:  # e.g. a slow connect before the deadline could apply
                raise TimedOut
            result.prompt_tokens = prompt_toks or sc.prompt_tokens
            result.prompt_estimated = not prompt_toks
            result.output_tokens = completion_toks or chunks
            result.tokens_estimated = not completion_toks and chunks > 0
            result.ok = result.output_tokens > 0
            if not result.ok:
                result.error = "server returned no tokens"
    except TimedOut:
        timed_out = True
        result.error = f"timed out after {sc.timeout_s:g} s"
    except requests.Timeout as exc:
        timed_out = True
        kind = "connect" if isinstance(exc, requests.ConnectTimeout) else "no answer"
        result.error = f"timed out after {sc.timeout_s:g} s ({kind})"
    except UnexpectedReply as exc:
        # a page (text/html) where the API's JSON or event stream belongs says most about a wrong --url
        shown = "" if re.search(r"json|event-stream|^$", content_type) else f" (Content-Type {content_type})"
        result.error = _one_line(f"unexpected reply{shown}: {exc}")
        result.bad_reply = True
    except (ServerFailed, CutOff) as exc:
        result.error = _one_line(str(exc))
        result.server_failed = True
    except (requests.RequestException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
        if time.perf_counter() >= deadline:  # the deadline shut the socket while the headers were read
            timed_out = True
            result.error = f"timed out after {sc.timeout_s:g} s (no answer)"
        else:
            result.error = f"{type(exc).__name__}: {exc}"
            result.server_failed = True  # e.g. the connection reset in the middle of the reply
    if not result.ok:
        result.ok, result.ttft_s, result.itl_s = False, None, []
        result.latency_s = time.perf_counter() - t0
        if timed_out and cut:
            result.cut, result.error = True, None
    return result
