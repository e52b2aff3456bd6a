"""Ingestion: batches of DDM messages into records (results.services.record_rows_store does the storing), and
attaching the records of hosts registered after they arrived."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.db import connection, transaction

from results.ingest_counts import ingest_counts_add
from results.services import RECORDS_LOCK, record_rows_store
from results.store.attribution import records_attribute_moved
from results.store.rollups import ROLLUP_COLUMNS, rollup_add_sql
from results.store.rows import RecordRow
from sites.roles import action_reach

from .messages import FtsMessage, fts_message_decode, fts_messages_decode
from .optimizer import optimizer_items_ingest
from .parsers import FORMATS, ItemError, Registry, Skip, parse_fts, parse_perfsonar, parse_rucio

OPTIMIZER_FORMAT = "fts-optimizer"


class BodyError(ValueError):
    """A request body that is not a JSON array nor newline-delimited JSON: nothing of it is stored."""


@dataclass
class InvalidItem:
    """A line of NDJSON that is not JSON: rejected by its index like any other bad item."""

    error: str


def items_from_body(body: bytes, *, ndjson: bool, format: str = "") -> list[Any]:
    """The items of a body: a JSON array, or one JSON value per non-blank line (NDJSON). FTS messages (format "fts")
    are decoded into the fields the parser reads (ingest.messages), when the body (or line) is made of them."""
    fast = format == "fts"
    if ndjson:
        items: list[Any] = []
        for line in body.splitlines():
            if not line.strip():
                continue
            message = fts_message_decode(line) if fast else None
            if message is not None:
                items.append(message)
                continue
            try:
                items.append(orjson.loads(line))
            except orjson.JSONDecodeError as exc:
                items.append(InvalidItem(f"not JSON: {exc}"))
        return items
    if fast and (messages := fts_messages_decode(body)) is not None:
        return messages  # type: ignore[return-value]
    try:
        loaded = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BodyError(f"not JSON: {exc} (send a JSON array, or application/x-ndjson)") from None
    if not isinstance(loaded, list):
        raise BodyError("the body must be a JSON array of messages (or application/x-ndjson)")
    return loaded


@dataclass
class IngestResult:
    accepted: int = 0
    duplicates: int = 0
    skipped: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "duplicates": self.duplicates,
            "skipped": self.skipped,
            "rejected": self.rejected,
        }

    def add(self, other: IngestResult, *, offset: int = 0) -> None:
        self.accepted += other.accepted
        self.duplicates += other.duplicates
        self.skipped += other.skipped
        self.rejected += [{**entry, "index": entry["index"] + offset} for entry in other.rejected]


Parser = Callable[[Mapping[str, Any], Registry, int | None], RecordRow]


def _parser(format: str) -> Parser:
    if format == "fts":
        return lambda item, registry, _default: parse_fts(item, registry)
    if format == "rucio":
        return lambda item, registry, default: parse_rucio(item, registry, default_experiment=default)
    if format == "perfsonar":
        return lambda item, registry, default: parse_perfsonar(item, registry, default_experiment=default)
    raise ValueError(f"format: one of {', '.join((*FORMATS, OPTIMIZER_FORMAT))}, not {format!r}")


def ingest_items(
    *,
    format: str,
    items: Sequence[Any],
    user: Any,
    registry: Registry | None = None,
    default_experiment: int | None = None,
) -> IngestResult:
    """Parse a batch of one format and store its valid items (one transaction); invalid items are listed with
    their index and reason, items of no transfer counted as skipped. A DDM service may send only its own
    experiment's records (an item of another is rejected); coordinators any, and so may the operator of the
    management commands (user None). Items that name no experiment (single-VO Rucio, perfSONAR) get the DDM
    service's own, else default_experiment. Format "fts-optimizer": FTS optimizer decisions (ingest.optimizer)."""
    parse = _parser(format) if format != OPTIMIZER_FORMAT else None
    registry = registry or Registry.load()
    allowed: set[int] | None = None
    if user is not None and not (reach := action_reach(user=user, action="send")).every:
        allowed = set(reach.experiment_ids)  # the access policy's "send": a DDM service its experiment's
    default = next(iter(allowed)) if allowed is not None and len(allowed) == 1 else default_experiment
    result = IngestResult()
    if parse is None:  # FTS optimizer decisions, not records: ingest.optimizer
        optimizer_items_ingest(items=items, allowed=allowed, registry=registry, result=result)
    else:
        _records_ingest(parse, items, registry=registry, allowed=allowed, default=default, result=result)
    # Once per batch, after it is stored (a batch that fails counts nothing): the totals /metrics exports.
    ingest_counts_add(
        format=format,
        accepted=result.accepted,
        duplicates=result.duplicates,
        skipped=result.skipped,
        rejected=len(result.rejected),
    )
    return result


