"""A transfer record as the batch writer stores it: a tuple in the table's column order, which COPY sends as it is.

Ingestion makes tens of thousands of records a second; a model instance each (or a dict turned into one) costs more
than parsing the message did. The parsers make RecordRows instead, and records_store turns model instances into them.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple


class RecordRow(NamedTuple):
    """The columns of results_transferrecord but the id, in the model's order, with the model's defaults (None where
    the model has none: PostgreSQL then refuses the row). A test keeps it the same as TransferRecord."""

    experiment_id: int | None = None
    source_site_id: int | None = None
    destination_site_id: int | None = None
    source_endpoint_id: int | None = None
    destination_endpoint_id: int | None = None
    source_url: str = ""
    destination_url: str = ""
    bytes: int | None = None
    start: datetime | None = None
    end: datetime | None = None
    state: str = ""
    error_message: str = ""
    error_category: str = ""
    mode: str = ""
    concurrency: int | None = None
    origin: str = ""
    origin_id: str = ""
    transfer_key: str = ""
    source_host: str = ""
    destination_host: str = ""
    run_id: int | None = None
    attempt: int = 1
    activity_id: int | None = None
    ddm_activity: str = ""
    fts_error_category: str = ""
    error_scope: str = ""
    failure_phase: str = ""


class DecisionRow(NamedTuple):
    """An FTS optimizer decision as ingestion hands it to results.services.optimizer_decisions_store: the columns of
    results_optimizerdecision but the id, in the model's order (a test keeps it the same as OptimizerDecision)."""

    experiment_id: int | None = None
    source_site_id: int | None = None
    destination_site_id: int | None = None
    source_se: str = ""
    dest_se: str = ""
    source_host: str = ""
    destination_host: str = ""
    at: datetime | None = None
    ema: float | None = None
    active: int | None = None
    actual_active: int | None = None
    queue_size: int | None = None
    throughput: float | None = None
    success: float | None = None
    filesize_avg: float | None = None
    filesize_stddev: float | None = None
    rationale: str = ""
    diff: int | None = None
    origin: str = "fts"
