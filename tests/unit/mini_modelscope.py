"""A ModelScope hub on loopback for the real modelscope client (MODELSCOPE_ENDPOINT=hub.url).

It answers the part of ModelScope's HTTP API that modelscope 1.40 (modelscope_hub 0.5) uses for
`HubApi().get_model_files` and `snapshot_download` of a model: the recursive listing
(`GET /api/v1/models/OWNER/NAME/repo/files?Revision=REV&Recursive=True[&Root=DIR]`, answered as ModelScope
does: {"Code": 200, "Data": {"Files": [...]}, "Success": true}, every folder an entry of "Type": "tree") and
each file (`GET /api/v1/models/OWNER/NAME/repo?Revision=REV&FilePath=PATH`, with Range). Anything else (the
client's region probe /api/v1/repos/internalAccelerationInfo) is a 404 in ModelScope's error form. The hub
itself is out of reach from this machine and its server is not public, so the client is tested against this.
Every request is recorded, so a test sees what the client asked for.
"""

from __future__ import annotations

import hashlib
import json
import re
from urllib.parse import parse_qs, urlsplit

from loopback_hub import HubHandler, LoopbackServer


class MiniModelScope(LoopbackServer):
    def __init__(self):
        self.repos: dict[str, dict[str, dict[str, bytes]]] = {}  # model id -> revision -> {path: bytes}
        self.requests: list[tuple[str, str, dict[str, str]]] = []  # (method, path, query)
        super().__init__(self._handler())

    def add(self, model_id: str, files: dict[str, bytes], revision: str = "master") -> None:
        """The model's files at `revision` (a branch, tag or commit; the client's default is master)."""
        self.repos.setdefault(model_id, {})[revision] = dict(files)

    def files_sent(self) -> list[str]:
        """FilePath of each file download the client made."""
        return [
            query["FilePath"]
            for method, path, query in self.requests
            if path.endswith("/repo") and method == "GET"
        ]

    def _handler(self):
        hub = self

        class Handler(HubHandler):
            def _json(self, status: int, value: dict, body: bool) -> None:
                self._send(status, json.dumps(value).encode(), {"Content-Type": "application/json"}, body)

            def _missing(self, body: bool, what: str) -> None:
                error = {"Code": 10010205001, "Message": f"{what} not found", "Success": False}
                self._json(404, error, body)

            def _answer(self, body: bool) -> None:
                url = urlsplit(self.path)
                query = {key: values[-1] for key, values in parse_qs(url.query).items()}
                hub.requests.append((self.command, url.path, query))
                if m := re.fullmatch(r"/api/v1/models/([^/]+/[^/]+)/repo/files", url.path):
                    self._listing(m[1], query, body)
                elif m := re.fullmatch(r"/api/v1/models/([^/]+/[^/]+)/repo", url.path):
                    self._file(m[1], query, body)
                else:
                    self._missing(body, url.path)

            def _files(self, model_id: str, query: dict) -> dict[str, bytes] | None:
                return hub.repos.get(model_id, {}).get(query.get("Revision", "master"))

            def _listing(self, model_id: str, query: dict, body: bool) -> None:
                files = self._files(model_id, query)
                if files is None:
                    self._missing(body, f"model {model_id}")
                    return
                root = query.get("Root", "").strip("/")
                folders = {rel.rsplit("/", i)[0] for rel in files for i in range(1, rel.count("/") + 1)}
                entries = [
                    {"Name": f.rsplit("/", 1)[-1], "Path": f, "Type": "tree", "Size": 0} for f in folders
                ]
                entries += [
                    {
                        "Name": rel.rsplit("/", 1)[-1],
                        "Path": rel,
                        "Type": "blob",
                        "Size": len(data),
                        "Sha256": hashlib.sha256(data).hexdigest(),
                        "IsLFS": False,
                        "Revision": query.get("Revision", "master"),
                    }
                    for rel, data in files.items()
                ]
                if root:
                    entries = [e for e in entries if e["Path"].startswith(root + "/")]
                entries.sort(key=lambda e: e["Path"])
                self._json(
                    200,
                    {"Code": 200, "Data": {"Files": entries}, "Message": "success", "Success": True},
                    body,
                )

            def _file(self, model_id: str, query: dict, body: bool) -> None:
                files = self._files(model_id, query)
                name = query.get("FilePath", "")
                if files is None or name not in files:
                    self._missing(body, f"file {name}")
                    return
                data = files[name]
                status, headers = 200, {"Content-Type": "application/octet-stream"}
                if m := re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range") or ""):
                    start, end = int(m[1]), int(m[2]) if m[2] else len(data) - 1
                    if start >= len(data):
                        self._send(416, b"", {"Content-Range": f"bytes */{len(data)}"}, body)
                        return
                    end = min(end, len(data) - 1)
                    status, headers["Content-Range"] = 206, f"bytes {start}-{end}/{len(data)}"
                    data = data[start : end + 1]
                self._send(status, data, headers, body)

        return Handler
