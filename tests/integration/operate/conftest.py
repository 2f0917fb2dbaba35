"""Real servers on loopback for the operate tests: `transformers serve` running a tiny random-weight
Qwen3-MoE on the CPU, and sglang-router in front of two of them. `make test-operate` sets everything up."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

HERE = Path(__file__).resolve().parent
START_TIMEOUT_S = 180


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run these tests with `make test-operate`", pytrace=False)
    return value


@pytest.fixture(scope="session")
def serve_python() -> Path:
    return Path(_env("KTINFRA_SERVE_PYTHON"))


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    return Path(_env("KTINFRA_TINY_MODEL"))


@pytest.fixture(scope="session")
def tiny_lora() -> Path:
    return Path(_env("KTINFRA_TINY_LORA"))


@pytest.fixture(scope="session")
def tiny_kt_lora() -> Path:
    """KT-format LoRA training output for the tiny model (scripts/tiny_model.py --kt-lora-out)."""
    return Path(_env("KTINFRA_TINY_KT_LORA"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    url: str
    process: subprocess.Popen
    log: Path

    def requests_served(self) -> int:
        return self.log.read_text(errors="replace").count('"POST /v1/chat/completions HTTP/1.1" 200')


def start(cmd: list[str], log: Path, health_url: str) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    handle = log.open("w")
    proc = subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{cmd[:3]} exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
        try:
            if requests.get(health_url, timeout=2).status_code == 200:
                return proc
        except requests.RequestException:
            pass
        time.sleep(0.5)
    stop(proc)
    raise RuntimeError(f"{cmd[:3]} not healthy after {START_TIMEOUT_S}s:\n{log.read_text()[-2000:]}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def serve_cmd(python: Path, model: Path, port: int, lenient: bool = False) -> list[str]:
    head = (
        [str(python), str(HERE / "lenient_serve.py")]
        if lenient
        else [str(python.parent / "transformers"), "serve"]
    )
    return [
        *head,
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--device",
        "cpu",
        "--log-level",
        "info",
    ]


@pytest.fixture(scope="session")
def tiny_server(serve_python, tiny_model, tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    proc = start(serve_cmd(serve_python, tiny_model, port), log, f"http://127.0.0.1:{port}/health")
    yield Server(f"http://127.0.0.1:{port}", proc, log)
    stop(proc)


def start_router(python: Path, worker_urls: list[str], log: Path) -> tuple[subprocess.Popen, int]:
    port, metrics_port = free_port(), free_port()
    cmd = [
        str(python), "-m", "sglang_router.launch_router",
        "--host", "127.0.0.1", "--port", str(port),
        "--worker-urls", *worker_urls, "--policy", "round_robin",
        "--prometheus-port", str(metrics_port), "--log-level", "info",
    ]  # fmt: skip
    return start(cmd, log, f"http://127.0.0.1:{port}/health"), port


@pytest.fixture(scope="session")
def launch_router(serve_python):
    """A context manager: sglang-router in front of the given workers, its URL inside, stopped after."""

    @contextlib.contextmanager
    def launch(worker_urls: list[str], log: Path):
        proc, port = start_router(serve_python, worker_urls, log)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            stop(proc)

    return launch


@pytest.fixture(scope="session")
def router_stack(serve_python, tiny_model, tmp_path_factory):
    """Two lenient workers behind `python -m sglang_router.launch_router` (round robin)."""
    logs = tmp_path_factory.mktemp("router")
    workers, procs = [], []
    try:
        for i in range(2):
            port = free_port()
            log = logs / f"worker{i}.log"
            proc = start(
                serve_cmd(serve_python, tiny_model, port, lenient=True),
                log,
                f"http://127.0.0.1:{port}/health",
            )
            procs.append(proc)
            workers.append(Server(f"http://127.0.0.1:{port}", proc, log))
        router, port = start_router(serve_python, [w.url for w in workers], logs / "router.log")
        procs.append(router)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60  # workers register asynchronously after the router is up
        while time.monotonic() < deadline:
            listed = requests.get(f"{url}/workers", timeout=5).json().get("workers", [])
            if sum(1 for w in listed if w.get("is_healthy")) == 2:
                break
            time.sleep(0.5)
        yield Server(url, router, logs / "router.log"), workers
    finally:
        for proc in reversed(procs):
            stop(proc)
