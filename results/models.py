"""What was measured: one transfer record per file transfer, and the rollups that rates and matrices read."""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import MD5

from sites.models import Experiment, Site, StorageEndpoint
from sites.roles import ExperimentRestrictedQuerySet

from .choices import ErrorCategory, Origin, RecordState

# Free text and URLs of records are bounded where they come in (the audit: megabytes stored and shown on every
# read): an error message is cut to ERROR_MESSAGE_LENGTH (its start says what went wrong); a URL longer than
# URL_LENGTH is no storage URL, and ingestion rejects its item.
ERROR_MESSAGE_LENGTH = 2000
URL_LENGTH = 4096


# A record's references but its activity: checked by triggers, not foreign keys (below).
_REFERENCE: dict[str, Any] = {"null": True, "blank": True, "related_name": "+", "db_constraint": False}


class TransferRecord(models.Model):
    """One file transfer, whatever produced it. Its bytes count spread uniformly over its real [start, end)."""

    # The references are checked by triggers once per statement (migration 0020: the distinct ids of a batch, locked
    # FOR KEY SHARE; deleting what records name is refused), not by foreign keys, which check every row and key on
    # its own. No index of its own for the experiment, the source site and the run: (experiment, start), (source_site,
    # destination_site, end) and record_run_state serve every query on them and the deletion checks; each index more
    # is kept on every ingested row. The destination site's and the endpoints' serve the deletion checks (and Django's
    # SET_NULL of an endpoint that goes).
    experiment = models.ForeignKey(Experiment, on_delete=models.PROTECT, **_REFERENCE, db_index=False)
    source_site = models.ForeignKey(Site, on_delete=models.PROTECT, **_REFERENCE, db_index=False)
    destination_site = models.ForeignKey(Site, on_delete=models.PROTECT, **_REFERENCE)
    source_endpoint = models.ForeignKey(StorageEndpoint, on_delete=models.SET_NULL, **_REFERENCE)
    destination_endpoint = models.ForeignKey(StorageEndpoint, on_delete=models.SET_NULL, **_REFERENCE)
    source_url = models.TextField(blank=True)
    destination_url = models.TextField(blank=True)
    bytes = models.PositiveBigIntegerField()
    start = models.DateTimeField()
    end = models.DateTimeField()
    state = models.CharField(max_length=10, choices=RecordState.choices)
    error_message = models.TextField(blank=True)
    error_category = models.CharField(max_length=24, choices=ErrorCategory.choices, blank=True)
    mode = models.CharField(max_length=16, blank=True, help_text="pull, push, streamed, native ...")
    concurrency = models.PositiveIntegerField(null=True, blank=True)
    origin = models.CharField(max_length=16, choices=Origin.choices)
    origin_id = models.CharField(max_length=128, help_text="FTS tr_id, Rucio request-id, probe file id ...")
    transfer_key = models.CharField(
        max_length=200,
        blank=True,
        help_text="the file transfer whoever reports it (e.g. Rucio request id and FTS job id), so that the same "
        "file reported by FTS and by Rucio counts once; blank when unknown",
    )
    source_host = models.CharField(max_length=255, blank=True, help_text="host of source_url, to match sites")
    destination_host = models.CharField(max_length=255, blank=True, help_text="host of destination_url")
    run = models.ForeignKey(
        "runs.Run",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="records",
        db_index=False,
        db_constraint=False,
    )
    attempt = models.PositiveSmallIntegerField(default=1, help_text="1 for the first try of this file in its run")
    # The activity the record counts for (results.store.attribution decides; NULL: none). No database constraint and no
    # cascade: when an activity goes, re-attribution takes its records' contributions out of the rollups under the
    # activity id they were added with, then gives the records their new activity.
    activity = models.ForeignKey(
        "challenges.Activity",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,
    )
    ddm_activity = models.CharField(
        max_length=64, blank=True, help_text='the FTS / Rucio activity name ("T0 Export", "Data Challenge")'
    )
    # FTS's own scheme of a failure (transfer-complete messages: tr_error_category, tr_error_scope,
    # t_failure_phase); the portal's runs get theirs from results.failures.PROBE_FTS_SCHEME when stored.
    fts_error_category = models.CharField(
        max_length=64, blank=True, default="", help_text="FTS tr_error_category (COMMUNICATION_ERROR, ...)"
    )
    error_scope = models.CharField(
        max_length=64, blank=True, default="", help_text="FTS tr_error_scope (SOURCE, DESTINATION, TRANSFER)"
    )
    failure_phase = models.CharField(
        max_length=64, blank=True, default="", help_text="FTS t_failure_phase (TRANSFER_PREPARATION, TRANSFER, ...)"
    )

    objects = ExperimentRestrictedQuerySet.as_manager()

    class Meta:
        ordering = ["start", "id"]
        # The table is partitioned by month of "end" (results.store.partitions; migration 0014): its primary key in the
        # database is (id, "end"), since PostgreSQL wants the partition key in every unique index. Django keeps `id`
        # as the primary key: ids come from one identity sequence and are unique, so lookups, the admin, DRF and
        # `record.pk` work as before; no foreign key may point at a record (PostgreSQL would need id unique on its
        # own). A record's identity (origin id, transfer key) is kept in RecordKey, not here: a unique index on
        # this table would have to include "end", and a record re-sent with another end would count twice.
        constraints = [
            models.CheckConstraint(condition=Q(end__gte=F("start")), name="record_end_not_before_start"),
        ]
        indexes = [
            models.Index(fields=["experiment", "start"]),
            # The records API's order: its keyset pages read this index at any depth.
            models.Index(fields=["start", "id"], name="record_start_id"),
            # The now board's freshness of each source: its latest record, read backwards in the latest partitions.
            models.Index(fields=["origin", "end"], name="record_origin_end"),
            models.Index(fields=["source_site", "destination_site", "end"]),
            models.Index(fields=["run", "state"], condition=Q(run__isnull=False), name="record_run_state"),
            models.Index(fields=["activity"], condition=Q(activity__isnull=False), name="record_activity"),
            # Records whose hosts matched no site, found again when a coordinator registers the endpoint.
            models.Index(fields=["source_host"], condition=Q(source_site__isnull=True), name="record_unmatched_src"),
            models.Index(
                fields=["destination_host"], condition=Q(destination_site__isnull=True), name="record_unmatched_dst"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.origin}:{self.origin_id} {self.state}"


class RateKeyCounts(models.Model):
    """The key and the counts that RateRollup and RateRollupHour share: experiment, activity, sites, mode and
    concurrency; bytes moved and files ended."""

    experiment_id = models.BigIntegerField(null=True)
    activity_id = models.BigIntegerField(null=True, help_text="the activity the records count for; NULL: none")
    source_site_id = models.BigIntegerField(null=True)
    destination_site_id = models.BigIntegerField(null=True)
    mode = models.CharField(max_length=16, blank=True)
    concurrency = models.PositiveIntegerField(null=True)
    bytes = models.FloatField(default=0)
    files_ok = models.PositiveIntegerField(default=0)
    files_failed = models.PositiveIntegerField(default=0)

    # The rows of an experiment a user may read (the access policy: sites.roles).
    objects = ExperimentRestrictedQuerySet.as_manager()

    class Meta:
        abstract = True


class RateRollup(RateKeyCounts):
    """Bytes moved per minute per experiment, source site, destination site and mode (bytes of a transfer spread
    over its [start, end)), and the files that ended in that minute. Kept up to date in the transaction that
    stores the records; rates never scan the raw records."""

    minute = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "minute",
                    "experiment_id",
                    "activity_id",
                    "source_site_id",
                    "destination_site_id",
                    "mode",
                    "concurrency",
                ],
                name="rollup_unique_key",
                nulls_distinct=False,
            ),
        ]
        indexes = [
            models.Index(fields=["experiment_id", "minute"]),
            models.Index(fields=["destination_site_id", "minute"]),
            models.Index(fields=["source_site_id", "minute"]),
        ]

    def __str__(self) -> str:
        return f"{self.minute:%Y-%m-%d %H:%M} {self.bytes:.0f} B"


