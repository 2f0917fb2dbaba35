"""Fixtures shared by several unit test modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_bench_http import Server

from ktinfra.image import dockercli


@pytest.fixture
def server() -> Iterator[Server]:
    """A real HTTP server on 127.0.0.1 for the bench tests; each test sets its `reply`."""
    srv = Server()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


@pytest.fixture
def fake_docker(monkeypatch):
    """docker as an image build sees it: a daemon and the base image; any other docker call fails the test
    (no build can start)."""

    def no_docker(*args, **_):
        raise AssertionError(f"docker was asked: {args}")

    monkeypatch.setattr(dockercli, "_docker", no_docker)
    monkeypatch.setattr(dockercli, "ensure_daemon", lambda: None)
    base = {"id": "sha256:base", "size_bytes": 1000, "tags": [], "labels": {}, "created": "2026"}
    monkeypatch.setattr(dockercli, "image_info", lambda ref: base)
