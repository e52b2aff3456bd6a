"""Parsers of the formats DDM systems publish, each item into one results.store.rows.RecordRow (or a skip, or a clear
error). Plain functions of one message; the registry they match against is read once per batch (Registry).

Sources of the formats:
- FTS3 "transfer complete" monitoring message: cern-fts/fts3 src/url-copy (msg-ifce, SendTransferFinishMessage);
  numbers may arrive as strings ("1466632860151.000000"), times are epoch milliseconds.
- Rucio Hermes events: rucio/rucio lib/rucio/core/request.py (add_monitor_message): an envelope
  {"event_type", "payload", "created_at"}; payload "request-id", "transfer-id" (the FTS job id), "src-url", ...
- perfSONAR pScheduler throughput: perfsonar/pscheduler pscheduler-test-throughput (result: succeeded, intervals,
  summary {summary, streams}), in a run as pScheduler's API returns it (task spec source/dest, run start/end).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from results.choices import Origin, RecordState
from results.models import ERROR_MESSAGE_LENGTH, URL_LENGTH
from results.store.rows import RecordRow
from sites.matching import url_host

from .errors import ItemError, Skip
from .registry import Registry, SiteMatch, address_host
from .times import duration_check, end_check, order_check, seconds_check

__all__ = ["FORMATS", "ItemError", "Registry", "Skip", "parse_fts", "parse_perfsonar", "parse_rucio"]


FORMATS = ("fts", "rucio", "perfsonar")
INFINITY = float("inf")
OK, FAILED = RecordState.OK.value, RecordState.FAILED.value
FTS, RUCIO, PERFSONAR = Origin.FTS.value, Origin.RUCIO.value, Origin.PERFSONAR.value
ORIGIN_ID_LENGTH = 128  # TransferRecord.origin_id
TRANSFER_KEY_LENGTH = 200  # TransferRecord.transfer_key
HOST_LENGTH = 255  # TransferRecord.source_host, destination_host
DDM_ACTIVITY_LENGTH = 64  # TransferRecord.ddm_activity

BYTES_MAX = 2**63 - 1  # TransferRecord.bytes, a bigint

# --- records ---------------------------------------------------------------------------------------------------

# Record fields checked before a record is made, and how each format names them in its messages.
_TEXT_FIELDS = ("origin_id", "transfer_key", "source_url", "destination_url", "source_host", "destination_host")


def _storable(values: dict[str, Any], names: Mapping[str, str]) -> None:
    """Reject by item what PostgreSQL would refuse for the whole batch (a NUL in a text, a host name longer than
    its column) and transfers of absurd length; a NUL in an error message, free text, is only dropped. Over-long
    ids and transfer keys never get here: they are kept as their hashes."""
    for attname in _TEXT_FIELDS:
        value = values.get(attname)
        if value and "\x00" in value:
            raise ItemError(f"{names.get(attname, attname)}: contains a NUL character")
    for attname in ("source_host", "destination_host"):
        host = values.get(attname)
        if host and len(host) > HOST_LENGTH:
            raise ItemError(f"{names.get(attname, attname)}: a host name of {len(host)} characters (at most 255)")
    for attname in ("source_url", "destination_url"):
        url = values.get(attname)
        if url and len(url) > URL_LENGTH:
            raise ItemError(f"{names.get(attname, attname)}: a URL of {len(url)} characters (at most {URL_LENGTH})")
    message = values.get("error_message")
    if message:
        values["error_message"] = _message_bounded(message)
    start, end = values["start"], values["end"]
    order_check(start, end, names.get("start", "start"), names.get("end", "end"))
    end_check(end, names.get("end", "end"))
    duration_check((end - start).total_seconds())


def _message_bounded(message: str) -> str:
    """An error message without NULs, cut to ERROR_MESSAGE_LENGTH characters (marked)."""
    if "\x00" in message:
        message = message.replace("\x00", "")
    return message if len(message) <= ERROR_MESSAGE_LENGTH else message[: ERROR_MESSAGE_LENGTH - 1] + "…"


def record_new(values: dict[str, Any], names: Mapping[str, str] | None = None) -> RecordRow:
    """The row of a record with these attribute values (attnames) and the model's defaults for the rest. Values
    PostgreSQL would refuse are an ItemError that names the message's field (names: attname -> the format's name
    of it)."""
    _storable(values, names or {})
    return RecordRow(**values)


def _number(item: Mapping[str, Any], *names: str, required: bool = True) -> float | None:
    for name in names:
        value = item.get(name)
        if value is None or value == "":
            continue
        if type(value) is str or type(value) is int or type(value) is float:  # the common case, fast
            try:
                number = float(value)
            except ValueError:
                raise ItemError(f"{name}: not a number: {value!r}") from None
            if 0 <= number < INFINITY:
                return number
            raise ItemError(f"{name}: must be a number >= 0, not {value!r}")
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ItemError(f"{name}: not a number: {value!r}")
        try:
            number = float(value)
        except ValueError:
            raise ItemError(f"{name}: not a number: {value!r}") from None
        if not number >= 0 or number == float("inf"):
            raise ItemError(f"{name}: must be a number >= 0, not {value!r}")
        return number
    if required:
        raise ItemError(f"{names[0]}: missing")
    return None


def _text(item: Mapping[str, Any], name: str, *, required: bool = False) -> str:
    value = item.get(name)
    if type(value) is str and value:
        return value
    if value is None or value == "":
        if required:
            raise ItemError(f"{name}: missing")
        return ""
    if not isinstance(value, str | int):
        raise ItemError(f"{name}: not a string: {value!r}")
    return str(value)


def _hashed_if_longer(value: str, length: int) -> str:
    if len(value) <= length:
        return value
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()


def _origin_id(value: str) -> str:
    # Ids longer than the column (some FTS tr_ids) are kept as their hash: still unique, still stable.
    return _hashed_if_longer(value, ORIGIN_ID_LENGTH)


def _transfer_key(request_id: Any, job_id: str) -> str:
    """Rucio's request id and the FTS job id, as FTS and Rucio reports of one file both make it; a key longer than
    the column is kept as its hash, the same from either side."""
    return _hashed_if_longer(f"{request_id}/{job_id}", TRANSFER_KEY_LENGTH)


def _byte_count(size: float, name: str) -> int:
    if size > BYTES_MAX:
        raise ItemError(f"{name}: {size:g} bytes is more than a record holds")
    if size != int(size):  # 1.5 was stored as 1: a count of bytes is whole ("1234.000000" from old FTS is)
        raise ItemError(f"{name}: a number of bytes is a whole number, not {size!r}")
    return int(size)


def _epoch_ms(value: float, name: str) -> datetime:
    try:
        return datetime.fromtimestamp(value / 1000.0, tz=UTC)
    except (OverflowError, OSError, ValueError):
        raise ItemError(f"{name}: time out of range: {value!r}") from None


def _iso(value: Any, name: str) -> datetime:
    if not isinstance(value, str):
        raise ItemError(f"{name}: not a time: {value!r}")
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ItemError(f"{name}: not an ISO 8601 time: {value!r}") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _matched(values: dict[str, Any], side: str, match: SiteMatch | None) -> None:
    if match is not None:
        values[f"{side}_site_id"], values[f"{side}_endpoint_id"] = match


# --- FTS -----------------------------------------------------------------------------------------------------

FTS_STATES = {"ok": OK, "error": FAILED, "abort": FAILED, "Ok": OK, "Error": FAILED, "Abort": FAILED}


def _metadata(value: Any) -> Mapping[str, Any]:
    """FTS file_metadata: an object, a JSON string of one, or "" (none)."""
    if type(value) is dict or isinstance(value, Mapping):
        return value
    if isinstance(value, str) and value.startswith("{"):
        try:
            loaded = orjson.loads(value)
        except orjson.JSONDecodeError:
            return {}
        return loaded if isinstance(loaded, Mapping) else {}
    return {}


def _counter(value: Any) -> int | None:
    """A count FTS sends (retry, retry_max) as a number or a string of one; None when absent or not a count."""
    if value is None or value == "" or isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return int(number) if math.isfinite(number) and number >= 0 else None


def _fts_last_try(item: Mapping[str, Any], final: str, retry: int | None) -> bool:
    """Whether FTS tries the file no more after this failed try, i.e. whether it is the try Rucio's transfer-failed
    reports. FTS tries a file again after a recoverable error while retry < retry_max, and another replica of a
    multi-source job while the job is ACTIVE (cern-fts/fts3 src/url-copy/LegacyReporter.cpp). A message that
    tells neither (older FTS) is taken for the last try."""
    if item.get("job_state") == "ACTIVE":
        return False
    recoverable = item.get("is_recoverable")
    if final.lower() == "abort" or recoverable is False or recoverable in ("false", "False", 0, "0"):
        return True
    retry_max = _counter(item.get("retry_max"))
    return retry is None or retry_max is None or retry >= retry_max


def parse_fts(item: Mapping[str, Any], registry: Registry) -> RecordRow:
    """An FTS3 transfer-complete message. Times: the data transfer itself (timestamp_tr_st/_comp) when FTS
    measured it, else the whole transfer (tr_timestamp_start/_complete). The same file reported by Rucio has the
    same transfer_key: Rucio's request id (in file_metadata) and the FTS job id.

    FTS sends one message per try of a file, all with that request id and job id: each try is a record, and only
    the try that ends the job (the successful one, or the last failed one) takes the transfer key, so that the
    earlier tries are not taken for duplicates of it, and Rucio's report of the job still is. A failed try's id
    is tr_id#retry: tr_id is made from the minute the message is sent, which quick tries share.

    The row is made here, field by field, rather than through record_new: this parser runs for every message of a
    stream of tens of thousands a second. Its checks are record_new's, in the same order (so the same error for
    the same message)."""
    tr_id = _text(item, "tr_id", required=True)
    final = item.get("t_final_transfer_state")
    state = FTS_STATES.get(final) if type(final) is str else None
    if state is None and isinstance(final, str):
        state = FTS_STATES.get(final.lower())
    if state is None:
        raise ItemError(f"t_final_transfer_state: not Ok, Error or Abort: {item.get('t_final_transfer_state')!r}")
    metadata = _metadata(item.get("file_metadata"))
    size = _number(item, "file_size", "f_size", required=False)
    if size is None:
        size = _number(metadata, "filesize", required=False)
    if size is None:
        if state == OK:
            raise ItemError("file_size: missing")
        size = 0.0
    start, end = _fts_span(item)
    source_url, destination_url = _text(item, "src_url", required=True), _text(item, "dst_url", required=True)
    job_id = _text(item, "job_id")
    request_id = metadata.get("request_id")
    retry = _counter(item.get("retry"))
    last_try = state == OK or _fts_last_try(item, str(final), retry)
    experiment = registry.experiment(item.get("vo"))
    byte_count = _byte_count(size, "file_size")
    error_message = _text(item, "t__error_message") if state != OK else ""
    origin_id = _origin_id(tr_id if state == OK or retry is None else f"{tr_id}#{retry}")
    transfer_key = _transfer_key(request_id, job_id) if request_id and job_id and last_try else ""
    source_host, source_site, source_endpoint = registry.storage_of_url(
        source_url, metadata.get("src_rse"), experiment_id=experiment
    )
    destination_host, destination_site, destination_endpoint = registry.storage_of_url(
        destination_url, metadata.get("dst_rse"), experiment_id=experiment
    )
    _fts_storable_check(
        origin_id=origin_id,
        transfer_key=transfer_key,
        urls=(source_url, destination_url),
        hosts=(source_host, destination_host),
    )
    if error_message:
        error_message = _message_bounded(error_message)
    # record_new's order and end checks are in _fts_span, with the values as FTS sent them
    duration_check((end - start).total_seconds())
    ddm_activity = _ddm_activity(item.get("activity") or metadata.get("activity"), "activity")
    failed = state != OK
    return RecordRow(
        experiment_id=experiment,
        source_site_id=source_site,
        destination_site_id=destination_site,
        source_endpoint_id=source_endpoint,
        destination_endpoint_id=destination_endpoint,
        source_url=source_url,
        destination_url=destination_url,
        bytes=byte_count,
        start=start,
        end=end,
        state=state,
        error_message=error_message,
        origin=FTS,
        origin_id=origin_id,
        transfer_key=transfer_key,
        source_host=source_host,
        destination_host=destination_host,
        ddm_activity=ddm_activity,
        fts_error_category=_fts_scheme(item.get("tr_error_category")) if failed else "",
        error_scope=_fts_scheme(item.get("tr_error_scope")) if failed else "",
        failure_phase=_fts_scheme(item.get("t_failure_phase")) if failed else "",
    )


def _fts_span(item: Mapping[str, Any]) -> tuple[datetime, datetime]:
    """[start, end) of an FTS message: the data transfer itself (timestamp_tr_st/_comp) when FTS measured it, else
    the whole transfer (tr_timestamp_start/_complete)."""
    start_name, end_name = "timestamp_tr_st", "timestamp_tr_comp"
    start_ms = _number(item, start_name, required=False)
    end_ms = _number(item, end_name, required=False)
    if not (start_ms and end_ms and end_ms >= start_ms):
        start_name, end_name = "tr_timestamp_start", "tr_timestamp_complete"
        start_ms = _number(item, start_name)
        end_ms = _number(item, end_name)
    assert start_ms is not None and end_ms is not None
    start, end = _epoch_ms(start_ms, start_name), _epoch_ms(end_ms, end_name)
    seconds_check(end_ms, end, end_name)
    seconds_check(start_ms, start, start_name)
    order_check(start, end, start_name, end_name, (start_ms, end_ms))
    end_check(end, end_name, end_ms)
    return start, end


def _fts_storable_check(*, origin_id: str, transfer_key: str, urls: tuple[str, str], hosts: tuple[str, str]) -> None:
    """record_new's checks (_storable), with FTS's field names. The hosts need no NUL check: a host is part of its
    URL, checked here."""
    if "\x00" in origin_id:
        raise ItemError("tr_id: contains a NUL character")
    if "\x00" in transfer_key:
        raise ItemError("file_metadata.request_id/job_id: contains a NUL character")
    names = ("src_url", "dst_url")
    for name, url in zip(names, urls, strict=True):
        if "\x00" in url:
            raise ItemError(f"{name}: contains a NUL character")
    for name, host in zip(names, hosts, strict=True):
        if len(host) > HOST_LENGTH:
            raise ItemError(f"{name}: a host name of {len(host)} characters (at most 255)")
    for name, url in zip(names, urls, strict=True):
        if len(url) > URL_LENGTH:
            raise ItemError(f"{name}: a URL of {len(url)} characters (at most {URL_LENGTH})")


FTS_SCHEME_LENGTH = 64  # TransferRecord.fts_error_category, error_scope, failure_phase


def _fts_scheme(value: Any) -> str:
    """FTS's category, scope or phase of a failure (tr_error_category, tr_error_scope, t_failure_phase): upper case
    as FTS writes them; "" when absent or not a string (a monitoring detail: never a reason to lose the record)."""
    if type(value) is not str or not value:
        return ""
    return value.replace("\x00", "").strip().upper()[:FTS_SCHEME_LENGTH]


def _ddm_activity(value: Any, name: str) -> str:
    """The DDM activity name a transfer was made for ("T0 Export"), which decides the plan activity it counts for;
    "" when none is given. Not a string, or a NUL in it: an error of the item; longer than the column: cut."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        raise ItemError(f"{name}: not a string: {value!r}")
    if "\x00" in value:
        raise ItemError(f"{name}: contains a NUL character")
    return value.strip()[:DDM_ACTIVITY_LENGTH]


