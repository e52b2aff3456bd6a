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
