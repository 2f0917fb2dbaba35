"""A real git server for the tests: git's own smart-HTTP CGI (`git http-backend`) behind a local HTTP server
that asks for Basic auth (401 first, as a private GitHub or GitLab repo does), and a pip-installable repo to
serve, whose build backend is in the repo (PEP 517 backend-path), so pip builds it with nothing downloaded."""

from __future__ import annotations

import base64
import contextlib
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

BACKEND = '''"""The in-tree build backend of a probe project: one module, one wheel, nothing to download."""
import base64, hashlib, zipfile

NAME, VERSION = "{name}", "{version}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    info = f"{{NAME}}-{{VERSION}}.dist-info"
    files = {{
        f"{{NAME}}.py": b"PROBE = True\\n",
        f"{{info}}/METADATA": f"Metadata-Version: 2.1\\nName: {{NAME}}\\nVersion: {{VERSION}}\\n".encode(),
        f"{{info}}/WHEEL": (
            b"Wheel-Version: 1.0\\nGenerator: probe\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
        ),
    }}
    record = [
        f"{{path}},sha256={{base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()}},{{len(data)}}"
        for path, data in files.items()
    ]
    files[f"{{info}}/RECORD"] = ("\\n".join(record) + f"\\n{{info}}/RECORD,,\\n").encode()
    name = f"{{NAME}}-{{VERSION}}-py3-none-any.whl"
    with zipfile.ZipFile(f"{{wheel_directory}}/{{name}}", "w") as wheel:
        for path, data in files.items():
            wheel.writestr(path, data)
    return name
'''

PYPROJECT = """[build-system]
requires = []
build-backend = "backend"
backend-path = ["."]
"""


def make_repo(root: Path, name: str, version: str = "1.0", tag: str = "v1") -> Path:
    """A bare repo root/<name>.git holding a pip-installable project (module `name`) tagged `tag`."""
    work = root / f"{name}-work"
    work.mkdir(parents=True)
    (work / "backend.py").write_text(BACKEND.format(name=name, version=version))
    (work / "pyproject.toml").write_text(PYPROJECT)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root)}  # fmt: skip
    for argv in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-qm", "probe"], ["tag", tag]):
        subprocess.run(["git", *argv], cwd=work, env=env, check=True)
    bare = root / f"{name}.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], env=env, check=True)
    return bare


@contextlib.contextmanager
def serve_git(project_root: Path, user: str, password: str):
    """`git http-backend` for the bare repos in project_root at http://127.0.0.1:PORT/; a request without
    user:password gets 401. Yields (port, the Authorization headers received)."""
    token = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    received: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args):
            pass

        def _cgi(self) -> None:
            received.append(self.headers.get("Authorization"))
            if self.headers.get("Authorization") != token:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            path, _, query = self.path.partition("?")
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            env = {"PATH": os.environ["PATH"], "GIT_PROJECT_ROOT": str(project_root),
                   "GIT_HTTP_EXPORT_ALL": "1", "PATH_INFO": path, "QUERY_STRING": query,
                   "REQUEST_METHOD": self.command,
                   "CONTENT_TYPE": self.headers.get("Content-Type", ""), "REMOTE_USER": user,
                   "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                   "GIT_PROTOCOL": self.headers.get("Git-Protocol", "")}  # fmt: skip
            out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
            head, _, payload = out.partition(b"\r\n\r\n")
            status, headers = 200, []
            for line in head.decode().split("\r\n"):
                key, _, value = line.partition(": ")
                if key.lower() == "status":
                    status = int(value.split()[0])
                elif key:
                    headers.append((key, value))
            self.send_response(status)
            for key, value in headers:
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = _cgi  # noqa: N815 (http.server's names)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1], received
    finally:
        server.shutdown()
        server.server_close()
