"""What DDM systems sent, counted for ever per format: messages accepted (stored), duplicates, skipped (no transfer)
and rejected (by item, with their index in the answer). One row per format, updated once per batch (not per
message): /metrics exports them as counters (portal_ingest_messages_total), which the records themselves cannot give,
since rejected and duplicate messages leave no record."""

from __future__ import annotations

from django.db import connection, models

OUTCOMES = ("accepted", "duplicates", "skipped", "rejected")


class IngestCount(models.Model):
    """The running totals of one ingest format (fts, rucio, perfsonar, fts-optimizer), API and STOMP together."""

    format = models.CharField(max_length=32, primary_key=True)
    accepted = models.BigIntegerField(default=0)
    duplicates = models.BigIntegerField(default=0)
    skipped = models.BigIntegerField(default=0)
    rejected = models.BigIntegerField(default=0)

    class Meta:
        app_label = "results"

    def __str__(self) -> str:
        return f"{self.format}: {self.accepted} accepted, {self.rejected} rejected"


_ADD = f"""
INSERT INTO {IngestCount._meta.db_table} AS c (format, accepted, duplicates, skipped, rejected)
VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (format) DO UPDATE SET
    accepted = c.accepted + EXCLUDED.accepted, duplicates = c.duplicates + EXCLUDED.duplicates,
    skipped = c.skipped + EXCLUDED.skipped, rejected = c.rejected + EXCLUDED.rejected
"""


def ingest_counts_add(*, format: str, accepted: int, duplicates: int, skipped: int, rejected: int) -> None:
    """Add one batch's outcome to its format's totals: one statement (a batch of nothing adds nothing)."""
    if accepted or duplicates or skipped or rejected:
        with connection.cursor() as cursor:
            cursor.execute(_ADD, [format, accepted, duplicates, skipped, rejected])


def ingest_counts() -> dict[str, dict[str, int]]:
    """The totals by format: {format: {outcome: count}}."""
    return {
        row["format"]: {outcome: int(row[outcome]) for outcome in OUTCOMES}
        for row in IngestCount.objects.values("format", *OUTCOMES)
    }
