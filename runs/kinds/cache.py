"""Cache runs (ActivityKind cache): read origin files direct, then through an empty and a filled cache
(measure.cache.cache_study). The registry does not pair origins and caches: a run is given both. Its results: per
file the direct, empty-cache and filled-cache read rates and the speed-up."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

import plotly.graph_objects as go

from challenges.choices import ActivityKind
from measure.context import ProbeContext
from measure.probes import cache_run

from .base import Grants, ProbeResult, RunLink, RunParameters, SiteNaming
from .fields import Problems, url, urls
from .figures import figure_json
from .one_task import OneTaskKind

if TYPE_CHECKING:
    from ..models import Run


@dataclass(frozen=True, kw_only=True)
class CacheParameters(RunParameters):
    """The origin files to read, and the cache endpoint to read them through (same paths)."""

    origin_urls: list[str] = field(default_factory=list)
    cache_url: str = ""

    @classmethod
    def check(cls, given: dict[str, Any], problems: Problems) -> dict[str, Any]:
        return {
            "origin_urls": urls(problems, "origin_urls", given.get("origin_urls"), what="file URLs at the origin"),
            "cache_url": url(problems, "cache_url", given.get("cache_url")),
        }


def cache_figures(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per file: the read rate direct, through an empty cache and through a filled one, side by side."""
    rows = [row for row in result.get("rows") or [] if isinstance(row, dict)]
    if not rows:
        return []
    names = [str(row.get("url") or "").rsplit("/", 1)[-1] for row in rows]
    figure = go.Figure(
        [
            go.Bar(x=names, y=[(row.get(column) or 0) / 1e9 for row in rows], name=label)
            for column, label in (
                ("direct_rate", "direct"),
                ("empty_cache_rate", "cache empty"),
                ("filled_cache_rate", "cache filled"),
            )
        ]
    )
    figure.update_layout(
        barmode="group",
        height=320,
        margin={"l": 50, "r": 10, "t": 30, "b": 80},
        title={"text": "Read rate: direct vs through the cache"},
        yaxis={"title": {"text": "GB/s"}},
    )
    return [figure_json(figure)]


class CacheKind(OneTaskKind[CacheParameters]):
    name = "cache"
    serves: ClassVar[tuple[str, ...]] = (ActivityKind.CACHE,)
    Parameters = CacheParameters
    given = frozenset({"origin_urls", "cache_url"})
    columns = ("file", "size", "direct_rate", "empty_cache_rate", "filled_cache_rate", "speedup")
    compared = "filled_cache_rate"

    def grants(self, run: Run) -> Grants:
        """It reads each origin file, direct and through the cache (no query string: the cache's path)."""
        parameters = self.parameters(run)
        cache = urlsplit(parameters.cache_url)
        through = [
            urlunsplit((cache.scheme, cache.netloc, urlsplit(item).path, "", "")) for item in parameters.origin_urls
        ]
        return [(item, "read") for item in parameters.origin_urls] + [(item, "read") for item in through]

    def probe(
        self, parameters: CacheParameters, context: ProbeContext, grants: Grants, cancelled: threading.Event
    ) -> ProbeResult:
        return cache_run(context, grants, cancelled, cache_url=parameters.cache_url, origin_urls=parameters.origin_urls)

    def rows(self, run: Run, summary: dict[str, Any], *, match: Any) -> list[dict[str, Any]]:
        return [
            {
                "file": row.get("url"),
                "size": row.get("size"),
                "direct_rate": row.get("direct_rate"),
                "empty_cache_rate": row.get("empty_cache_rate"),
                "filled_cache_rate": row.get("filled_cache_rate"),
                "speedup": row.get("speedup"),
            }
            for row in summary.get("rows") or []
            if isinstance(row, dict)
        ]

    def results(self, run: Run, summary: dict[str, Any]) -> dict[str, Any] | None:
        return {"kind": "cache", "rows": summary.get("rows") or []}

    def figures(self, result: dict[str, Any]) -> list[dict[str, Any]]:
        return cache_figures(result)

    def describe(self, parameters: CacheParameters) -> tuple[str, float | None]:
        count = len(parameters.origin_urls)
        return f"Reading {count} file{'s' if count != 1 else ''} direct and through the cache", None

    def target(self, parameters: CacheParameters) -> str:
        return parameters.cache_url or parameters.site or ""

    def link(self, parameters: CacheParameters, sites: SiteNaming) -> RunLink:
        if parameters.cache_url:
            return RunLink(sites.of_url(parameters.cache_url), parameters.cache_url)
        return RunLink(parameters.site or "", "")


CACHE = CacheKind()
