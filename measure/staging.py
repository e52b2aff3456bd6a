"""The staging probe: bring files online from a tape endpoint in bulk requests, poll until done or timeout.

Plain Python with gfal2 (no Django). Files go to the tape endpoint in bulk requests of `bulk_size` (gfal2
bring_online, asynchronous), then every `poll_interval` seconds gfal2 polls what is still pending. Per file:

- start: when its bulk request was sent; end: when it was online (or failed);
- queue_seconds: from the request to the start of its recall, and stage_seconds: from that start to online.

gfal2 says only "pending" or "online", so the start of a recall is observable only where the endpoint shows it:
for a WLCG Tape REST endpoint (davs:// or https://) the probe reads the stage request (GET stage/ID, found through
/.well-known/wlcg-tape-rest-api) at every poll and takes the server's per-file start and end times when it gives
them, else the first poll that shows the file STARTED. Elsewhere (root:// prepare) queue_seconds is None and
stage_seconds spans request to online. details["timing"] says which ("server", "polled" or "request").

Before anything is requested the probe asks where each file is (gfal2's `user.status`: NEARLINE, ONLINE or
ONLINE_AND_NEARLINE, as Tape REST archiveinfo or XRootD's stat say it), so that a recall tells the files that came
from tape from those that were online already: only the former make a tape rate (`tape_rate`: their bytes over the
span from the first one's recall start to the last one online).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import gfal2

from .outcomes import ONLINE_BEFORE, FileOutcome, utcnow

PENDING_CODES = {errno.EAGAIN}  # gfal2: not online yet
# gfal2's user.status, as the Tape REST API's localities.
LOCALITIES = {"NEARLINE": "TAPE", "ONLINE": "DISK", "ONLINE_AND_NEARLINE": "DISK_AND_TAPE"}


def locality_of(ctx: Any, url: str) -> str | None:
    """Where a file is before its recall: TAPE, DISK or DISK_AND_TAPE; None when the endpoint does not say."""
    try:
        status = str(ctx.getxattr(url, "user.status")).strip().upper()
    except gfal2.GError:
        return None
    return LOCALITIES.get(status)


def _message(exc: Exception) -> str:
    return str(getattr(exc, "message", "") or exc)


def _explained(message: str, files: int) -> str:
    """gfal2's message, with what a 413 means here (gfal2 passes the status code on, not the endpoint's reason)."""
    if "received 413" in message or "HTTP 413" in message:
        return f"{message}: the endpoint refused a stage request of {files} files as too large; use a smaller bulk_size"
    return message


@dataclass
class StagingResult:
    """Every file's outcome (mode "stage"), in the order asked, and the bulk requests that were sent."""

    files: list[FileOutcome] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    start: datetime | None = None
    end: datetime | None = None
    released: int = 0

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds() if self.start and self.end else 0.0

    @property
    def staged(self) -> int:
        return sum(1 for outcome in self.files if outcome.ok)

    @property
    def failed(self) -> int:
        return sum(1 for outcome in self.files if not outcome.ok)

    def _from_tape(self) -> list[FileOutcome]:
        return [o for o in self.files if o.ok and o.details.get("locality_before") == "TAPE"]

    def tape_figures(self) -> dict[str, Any]:
        """The files that came from tape (offline before the recall) and those online already (never a tape rate);
        the tape rate: the former's bytes over their span, first recall start to last online."""
        from_tape = self._from_tape()
        online = [o for o in self.files if o.ok and o.details.get("locality_before") in ONLINE_BEFORE]
        span = (max(o.end for o in from_tape) - min(o.start for o in from_tape)).total_seconds() if from_tape else 0.0
        tape_bytes = sum(o.bytes for o in from_tape)
        return {
            "files_from_tape": len(from_tape),
            "files_already_online": len(online),
            "files_locality_unknown": sum(1 for o in self.files if o.ok and o.details.get("locality_before") is None),
            "tape_bytes": tape_bytes,
            "tape_seconds": span,
            "tape_rate": tape_bytes / span if span > 0 else None,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "start": self.start.isoformat() if self.start else None,
            "end": self.end.isoformat() if self.end else None,
            "seconds": self.seconds,
            "staged": self.staged,
            "failed": self.failed,
            **self.tape_figures(),
            "released": self.released,
            "requests": self.requests,
            "files": [outcome.to_dict() for outcome in self.files],
        }


