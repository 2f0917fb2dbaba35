"""HTTP sessions whose response headers are read under a whole-request deadline.

requests applies its timeout to each socket read, so a server that sends a header line just inside the
timeout, again and again, holds a request for up to 100 (http.client's header limit) times that timeout.
A session from `new_session()` arms a timer while the headers are read: at the deadline of the request the
thread has set with `request_deadline()`, it shuts the socket down and the read ends at once as a timeout
(requests.ReadTimeout, or a ConnectionError where the server was cut mid-status-line). The caller reads
the body under the same deadline (client._reads).
Requests through a proxy are watched too: an HTTP proxy, plain or in a CONNECT tunnel (not the proxy's answer
to CONNECT itself), and a SOCKS proxy (PySocks, the `socks` extra) once the tunnel is up.
"""

from __future__ import annotations

import importlib.util
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

import requests
import urllib3
from requests.adapters import HTTPAdapter

_local = threading.local()


class ThreadLimit(RuntimeError):
    """The OS refused a new thread (a limit on threads or memory): a user of the load, or the timer that
    holds a request to its deadline, could not start."""

    def __init__(self, what: str, error: RuntimeError) -> None:
        super().__init__(
            f"the OS refused to start {what} ({error}): a limit on threads or memory (ulimit -u or -v, a "
            "container's pids limit, systemd TasksMax)"
        )


def start_thread(thread: threading.Thread, what: str) -> None:
    """thread.start(), raising ThreadLimit where the OS has no thread to give."""
    try:
        thread.start()
    except RuntimeError as error:  # "can't start new thread"; the only RuntimeError of a fresh thread
        raise ThreadLimit(what, error) from None


@contextmanager
def request_deadline(deadline: float) -> Iterator[None]:
    """Requests of this thread read their headers until `deadline` (a time.perf_counter() value)."""
    previous = getattr(_local, "deadline", None)
    _local.deadline = deadline
    try:
        yield
    finally:
        _local.deadline = previous


def _shut(sock: socket.socket, fired: threading.Event) -> None:
    fired.set()
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed
        pass


@contextmanager
def _watched(sock: socket.socket | None) -> Iterator[threading.Event]:
    """Set (and the socket shut) when the thread's deadline passed inside the block."""
    fired = threading.Event()
    deadline = getattr(_local, "deadline", None)
    if sock is None or deadline is None:
        yield fired
        return
    timer = threading.Timer(max(0.0, deadline - time.perf_counter()), _shut, (sock, fired))
    timer.daemon = True
    start_thread(timer, "a request's deadline timer")
    try:
        yield fired
    finally:
        timer.cancel()


def _response_in_time(connection, getresponse):
    with _watched(connection.sock) as fired:
        response = getresponse()
    if fired.is_set():
        # the shut socket ends the header block early: what http.client parsed is not the server's answer
        response.close()
        raise TimeoutError("the request's deadline passed while its headers were read")
    return response


def _watching(pool: type) -> type:
    """`pool` whose connections read response headers under the thread's deadline."""

    class Connection(pool.ConnectionCls):
        def getresponse(self):
            return _response_in_time(self, super().getresponse)

    Connection.__name__ = Connection.__qualname__ = f"Watched{pool.ConnectionCls.__name__}"
    return type(f"Watched{pool.__name__}", (pool,), {"ConnectionCls": Connection})


_POOLS = {"http": _watching(urllib3.HTTPConnectionPool), "https": _watching(urllib3.HTTPSConnectionPool)}


@cache
def _socks_pools() -> dict:
    """urllib3's SOCKS pools, watched; imported only once a SOCKS proxy is in use (requests has imported the
    module for its proxy manager by then, so PySocks is there)."""
    from urllib3.contrib import socks

    pools = socks.SOCKSProxyManager.pool_classes_by_scheme
    return {scheme: _watching(pool) for scheme, pool in pools.items()}


class _DeadlineAdapter(HTTPAdapter):
    def init_poolmanager(self, *args, **kwargs) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy, **proxy_kwargs):
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        manager.pool_classes_by_scheme = _socks_pools() if proxy.lower().startswith("socks") else _POOLS
        return manager


def socks_proxy_problem(url: str) -> str | None:
    """Why requests to `url` cannot work: the environment (ALL_PROXY, HTTP_PROXY, ...) routes them through
    a SOCKS proxy and PySocks is missing, so requests would fail each one. The proxy's credentials are
    left out of the message."""
    proxy = requests.utils.select_proxy(url, requests.utils.get_environ_proxies(url))
    if not proxy or not proxy.lower().startswith("socks") or importlib.util.find_spec("socks") is not None:
        return None
    parsed = urllib3.util.parse_url(proxy)
    shown = f"{parsed.scheme}://{parsed.host}" + (f":{parsed.port}" if parsed.port else "")
    return (
        f"the environment routes {url} through the SOCKS proxy {shown} and PySocks is not installed: "
        "pip install 'ktinfra[socks]', or add the host to NO_PROXY"
    )


def new_session() -> requests.Session:
    session = requests.Session()
    adapter = _DeadlineAdapter()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
