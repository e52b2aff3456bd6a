"""Failure causes: error messages sorted into categories by ordered rules (FailureRule), re-categorising stored
records in SQL when the rules change, and the per link and mode breakdown of a challenge's failures.

A failed transfer's category is that of the first enabled rule (lowest position) whose pattern matches its error
message, ignoring case; "other" when none does. New records are categorised in Python (`failure_categorize_records`,
called by records_store); stored ones in PostgreSQL (`failures_recategorize`). Patterns are checked to mean the
same in both (models.validate_failure_pattern and `failure_pattern_problem`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import plotly.graph_objects as go
from django.core.exceptions import ValidationError
from django.db import DatabaseError, connection, transaction
from django.db.models import Count, F, Func, Q, QuerySet
from django.db.models.functions import TruncHour
from django.utils import timezone
from plotly import colors

from challenges.models import Activity, Challenge
from common.db import read_connection
from sites.models import Site

from ..choices import ErrorCategory, Origin, RecordState
from ..models import FailureRule, TransferRecord, validate_failure_pattern
from ..store.failure_counts import (
    FAILURE_COLUMNS,
    MESSAGE_URL_PATTERN,
    FailureRows,
    failure_counts_add,
    failure_counts_complete,
    failure_rows_stored,
)
from ..store.rollups import RECORDS_LOCK, minute_floor
from ..store.rows import RecordRow

CompiledRules = list[tuple[re.Pattern[str], str]]
TOP_MESSAGES = 5
UNCATEGORISED = ""  # failed records stored before the rules ran
STORED, FROM_RECORDS = "stored", "records"  # how a ChallengeFailures was computed


# --- the rules ------------------------------------------------------------------------------------------------


def failure_rules_compiled() -> CompiledRules:
    """The enabled rules in their order, compiled once (one query)."""
    return [
        (re.compile(pattern, re.IGNORECASE), category)
        for pattern, category in FailureRule.objects.filter(enabled=True)
        .order_by("position", "id")
        .values_list("pattern", "category")
    ]


def failure_categorize(message: str, *, rules: CompiledRules | None = None) -> str:
    """The category of one error message: the first matching rule's, "other" when none matches."""
    for pattern, category in failure_rules_compiled() if rules is None else rules:
        if pattern.search(message or ""):
            return category
    return ErrorCategory.OTHER.value


def _categories_of_batch() -> Callable[[str], str]:
    """The category of a failed record's message, by the enabled rules read at the batch's first failure (a batch
    without one makes no query). A batch repeats its failures' messages (one cause, many files): each is matched
    against the rules once."""
    rules: CompiledRules | None = None
    categories: dict[str, str] = {}

    def category_of(message: str) -> str:
        nonlocal rules
        category = categories.get(message)
        if category is None:
            if rules is None:
                rules = failure_rules_compiled()
            category = categories[message] = failure_categorize(message, rules=rules)
        return category

    return category_of


# --- FTS's scheme of a failure ----------------------------------------------------------------------------------
# FTS says of a failed transfer its category (tr_error_category), scope (tr_error_scope: SOURCE, DESTINATION,
# TRANSFER, GENERAL_FAILURE) and phase (t_failure_phase: TRANSFER_PREPARATION, TRANSFER, TRANSFER_FINALIZATION).
# The portal's own runs (origin "probe") begin their error message with a cause (measure/transfer.py): that cause
# is given FTS's fields WHEN THE RECORD IS STORED (records_store, record_rows_store), so that failures of both
# group by one scheme in plain SQL. A probe failure of another cause: OTHER / GENERAL_FAILURE / TRANSFER.

