"""A challenge's probes: one table per probe kind (network, io, cache, staging) with CSV/JSON exports
(?table=KIND&format=csv|json), the Tape Challenge table of its tape writes and recalls (?table=tape), and the
comparison with the challenge's earlier one (?table=compare)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from challenges.choices import ActivityKind
from challenges.models import Challenge
from challenges.selectors import challenge_for
from challenges.views import read_access
from common.exports import export_requested, table_response

from ..models import Run
from ..selectors import runs_visible_to
from .tables import probe_activity_kinds, probe_columns, probe_comparison, probe_kinds, probe_tables
from .tape import TAPE_COLUMNS, tape_table

COMPARE_COLUMNS = ["kind", "figure", "target", "now", "earlier", "ratio"]


def _runs(request: HttpRequest, challenge: Challenge) -> list[Run]:
    return list(
        runs_visible_to(user=request.user)
        .filter(activity__challenge=challenge, kind__in=[*probe_activity_kinds(), ActivityKind.TAPE_WRITE])
        .select_related("activity__experiment")
        .order_by()
    )


def _tables(request: HttpRequest, challenge: Challenge) -> dict[str, list[dict[str, object]]]:
    return probe_tables(_runs(request, challenge))


@require_GET
@read_access
def challenge_probes(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = challenge_for(slug=slug, user=request.user, queryset=Challenge.objects.select_related("compare_with"))
    runs = _runs(request, challenge)
    tables = probe_tables(runs)
    tape = tape_table(runs)
    earlier = challenge.compare_with
    comparison = probe_comparison(tables, _tables(request, earlier)) if earlier else []
    if export_requested(request):
        table = request.GET.get("table", "network")
        if table == "tape":
            return table_response(request, name=f"{slug}-tape", columns=TAPE_COLUMNS, rows=tape)
        if table == "compare":
            rows = [entry.as_row() for entry in comparison]
            return table_response(request, name=f"{slug}-probes-compare", columns=COMPARE_COLUMNS, rows=rows)
        columns = probe_columns()
        if table not in columns:
            return HttpResponse(
                f"table must be one of {', '.join([*probe_kinds(), 'tape', 'compare'])}, not {table[:40]!r}",
                status=400,
                content_type="text/plain",
            )
        return table_response(request, name=f"{slug}-probes-{table}", columns=columns[table], rows=tables[table])
    context = {"challenge": challenge, "tables": tables, "tape": tape, "earlier": earlier, "comparison": comparison}
    return render(request, "runs/challenge_probes.html", context)