class TapeRestObserver:
    """Reads stage requests of WLCG Tape REST endpoints (GET <uri>stage/<id>) to see when each recall started.

    Uses the CA directory of X509_CERT_DIR (as gfal2 does) and the file's own token when the context gives one
    (`bearer_for`: the staged file's storage.stage token), else BEARER_TOKEN when set (WLCG token discovery).
    Observation is best effort: whatever fails here leaves the timing to gfal2's polling.
    """

    def __init__(self, timeout: float = 10.0, bearer_for: Callable[[str], str | None] | None = None) -> None:
        self.timeout = timeout
        self.bearer_for = bearer_for
        self._api: dict[str, str | None] = {}
        cert_dir = os.environ.get("X509_CERT_DIR")
        self._ssl = ssl.create_default_context(capath=cert_dir) if cert_dir else ssl.create_default_context()

    def _get(self, url: str, file_url: str = "") -> Any:
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        token = self.bearer_for(file_url) if self.bearer_for is not None and file_url else None
        if token := token or os.environ.get("BEARER_TOKEN"):
            request.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(request, timeout=self.timeout, context=self._ssl) as response:
            return json.load(response)

    def _api_uri(self, url: str) -> str | None:
        parts = urlsplit(url)
        if parts.scheme not in ("davs", "https"):
            return None
        base = f"https://{parts.netloc}"
        if base not in self._api:
            self._api[base] = None
            try:
                document = self._get(f"{base}/.well-known/wlcg-tape-rest-api")
                for endpoint in document.get("endpoints", []):
                    if endpoint.get("version") == "v1" and endpoint.get("uri"):
                        self._api[base] = str(endpoint["uri"]).rstrip("/") + "/"
                        break
            except (OSError, ValueError, AttributeError):
                pass
        return self._api[base]

    def files(self, url: str, request_id: str) -> dict[str, dict[str, Any]] | None:
        """The stage request's files by path (state, and startedAt/finishedAt when the server gives them)."""
        api = self._api_uri(url)
        if api is None:
            return None
        try:
            document = self._get(f"{api}stage/{request_id}", url)
            return {str(entry["path"]): entry for entry in document.get("files", [])}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None


@dataclass
class _File:
    url: str
    index: int
    request: int
    requested: datetime
    started: datetime | None = None
    started_by: str = ""
    outcome: FileOutcome | None = None
    locality: str | None = None


def _server_time(value: Any) -> datetime | None:
    return datetime.fromtimestamp(float(value), UTC) if isinstance(value, int | float) and value > 0 else None


def _finish(
    ctx: Any, item: _File, *, ok: bool, end: datetime, error: str = "", server_end: datetime | None = None
) -> None:
    if ok and server_end is not None and item.requested <= server_end <= end:
        end = server_end  # the server saw it online before our poll did
    size = 0
    if ok:
        try:
            size = int(ctx.stat(item.url).st_size)
        except gfal2.GError:
            size = 0
    started = item.started if item.started is not None and item.started <= end else None
    details: dict[str, Any] = {
        "request": item.request,
        "locality_before": item.locality,
        "timing": item.started_by if started is not None else "request",
        "queue_seconds": (started - item.requested).total_seconds() if started is not None else None,
        "stage_seconds": (end - (started or item.requested)).total_seconds() if ok else None,
    }
    if started is not None:
        details["stage_started"] = started.isoformat()
    # A recall moves the file out of the tape system into the same site's disk buffer: the tape URL is the source
    # and there is no destination endpoint, so a recall counts once, as traffic out of the tape site (the A-DT
    # targets), never also as traffic into it. A recalled file's bytes span the stage itself: from when a drive
    # started on it when the endpoint tells (Tape REST), not from the request's submission; a failed file (no bytes)
    # spans the whole wait, which is what its error speaks of.
    start = started if ok and started is not None else item.requested
    item.outcome = FileOutcome(item.url, "", size, start, end, ok, error, "stage", details=details)