# --- Rucio ---------------------------------------------------------------------------------------------------

RUCIO_STATES = {"transfer-done": OK, "transfer-failed": FAILED}
RUCIO_NAMES = {
    "origin_id": "payload.request-id",
    "transfer_key": "payload.request-id/transfer-id",
    "source_url": "payload.src-url",
    "destination_url": "payload.dst-url",
    "source_host": "payload.src-url",
    "destination_host": "payload.dst-url",
    "start": "payload.started_at",
    "end": "payload.transferred_at",
}
RUCIO_CREATED_NAMES = {**RUCIO_NAMES, "end": "created_at"}  # no transferred_at: the envelope's time


def _rucio_duration(value: Any) -> float:
    """Seconds from FTS's start to finish of the file, as Rucio sends them (a number or a string of one); -1 or
    none when FTS gave none: 0, the transfer then placed at the moment it ended, as nothing better is known."""
    if value is None or value == "":
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ItemError(f"payload.duration: not a number: {value!r}")
    try:
        seconds = float(value)
    except ValueError:
        raise ItemError(f"payload.duration: not a number: {value!r}") from None
    if not math.isfinite(seconds):
        raise ItemError(f"payload.duration: not a finite number: {value!r}")
    if seconds < 0:
        return 0.0
    duration_check(seconds)
    return seconds


