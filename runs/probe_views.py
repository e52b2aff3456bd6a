"""A challenge's probes: one table per probe kind (network, io, cache, staging) with CSV/JSON exports
(?table=KIND&format=csv|json), and beside them the comparison with the challenge's earlier one
(?table=compare)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from challenges.models import Challenge
from challenges.views import read_access
from common.exports import export_requested, table_response

from .api.views import runs_visible_to
from .probe_tables import COLUMNS, PROBE_KINDS, probe_comparison, probe_tables

COMPARE_COLUMNS = ["kind", "figure", "target", "now", "earlier", "ratio"]


def _tables(request: HttpRequest, challenge: Challenge) -> dict[str, list[dict[str, object]]]:
    runs = (
        runs_visible_to(user=request.user)
        .filter(activity__challenge=challenge, kind__in=PROBE_KINDS)
        .select_related("activity")
        .order_by()
    )
    return probe_tables(runs)


@require_GET
@read_access
def challenge_probes(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge.objects.select_related("compare_with"), slug=slug)
    tables = _tables(request, challenge)
    earlier = challenge.compare_with
    comparison = probe_comparison(tables, _tables(request, earlier)) if earlier else []
    if export_requested(request):
        table = request.GET.get("table", "network")
        if table == "compare":
            rows = [entry.as_row() for entry in comparison]
            return table_response(request, name=f"{slug}-probes-compare", columns=COMPARE_COLUMNS, rows=rows)
        if table not in COLUMNS:
            return HttpResponse(
                f"table must be one of {', '.join([*PROBE_KINDS, 'compare'])}, not {table[:40]!r}",
                status=400,
                content_type="text/plain",
            )
        return table_response(request, name=f"{slug}-probes-{table}", columns=COLUMNS[table], rows=tables[table])
    context = {"challenge": challenge, "tables": tables, "earlier": earlier, "comparison": comparison}
    return render(request, "runs/challenge_probes.html", context)