def validate_failure_pattern(pattern: str) -> None:
    """A rule's pattern must be a regular expression that Python and PostgreSQL read alike (rules run in both:
    on new records in Python, when re-categorising in SQL)."""
    import re

    from django.core.exceptions import ValidationError

    if not pattern.strip():
        raise ValidationError("a regular expression that matches part of an error message", code="empty")
    if re.search(r"\\[bB]|\(\?P|\(\?<[^=!]|\(\?[aiLmsux-]+[:)]", pattern):
        raise ValidationError(
            "PostgreSQL reads \\b, named groups and inline flags differently: use (^|[^a-z]) for a word boundary, "
            "plain groups, and no flags (rules always ignore case)",
            code="dialect",
        )
    try:
        re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise ValidationError(f"not a regular expression: {exc}", code="regex") from exc


class RateRollupHour(RateKeyCounts):
    """RateRollup summed per hour (same key, `hour` the first minute of the hour): what the FROM x TO matrix reads,
    so that a three-week challenge sums thousands of rows rather than a million. Kept with RateRollup, from the
    same deltas; the minutes of a window's partial hours are read from RateRollup."""

    hour = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "hour",
                    "experiment_id",
                    "activity_id",
                    "source_site_id",
                    "destination_site_id",
                    "mode",
                    "concurrency",
                ],
                name="rollup_hour_unique_key",
                nulls_distinct=False,
            ),
        ]
        indexes = [models.Index(fields=["experiment_id", "hour"], name="results_rat_experim_hour_idx")]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} {self.bytes:.0f} B"