FtsScheme = tuple[str, str, str]  # (category, scope, phase)
PROBE_FTS_SCHEME: dict[str, FtsScheme] = {
    "destination refused the write": ("PERMISSION_DENIED", "DESTINATION", "TRANSFER_PREPARATION"),
    "source file missing": ("FILE_NOT_FOUND", "SOURCE", "TRANSFER_PREPARATION"),
    "checksum mismatch": ("CHECKSUM_MISMATCH", "TRANSFER", "TRANSFER_FINALIZATION"),
    "stalled": ("TIMEOUT", "TRANSFER", "TRANSFER"),
    "destination exists": ("FILE_EXISTS", "DESTINATION", "TRANSFER_PREPARATION"),
    "destination full": ("NO_SPACE_LEFT", "DESTINATION", "TRANSFER"),
    "timed out": ("TIMEOUT", "TRANSFER", "TRANSFER"),
    "cancelled": ("CANCELED", "TRANSFER", "TRANSFER"),
}
PROBE_FTS_OTHER: FtsScheme = ("OTHER", "GENERAL_FAILURE", "TRANSFER")


def probe_fts_scheme(message: str) -> FtsScheme:
    """FTS's (category, scope, phase) of a portal run's failure, from the cause its message begins with."""
    lowered = (message or "").lower()
    for cause, scheme in PROBE_FTS_SCHEME.items():
        if lowered.startswith(cause):
            return scheme
    return PROBE_FTS_OTHER


def failure_categorize_records(records: Iterable[TransferRecord]) -> None:
    """Set error_category on unsaved records (one query for the rules): failed ones by the rules, the others
    blank; failed records of the portal's runs without FTS's fields get them (probe_fts_scheme). records_store
    calls this before inserting a batch."""
    category_of = _categories_of_batch()
    for record in records:
        failed = record.state == RecordState.FAILED
        record.error_category = category_of(record.error_message) if failed else ""
        if failed and record.origin == Origin.PROBE and not record.fts_error_category:
            scheme = probe_fts_scheme(record.error_message)
            record.fts_error_category, record.error_scope, record.failure_phase = scheme


def failure_categorize_rows(rows: Sequence[RecordRow]) -> list[RecordRow]:
    """The rows with their error_category: failed ones by the rules (one query, only when a row failed), the others
    blank; failed rows of the portal's runs get FTS's fields (probe_fts_scheme). record_rows_store calls this
    before inserting a batch."""
    failed = RecordState.FAILED.value
    category_of = _categories_of_batch()
    categorized = list(rows)
    probe = Origin.PROBE.value
    for index, row in enumerate(rows):
        category = category_of(row.error_message) if row.state == failed else ""
        if row.error_category != category:
            categorized[index] = row._replace(error_category=category)
        if row.state == failed and row.origin == probe and not row.fts_error_category:
            scheme = probe_fts_scheme(row.error_message)
            categorized[index] = categorized[index]._replace(
                fts_error_category=scheme[0], error_scope=scheme[1], failure_phase=scheme[2]
            )
    return categorized


def failure_pattern_problem(pattern: str) -> str | None:
    """Why a pattern cannot be a rule (Python or PostgreSQL refuses it, or they would read it differently), or
    None when it can."""
    try:
        validate_failure_pattern(pattern)
    except ValidationError as exc:
        return " ".join(exc.messages)
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT '' ~* %s", [pattern])
    except DatabaseError as exc:
        return f"PostgreSQL refuses this regular expression: {str(exc).strip().splitlines()[0]}"
    return None


def failure_rules_renumber() -> None:
    """Positions 10, 20, 30 ... in the current order, leaving room to insert between two rules."""
    rules = list(FailureRule.objects.order_by("position", "id"))
    for index, rule in enumerate(rules):
        rule.position = (index + 1) * 10
    FailureRule.objects.bulk_update(rules, ["position"])


@transaction.atomic
def failure_rule_move(*, rule: FailureRule, offset: int) -> None:
    """Move a rule up (offset -1) or down (+1) in the order, swapping with its neighbour."""
    failure_rules_renumber()
    rules = list(FailureRule.objects.select_for_update().order_by("position", "id"))
    index = next(i for i, other in enumerate(rules) if other.pk == rule.pk)
    other_index = index + offset
    if 0 <= other_index < len(rules):
        first, second = rules[index], rules[other_index]
        first.position, second.position = second.position, first.position
        FailureRule.objects.bulk_update([first, second], ["position"])


