"""A 429/503 reply's Retry-After header (RFC 9110 §10.2.3): delta-seconds or an HTTP-date."""

from __future__ import annotations

import re
import time
from datetime import timezone
from email.utils import parsedate_to_datetime

# The longest pause a Retry-After may ask of a user. A larger value (a buggy or hostile server: "86400",
# a date next year) is capped here and reported; a --duration level also ends its pauses at its deadline.
RETRY_AFTER_MAX_S = 60.0
_DELTA = re.compile(r"[0-9]+")
_DIGITS_KEPT = 12  # more digits than this are years of waiting: the cap applies either way


def retry_after_s(value: str, now: float | None = None) -> float | None:
    """Seconds the header asks to wait (0 for a date in the past), uncapped; None where it is neither form
    (garbage, a negative or fractional number): the caller then keeps its own backoff. `now` is a
    time.time() value."""
    value = value.strip()
    if _DELTA.fullmatch(value):
        # int() of thousands of digits raises (Python's int_max_str_digits): its size alone says "huge"
        digits = value.lstrip("0") or "0"
        return float(digits) if len(digits) <= _DIGITS_KEPT else float(10**_DIGITS_KEPT)
    try:
        when = parsedate_to_datetime(value)
    except (ValueError, TypeError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000" and asctime's form carry no zone: HTTP dates are UTC
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def shown(value: str) -> str:
    """The header's value as reported: one line, at most 40 characters."""
    text = value.strip().replace("\r", "\\r").replace("\n", "\\n")
    return text if len(text) <= 40 else text[:37] + "..."
