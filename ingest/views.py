"""The coordinators' page of unknown hosts: hosts of ingested records that matched no site, with counts."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from common.exports import table_response
from sites.token_views import coordinator_required

from .selectors import unknown_hosts
from .services import records_attach

HOST_COLUMNS = ["host", "kind", "records_as_source", "records_as_destination", "last_seen"]


@coordinator_required
@require_http_methods(["GET", "POST"])
def unknown_hosts_page(request: HttpRequest) -> HttpResponse:
    """GET: the list (CSV/JSON with ?format=). POST: attach the records of hosts registered since (also done every
    minute by Celery beat)."""
    if request.method == "POST":
        summary = records_attach()
        if summary.records:
            messages.success(request, f"{summary.records} records attached ({', '.join(summary.hosts)}).")
        else:
            messages.info(request, "No records to attach: register the endpoints of these hosts first.")
        return redirect("ingest:unknown-hosts")
    hosts = unknown_hosts()
    rows: list[dict[str, Any]] = [
        {
            "host": host.host,
            "kind": "network host" if host.network else "storage endpoint",
            "records_as_source": host.as_source,
            "records_as_destination": host.as_destination,
            "last_seen": host.last_seen.isoformat(),
        }
        for host in hosts
    ]
    export = request.GET.get("format")
    if export == "json":
        return JsonResponse({"hosts": rows})
    if export == "csv":
        return table_response(request, name="unknown-hosts", columns=HOST_COLUMNS, rows=rows)
    return render(request, "ingest/unknown_hosts.html", {"hosts": hosts})