def failure_rule_next_position() -> int:
    last = FailureRule.objects.order_by("-position").values_list("position", flat=True).first()
    return (last or 0) + 10


def _challenge_records(challenge: Challenge) -> Q:
    """The records of a challenge: those that count for its activities (results.store.attribution)."""
    return Q(activity__challenge=challenge)


# Re-categorisations take it in turn: each reads the rules only once the one before it has committed, so the
# last to finish applies the latest rules (two rule changes in quick succession send two tasks).
RECATEGORIZE_LOCK = 0x72637467


_CHANGED = (
    f'SELECT {FAILURE_COLUMNS} FROM results_transferrecord AS r JOIN failure_recategorized AS c USING (id, "end")'
)


@transaction.atomic
def failures_recategorize(*, challenge: Challenge | None = None) -> int:
    """Apply the current rules to every stored failed record (of one challenge's activities, or all): a CASE with
    one branch per enabled rule in order, so the first matching rule wins as in Python. Only rows whose category
    changes are written, and the failure causes' counts (results.store.failure_counts) follow: the changed records are
    taken out with their old category and added with the new one. Returns how many changed."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [RECATEGORIZE_LOCK])
        # Shared, as writers of records take it: no move of records between activities (exclusive) meanwhile.
        cursor.execute("SELECT pg_advisory_xact_lock_shared(%s)", [RECORDS_LOCK])
    rules = list(FailureRule.objects.filter(enabled=True).order_by("position", "id").values_list("pattern", "category"))
    branches = " ".join("WHEN r.error_message ~* %s THEN %s" for _ in rules)
    case = f"CASE {branches} ELSE %s END" if rules else "%s"
    case_params: list[Any] = [value for rule in rules for value in rule] + [ErrorCategory.OTHER.value]
    where = "r.state = %s"
    where_params: list[Any] = [RecordState.FAILED.value]
    if challenge is not None:
        where += f" AND r.activity_id IN (SELECT id FROM {Activity._meta.db_table} WHERE challenge_id = %s)"
        where_params += [challenge.pk]
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS pg_temp.failure_recategorized")
        cursor.execute(
            "CREATE TEMP TABLE failure_recategorized ON COMMIT DROP AS "
            f'SELECT id, "end", category FROM (SELECT r.id, r."end", r.error_category, {case} AS category '
            f"FROM results_transferrecord AS r WHERE {where}) AS c WHERE error_category IS DISTINCT FROM category",
            case_params + where_params,
        )
        changed = int(cursor.rowcount)
        if not changed:
            return 0
        cursor.execute("ANALYZE failure_recategorized")  # the UPDATE's join planned on its real size
        failure_counts_add(records=_CHANGED, sign=-1)
        cursor.execute(
            "UPDATE results_transferrecord AS r SET error_category = c.category FROM failure_recategorized AS c "
            'WHERE r.id = c.id AND r."end" = c."end"'
        )
        failure_counts_add(records=_CHANGED, sign=1)
    return changed


# --- the causes of a challenge's failures -----------------------------------------------------------------------


class _MessageKey(Func):
    """The message with URLs replaced by <url> (not their trailing punctuation), so that one cause on many files
    counts as one message."""

    function = "regexp_replace"
    template = f"%(function)s(%(expressions)s, '{MESSAGE_URL_PATTERN}', '<url>', 'gi')"


@dataclass
class LinkCauses:
    """The failures of one link (source site -> destination site) and mode."""

    source: str
    destination: str
    mode: str
    counts: dict[str, int] = field(default_factory=dict)
    messages: list[tuple[str, int]] = field(default_factory=list)
    # FTS's scheme beside the portal's categories: (category, scope, phase, failures), most failures first; blank
    # fields where the record carries none (Rucio, perfSONAR, FTS messages without them).
    fts_causes: list[tuple[str, str, str, int]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass
class ChallengeFailures:
    links: list[LinkCauses]
    categories: list[tuple[str, str]]  # (value, label) of the categories that occur, in ErrorCategory order
    hourly: dict[str, list[tuple[datetime, int]]]  # category -> [(hour, failures)]
    computed: str = "stored"  # STORED (results.store.failure_counts) or FROM_RECORDS (the counts did not hold them all)

    def as_rows(self) -> list[dict[str, Any]]:
        return [
            {
                "source": link.source,
                "destination": link.destination,
                "mode": link.mode,
                "failures": link.total,
                **{value: link.counts.get(value, 0) for value, _ in self.categories},
            }
            for link in self.links
        ]

    def message_rows(self) -> list[dict[str, Any]]:
        return [
            {"source": link.source, "destination": link.destination, "mode": link.mode, "message": m, "count": n}
            for link in self.links
            for m, n in link.messages
        ]

    def fts_rows(self) -> list[dict[str, Any]]:
        return [
            {
                "source": link.source,
                "destination": link.destination,
                "mode": link.mode,
                "category": category,
                "scope": scope,
                "phase": phase,
                "failures": count,
            }
            for link in self.links
            for category, scope, phase, count in link.fts_causes
        ]

    def hourly_rows(self) -> list[dict[str, Any]]:
        return [
            {"hour": hour, "category": category, "failures": count}
            for category, points in self.hourly.items()
            for hour, count in points
        ]


def challenge_failed_records(
    *, challenge: Challenge, experiment_ids: Collection[int] | None = None, until: datetime | None = None
) -> QuerySet[TransferRecord]:
    """The failed records of a challenge, of these experiments only (None for all, with those of no experiment),
    and of those that ended before `until` when it is given (a failure counts in the minute it ended, as the
    rollups count it)."""
    records = TransferRecord.objects.filter(_challenge_records(challenge), state=RecordState.FAILED)
    if until is not None:
        records = records.filter(end__lt=until)
    return records if experiment_ids is None else records.filter(experiment_id__in=experiment_ids)


def _failure_rows_from_records(failed: QuerySet[TransferRecord]) -> FailureRows:
    """The page's rows computed from the failed records themselves (four queries over every one of them)."""
    link = ("source_site_id", "destination_site_id", "mode")
    counts = failed.values_list(*link, "error_category").annotate(n=Count("id")).order_by()
    base_sql, base_params = (
        failed.annotate(message=_MessageKey(F("error_message")))
        .values(*link, "message")
        .order_by()
        .query.sql_with_params()
    )
    # Window functions cannot sit in a grouped ORM query's GROUP BY: rank the grouped messages in plain SQL.
    top_sql = f"""
        SELECT source_site_id, destination_site_id, mode, message, n FROM (
            SELECT source_site_id, destination_site_id, mode, message, count(*) AS n,
                   row_number() OVER (PARTITION BY source_site_id, destination_site_id, mode
                                      ORDER BY count(*) DESC, message) AS rank
            FROM ({base_sql}) AS failed GROUP BY source_site_id, destination_site_id, mode, message
        ) AS ranked WHERE rank <= %s ORDER BY source_site_id, destination_site_id, mode, rank"""
    with read_connection().cursor() as cursor:  # the replica where the request allows it (common.db)
        cursor.execute(top_sql, [*base_params, TOP_MESSAGES])
        messages = cursor.fetchall()
    scheme = ("fts_error_category", "error_scope", "failure_phase")
    fts = failed.values_list(*link, *scheme).annotate(n=Count("id")).order_by(*link, "-n", *scheme)
    hourly = (
        failed.annotate(hour=TruncHour("end"), category=F("error_category"))
        .values_list("category", "hour")
        .annotate(n=Count("id"))
        .order_by("category", "hour")
    )
    return FailureRows(counts=list(counts), messages=list(messages), fts=list(fts), hourly=list(hourly))