def stage_files(
    ctx: Any,
    urls: list[str],
    *,
    bulk_size: int = 1000,
    pin_time: int = 3600,
    timeout: float = 3600,
    poll_interval: float = 2.0,
    cancel: threading.Event | None = None,
    release: bool = True,
) -> StagingResult:
    """Bring urls online in bulk requests of bulk_size; poll every poll_interval s until all are online or failed, or
    `timeout` seconds after the first request have passed: files still offline then fail with "staging timeout"
    (and their requests are aborted). Failed files keep gfal2's message. `cancel`, when set, ends the wait the same
    way (the files still offline fail as cancelled) and the files already online are kept in the result. With
    `release` (the default) the files brought online are released at the end: a test recall leaves nothing pinned."""
    if not urls:
        raise ValueError("no files to stage")
    if len(set(urls)) != len(urls):
        raise ValueError("the same file is asked for twice")
    if bulk_size < 1 or timeout <= 0 or poll_interval <= 0 or pin_time < 0:
        raise ValueError("need bulk_size >= 1, timeout > 0, poll_interval > 0 and pin_time >= 0")
    # Where each file is, asked before the first request (and before the timeout starts to run).
    localities = [locality_of(ctx, url) for url in urls]
    started = utcnow()
    result = StagingResult(start=started)
    observer = TapeRestObserver(bearer_for=getattr(ctx, "bearer_for", None))
    deadline = time.monotonic() + timeout
    items = [
        _File(url, index, index // bulk_size, started, locality=localities[index]) for index, url in enumerate(urls)
    ]
    tokens = _request(ctx, items, result, bulk_size=bulk_size, pin_time=pin_time, timeout=timeout)
    while any(item.outcome is None for item in items):
        _poll(ctx, items, tokens, observer)
        if all(item.outcome is not None for item in items):
            break
        cancelled = cancel is not None and cancel.is_set()
        if cancelled or time.monotonic() >= deadline:
            _give_up(ctx, items, tokens, cancelled=cancelled, timeout=timeout)
            break
        pause = min(poll_interval, max(deadline - time.monotonic(), 0.0))
        if cancel is not None:
            cancel.wait(pause)
        else:
            time.sleep(pause)
    result.files = [item.outcome for item in items if item.outcome is not None]
    result.end = max(outcome.end for outcome in result.files)
    if release:
        result.released = _release(ctx, items, tokens)
    return result


def _request(
    ctx: Any, items: list[_File], result: StagingResult, *, bulk_size: int, pin_time: int, timeout: float
) -> dict[int, str]:
    """Send the bulk requests; returns each request's gfal2 token by its number. Files refused at once fail."""
    tokens: dict[int, str] = {}
    for number in range(0, (len(items) + bulk_size - 1) // bulk_size):
        batch = items[number * bulk_size : (number + 1) * bulk_size]
        requested = utcnow()
        for item in batch:
            item.requested = requested
        record: dict[str, Any] = {"files": len(batch), "submitted": requested.isoformat()}
        result.requests.append(record)
        try:
            errors, token = ctx.bring_online([item.url for item in batch], pin_time, int(timeout), True)
        except gfal2.GError as exc:
            message = _explained(_message(exc), len(batch))
            record["error"] = message
            for item in batch:
                _finish(ctx, item, ok=False, end=utcnow(), error=message)
            continue
        tokens[number], record["token"] = token, token
        for item, error in zip(batch, errors, strict=True):
            if error is not None and error.code not in PENDING_CODES:
                _finish(ctx, item, ok=False, end=utcnow(), error=_explained(error.message, len(batch)))
    return tokens


def _poll(ctx: Any, items: list[_File], tokens: dict[int, str], observer: TapeRestObserver) -> None:
    """One poll of every request with files pending: online files finish, failed ones fail, and a recall's start
    is taken from the server (Tape REST) when it tells."""
    pending = [item for item in items if item.outcome is None]
    for number in sorted({item.request for item in pending}):
        batch = [item for item in pending if item.request == number]
        server = observer.files(batch[0].url, tokens[number])
        try:
            errors = ctx.bring_online_poll([item.url for item in batch], tokens[number])
        except gfal2.GError as exc:
            errors = [exc] * len(batch)
        now = utcnow()
        for item, error in zip(batch, errors, strict=True):
            entry = (server or {}).get(urlsplit(item.url).path.replace("//", "/"), {})
            if item.started is None:
                if (server_start := _server_time(entry.get("startedAt"))) is not None:
                    item.started, item.started_by = server_start, "server"
                elif entry.get("state") in ("STARTED", "COMPLETED"):
                    item.started, item.started_by = now, "polled"
            if error is None:
                _finish(ctx, item, ok=True, end=now, server_end=_server_time(entry.get("finishedAt")))
            elif getattr(error, "code", None) not in PENDING_CODES:
                _finish(ctx, item, ok=False, end=now, error=_message(error))


def _give_up(ctx: Any, items: list[_File], tokens: dict[int, str], *, cancelled: bool, timeout: float) -> None:
    """The timeout (or the cancel) is the outcome of the files still offline; their requests are aborted (an abort
    the endpoint refuses changes nothing here)."""
    late = [item for item in items if item.outcome is None]
    for number in sorted({item.request for item in late}):
        with contextlib.suppress(gfal2.GError):
            ctx.abort_bring_online([item.url for item in late if item.request == number], tokens[number])
    why = "cancelled: the run ended" if cancelled else f"staging timeout: not online after {timeout:g} s"
    for item in late:
        _finish(ctx, item, ok=False, end=utcnow(), error=why)


def _release(ctx: Any, items: list[_File], tokens: dict[int, str]) -> int:
    """Release what the recall brought online (its measure is taken), so that it leaves nothing pinned and the next
    recall of these files comes from tape again. Returns the files released; a refusal leaves the file as it is."""
    released = 0
    for item in items:
        if item.outcome is None or not item.outcome.ok or item.request not in tokens:
            continue
        with contextlib.suppress(gfal2.GError):
            ctx.release(item.url, tokens[item.request])
            released += 1
    return released


__all__ = ["StagingResult", "TapeRestObserver", "stage_files"]
