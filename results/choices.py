"""Enumerations of transfer records."""

from django.db import models


class RecordState(models.TextChoices):
    OK = "ok", "ok"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"


class Origin(models.TextChoices):
    """What produced a record: a portal probe, an FTS or Rucio message, or a site report."""

    PROBE = "probe", "probe"
    FTS = "fts", "FTS"
    RUCIO = "rucio", "Rucio"
    PERFSONAR = "perfsonar", "perfSONAR"
    REPORT = "report", "site report"


class ErrorCategory(models.TextChoices):
    TIMEOUT = "timeout", "timeout"
    TLS = "tls", "TLS / broken pipe"
    CHECKSUM = "checksum", "checksum mismatch"
    NO_SUCH_FILE = "no-such-file", "no such file"
    PERMISSION = "permission", "permission / authentication"
    FILE_EXISTS = "file-exists", "file exists"
    CONNECTION_REFUSED = "connection-refused", "connection refused"
    NETWORK_UNREACHABLE = "network-unreachable", "network unreachable"
    STAGING = "staging", "staging / tape"
    OTHER = "other", "other"


class Verdict(models.TextChoices):
    """What a target's figures say, the one set of words every surface uses (results.targets.figures decides).

    Once its window has ended: met, partly or missed (or "not measured" for a network target no run measured).
    While it runs: the live verdict (on track, at risk, will miss, met; never missed), or, for a network target,
    what its iperf3 runs measured (met, below target, not measured). Before it: not started."""

    MET = "met", "met"
    PARTLY = "partly", "partly met"
    MISSED = "missed", "missed"
    ON_TRACK = "on track", "on track"
    AT_RISK = "at risk", "at risk"
    WILL_MISS = "will miss", "will miss"
    BELOW_TARGET = "below target", "measured below target"
    NOT_MEASURED = "not measured", "not measured yet"
    NOT_STARTED = "not started", "not started"


# Worst first: the now board's order and the report's summary.
VERDICT_ORDER = {
    Verdict.WILL_MISS: 0,
    Verdict.MISSED: 1,
    Verdict.AT_RISK: 2,
    Verdict.BELOW_TARGET: 3,
    Verdict.PARTLY: 4,
    Verdict.NOT_MEASURED: 5,
    Verdict.ON_TRACK: 6,
    Verdict.MET: 7,
    Verdict.NOT_STARTED: 8,
}
# The verdicts that open a target_at_risk alert while a window runs.
VERDICTS_AT_RISK = (Verdict.AT_RISK, Verdict.WILL_MISS)
