"""Reads of ingestion: the hosts of records that matched no site."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection

UNKNOWN_HOSTS = """
SELECT host, sum(as_source)::bigint, sum(as_destination)::bigint, max(last_seen), bool_or(network)
FROM (
    SELECT source_host AS host, count(*) AS as_source, 0 AS as_destination, max("end") AS last_seen,
           bool_or(origin = 'perfsonar') AS network
    FROM results_transferrecord WHERE source_site_id IS NULL AND source_host <> ''
    GROUP BY source_host
    UNION ALL
    SELECT destination_host, 0, count(*), max("end"), bool_or(origin = 'perfsonar')
    FROM results_transferrecord WHERE destination_site_id IS NULL AND destination_host <> ''
    GROUP BY destination_host
) AS hosts
GROUP BY host
ORDER BY sum(as_source) + sum(as_destination) DESC, host
"""


@dataclass(frozen=True)
class UnknownHost:
    host: str
    as_source: int
    as_destination: int
    last_seen: datetime
    network: bool  # seen in perfSONAR results: register it as a network host, else as a storage endpoint

    @property
    def records(self) -> int:
        return self.as_source + self.as_destination


def unknown_hosts() -> list[UnknownHost]:
    """Hosts of stored records that matched no site, most records first (a host of several sites' endpoints on
    different ports counts here until each port is registered)."""
    with connection.cursor() as cursor:
        cursor.execute(UNKNOWN_HOSTS)
        return [UnknownHost(*row) for row in cursor.fetchall()]