def parse_rucio(item: Mapping[str, Any], registry: Registry, *, default_experiment: int | None = None) -> RecordRow:
    """A Rucio Hermes envelope of a transfer-done or transfer-failed event (other types: Skip). The payload
    names its VO only on multi-VO instances: without one, the experiment of the sending DDM service."""
    event_type = item.get("event_type")
    if not isinstance(event_type, str):
        raise ItemError("event_type: missing")
    state = RUCIO_STATES.get(event_type)
    if state is None:
        raise Skip(event_type)
    payload = item.get("payload")
    if not isinstance(payload, Mapping):
        raise ItemError("payload: missing or not an object")
    request_id = _text(payload, "request-id", required=True)
    size = _number(payload, "bytes", "file-size", required=state == RecordState.OK) or 0.0
    end_text = payload.get("transferred_at") or item.get("created_at")
    if not end_text:
        raise ItemError("payload.transferred_at: missing")
    end = _iso(end_text, "payload.transferred_at")
    if payload.get("started_at"):
        start = _iso(payload["started_at"], "payload.started_at")
    else:  # older Rucio versions: no started_at, but the duration FTS measured
        start = end - timedelta(seconds=_rucio_duration(payload.get("duration")))
    vo = payload.get("vo")
    if vo:
        experiment = registry.experiment(vo)
    elif default_experiment is not None:
        experiment = default_experiment
    else:
        raise ItemError("payload.vo: missing (needed unless a DDM service of one experiment sends it)")
    source_url, destination_url = _text(payload, "src-url"), _text(payload, "dst-url")
    transfer_id = _text(payload, "transfer-id")
    values: dict[str, Any] = {
        "experiment_id": experiment,
        "source_url": source_url,
        "destination_url": destination_url,
        "source_host": url_host(source_url) if source_url else "",
        "destination_host": url_host(destination_url) if destination_url else "",
        "bytes": _byte_count(size, "bytes"),
        "start": start,
        "end": end,
        "state": state,
        "error_message": _text(payload, "reason") if state != RecordState.OK else "",
        "origin": RUCIO,
        "origin_id": _origin_id(request_id),
        "transfer_key": _transfer_key(request_id, transfer_id) if transfer_id else "",
        "ddm_activity": _ddm_activity(payload.get("activity"), "payload.activity"),
    }
    _matched(values, "source", registry.storage(source_url, payload.get("src-rse"), experiment_id=experiment))
    _matched(values, "destination", registry.storage(destination_url, payload.get("dst-rse"), experiment_id=experiment))
    return record_new(values, RUCIO_NAMES if payload.get("transferred_at") else RUCIO_CREATED_NAMES)