def _records_ingest(
    parse: Parser,
    items: Sequence[Any],
    *,
    registry: Registry,
    allowed: set[int] | None,
    default: int | None,
    result: IngestResult,
) -> None:
    """Parse the items into records and store them (one transaction); the outcome into result."""
    records: list[RecordRow] = []
    for index, item in enumerate(items):
        try:
            if type(item) is not dict and type(item) is not FtsMessage:  # JSON objects: the checks only for others
                if isinstance(item, InvalidItem):
                    raise ItemError(item.error)
                if not isinstance(item, Mapping):
                    raise ItemError("not a JSON object")
            record = parse(item, registry, default)
        except Skip:
            result.skipped += 1
            continue
        except ItemError as exc:
            result.rejected.append({"index": index, "error": str(exc)})
            continue
        except (KeyError, TypeError, AttributeError, ValueError, OverflowError) as exc:
            # OverflowError: date arithmetic past year 9999 and the like, which the parsers do not foresee.
            result.rejected.append({"index": index, "error": f"malformed message: {exc!r}"})
            continue
        if allowed is not None and record.experiment_id not in allowed:
            name = registry.experiment_names.get(record.experiment_id or 0, "none")
            mine = ", ".join(sorted(registry.experiment_names.get(pk, str(pk)) for pk in allowed)) or "none"
            result.rejected.append(
                {"index": index, "error": f"experiment {name}: this token sends records of {mine} only"}
            )
            continue
        records.append(record)
    summary = record_rows_store(rows=records)
    result.accepted, result.duplicates = summary.stored, summary.duplicates


# --- records of hosts registered later -------------------------------------------------------------------------


@dataclass
class AttachSummary:
    records: int = 0
    hosts: list[str] = field(default_factory=list)


_UNMATCHED = """
SELECT id, origin, experiment_id, source_url, source_host, source_site_id, destination_url, destination_host,
       destination_site_id
FROM results_transferrecord
WHERE (source_site_id IS NULL AND source_host = ANY(%(hosts)s))
   OR (destination_site_id IS NULL AND destination_host = ANY(%(hosts)s))
"""
_MOVED = f"SELECT {ROLLUP_COLUMNS} FROM results_transferrecord WHERE id IN (SELECT id FROM attach_move)"


_REGISTERED_UNMATCHED = """
SELECT host FROM unnest(%s::text[]) AS host
WHERE EXISTS (SELECT 1 FROM results_transferrecord WHERE source_site_id IS NULL AND source_host = host)
   OR EXISTS (SELECT 1 FROM results_transferrecord WHERE destination_site_id IS NULL AND destination_host = host)
"""


def _registered_unmatched_hosts(registry: Registry) -> list[str]:
    """Hosts the registry knows that records without a site still name: one probe of the partial indexes of
    unmatched records per registered host, cheap enough for every minute."""
    known = registry.endpoints.hosts | set(registry.network)
    with connection.cursor() as cursor:
        cursor.execute(_REGISTERED_UNMATCHED, [sorted(known)])
        return [row[0] for row in cursor.fetchall()]


