"""Network runs (ActivityKind network): iperf3 to a site's network host, then tracepath for the path MTU
(measure.network.network_probe). The plan gives an activity's run the first network host of its sites. Its
results: the throughput per interval and its statistics over the intervals that moved data, retransmits, the MTU."""

from __future__ import annotations

import statistics
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import plotly.graph_objects as go
from django.utils import timezone

from challenges.choices import ActivityKind
from common.units import is_whole_number
from measure.context import ProbeContext
from measure.probes import network_run
from results.charts import one_value_bins
from results.services import network_measurement_store

from .base import Grants, ProbeResult, RunLink, RunParameters, SiteNaming
from .endpoints import activity_site_names, activity_sites
from .fields import Problems, boolean, integer
from .figures import figure_json
from .one_task import OneTaskKind

if TYPE_CHECKING:
    from challenges.models import Activity
    from sites.models import Experiment, Site

    from ..models import Run

# A network probe runs tracepath after iperf3: about this long on the paths the portal measures.
TRACEPATH_SECONDS = 5.0


@dataclass(frozen=True, kw_only=True)
class NetworkParameters(RunParameters):
    """iperf3 to host:port, `streams` parallel streams for `duration` seconds (reverse: the host sends)."""

    host: str = ""
    port: int = 5201
    streams: int = 1
    duration: int = 10
    reverse: bool = False

    @classmethod
    def check(cls, given: dict[str, Any], problems: Problems) -> dict[str, Any]:
        host = given.get("host")
        if not isinstance(host, str) or not host.strip():
            problems.add("host", "host is required: the site's network host (name or address)")
        return {
            "host": host,
            "port": integer(problems, given, "port", 5201, low=1, high=65535),
            "streams": integer(problems, given, "streams", 1, low=1, high=128),
            "duration": integer(problems, given, "duration", 10, low=1, high=3600),
            "reverse": boolean(problems, given, "reverse", False),
        }


def _interval_rates(summary: dict[str, Any]) -> list[tuple[float, float]]:
    """(seconds from the start, bytes per second) of each iperf3 interval."""
    rates = []
    for interval in (summary.get("pscheduler") or {}).get("intervals") or []:
        entry = interval.get("summary") or {}
        if "throughput-bits" in entry:
            rates.append((float(entry.get("end", 0.0)), float(entry["throughput-bits"]) / 8))
    return rates


def network_results(summary: dict[str, Any]) -> dict[str, Any]:
    """iperf3 per interval with min / average / max / standard deviation over the intervals that moved data (an
    idle interval is no sample of the link), retransmits, path MTU and its warnings."""
    intervals = _interval_rates(summary)
    active = [rate for _, rate in intervals if rate > 0]
    total = ((summary.get("pscheduler") or {}).get("summary") or {}).get("summary") or {}
    return {
        "intervals": intervals,
        "samples": len(active),
        "min": min(active) if active else None,
        "average": statistics.fmean(active) if active else None,
        "max": max(active) if active else None,
        "stdev": statistics.stdev(active) if len(active) > 1 else None,
        "rate": summary.get("rate"),
        "retransmits": total.get("retransmits"),
        "path_mtu": summary.get("path_mtu"),
        "local_mtu": summary.get("local_mtu"),
        "hops": summary.get("hops"),
        "warnings": summary.get("warnings") or [],
        "interrupted": (summary.get("pscheduler") or {}).get("interrupted"),
    }


def network_figures(result: dict[str, Any]) -> list[dict[str, Any]]:
    """iperf3 throughput per interval (Gb/s over time) and the histogram of the intervals that moved data, with the
    min / average / max / standard deviation (as the SC2005 figures showed them)."""
    intervals = result.get("intervals") or []
    if not intervals:
        return []
    seconds = [end for end, _ in intervals]
    gbits = [rate * 8 / 1e9 for _, rate in intervals]
    line = go.Figure(go.Scatter(x=seconds, y=gbits, mode="lines+markers", name="throughput"))
    line.update_layout(
        height=300,
        margin={"l": 50, "r": 10, "t": 30, "b": 40},
        title={"text": "iperf3 throughput per interval"},
        xaxis={"title": {"text": "seconds from the start"}},
        yaxis={"title": {"text": "Gb/s"}, "rangemode": "tozero"},
    )
    active = [value for value in gbits if value > 0]
    stats = " · ".join(
        f"{name} {value * 8 / 1e9:.3g} Gb/s"
        for name, value in (("min", result.get("min")), ("avg", result.get("average")), ("max", result.get("max")))
        if value is not None
    )
    if result.get("stdev") is not None:
        stats += f" · stdev {result['stdev'] * 8 / 1e9:.3g} Gb/s"
    one = one_value_bins(active)
    histogram = go.Figure(
        go.Histogram(x=active, nbinsx=None if one else 20, xbins=one.xbins if one else None, name="intervals")
    )
    histogram.update_layout(
        height=300,
        margin={"l": 50, "r": 10, "t": 30, "b": 40},
        title={"text": f"Intervals with data ({len(active)}): {stats}"},
        xaxis={"title": {"text": "Gb/s"}, **({"range": one.x_range} if one else {})},
        yaxis={"title": {"text": "intervals"}},
        bargap=0.05,
    )
    return [figure_json(line), figure_json(histogram)]


