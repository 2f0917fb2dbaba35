"""Fixtures shared by several unit test modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_bench_http import Server


@pytest.fixture
def server() -> Iterator[Server]:
    """A real HTTP server on 127.0.0.1 for the bench tests; each test sets its `reply`."""
    srv = Server()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()
