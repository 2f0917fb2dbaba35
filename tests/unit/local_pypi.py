"""A real package index (PEP 503 simple pages, one small wheel) and a real forwarding HTTP proxy on
127.0.0.1, for the kt_python_env tests of index, proxy and CA settings: each logs what it was asked."""

from __future__ import annotations

import base64
import hashlib
import http.server
import shutil
import ssl
import subprocess
import threading
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

PACKAGE, VERSION = "ktprobe", "1.0.0"


def make_wheel(folder: Path, name: str = PACKAGE, version: str = VERSION) -> Path:
    """A pure-Python wheel of one module, as pip checks it (METADATA, WHEEL, RECORD with hashes)."""
    folder.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": f"VERSION = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: ktinfra-test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    rows = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        rows.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*rows, f"{info}/RECORD,,"]) + "\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


class _Logged(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, handler, files: Path | None = None, tls: tuple[Path, Path] | None = None) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.asked: list[tuple[str, str | None]] = []  # (path or URL, Proxy-Authorization)
        self.files = files
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*map(str, tls))
            self.socket = context.wrap_socket(self.socket, server_side=True)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return self.server_address[1]

    def close(self) -> None:
        self.shutdown()
        self.server_close()


class _IndexHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self.server.asked.append((self.path, None))
        files: Path = self.server.files
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        if parts[:1] == ["simple"] and len(parts) == 2:
            wheels = sorted(files.glob(f"{parts[1].replace('-', '_')}-*.whl"))
            sums = {w.name: hashlib.sha256(w.read_bytes()).hexdigest() for w in wheels}
            links = "".join(f'<a href="/files/{n}#sha256={h}">{n}</a>\n' for n, h in sums.items())
            body = f"<!DOCTYPE html><html><body>\n{links}</body></html>\n".encode() if links else None
        elif parts[:1] == ["files"] and len(parts) == 2 and (files / parts[1]).is_file():
            body = (files / parts[1]).read_bytes()
        else:
            body = None
        self.send_response(200 if body is not None else 404)
        self.send_header(
            "Content-Type", "text/html" if parts[:1] == ["simple"] else "application/octet-stream"
        )
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")


def serve_index(files: Path, tls: tuple[Path, Path] | None = None) -> _Logged:
    """An index of the wheels in `files` at http(s)://127.0.0.1:PORT/simple; `tls`: (cert, key)."""
    return _Logged(_IndexHandler, files, tls)


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    """GET http://host/path (absolute form, as a client asks a proxy for a plain-http URL): fetched from
    there, directly, and relayed."""

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self.server.asked.append((self.path, self.headers.get("Proxy-Authorization")))
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with direct.open(self.path, timeout=30) as reply:
                status, body, kind = reply.status, reply.read(), reply.headers.get("Content-Type", "")
        except urllib.error.HTTPError as error:
            status, body, kind = error.code, b"", "text/plain"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serve_proxy() -> _Logged:
    return _Logged(_ProxyHandler)


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (its own CA) and its key, made by openssl."""
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = folder / "ca.pem", folder / "key.pem"
    subprocess.run(
        [shutil.which("openssl") or "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key
