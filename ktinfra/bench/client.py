"""One benchmark request against an OpenAI-compatible or SGLang-native endpoint, timed token by token."""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field

import requests

APIS = ("openai", "sglang")
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

    def __post_init__(self) -> None:
        if self.api not in APIS:
            raise ValueError(f"api must be one of {', '.join(APIS)}, not {self.api!r}")
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, got {self.url!r}")
        if self.prompt_tokens < 1 or self.gen_tokens < 1:
            raise ValueError("prompt and generated token counts must be at least 1")


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

    @property
    def user_tps(self) -> float:
        """Output tokens per second this user saw, first byte wait included."""
        return self.output_tokens / self.latency_s if self.ok and self.latency_s > 0 else 0.0


def make_prompt(tokens: int, seed: int) -> str:
    rng = random.Random(seed)
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


def _events(response: requests.Response):
    for raw in response.iter_lines():
        if not raw or not raw.startswith(b"data:"):
            continue
        data = raw[5:].strip()
        if data == b"[DONE]":
            return
        yield json.loads(data)


def _chunk_text(sc: Scenario, event: dict, seen: str) -> tuple[str, str]:
    """New text in this event, and the text seen so far (SGLang streams cumulative text)."""
    if sc.api == "sglang":
        text = event.get("text", "")
        return text[len(seen) :], text
    choices = event.get("choices") or []
    delta = (choices[0].get("delta") or {}).get("content") or "" if choices else ""
    return delta, seen + delta


def _usage(sc: Scenario, event: dict) -> tuple[int | None, int | None]:
    if sc.api == "sglang":
        meta = event.get("meta_info") or {}
        return meta.get("prompt_tokens"), meta.get("completion_tokens")
    usage = event.get("usage") or {}
    return usage.get("prompt_tokens"), usage.get("completion_tokens")


def send(session: requests.Session, sc: Scenario, prompt: str) -> RequestResult:
    path, body = _payload(sc, prompt)
    result = RequestResult(ok=False, start=time.time())
    t0 = time.perf_counter()
    try:
        with session.post(
            sc.url.rstrip("/") + path, json=body, stream=sc.stream, timeout=sc.timeout_s
        ) as resp:
            if resp.status_code != 200:
                result.error = f"HTTP {resp.status_code}: {resp.text[:200]}"
                return result
            prompt_toks = completion_toks = None
            chunks = 0
            if sc.stream:
                seen, last = "", None
                for event in _events(resp):
                    new, seen = _chunk_text(sc, event, seen)
                    p, c = _usage(sc, event)
                    prompt_toks, completion_toks = p or prompt_toks, c or completion_toks
                    if not new:
                        continue
                    now = time.perf_counter()
                    if last is None:
                        result.ttft_s = now - t0
                    else:
                        result.itl_s.append(now - last)
                    last = now
                    chunks += 1
            else:
                event = resp.json()
                prompt_toks, completion_toks = _usage(sc, event)
                result.ttft_s = time.perf_counter() - t0  # the whole answer arrives at once
            result.latency_s = time.perf_counter() - t0
            result.prompt_tokens = prompt_toks or sc.prompt_tokens
            result.output_tokens = completion_toks or chunks
            result.ok = result.output_tokens > 0
            if not result.ok:
                result.error = "server returned no tokens"
    except (requests.RequestException, ValueError) as exc:
        result.latency_s = time.perf_counter() - t0
        result.error = f"{type(exc).__name__}: {exc}"
    return result