def records_attach(*, registry: Registry | None = None) -> AttachSummary:
    """Give the records of hosts that matched no site when they arrived the site (and endpoint) the registry now
    has for them, and move their contributions in the rollups: the old ones taken out, the new ones added, in one
    transaction under the writers' lock (so no batch stored meanwhile is counted twice or missed)."""
    registry = registry or Registry.load()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [RECORDS_LOCK])  # no batch is stored meanwhile
        hosts = _registered_unmatched_hosts(registry)
        if not hosts:
            return AttachSummary()
        cursor.execute(_UNMATCHED, {"hosts": hosts})
        moves: list[tuple[int, int | None, int | None, int | None, int | None]] = []
        attached_hosts: set[str] = set()
        for pk, origin, experiment, src_url, src_host, src_site, dst_url, dst_host, dst_site in cursor.fetchall():
            source = destination = None
            if src_site is None and src_host:
                source = _site_of(registry, origin, experiment, src_url, src_host)
            if dst_site is None and dst_host:
                destination = _site_of(registry, origin, experiment, dst_url, dst_host)
            if source is None and destination is None:
                continue
            attached_hosts.update(host for host, match in ((src_host, source), (dst_host, destination)) if match)
            moves.append((pk, *(source or (None, None)), *(destination or (None, None))))
        if not moves:
            return AttachSummary()
        cursor.execute("DROP TABLE IF EXISTS pg_temp.attach_move")
        cursor.execute(
            "CREATE TEMP TABLE attach_move (id bigint PRIMARY KEY, source_site_id bigint, source_endpoint_id bigint,"
            " destination_site_id bigint, destination_endpoint_id bigint) ON COMMIT DROP"
        )
        with cursor.cursor.copy("COPY attach_move FROM STDIN") as copy:
            for move in moves:
                copy.write_row(move)
        rollup_add_sql(records=_MOVED, sign=-1)
        cursor.execute(
            """
            UPDATE results_transferrecord AS r SET
                source_site_id = coalesce(r.source_site_id, m.source_site_id),
                source_endpoint_id = CASE WHEN r.source_site_id IS NULL AND m.source_site_id IS NOT NULL
                                          THEN m.source_endpoint_id ELSE r.source_endpoint_id END,
                destination_site_id = coalesce(r.destination_site_id, m.destination_site_id),
                destination_endpoint_id = CASE WHEN r.destination_site_id IS NULL
                                                    AND m.destination_site_id IS NOT NULL
                                               THEN m.destination_endpoint_id ELSE r.destination_endpoint_id END
            FROM attach_move AS m WHERE r.id = m.id
            """
        )
        records_attribute_moved(table_of_ids="attach_move")  # on their new sites they may count for an activity
        rollup_add_sql(records=_MOVED, sign=1)
    return AttachSummary(records=len(moves), hosts=sorted(attached_hosts))


def _site_of(
    registry: Registry, origin: str, experiment: int | None, url: str, host: str
) -> tuple[int, int | None] | None:
    """What a record's URL (or host) matches now, as it would have when it arrived (sites.matching)."""
    if origin == "perfsonar":
        site = registry.network_site(host)
        return None if site is None else (site, None)
    if url:
        return registry.storage(url, experiment_id=experiment)
    return registry.endpoints.host_match(host, experiment_id=experiment)


def ingest_lines(
    *, format: str, lines: Iterable[bytes], batch_size: int = 5000, default_experiment: int | None = None
) -> Iterable[tuple[int, IngestResult]]:
    """NDJSON lines (a dump) in batches of batch_size, each stored in its own transaction, as the operator (any
    experiment): yields (messages in the batch, its result, indexes counted from the first non-blank line)."""
    registry = Registry.load()
    batch: list[bytes] = []
    offset = 0

    def flush() -> IngestResult:
        result = IngestResult()
        items = items_from_body(b"\n".join(batch), ndjson=True, format=format)
        stored = ingest_items(
            format=format, items=items, user=None, registry=registry, default_experiment=default_experiment
        )
        result.add(stored, offset=offset)
        return result

    for line in lines:
        if line.strip():
            batch.append(line)
        if len(batch) >= batch_size:
            yield len(batch), flush()
            offset += len(batch)
            batch = []
    if batch:
        yield len(batch), flush()
