"""Registry pages: the site list (with CSV/JSON export) and a site's detail."""

from __future__ import annotations

import csv

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render

from . import selectors, services
from .filters import SiteFilter

CSV_COLUMNS = [
    "name",
    "tier",
    "country",
    "experiments",
    "endpoints",
    "network_rate_Bps",
    "tape_drives",
    "tape_drive_rate_Bps",
    "staging_request_limit",
]


@login_required
def site_list(request: HttpRequest) -> HttpResponse:
    """Sites at a glance, filtered by experiment and tier; ?format=csv or ?format=json exports the same rows."""
    filterset = SiteFilter(request.GET, queryset=selectors.sites_with_details())
    sites = filterset.qs
    export = request.GET.get("format")
    if export == "json":
        return JsonResponse(services.sites_export(sites=sites))
    if export == "csv":
        response = HttpResponse(content_type="text/csv")
        response["Content-Disposition"] = 'attachment; filename="sites.csv"'
        writer = csv.writer(response)
        writer.writerow(CSV_COLUMNS)
        for site in sites:
            capacity = site.capacity_or_none
            writer.writerow(
                [
                    site.name,
                    site.tier,
                    site.country,
                    " ".join(e.name for e in site.experiments.all()),
                    len(site.endpoints.all()),
                    *(
                        getattr(capacity, field, None)
                        for field in ("network_rate", "tape_drives", "tape_drive_rate", "staging_request_limit")
                    ),
                ]
            )
        return response
    return render(
        request,
        "sites/site_list.html",
        {
            "sites": sites,
            "filter": filterset,
            "experiments": selectors.experiment_names(),
            "query": request.GET.urlencode(),
        },
    )


@login_required
def site_detail(request: HttpRequest, name: str) -> HttpResponse:
    site = get_object_or_404(selectors.sites_with_details(), name=name)
    return render(request, "sites/site_detail.html", {"site": site, "capacity": site.capacity_or_none})