class NetworkKind(OneTaskKind[NetworkParameters]):
    name = "network"
    serves: ClassVar[tuple[str, ...]] = (ActivityKind.NETWORK,)
    Parameters = NetworkParameters
    given = frozenset({"host", "port", "streams", "duration", "reverse"})
    needs = "host"
    columns = (
        "rate",
        "interval_min",
        "interval_average",
        "interval_max",
        "interval_stdev",
        "retransmits",
        "path_mtu",
        "local_mtu",
        "mtu_mismatch",
        "interrupted",
    )
    compared = "rate"

    def plan_defaults(
        self, activity: Activity, given: dict[str, Any], problems: Problems, experiment: Experiment | None
    ) -> dict[str, Any]:
        """The first of the activity's sites' network hosts (host:port gives the port too)."""
        sites = activity_sites(activity)
        hosts = [host.address for site in sites for host in site.network_hosts.all()]
        if not hosts:
            names = activity_site_names(sites)
            problems.add("host", f"none of the activity's sites ({names}) has a network host: give host")
            return {}
        host, _, port = hosts[0].rpartition(":") if hosts[0].count(":") == 1 else (hosts[0], "", "")
        return {"host": host, **({"port": int(port)} if is_whole_number(port) else {})}

    def planned(
        self, parameters: NetworkParameters, *, activity: Activity | None, experiment: Experiment | None
    ) -> tuple[Site | None, float]:
        return (activity.source if activity else None), (parameters.duration or 10) + 600

    def probe(
        self, parameters: NetworkParameters, context: ProbeContext, grants: Grants, cancelled: threading.Event
    ) -> ProbeResult:
        return network_run(
            context,
            grants,
            cancelled,
            host=parameters.host,
            port=parameters.port,
            streams=parameters.streams,
            duration=parameters.duration,
            reverse=parameters.reverse,
        )

    def measurement_store(self, run: Run, *, experiment_id: int | None, summary: dict[str, Any]) -> None:
        """Its throughput as its activity's network figure (results.targets), over the run's own span."""
        rate = summary.get("rate")
        if not isinstance(rate, int | float) or rate < 0:
            return
        now = timezone.now()
        network_measurement_store(
            run_id=run.pk,
            activity_id=run.activity_id,
            experiment_id=experiment_id,
            host=str(summary.get("host") or ""),
            port=summary.get("port") if isinstance(summary.get("port"), int) else None,
            rate=float(rate),
            start=run.started_at or now,
            end=now,
        )

    def rows(self, run: Run, summary: dict[str, Any], *, match: Any) -> list[dict[str, Any]]:
        result = network_results(summary)
        path, local = result["path_mtu"], result["local_mtu"]
        return [
            {
                "rate": result["rate"],
                "interval_min": result["min"],
                "interval_average": result["average"],
                "interval_max": result["max"],
                "interval_stdev": result["stdev"],
                "retransmits": result["retransmits"],
                "path_mtu": path,
                "local_mtu": local,
                "mtu_mismatch": bool(path and local and path != local),
                "interrupted": bool(result["interrupted"]),
            }
        ]

    def results(self, run: Run, summary: dict[str, Any]) -> dict[str, Any] | None:
        return {"kind": "network", **network_results(summary)}

    def figures(self, result: dict[str, Any]) -> list[dict[str, Any]]:
        return network_figures(result)

    def describe(self, parameters: NetworkParameters) -> tuple[str, float | None]:
        port = f":{parameters.port}" if parameters.port else ""
        duration = float(parameters.duration or 10)
        streams = parameters.streams or 1
        direction = " (reverse)" if parameters.reverse else ""
        return (
            f"iperf3 to {parameters.host or None}{port}{direction}, {streams} stream{'s' if streams != 1 else ''} "
            f"for {duration:g} s, then tracepath (path MTU)",
            duration + TRACEPATH_SECONDS,
        )

    def phase(self, *, elapsed: float | None, expected: float | None) -> str:
        if elapsed is None or expected is None:
            return "running"
        return "iperf3" if elapsed < expected - TRACEPATH_SECONDS else "tracepath"

    def target(self, parameters: NetworkParameters) -> str:
        return parameters.host or parameters.site or ""

    def link(self, parameters: NetworkParameters, sites: SiteNaming) -> RunLink:
        site = parameters.site or ""
        if not parameters.host:
            return RunLink(site, "")
        measured = sites.of_host(parameters.host, parameters.port)
        names = f"{site} -> {measured}" if site and site != measured else measured
        return RunLink(names, f"iperf3 {parameters.host}:{parameters.port}")


NETWORK = NetworkKind()