def failures_for_challenge(
    *, challenge: Challenge, experiment_ids: Collection[int] | None = None, until: datetime | None = None
) -> ChallengeFailures:
    """Counts per category, per FTS category, scope and phase, and the most common messages per link and mode,
    and failures per hour and category, of these experiments only (see challenge_failed_records): from the stored
    counts (results.store.failure_counts, a few rows whatever the number of records), or from the records when the
    counts do not hold them all (a bulk load without failure_counts_rebuild), which the result says.

    `until`: only the failures that ended before it (a report counts what happened up to its minute). The stored
    counts have no time but the hour of the per-hour rows, so a cut reads the records (computed FROM_RECORDS) when it
    falls before the challenge's end and before the present's minute (a report rebuilt for an earlier minute); at
    the present's minute the stored counts are read (they differ from the cut by the failures of the minute under
    way only), and at or after the challenge's end they are the whole window."""
    if experiment_ids is not None and not experiment_ids:  # no experiment to read (and an empty IN cannot be SQL)
        return ChallengeFailures(links=[], categories=[], hourly={})
    cut = until if until is not None and until < min(challenge.end, minute_floor(timezone.now())) else None
    if cut is None and failure_counts_complete(challenge.pk):
        rows = failure_rows_stored(challenge_id=challenge.pk, experiment_ids=experiment_ids, top=TOP_MESSAGES)
        computed = STORED
    else:
        failed = challenge_failed_records(challenge=challenge, experiment_ids=experiment_ids, until=cut)
        rows = _failure_rows_from_records(failed)
        computed = FROM_RECORDS
    names = dict(Site.objects.values_list("id", "name"))
    links: dict[tuple[Any, ...], LinkCauses] = {}

    def link_of(row: tuple[Any, ...]) -> LinkCauses:
        key = tuple(row[:3])
        if key not in links:
            links[key] = LinkCauses(
                source=names.get(row[0], "unknown"), destination=names.get(row[1], "unknown"), mode=row[2]
            )
        return links[key]

    present: set[str] = set()
    for row in rows.counts:
        link_of(row).counts[row[3]] = row[4]
        present.add(row[3])
    for row in rows.messages:
        link_of(row).messages.append((row[3], row[4]))
    for row in rows.fts:
        link_of(row).fts_causes.append((row[3], row[4], row[5], row[6]))
    hourly: dict[str, list[tuple[datetime, int]]] = {}
    for category, hour, n in rows.hourly:
        hourly.setdefault(category, []).append((hour, n))
    choices = [(UNCATEGORISED, "not categorised"), *ErrorCategory.choices]
    return ChallengeFailures(
        links=sorted(links.values(), key=lambda item: (-item.total, item.source, item.destination, item.mode)),
        categories=[(value, str(label)) for value, label in choices if value in present],
        hourly={value: hourly[value] for value, _ in choices if value in hourly},
        computed=computed,
    )


