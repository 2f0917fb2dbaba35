"""A value from a user's JSON file inside an error message: as JSON, cut short."""

from __future__ import annotations

import json


def json_shown(value: object, limit: int = 40) -> str:
    """`value` as JSON (str() for what JSON cannot hold), at most `limit` characters: a 400-digit number or a
    long string must not flood the one-line error."""
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def name_shown(value: object, limit: int = 40) -> str:
    """A value that should be a name: bare when it is a short string, else as json_shown."""
    return value if isinstance(value, str) and len(value) <= limit else json_shown(value, limit)