MINUTES_PER_HOUR = 60


class FlowRollup(models.Model):
    """The rollup as the targets read it: bytes per minute per experiment and flow, where a flow is the traffic
    into a site (`in`, site = destination), out of a site (`out`, site = source) or over a link (`link`, site =
    source, peer = destination). One row per flow and hour holding the hour's 60 minutes as arrays (index 0: the
    minute at `hour`), so that a target's week is 168 rows whatever the number of records, and the best windows
    are still found minute by minute. Kept with RateRollup, from the same deltas."""

    hour = models.DateTimeField()
    experiment_id = models.BigIntegerField()
    activity_id = models.BigIntegerField(default=0, help_text="the activity the records count for; 0: none")
    flow = models.CharField(max_length=4)
    site_id = models.BigIntegerField()
    peer_id = models.BigIntegerField(default=0, help_text="the destination of a link; 0 otherwise")
    bytes = ArrayField(models.FloatField(), size=MINUTES_PER_HOUR, help_text="bytes moved in each minute")
    files_ok = ArrayField(models.IntegerField(), size=MINUTES_PER_HOUR, help_text="files that ended in each minute")
    files_failed = ArrayField(models.IntegerField(), size=MINUTES_PER_HOUR)
    hour_files_ok = models.IntegerField(default=0, help_text="sum of files_ok: whole hours read no array")
    hour_files_failed = models.IntegerField(default=0, help_text="sum of files_failed")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["activity_id", "flow", "site_id", "peer_id", "hour", "experiment_id"],
                name="flow_rollup_unique_hour",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} {self.flow} {sum(self.bytes):.0f} B"


class FailureRule(models.Model):
    """One ordered rule of the failure causes: a failed transfer's category is that of the first enabled rule
    (lowest position) whose pattern matches its error message, ignoring case; "other" when none does."""

    position = models.PositiveIntegerField(default=0, help_text="rules are tried from the lowest position up")
    pattern = models.CharField(
        max_length=500, validators=[validate_failure_pattern], help_text="a regular expression, case ignored"
    )
    category = models.CharField(max_length=24, choices=ErrorCategory.choices)
    enabled = models.BooleanField(default=True)
    note = models.CharField(max_length=200, blank=True, help_text="where the messages come from")

    class Meta:
        ordering = ["position", "id"]

    def __str__(self) -> str:
        return f"{self.position}: /{self.pattern}/ -> {self.category}"


class RollupVersion(models.Model):
    """A counter per experiment, raised in the transaction of every change to the rollups of its records (0 for
    records of no experiment), so that figures computed from the rollups can be cached until it moves."""

    experiment_id = models.BigIntegerField(unique=True)
    version = models.BigIntegerField(default=0)
    changed_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"experiment {self.experiment_id}: v{self.version}"


