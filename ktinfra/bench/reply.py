"""What a 200 reply says: its shape checked, its text, token counts and in-reply failures read out."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ktinfra.bench.client import Scenario

# The field an answer (a whole reply, or a streamed chunk) of each API has, empty or not
_ANSWER_FIELD = {"openai": "choices", "sglang": "text"}
MAX_TOKEN_COUNT = 10**9  # a larger count in a reply is garbage, and would make the metrics non-finite


class UnexpectedReply(Exception):
    """The server answered 200 with something that is not the API's reply shape."""


class ServerFailed(Exception):
    """The server answered 200 but said inside the reply that the request failed."""


class CutOff(Exception):
    """A streamed reply ended without saying it was complete (no [DONE], no finish_reason)."""


def _short(data: object) -> str:
    if isinstance(data, bytes):
        text = data.decode("utf-8", "replace")
    else:
        try:
            text = json.dumps(data)
        except (RecursionError, ValueError):
            text = f"<{type(data).__name__} nested too deeply to show>"
    text = text.replace("\r", "\\r").replace("\n", "\\n")  # error messages stay one line
    return text if len(text) <= 80 else text[:77] + "..."


def _json(data: bytes) -> object:
    try:
        return json.loads(data)
    except ValueError:
        raise UnexpectedReply(f"not JSON: {_short(data)}") from None
    except RecursionError:  # e.g. [[[[...]]]] 100000 deep: this request fails, the run goes on
        raise UnexpectedReply(f"JSON nested too deeply: {_short(data)}") from None


def _object(value: object, what: str) -> dict:
    if not isinstance(value, dict):
        raise UnexpectedReply(f"{what} is {type(value).__name__}, not an object: {_short(value)}")
    return value