# --- perfSONAR -----------------------------------------------------------------------------------------------

PERFSONAR_NAMES = {
    "origin_id": "run.href",
    "source_host": "task.test.spec.source",
    "destination_host": "task.test.spec.dest",
    "start": "run.start-time",
    "end": "run.end-time",
}
# A successful run's end is its start and the duration of its summary.
PERFSONAR_SUMMED_NAMES = {**PERFSONAR_NAMES, "end": "run.start-time + result.summary.summary.end"}


def parse_perfsonar(item: Mapping[str, Any], registry: Registry, *, default_experiment: int | None = None) -> RecordRow:
    """A pScheduler throughput run: {"task": {"test": {"type": "throughput", "spec": {"source", "dest"}}},
    "run": {"href", "start-time", "result-merged"}} (or the result as "result"), with an optional "experiment".
    The bytes of the run's summary over its duration; sites by their network hosts."""
    task, run = item.get("task"), item.get("run")
    if not isinstance(task, Mapping) or not isinstance(task.get("test"), Mapping):
        raise ItemError("task.test: missing")
    test = task["test"]
    if test.get("type") != "throughput":
        raise ItemError(f"task.test.type: only throughput results are records, not {test.get('type')!r}")
    spec = test.get("spec")
    if not isinstance(spec, Mapping):
        raise ItemError("task.test.spec: missing")
    source, destination = _text(spec, "source", required=True), _text(spec, "dest", required=True)
    if not isinstance(run, Mapping):
        raise ItemError("run: missing")
    run_id = _text(run, "href") or _text(run, "id", required=True)
    result = item.get("result") or run.get("result-merged")
    if not isinstance(result, Mapping):
        raise ItemError("run.result-merged: missing")
    start = _iso(run.get("start-time"), "run.start-time")
    succeeded = result.get("succeeded") is True
    size, seconds, streams = 0.0, 0.0, None
    if succeeded:
        summary = result.get("summary")
        if not isinstance(summary, Mapping) or not isinstance(summary.get("summary"), Mapping):
            raise ItemError("result.summary.summary: missing")
        overall = summary["summary"]
        size = _number(overall, "throughput-bytes") or 0.0
        seconds = (_number(overall, "end") or 0.0) - (_number(overall, "start", required=False) or 0.0)
        if seconds <= 0:
            raise ItemError("result.summary.summary: end must be after start")
        duration_check(seconds)  # before timedelta(), which overflows
        if isinstance(summary.get("streams"), list):
            streams = len(summary["streams"]) or None
    end = (
        start + timedelta(seconds=seconds)
        if succeeded
        else _iso(run.get("end-time") or run["start-time"], "run.end-time")
    )
    name = item.get("experiment")
    experiment = registry.experiment(name) if name else default_experiment
    values: dict[str, Any] = {
        "experiment_id": experiment,
        "source_host": address_host(source),
        "destination_host": address_host(destination),
        "source_site_id": registry.network_site(source),
        "destination_site_id": registry.network_site(destination),
        "bytes": _byte_count(size, "throughput-bytes"),
        "start": start,
        "end": end,
        "state": RecordState.OK.value if succeeded else RecordState.FAILED.value,
        "error_message": "" if succeeded else str(result.get("error") or "throughput test failed"),
        "mode": "iperf3",
        "concurrency": streams,
        "origin": PERFSONAR,
        "origin_id": _origin_id(run_id),
    }
    return record_new(values, PERFSONAR_SUMMED_NAMES if succeeded else PERFSONAR_NAMES)
