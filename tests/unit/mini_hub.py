"""A model hub on loopback for the real huggingface_hub client (HF_ENDPOINT=hub.url).

It answers the part of the Hub's HTTP API that `snapshot_download` uses: a revision's info
(`/api/models/REPO[/revision/REV]`), its recursive file listing (`/api/models/REPO/tree/REV`) and the files
(`HEAD`/`GET /REPO/resolve/REV/PATH`, with X-Repo-Commit, ETag and Range). The Hub itself is out of reach from
this machine and its server is not public, so the client is tested against this; no Xet, no LFS redirects.
Every request is recorded with its Authorization header, so a test sees which token the client sent.
"""

from __future__ import annotations

import hashlib
import json
import re
from urllib.parse import unquote, urlsplit

from loopback_hub import HubHandler, LoopbackServer


class MiniHub(LoopbackServer):
    def __init__(self, token: str | None = None):
        self.repos: dict[str, dict] = {}  # repo -> {"refs": {name: sha}, "commits": {sha: {path: bytes}}}
        self.token = token  # when set, requests without `Bearer token` get 401
        self.unserved: set[str] = set()  # listed, but resolve answers 404 (listing out of step with storage)
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Authorization)
        super().__init__(self._handler())

    def commit(self, repo: str, files: dict[str, bytes], *refs: str) -> str:
        """Add a commit holding exactly `files`; each of `refs` (a branch or tag) then names it."""
        sha = hashlib.sha1(repr((repo, sorted(files.items()))).encode()).hexdigest()
        entry = self.repos.setdefault(repo, {"refs": {}, "commits": {}})
        entry["commits"][sha] = dict(files)
        for ref in refs:
            entry["refs"][ref] = sha
        return sha

    def files_sent(self) -> list[str]:
        return [path for method, path, _ in self.requests if method == "GET" and "/resolve/" in path]

    def _resolve(self, repo: str, rev: str) -> tuple[str, dict[str, bytes]] | None:
        entry = self.repos.get(repo)
        if entry is None:
            return None
        sha = entry["refs"].get(rev, rev)
        files = entry["commits"].get(sha)
        return None if files is None else (sha, files)

    def _handler(self):
        hub = self

        class Handler(HubHandler):
            def _json(self, value, body: bool) -> None:
                self._send(200, json.dumps(value).encode(), {"Content-Type": "application/json"}, body)

            def _missing(self, body: bool, kind: str = "RepoNotFound") -> None:
                self._send(404, b'{"error": "not found"}', {"X-Error-Code": kind}, body)

            def _answer(self, body: bool) -> None:
                path = unquote(urlsplit(self.path).path)
                hub.requests.append((self.command, path, self.headers.get("Authorization")))
                if hub.token and self.headers.get("Authorization") != f"Bearer {hub.token}":
                    self._send(401, b'{"error": "unauthorized"}', {"X-Error-Code": "GatedRepo"}, body)
                    return
                if m := re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/(.+))?", path):
                    self._info(m[1], m[2] or "main", body)
                elif m := re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)(/.*)?", path):
                    self._tree(m[1], m[2], body)
                elif m := re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path):
                    self._file(m[1], m[2], m[3], body)
                else:
                    self._missing(body)

            def _info(self, repo: str, rev: str, body: bool) -> None:
                found = hub._resolve(repo, rev)
                if found is None:
                    self._missing(body, "RevisionNotFound" if repo in hub.repos else "RepoNotFound")
                    return
                sha, files = found
                siblings = [{"rfilename": p} for p in sorted(files)]
                info = {"id": repo, "modelId": repo, "sha": sha, "private": False, "siblings": siblings}
                self._json(info, body)

            def _tree(self, repo: str, rev: str, body: bool) -> None:
                found = hub._resolve(repo, rev)
                if found is None:
                    self._missing(body)
                    return
                listing = [
                    {"type": "file", "oid": hashlib.sha1(data).hexdigest(), "size": len(data), "path": p}
                    for p, data in sorted(found[1].items())
                ]
                self._json(listing, body)

            def _file(self, repo: str, rev: str, name: str, body: bool) -> None:
                found = hub._resolve(repo, rev)
                if found is None or name not in found[1] or name in hub.unserved:
                    self._missing(body, "EntryNotFound")
                    return
                sha, data = found[0], found[1][name]
                headers = {"X-Repo-Commit": sha, "ETag": f'"{hashlib.sha1(data).hexdigest()}"'}
                start = 0
                if m := re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or ""):
                    start = int(m[1])
                    headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
                self._send(206 if start else 200, data[start:], headers, body)

        return Handler
