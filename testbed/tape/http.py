"""The Tape REST API (WLCG v1, as gfal2 2.21.3 uses it) and the control port of the XRootD prepare program, over
one HTTP request handler."""

from __future__ import annotations

import contextlib
import email.utils
import json
import os
import posixpath
import re
import socket
import ssl
from html import escape
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from .library import TapeLibrary, _unique
from .model import (
    API_PREFIX,
    MAX_BODY,
    READ_CHUNK,
    TapeError,
    log,
    normalize_path,
)
from .tokens import TokenPolicy

# The WLCG scopes each operation of the door needs (storage.stage reads as well as stages).
STAGE = ("storage.stage",)
READ = ("storage.read", "storage.stage")


class TapeHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server for the tape API; with an SSL context, TLS is set up in the request's thread."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(
        self,
        address: tuple[str, int],
        library: TapeLibrary,
        sitename: str,
        public_base: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        internal: bool = False,
        tokens: TokenPolicy | None = None,
    ) -> None:
        self.library = library
        self.tokens = tokens
        self.sitename = sitename
        self.public_base = public_base.rstrip("/")
        self.ssl_context = ssl_context
        self.internal = internal
        super().__init__(address, TapeRequestHandler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.ssl_context is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(30)
        try:
            conn = self.ssl_context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            log(f"TLS handshake with {client_address[0]} failed: {exc}")
            return
        try:
            TapeRequestHandler(conn, client_address, self)
        finally:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()


class TapeRequestHandler(BaseHTTPRequestHandler):
    """Routes the Tape REST API, the internal endpoints, /status and file reads."""

    protocol_version = "HTTP/1.1"
    server_version = "TestbedTape/1"
    server: TapeHTTPServer

    # -- plumbing --

    def log_message(self, format: str, *args: Any) -> None:
        log(f"{self.client_address[0]} {format % args}")

    def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_error_json(self, status: int, detail: str) -> None:
        title = HTTPStatus(status).phrase
        self._send_json(status, {"type": "about:blank", "title": title, "status": status, "detail": detail})

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise TapeError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "request body too large")
        return self.rfile.read(length) if length > 0 else b""

    def _json_body(self) -> Any:
        body = self._read_body()
        try:
            return json.loads(body or b"null")
        except (ValueError, UnicodeDecodeError) as exc:
            raise TapeError(HTTPStatus.BAD_REQUEST, f"invalid JSON: {exc}") from exc

    def _paths(self, body: Any, key: str = "paths") -> list[str]:
        """A non-empty list of path strings from body[key], normalized."""
        if not isinstance(body, dict) or not isinstance(body.get(key), list) or not body[key]:
            raise TapeError(HTTPStatus.BAD_REQUEST, f'expected a JSON object with a non-empty "{key}" list')
        try:
            return _unique(normalize_path(path) for path in body[key])
        except ValueError as exc:
            raise TapeError(HTTPStatus.BAD_REQUEST, str(exc)) from exc

    def _request_id(self, body: Any) -> str:
        rid = body.get("requestId") if isinstance(body, dict) else None
        if not isinstance(rid, str) or not rid:
            raise TapeError(HTTPStatus.BAD_REQUEST, 'expected a non-empty string "requestId"')
        return rid

    def _allowed(self, operations: tuple[str, ...], paths: list[str]) -> None:
        """With a token policy (a door that requires tokens), 401/403 unless the bearer token allows `operations`
        on every path; the control port and a door without a policy take anyone."""
        if self.server.tokens is not None and not self.server.internal:
            self.server.tokens.require(self.headers.get("Authorization"), operations, paths)

    def _request_paths(self, rid: str) -> list[str]:
        return [str(entry["path"]) for entry in self.server.library.request_json(rid).get("files", [])]

    def _route(self, method: str) -> None:
        path = unquote(urlsplit(self.path).path)
        try:
            self._dispatch(method, path)
        except TapeError as exc:
            self._send_error_json(exc.status, exc.detail)
        except (BrokenPipeError, ConnectionResetError):
            raise
        except Exception as exc:
            log(f"error handling {method} {self.path}: {exc!r}")
            self._send_error_json(HTTPStatus.INTERNAL_SERVER_ERROR, f"internal error: {exc}")

    def do_GET(self) -> None:
        self._route("GET")

    def do_HEAD(self) -> None:
        self._route("HEAD")

    def do_POST(self) -> None:
        self._route("POST")

    def do_DELETE(self) -> None:
        self._route("DELETE")

    def do_PROPFIND(self) -> None:
        self._route("PROPFIND")

    def do_OPTIONS(self) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Allow", "GET, HEAD, POST, DELETE, PROPFIND, OPTIONS")
        self.send_header("DAV", "1")
        self.send_header("Content-Length", "0")
        self.end_headers()

    # -- routing --

    def _dispatch(self, method: str, path: str) -> None:
        library = self.server.library
        api = path.rstrip("/")
        if method == "GET" and api == "/.well-known/wlcg-tape-rest-api":
            self._send_json(
                HTTPStatus.OK,
                {
                    "sitename": self.server.sitename,
                    "description": "Emulated tape of the Data Challenge Portal testbed",
                    "endpoints": [{"uri": f"{self.server.public_base}{API_PREFIX}/", "version": "v1", "metadata": {}}],
                },
            )
        elif method == "GET" and api == "/status":
            self._send_json(HTTPStatus.OK, library.status_json())
        elif api == API_PREFIX or api.startswith(API_PREFIX + "/"):
            self._api(method, api[len(API_PREFIX) :].strip("/").split("/"))
        elif api.startswith("/internal/") and self.server.internal:
            self._internal(method, api[len("/internal/") :])
        elif method in ("GET", "HEAD"):
            self._allowed(READ, [path])
            self._serve_file(path)
        elif method == "PROPFIND":
            self._allowed(READ, [path])
            self._propfind(path)
        else:
            raise TapeError(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} not allowed on {path}")

    def _api(self, method: str, parts: list[str]) -> None:
        library = self.server.library
        match method, parts:
            case "POST", ["stage"]:
                body = self._json_body()
                files = body.get("files") if isinstance(body, dict) else None
                if not isinstance(files, list) or not files:
                    raise TapeError(HTTPStatus.BAD_REQUEST, 'expected a JSON object with a non-empty "files" list')
                if not all(isinstance(item, dict) and "path" in item for item in files):
                    raise TapeError(HTTPStatus.BAD_REQUEST, 'every entry of "files" needs a "path"')
                self._allowed(STAGE, [str(item["path"]) for item in files])
                try:
                    request = library.submit([item["path"] for item in files])
                except ValueError as exc:
                    raise TapeError(HTTPStatus.BAD_REQUEST, str(exc)) from exc
                self._send_json(
                    HTTPStatus.CREATED,
                    {"requestId": request.id},
                    {"Location": f"{self.server.public_base}{API_PREFIX}/stage/{request.id}"},
                )
            case "GET", ["stage", rid]:
                self._allowed(STAGE, self._request_paths(rid))
                self._send_json(HTTPStatus.OK, library.request_json(rid))
            case "DELETE", ["stage", rid]:
                self._allowed(STAGE, self._request_paths(rid))
                library.delete(rid)
                self._send_json(HTTPStatus.OK, {"requestId": rid, "deleted": True})
            case "POST", ["stage", rid, "cancel"]:
                paths = self._paths(self._json_body())
                self._allowed(STAGE, paths)
                library.get(rid)
                self._send_json(HTTPStatus.OK, {"requestId": rid, "canceled": library.cancel(rid, paths)})
            case "POST", ["release", rid]:
                # gfal2 releases with the id "gfal2-placeholder-id" when it has none: any id is accepted.
                paths = self._paths(self._json_body())
                self._allowed(STAGE, paths)
                self._send_json(HTTPStatus.OK, {"requestId": rid, "released": library.evict(paths)})
            case "POST", ["archiveinfo"]:
                paths = self._paths(self._json_body())
                self._allowed(READ, paths)
                self._send_json(HTTPStatus.OK, library.archiveinfo_json(paths))
            case _:
                raise TapeError(HTTPStatus.NOT_FOUND, f"no such endpoint: {method} {API_PREFIX}/{'/'.join(parts)}")

    def _internal(self, method: str, name: str) -> None:
        library = self.server.library
        if method != "POST":
            raise TapeError(HTTPStatus.METHOD_NOT_ALLOWED, "internal endpoints take POST")
        body = self._json_body()
        if name == "stage":
            request = library.submit(self._paths(body), self._request_id(body))
            self._send_json(HTTPStatus.CREATED, {"requestId": request.id})
        elif name == "query":
            self._send_json(HTTPStatus.OK, library.prepare_query_json(self._request_id(body), self._paths(body)))
        elif name == "cancel":
            rid = self._request_id(body)
            paths = self._paths(body) if body.get("paths") else None  # no paths: the whole request
            self._send_json(HTTPStatus.OK, {"requestId": rid, "canceled": library.cancel(rid, paths, strict=False)})
        elif name == "evict":
            self._send_json(HTTPStatus.OK, {"released": library.evict(self._paths(body))})
        else:
            raise TapeError(HTTPStatus.NOT_FOUND, f"no such internal endpoint: {name}")

    # -- files --

    def _serve_file(self, raw_path: str) -> None:
        """GET/HEAD of a file on the disk buffer, with single byte ranges."""
        try:
            path = normalize_path(raw_path)
        except ValueError as exc:
            raise TapeError(HTTPStatus.BAD_REQUEST, str(exc)) from exc
        disk = self.server.library.disk_path(path)
        if not disk.is_file():
            detail = "file is on tape only: stage it first" if self.server.library.on_tape(path) else "no such file"
            raise TapeError(HTTPStatus.NOT_FOUND, f"{path}: {detail}")
        with open(disk, "rb") as handle:
            stat = os.fstat(handle.fileno())
            size = stat.st_size
            start, end = 0, size - 1
            status = HTTPStatus.OK
            ranged = _parse_range(self.headers.get("Range"), size)
            if ranged == "invalid":
                self.send_response(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if isinstance(ranged, tuple):
                start, end = ranged
                status = HTTPStatus.PARTIAL_CONTENT
            length = max(0, end - start + 1)
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(length))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Last-Modified", email.utils.formatdate(stat.st_mtime, usegmt=True))
            if status == HTTPStatus.PARTIAL_CONTENT:
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            self.end_headers()
            if self.command == "HEAD":
                return
            handle.seek(start)
            remaining = length
            while remaining > 0:
                chunk = handle.read(min(READ_CHUNK, remaining))
                if not chunk:
                    break
                self.wfile.write(chunk)
                remaining -= len(chunk)

    def _propfind(self, raw_path: str) -> None:
        """A minimal WebDAV PROPFIND (depth 0 or 1) over the union of disk and tape, for clients that stat."""
        self._read_body()
        library = self.server.library
        path = normalize_path(raw_path)
        disk, tape = library.disk_path(path), library.tape_path(path)
        if not disk.exists() and not tape.exists():
            raise TapeError(HTTPStatus.NOT_FOUND, f"{path}: no such file or directory")
        entries = [(path, disk if disk.exists() else tape)]
        if self.headers.get("Depth", "1") != "0" and entries[0][1].is_dir():
            names: set[str] = set()
            for base in (disk, tape):
                if base.is_dir():
                    names.update(child.name for child in base.iterdir() if not child.name.startswith("."))
            for name in sorted(names):
                child = posixpath.join(path, name)
                local = library.disk_path(child)
                entries.append((child, local if local.exists() else library.tape_path(child)))
        responses = "".join(_dav_response(lfn, local) for lfn, local in entries)
        body = f'<?xml version="1.0" encoding="utf-8"?>\n<D:multistatus xmlns:D="DAV:">{responses}</D:multistatus>'
        data = body.encode()
        self.send_response(HTTPStatus.MULTI_STATUS)
        self.send_header("Content-Type", 'application/xml; charset="utf-8"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _dav_response(lfn: str, local: Path) -> str:
    stat = local.stat()
    is_dir = local.is_dir()
    kind = "<D:collection/>" if is_dir else ""
    size = "" if is_dir else f"<D:getcontentlength>{stat.st_size}</D:getcontentlength>"
    href = quote(lfn + ("/" if is_dir and lfn != "/" else ""))
    modified = email.utils.formatdate(stat.st_mtime, usegmt=True)
    return (
        f"<D:response><D:href>{escape(href)}</D:href><D:propstat><D:prop><D:resourcetype>{kind}"
        f"</D:resourcetype>{size}<D:getlastmodified>{modified}</D:getlastmodified></D:prop>"
        f"<D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>"
    )


def _parse_range(header: str | None, size: int) -> tuple[int, int] | str | None:
    """(start, end) for a single "bytes=a-b" range, None to send everything, "invalid" when unsatisfiable."""
    if not header:
        return None
    match = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", header)
    if not match or match.group(1) == match.group(2) == "":
        return None  # several ranges or nonsense: answer with the whole file
    first, last = match.groups()
    if first == "":
        start, end = max(0, size - int(last)), size - 1
    else:
        start, end = int(first), min(size - 1, int(last)) if last else size - 1
    if start >= size or start > end:
        return "invalid"
    return start, end
