"""A real HTTP server on 127.0.0.1 standing in for the Hugging Face Hub (HF_ENDPOINT), serving one model
repository from a folder: what huggingface_hub asks when fastembed fetches a model (the repository's
info and file tree, then each file's metadata by HEAD and its bytes by GET). Used by
tests/test_models.py for the reranker fetched on a search's first use; no test reaches the real hub.

``FakeHub(files, repo)`` serves ``files`` ({path in the repository: bytes}); ``fail`` makes every
request a 503 (a hub that is up and cannot serve); ``requests`` counts what was asked.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

REVISION = "0123456789abcdef0123456789abcdef01234567"  # the repository's one commit


class FakeHub:
    def __init__(self, files: dict[str, bytes], repo: str, fail: bool = False):
        self.files, self.repo, self.fail = files, repo, fail
        self.requests: list[str] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                hub._answer(self, body=False)

            def do_GET(self) -> None:
                hub._answer(self, body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeHub":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    # -- the Hub's answers ---------------------------------------------------------------------
    def _oid(self, data: bytes) -> str:
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's blob id, as the Hub gives

    def _info(self) -> dict:
        return {"id": self.repo, "modelId": self.repo, "sha": REVISION, "private": False, "disabled": False,
                "gated": False, "tags": [], "siblings": [{"rfilename": path} for path in sorted(self.files)]}

    def _tree(self) -> list[dict]:
        folders = sorted({path.rsplit("/", 1)[0] for path in self.files if "/" in path})
        return ([{"type": "directory", "oid": "0" * 40, "size": 0, "path": folder} for folder in folders]
                + [{"type": "file", "oid": self._oid(data), "size": len(data), "path": path}
                   for path, data in sorted(self.files.items())])

    def _answer(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        path = unquote(urlsplit(handler.path).path)
        self.requests.append(f"{handler.command} {path}")
        if self.fail:
            return self._send(handler, 503, b'{"error": "the hub is down for maintenance"}', body)
        api = f"/api/models/{self.repo}"
        if path in (api, f"{api}/revision/main", f"{api}/revision/{REVISION}"):
            return self._send(handler, 200, json.dumps(self._info()).encode(), body)
        if path.startswith(f"{api}/tree/"):
            return self._send(handler, 200, json.dumps(self._tree()).encode(), body)
        for revision in ("main", REVISION):
            prefix = f"/{self.repo}/resolve/{revision}/"
            if path.startswith(prefix) and path[len(prefix):] in self.files:
                data = self.files[path[len(prefix):]]
                return self._send(handler, 200, data, body, {
                    "ETag": f'"{self._oid(data)}"', "X-Repo-Commit": REVISION,
                    "Content-Type": "application/octet-stream"})
        self._send(handler, 404, b'{"error": "not found"}', body, {"X-Error-Code": "EntryNotFound"})

    @staticmethod
    def _send(handler, status: int, data: bytes, body: bool, headers: dict | None = None) -> None:
        handler.send_response(status)
        for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if body:
            handler.wfile.write(data)
