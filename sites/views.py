"""Registry pages: the site list (with CSV/JSON export) and a site's detail."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render

from common.exports import table_response

from . import selectors, services
from .filters import SiteFilter
from .roles import action_refusal, user_may

View = Callable[..., Any]


def action_required(action: str) -> Callable[[View], View]:
    """A page whose every request takes `action` (a form of the plan, the tokens page): anonymous callers go to the
    login page, actors whose roles may not take it anywhere (the access policy's POLICY table) get 403. Which rows
    they may take it on, the view's `object_for(..., action=action)` decides."""

    def decorator(view: View) -> View:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not user_may(user=request.user, action=action):
                raise PermissionDenied(action_refusal(user=request.user, action=action))
            return view(request, *args, **kwargs)

        return wrapper

    return decorator


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
        return table_response(request, name="sites", columns=CSV_COLUMNS, rows=[_csv_row(site) for site in sites])
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


def _csv_row(site: Any) -> dict[str, Any]:
    capacity = site.capacity_or_none
    return {
        "name": site.name,
        "tier": site.tier,
        "country": site.country,
        "experiments": " ".join(e.name for e in site.experiments.all()),
        "endpoints": len(site.endpoints.all()),
        "network_rate_Bps": getattr(capacity, "network_rate", None),
        "tape_drives": getattr(capacity, "tape_drives", None),
        "tape_drive_rate_Bps": getattr(capacity, "tape_drive_rate", None),
        "staging_request_limit": getattr(capacity, "staging_request_limit", None),
    }


@login_required
def site_detail(request: HttpRequest, name: str) -> HttpResponse:
    site = get_object_or_404(selectors.sites_with_details(), name=name)
    return render(request, "sites/site_detail.html", {"site": site, "capacity": site.capacity_or_none})
