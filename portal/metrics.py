"""Prometheus metrics for operators at `/metrics`: what the portal is doing, computed when Prometheus scrapes it.

Every figure is read at scrape time (prometheus_client's custom collectors), from the database and, for the STOMP
consumer's lag, from the status the consumer keeps in the cache: nothing is counted in a process's memory, so any
web worker answers the same. Each read is one grouped query on an index (or on a small table) under a statement
timeout: a slow one fails that collector alone, which says so (portal_metrics_collector_up 0), never the scrape.

Who may scrape: a bearer token (METRICS_TOKEN) or an address in METRICS_ALLOWED_IPS; with neither set, nobody.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from collections.abc import Callable, Iterable, Iterator
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

STATEMENT_TIMEOUT_MS = 2000
RECORDS_WINDOW = timedelta(hours=1)
STOMP_FORMATS = ("fts", "rucio", "perfsonar")


def runs_by_state() -> Iterator[Metric]:
    from runs.choices import RunState
    from runs.models import Run

    runs = GaugeMetricFamily(
        "portal_runs", "Runs of the portal's own tests by kind and state", labels=["kind", "state"]
    )
    counts = Run.objects.order_by().values_list("kind", "state").annotate(n=Count("pk"))
    seen = {(kind, state): n for kind, state, n in counts}
    for kind in sorted({kind for kind, _ in seen}) or ["transfer"]:
        for state in RunState.values:  # every state, 0 included: a series that vanishes reads as no data
            runs.add_metric([kind, state], seen.get((kind, state), 0))
    yield runs


def files_in_flight() -> Iterator[Metric]:
    from runs.choices import FileState
    from runs.models import RunFile

    running = RunFile.objects.filter(state=FileState.RUNNING).count()  # the partial index runfile_running
    yield GaugeMetricFamily("portal_run_files_in_flight", "Files of runs being copied now", value=running)


def ingest_records() -> Iterator[Metric]:
    """Transfer records of each DDM origin that ended in the last hour (the index on origin and end)."""
    from results.choices import Origin
    from results.models import TransferRecord

    since = timezone.now() - RECORDS_WINDOW
    counts = dict(
        TransferRecord.objects.filter(end__gt=since, origin__in=[Origin.FTS, Origin.RUCIO, Origin.PERFSONAR])
        .order_by()
        .values_list("origin")
        .annotate(n=Count("pk"))
    )
    records = GaugeMetricFamily(
        "portal_ingest_records_last_hour",
        "Transfer records that DDM systems sent (stored, duplicates not counted) whose transfer ended in the last hour",
        labels=["origin"],
    )
    for origin in (Origin.FTS, Origin.RUCIO, Origin.PERFSONAR):
        records.add_metric([origin.value], counts.get(origin.value, 0))
    yield records


def ingest_messages() -> Iterator[Metric]:
    """What DDM systems sent since the portal began, per format and outcome (results.ingest_counts: one row per
    format, kept once per batch): a counter, so rate() gives messages and rejections per second."""
    from results.ingest_counts import OUTCOMES, ingest_counts

    messages = CounterMetricFamily(
        "portal_ingest_messages",
        "Messages DDM systems sent (API and STOMP) by format and outcome: accepted (stored), duplicates, skipped "
        "(no transfer), rejected (bad items, listed by index in the answer)",
        labels=["format", "outcome"],
    )
    for format, counts in sorted(ingest_counts().items()):
        for outcome in OUTCOMES:
            messages.add_metric([format, outcome], counts[outcome])
    yield messages


def stomp_lag() -> Iterator[Metric]:
    from ingest.consumer import consumer_lag

    lag = GaugeMetricFamily(
        "portal_stomp_lag_seconds",
        "Seconds the STOMP consumer's messages waited before they were stored (no sample: no consumer running)",
        labels=["format"],
    )
    running = GaugeMetricFamily(
        "portal_stomp_consumer_up", "1 when a STOMP consumer reported in the last minute", labels=["format"]
    )
    for name in STOMP_FORMATS:
        seconds = consumer_lag(format=name)
        running.add_metric([name], 0 if seconds is None else 1)
        if seconds is not None:
            lag.add_metric([name], seconds)
    yield lag
    yield running


def open_alerts() -> Iterator[Metric]:
    from live.choices import AlertKind, AlertState
    from live.models import Alert

    counts = dict(Alert.objects.filter(state=AlertState.OPEN).order_by().values_list("kind").annotate(n=Count("pk")))
    alerts = GaugeMetricFamily("portal_alerts_open", "Open alerts of the challenges by kind", labels=["kind"])
    for kind in AlertKind.values:
        alerts.add_metric([kind], counts.get(kind, 0))
    yield alerts


def site_agents() -> Iterator[Metric]:
    """Every enrolled site agent (sites.SiteAgent, one small table read once): when it last called the portal, how
    long ago that was, the jobs it said it had in flight, and whether it is enrolled or revoked. A revoked agent keeps
    its `portal_agent_enrolled 0` series so that a revocation reads as one, not as an agent gone missing."""
    from sites.models import SiteAgent

    now = timezone.now()
    labels = ["site", "agent"]
    enrolled = GaugeMetricFamily(
        "portal_agent_enrolled", "1 for a site agent whose credential is valid, 0 for a revoked one", labels=labels
    )
    last_seen = GaugeMetricFamily(
        "portal_agent_last_seen_timestamp_seconds",
        "Unix time of the enrolled agent's last call to the portal (no sample: it never called)",
        labels=labels,
    )
    silence = GaugeMetricFamily(
        "portal_agent_seconds_since_seen",
        "Seconds since the enrolled agent last called the portal (since its enrolment when it never called)",
        labels=labels,
    )
    in_flight = GaugeMetricFamily(
        "portal_agent_jobs_in_flight", "Jobs the enrolled agent said it was running at its last call", labels=labels
    )
    for agent in SiteAgent.objects.select_related("site").order_by("site__name", "name"):
        key = [agent.site.name, agent.name]
        enrolled.add_metric(key, 0 if agent.revoked else 1)
        if agent.revoked:
            continue
        if agent.last_seen is not None:
            last_seen.add_metric(key, agent.last_seen.timestamp())
        silence.add_metric(key, agent.silent_seconds(now))
        in_flight.add_metric(key, agent.in_flight)
    yield from (enrolled, last_seen, silence, in_flight)


# Each part of the scrape, by name.
COLLECTORS: dict[str, Callable[[], Iterator[Metric]]] = {
    "runs": runs_by_state,
    "files": files_in_flight,
    "ingest": ingest_records,
    "ingest_messages": ingest_messages,
    "stomp": stomp_lag,
    "alerts": open_alerts,
    "agents": site_agents,
}


class PortalCollector(Collector):
    """The portal's metrics, each part read in a transaction of its own with a statement timeout."""

    def collect(self) -> Iterable[Metric]:
        up = GaugeMetricFamily("portal_metrics_collector_up", "1 when the part of the scrape was read", labels=["part"])
        for name, read in COLLECTORS.items():
            try:
                with transaction.atomic():
                    with connection.cursor() as cursor:
                        cursor.execute(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}")
                    metrics = list(read())
            except Exception as exc:  # one part that fails (a timeout, the cache away) leaves the others
                log.warning("metrics part %s not read: %s", name, exc)
                up.add_metric([name], 0)
                continue
            up.add_metric([name], 1)
            yield from metrics
        yield up


def _address_allowed(request: HttpRequest) -> bool:
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(allowed, strict=False) for allowed in settings.METRICS_ALLOWED_IPS)


def _token_given(request: HttpRequest) -> bool:
    expected = settings.METRICS_TOKEN
    words = request.headers.get("Authorization", "").split()
    if not expected or len(words) != 2 or words[0].lower() != "bearer":
        return False
    return hmac.compare_digest(words[1].encode(), expected.encode())


def metrics_view(request: HttpRequest) -> HttpResponse:
    """GET /metrics in Prometheus's text format, for a bearer token (METRICS_TOKEN) or an allowed address."""
    if request.method not in ("GET", "HEAD"):
        return HttpResponse("GET only\n", status=405, headers={"Allow": "GET, HEAD"}, content_type="text/plain")
    if not settings.METRICS_TOKEN and not settings.METRICS_ALLOWED_IPS:
        return HttpResponse(
            "metrics are off: set METRICS_TOKEN or METRICS_ALLOWED_IPS\n", status=403, content_type="text/plain"
        )
    if not (_token_given(request) or _address_allowed(request)):
        response = HttpResponse(
            "a bearer token or an allowed address is required\n", status=401, content_type="text/plain"
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PortalCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