_PALETTE = colors.qualitative.Plotly


def failures_hourly_figure(*, failures: ChallengeFailures, start: datetime, end: datetime) -> dict[str, Any]:
    """Failures per hour, one stacked bar colour per category."""
    labels = dict(failures.categories) | {UNCATEGORISED: "not categorised"}
    figure = go.Figure()
    for index, (category, points) in enumerate(failures.hourly.items()):
        figure.add_trace(
            go.Bar(
                name=labels.get(category, category),
                x=[hour.isoformat() for hour, _ in points],
                y=[count for _, count in points],
                marker_color=_PALETTE[index % len(_PALETTE)],
                hovertemplate="%{x|%Y-%m-%d %H:00} UTC: %{y} failures<extra>%{fullData.name}</extra>",
            )
        )
    figure.update_layout(
        barmode="stack",
        height=320,
        margin={"l": 50, "r": 10, "t": 20, "b": 40},
        legend={"orientation": "h", "y": -0.2},
        xaxis={"type": "date", "range": [start.isoformat(), end.isoformat()], "title": {"text": "hour (UTC)"}},
        yaxis={"title": {"text": "failed transfers per hour"}, "rangemode": "tozero"},
        plot_bgcolor="#fff",
    )
    result: dict[str, Any] = json.loads(figure.to_json())
    return result


def categories_in_order() -> Sequence[tuple[str, str]]:
    return [(value, str(label)) for value, label in ErrorCategory.choices]