class OptimizerDecision(models.Model):
    """One decision of FTS's optimizer on a link (a row of FTS's t_optimizer_evolution): how many transfers it lets
    run at once, and why. Sites are matched from the storage elements' hosts as transfer records' are (NULL: no
    registered endpoint had that host when it came in). Stored by results.services.optimizer_decisions_store."""

    experiment = models.ForeignKey(
        Experiment, on_delete=models.PROTECT, null=True, blank=True, related_name="+", db_index=False
    )
    source_site = models.ForeignKey(Site, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    destination_site = models.ForeignKey(Site, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    source_se = models.CharField(max_length=512, help_text="FTS source_se: davs://host, root://host:port ...")
    dest_se = models.CharField(max_length=512, help_text="FTS dest_se")
    source_host = models.CharField(max_length=255, blank=True)
    destination_host = models.CharField(max_length=255, blank=True)
    at = models.DateTimeField(help_text="FTS datetime: when the optimizer decided")
    ema = models.FloatField(null=True, blank=True, help_text="exponential moving average of the throughput, B/s")
    active = models.PositiveIntegerField(help_text="the active transfers the optimizer allows from now on")
    actual_active = models.PositiveIntegerField(null=True, blank=True, help_text="transfers running when it decided")
    queue_size = models.PositiveIntegerField(null=True, blank=True, help_text="files waiting on the link")
    throughput = models.FloatField(null=True, blank=True, help_text="bytes per second")
    success = models.FloatField(null=True, blank=True, help_text="success rate, percent")
    filesize_avg = models.FloatField(null=True, blank=True, help_text="bytes")
    filesize_stddev = models.FloatField(null=True, blank=True, help_text="bytes")
    rationale = models.TextField(blank=True)
    diff = models.IntegerField(null=True, blank=True, help_text="change of active transfers by this decision")
    origin = models.CharField(max_length=16, choices=Origin.choices, default=Origin.FTS)

    objects = ExperimentRestrictedQuerySet.as_manager()

    class Meta:
        ordering = ["at", "id"]
        constraints = [
            # A decision sent twice (a retried batch, a redelivered STOMP message) is stored once.
            models.UniqueConstraint(
                fields=["origin", "experiment", "source_se", "dest_se", "at"],
                name="optimizer_decision_unique",
                nulls_distinct=False,
            ),
        ]
        indexes = [models.Index(fields=["source_site", "destination_site", "at"])]

    def __str__(self) -> str:
        return f"{self.source_se} -> {self.dest_se} at {self.at:%Y-%m-%d %H:%M}: {self.active} active"


# --- the FROM x TO matrix's stored unions (results.store.link_intervals keeps them, results.matrix.unions reads them)
# ---


class LinkKey(models.Model):
    """The key the matrix's stored unions share: the activity the records count for, the link, the mode and the
    concurrency (-1: none given, so that the key has no NULL). Only records that count for an activity, of known
    sites, ok or failed, are kept: those are the challenge matrix's."""

    activity_id = models.BigIntegerField()
    source_site_id = models.BigIntegerField()
    destination_site_id = models.BigIntegerField()
    mode = models.CharField(max_length=16, blank=True)
    concurrency = models.IntegerField(help_text="-1: not given")

    class Meta:
        abstract = True


class NumericField(models.DecimalField):
    """PostgreSQL numeric without a precision: sums of numeric quotients stay exact, whatever their grouping."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("max_digits", 1000)
        kwargs.setdefault("decimal_places", 0)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def db_type(self, connection: object) -> str:
        return "numeric"


class LinkTotals(LinkKey):
    """Per key: what the matrix adds up (volume, files, sum of file rates) and the portal runs behind it. Its row
    is the key's lock: a writer updates it before it merges the key's intervals."""

    volume = models.BigIntegerField(default=0, help_text="bytes of the ok records")
    files_ok = models.BigIntegerField(default=0)
    files_failed = models.BigIntegerField(default=0)
    sum_of_file_rates = NumericField(default=0, help_text="each ok file's bytes over its own duration, added up")
    runs = ArrayField(models.BigIntegerField(), default=list, help_text="the portal runs of its records")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["activity_id", "source_site_id", "destination_site_id", "mode", "concurrency"],
                name="link_totals_unique_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source_site_id}->{self.destination_site_id} {self.mode} {self.files_ok} ok"


class LinkInterval(LinkKey):
    """One island of a key's active time: a maximal [start, end) of the union of its records' intervals (records
    of no length are left out: they add no time). The islands of one key never overlap."""

    start = models.DateTimeField()
    end = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(
                fields=["activity_id", "source_site_id", "destination_site_id", "mode", "concurrency", "end"],
                include=["start"],
                name="link_interval_key_end",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source_site_id}->{self.destination_site_id} [{self.start:%Y-%m-%d %H:%M}, {self.end:%H:%M})"


class LinkError(LinkKey):
    """Per key and error message (its first 300 characters, as the matrix compares them): the failed records
    that gave it, for the most common error of a cell."""

    message = models.TextField()
    failures = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["activity_id", "source_site_id", "destination_site_id", "mode", "concurrency", "message"],
                name="link_error_unique_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source_site_id}->{self.destination_site_id}: {self.failures} x {self.message[:40]}"


class RecordKey(models.Model):
    """The identities of the stored transfer records, one row per identity: the md5 of (origin, experiment,
    origin id), and of (experiment, transfer key) when the record has one (results.store.keys). A batch claims its
    records' keys first; a record whose key is already claimed is a duplicate and is not stored. Kept here rather
    than as unique indexes of the partitioned records (which would have to include "end"), and kept when a month
    is retired, so that a record re-sent with another end, or after its month was retired, still counts once."""

    key = models.UUIDField(primary_key=True)

    def __str__(self) -> str:
        return str(self.key)


class RetiredMonth(models.Model):
    """A month whose raw transfer records were dropped by `manage.py records_retire` (results.store.retention): its
    rollups (rates, minute matrices, the now board) stay; pages that read raw records say so."""

    month = models.DateField(unique=True, help_text="the first day of the month (UTC) whose records ended in it")
    retired_at = models.DateTimeField()
    records = models.BigIntegerField(help_text="raw records dropped")
    bytes = models.BigIntegerField(help_text="bytes of the partition dropped (table and indexes)")

    class Meta:
        ordering = ["month"]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} retired {self.retired_at:%Y-%m-%d}"


# --- the failure causes' stored counts (results.store.failure_counts keeps and reads them) ----------------------


class FailureKey(models.Model):
    """What the failure-causes page selects by: the activity the failed records count for and their experiment
    (NULL: none), as stored on the records."""

    activity_id = models.BigIntegerField()
    experiment_id = models.BigIntegerField(null=True)
    failures = models.BigIntegerField(default=0)

    class Meta:
        abstract = True


class FailureCount(FailureKey):
    """Failed records per link (NULL site: not matched), mode, portal category and FTS category / scope / phase."""

    source_site_id = models.BigIntegerField(null=True)
    destination_site_id = models.BigIntegerField(null=True)
    mode = models.CharField(max_length=16, blank=True)
    error_category = models.CharField(max_length=24, blank=True)
    fts_error_category = models.CharField(max_length=64, blank=True)
    error_scope = models.CharField(max_length=64, blank=True)
    failure_phase = models.CharField(max_length=64, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "activity_id",
                    "experiment_id",
                    "source_site_id",
                    "destination_site_id",
                    "mode",
                    "error_category",
                    "fts_error_category",
                    "error_scope",
                    "failure_phase",
                ],
                name="failure_count_unique_key",
                nulls_distinct=False,
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source_site_id}->{self.destination_site_id} {self.error_category}: {self.failures}"


class FailureHour(FailureKey):
    """Failed records per hour (UTC) of their end and portal category: the page's hourly figure."""

    hour = models.DateTimeField()
    error_category = models.CharField(max_length=24, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["activity_id", "experiment_id", "hour", "error_category"],
                name="failure_hour_unique_key",
                nulls_distinct=False,
            ),
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} {self.error_category}: {self.failures}"


class FailureMessage(FailureKey):
    """Failed records per link, mode and message key (the message with its URLs replaced by <url>, whole: unique
    by its md5)."""

    source_site_id = models.BigIntegerField(null=True)
    destination_site_id = models.BigIntegerField(null=True)
    mode = models.CharField(max_length=16, blank=True)
    message = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                F("activity_id"),
                F("experiment_id"),
                F("source_site_id"),
                F("destination_site_id"),
                F("mode"),
                MD5("message"),
                name="failure_message_unique_key",
                nulls_distinct=False,
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source_site_id}->{self.destination_site_id} {self.message[:40]}: {self.failures}"