def _text(value: object, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise UnexpectedReply(f"{what} is {type(value).__name__}, not a string: {_short(value)}")
    return value


def _first_choice(event: dict) -> dict | None:
    choices = event.get("choices")
    if choices is None:
        return None
    if not isinstance(choices, list):
        raise UnexpectedReply(f"choices is {type(choices).__name__}, not a list: {_short(choices)}")
    return _object(choices[0], "choices[0]") if choices else None


def _delta_text(event: dict) -> str:
    """The text an OpenAI chat stream event adds."""
    choice = _first_choice(event)
    delta = _object(choice.get("delta") or {}, "delta") if choice is not None else {}
    # A server with a reasoning parser (SGLang --reasoning-parser) streams the thinking as reasoning_content:
    # generated tokens like the answer's, so the first of them is the first token.
    return _reasoning(delta, "delta") + _text(delta.get("content"), "delta.content")


def _reasoning(message: dict, what: str) -> str:
    """The thinking in a delta or message: reasoning_content (SGLang, DeepSeek), else reasoning (vLLM's
    name for it since late 2025, the only one newer vLLM sends). A `reasoning` that is not a string is some
    other API's field, not thinking text, and is left alone."""
    text = _text(message.get("reasoning_content"), f"{what}.reasoning_content")
    other = message.get("reasoning")
    return text or (other if isinstance(other, str) else "")


def _whole_text(sc: Scenario, body: dict) -> str:
    """The answer of a non-streamed reply; a reply without the API's answer field (JSON of some other
    service: a health page, an error of another shape) raises UnexpectedReply."""
    field = _ANSWER_FIELD[sc.api]
    if field not in body:
        raise UnexpectedReply(f"no {field!r} in the reply: {_short(body)}")
    if sc.api == "sglang":
        return _text(body.get("text"), "text")
    choice = _first_choice(body)
    message = _object(choice.get("message") or {}, "message") if choice is not None else {}
    return _reasoning(message, "message") + _text(message.get("content"), "message.content")


def _count(value: object, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKEN_COUNT:
        raise UnexpectedReply(f"{what} is not a token count: {_short(value)}")
    return value


def _usage(sc: Scenario, event: dict) -> tuple[int | None, int | None]:
    return token_counts(event, "meta_info" if sc.api == "sglang" else "usage")


def token_counts(event: dict, key: str = "usage") -> tuple[int | None, int | None]:
    """(prompt_tokens, completion_tokens) of a reply's `key` object, None where absent; a count that is
    not one (negative, fractional, NaN, a string, absurdly large) raises UnexpectedReply."""
    usage = _object(event.get(key) or {}, key)
    return (
        _count(usage.get("prompt_tokens"), f"{key}.prompt_tokens"),
        _count(usage.get("completion_tokens"), f"{key}.completion_tokens"),
    )


def _finish_reason(sc: Scenario, event: dict) -> object:
    """choices[0].finish_reason (/v1) or meta_info.finish_reason (/generate): null until the last event."""
    if sc.api == "sglang":
        meta = event.get("meta_info")
        return meta.get("finish_reason") if isinstance(meta, dict) else None
    choices = event.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    return first.get("finish_reason") if isinstance(first, dict) else None


def _failure(sc: Scenario, event: dict) -> str | None:
    """What the server said went wrong, in an event or a whole reply that answers 200 all the same: SGLang
    streams ``{"error": {"message": ...}}`` before [DONE] when generation fails (transformers serve
    ``{"error": "..."}``), and ends an aborted request with finish_reason "abort" (``{"type": "abort",
    "message": ...}`` in /generate's meta_info); a finish_reason "error" ends a failed one. Without this
    the tokens streamed before it made the request a success. A server that sends the error object itself,
    unwrapped (``{"object": "error", "message": ..., "code": 400}``, the shape of an OpenAI-style
    ErrorResponse), failed the same way."""
    error = event.get("error")
    if not error and event.get("object") == "error":
        error = event
    if error:
        message = error.get("message") if isinstance(error, dict) else error
        return f"server error: {message if isinstance(message, str) and message else _short(error)}"
    reason = _finish_reason(sc, event)
    kind = reason.get("type") if isinstance(reason, dict) else reason
    if kind == "error":  # Together's API, vLLM's FinishReason.ERROR: the reply ended in a failure
        return "server ended the reply with finish_reason error"
    if kind != "abort":
        return None
    message = reason.get("message") if isinstance(reason, dict) else None
    return "server aborted the request" + (f": {message}" if isinstance(message, str) and message else "")


def _error_event(data: bytes) -> str:
    """The message of a streamed error (llama.cpp's `error:` line, an SSE `event: error`): the JSON's
    error.message or message where it has one, else its text."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, dict):
        inner = value.get("error") or value
        message = inner.get("message") if isinstance(inner, dict) else inner
        if isinstance(message, str) and message:
            return f"server error: {message}"
    return f"server error: {_short(data)}" if data else "server error (no message)"


def _whole_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except (ValueError, RecursionError):
        return False
    return True


def _hopeless(data: bytes) -> bool:
    """Whether no data lines after `data` can make it JSON: the decoder stopped before its end, and what
    follows, joined on with a newline, cannot mend that (no JSON token or string spans a newline)."""
    try:
        json.loads(data)
    except json.JSONDecodeError as exc:
        return exc.pos < len(exc.doc.rstrip())
    except (ValueError, RecursionError):  # not UTF-8; nested too deeply
        return True
    return False


def _event_json(lines: list[bytes]) -> object:
    """The JSON of an event's data lines joined with a newline; where it is none, the first line it goes
    wrong at (the decoder's line is the data line), or that the event ended inside a JSON value."""
    data = b"\n".join(lines)
    if len(lines) == 1:
        return _json(data)
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(exc.doc.rstrip()):
            raise UnexpectedReply(
                f"not JSON: an event's {len(lines)} data lines end inside a JSON value: {_short(data)}"
            ) from None
        at = min(exc.lineno, len(lines))
        shown = _short(lines[at - 1])
        raise UnexpectedReply(f"not JSON at data line {at} of {len(lines)}: {shown}") from None
    except (ValueError, RecursionError):
        return _json(data)


def estimate_tokens(text: str) -> int:
    """Output tokens of a reply the server sent no usage for: about 4 characters per token."""
    return estimate_from_chars(len(text)) if text.strip() else 0


def estimate_from_chars(chars: int) -> int:
    return max(1, round(chars / 4)) if chars else 0


class Stream:
    """A streamed reply, event by event: its token counts, and whether it said it was complete."""

    def __init__(self, sc: Scenario, max_event_bytes: int = 64 << 20) -> None:
        self.sc = sc
        self.max_event_bytes = max_event_bytes  # an event split over data lines is gathered up to this
        self.events = 0
        self.shaped = False  # an event had the API's answer field (choices, or /generate's text)
        self.complete = False  # [DONE] came, or an event with a finish_reason
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None
        self.chars = 0  # characters of generated text: the token estimate when the server sends no counts
        self.yielded = 0  # tokens yielded so far
        self._last = ""  # the previous /generate event's text
        self._incremental = False  # /generate events carry only their new text

    def outputs(self, lines: Iterator[bytes]) -> Iterator[int]:
        """Yields, as each event with new output arrives, how many tokens it brought (1 where the server
        counts nothing; more with SGLang's --stream-interval above 1); raises for a failure the server
        reports, an event of the wrong shape, and a stream that ends before it said it was complete.

        A data line that is a whole JSON value is an event as soon as it arrives (a server that sends no
        blank lines between events has each counted one by one). One that is not starts an event split over
        data lines: the SSE spec joins an event's data lines with '\\n' and dispatches it at the blank line
        (or the stream's end), and an OpenAI-style server may split a JSON chunk so. `event: error` before
        its data gathers the data the same way: the message is the whole of it. Where the split data can no
        longer become JSON, a whole JSON line (or [DONE], never part of JSON) shows a server that sends no
        blank lines: the event ended before that line, and fails there, naming its first bad line."""
        began = b""  # the first line that is no SSE field (an HTML page's first line): shown if no event came
        kind = b""  # the SSE `event:` name of the event being read; a blank line ends the event
        data = None  # the event's data: its message, should `event: error` come after it
        split: list[bytes] = []  # the data lines of an event split over several, until it ends
        size = 0
        hopeless = False  # the split's first line is no JSON and no start of one: joining cannot mend it
        refused: UnexpectedReply | None = None  # what was wrong with that data, unless the event is an error
        for raw in lines:
            if raw.startswith(b"event:"):
                kind = raw[6:].strip()
                continue
            if raw.startswith(b"error:"):
                # llama.cpp's server streams a failure as its own field, `error: {"code": 500, "message":
                # ..., "type": "server_error"}` (server_sent_event(sink, "error", ...)), not as data
                raise ServerFailed(_error_event(raw[6:].strip()))
            if raw and not raw.startswith(b"data:"):
                began = began or raw.strip()
                continue
            if not raw:  # the event ends; its fields came in any order: `event: error` after the data too
                if split:
                    data = b"\n".join(split)
                    yield from self._split_event(split, kind)
                    split, size = [], 0
                if kind == b"error" and data is not None:
                    raise ServerFailed(_error_event(data))
                if refused:
                    raise refused
                kind, data = b"", None
                continue
            line = raw[5:].strip()
            if split:
                if line != b"[DONE]" and not (hopeless and _whole_json(line)):
                    split.append(line)
                    size += len(line) + 1
                    if size > self.max_event_bytes:
                        mib = self.max_event_bytes >> 20
                        raise UnexpectedReply(f"an event ran past {mib} MiB of data lines")
                    continue
                yield from self._split_event(split, kind)  # no blank line came: the event ended before this
                split, size, kind, data = [], 0, b"", None
            if refused:  # a server that sends no blank lines: each data line is its own event
                raise refused
            data = line
            if line == b"[DONE]":
                self.complete = True
                break
            if not line and kind != b"error":
                continue  # an empty event: a keep-alive some proxies send while the model thinks
            try:
                value = json.loads(line)
            except (ValueError, RecursionError):
                split, size, hopeless = [line], len(line), _hopeless(line)
                continue
            if kind == b"error":  # `event: error` then `data: {...}`: the server's message
                raise ServerFailed(_error_event(line))
            try:
                yield from self._tokens(value)
            except UnexpectedReply as exc:
                refused = exc
        if split:  # the stream ended in the middle of an event split over data lines
            data = b"\n".join(split)
            yield from self._split_event(split, kind)
        if kind == b"error" and data is not None:
            raise ServerFailed(_error_event(data))
        if refused:
            raise refused
        if not self.events and self.complete:
            raise UnexpectedReply("the stream held [DONE] and no event before it")
        if not self.events:
            shown = f": it began {_short(began)}" if began else ""
            if began.startswith(b"{"):  # a whole JSON reply to stream=true
                shown += " (a whole reply: the server does not stream, try --no-stream)"
            raise UnexpectedReply(f"no 'data:' event in the streamed reply{shown}")
        if not self.shaped:  # events of some other service: JSON, but none the API's chunk
            raise UnexpectedReply(
                f"no event with {_ANSWER_FIELD[self.sc.api]!r} in the streamed reply ({self.events} events)"
            )
        if not self.complete:
            # a body closed mid-generation (a worker killed behind a proxy): its tokens are not an answer
            raise CutOff(f"stream ended before [DONE] ({self.events} events, none with a finish_reason)")

    def _split_event(self, split: list[bytes], kind: bytes) -> Iterator[int]:
        """The tokens of an event whose data came over several data lines, or its error."""
        if kind == b"error":
            raise ServerFailed(_error_event(b"\n".join(split)))
        yield from self._tokens(_event_json(split))

    def _tokens(self, value: object) -> Iterator[int]:
        """The tokens one event's data (a JSON value) brought, if any."""
        finished, tokens = self._event(value)
        # some OpenAI-compatible servers end with the finish_reason event and send no [DONE]
        self.complete = self.complete or finished
        if tokens:
            yield tokens

    def _event(self, value: object) -> tuple[bool, int]:
        """(whether it has a finish_reason, the tokens it brought) of one event's data."""
        event = _object(value, "event")
        self.events += 1
        self.shaped = self.shaped or _ANSWER_FIELD[self.sc.api] in event
        failure = _failure(self.sc, event)
        if failure:
            raise ServerFailed(failure)
        finished = _finish_reason(self.sc, event) is not None
        p, c = _usage(self.sc, event)
        new = self._new_output(event, c)
        self.prompt_tokens, self.completion_tokens = p or self.prompt_tokens, c or self.completion_tokens
        if not new:
            return finished, 0
        # a running count brings what it grew by since the tokens yielded so far: counted against the
        # previous count, a count that first comes with the last text (earlier chunks uncounted, 1 each) was
        # all of the reply's tokens again, and made that many ITL gaps more than it had
        tokens = max(1, c - self.yielded) if c else 1
        self.yielded += tokens
        return finished, tokens

    def _new_output(self, event: dict, count: int | None) -> bool:
        if self.sc.api != "sglang":
            new = _delta_text(event)
            self.chars += len(new)
            return bool(new)
        # /generate streams the text so far, or with --incremental-streaming-output each event's new text.
        # The text so far only grows: an event whose text does not extend the previous one's is a delta. The
        # text cannot prove the reverse (deltas " the", " the" read as text that did not grow), so where the
        # server counts, the count decides: meta_info.completion_tokens is the running total in both modes.
        text = _text(event.get("text"), "text")
        self._incremental = self._incremental or not text.startswith(self._last)
        new = text if self._incremental else text[len(self._last) :]
        self._last = text
        self.chars += len(new)
        return bool(new) if count is None else count > (self.completion_tokens or 0)