# What a network target is measured by (results.targets.network): volume says nothing of a network target, since an
# iperf3 run moves what the link takes for as long as it is asked to, so its figure is the rate it measured.
class NetworkMeasurement(models.Model):
    """The throughput one network run (iperf3) measured, over its real [start, end), towards the site of the host it
    measured (None when no site registers that host: then it counts for every target of its activity)."""

    run = models.OneToOneField(
        "runs.Run", on_delete=models.CASCADE, related_name="network_measurement", db_constraint=False
    )
    # Like TransferRecord.activity: no constraint, the plan may change under it; a measurement of a deleted activity
    # counts for nothing.
    activity = models.ForeignKey(
        "challenges.Activity", on_delete=models.DO_NOTHING, db_constraint=False, null=True, blank=True, related_name="+"
    )
    experiment = models.ForeignKey(
        Experiment, on_delete=models.PROTECT, null=True, blank=True, related_name="+", db_index=False
    )
    site = models.ForeignKey(Site, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    host = models.CharField(max_length=255, blank=True)
    rate = models.FloatField(help_text="bytes per second, iperf3's whole-run figure")
    start = models.DateTimeField()
    end = models.DateTimeField()

    objects = ExperimentRestrictedQuerySet.as_manager()

    class Meta:
        ordering = ["end", "id"]
        indexes = [models.Index(fields=["activity", "end"], name="network_measurement_activity")]
        constraints = [
            models.CheckConstraint(condition=models.Q(end__gte=models.F("start")), name="network_measurement_span"),
            models.CheckConstraint(condition=models.Q(rate__gte=0), name="network_measurement_rate"),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id}: {self.rate * 8 / 1e9:.3g} Gb/s"


from .ingest_counts import IngestCount  # noqa: E402, F401  (a model in its own module, registered with the app's)
