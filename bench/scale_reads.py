"""bench/scale's reads: every page and API a coordinator opens during a 2028-size challenge, cold and warm, beside
its goal (imported by bench/scale.py; not a benchmark by itself)."""

from __future__ import annotations

import time
from typing import Any

GOAL_PAGE_COLD, GOAL_PAGE_WARM, GOAL_BOARD_COLD = 1.0, 0.3, 0.3
DEPTH = 1_000_000


def _get(client: Any, url: str, params: dict[str, Any] | None = None) -> Any:
    response = client.get(url, params or {})
    assert response.status_code == 200, (url, response.status_code, getattr(response, "content", b"")[:300])
    return response


def _deep_cursor(challenge: Any, depth: int) -> str:
    """The cursor of the records API a page `depth` records deep in the challenge's records (found once, untimed,
    by the offset the API no longer uses)."""
    from django.contrib.auth import get_user_model

    from results.api.pagination import cursor_encode
    from results.api.records import RecordFilter, records_visible_to

    user = get_user_model().objects.filter(is_superuser=True).first()
    records = RecordFilter({"challenge": challenge.slug}, queryset=records_visible_to(user=user)).qs
    row = records.values_list("start", "id")[depth : depth + 1].get()
    return cursor_encode(row[0], row[1])


def export_time(pages: Any, url: str, params: dict[str, Any], memory: Any) -> None:
    """A streamed CSV export: time to the first row, in all, rows a second, peak memory of the process."""
    first: list[float] = []
    rows = [0]

    def call() -> None:
        began = time.perf_counter()
        response = pages.get(url, params)
        assert response.status_code == 200
        for chunk in response.streaming_content:
            if not first:
                first.append(time.perf_counter() - began)
            rows[0] += chunk.count(b"\n")

    seconds, peak = memory.peak_of(call)
    from scale import verdict

    print(
        f"{'records CSV export (streamed), cold':<44} {seconds * 1000:8,.0f} ms in all, first row after "
        f"{first[0] * 1000:,.0f} ms; {rows[0] - 1:,} records, {(rows[0] - 1) / seconds:,.0f} a second"
    )
    print(f"{'':<44} peak memory {peak / 1e6:6.1f} MB  {verdict(peak / 1e6, 200, 'MB')}", flush=True)


def reads_time(*, challenge: Any, timer: Any, records: int) -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client, override_settings
    from rest_framework.test import APIClient

    from challenges.models import Target
    from results.models import TransferRecord

    user = get_user_model().objects.create_superuser(f"bench-{time.time_ns()}")
    api, pages = APIClient(), Client()
    api.force_authenticate(user)
    pages.force_login(user)
    slug = challenge.slug
    targets = list(Target.objects.filter(activity__challenge=challenge).select_related("site"))
    target = next(t for t in targets if t.site_id)
    page, board = {"cold_goal": GOAL_PAGE_COLD, "warm_goal": GOAL_PAGE_WARM}, {"cold_goal": GOAL_BOARD_COLD}
    print(
        f"reads of the challenge ({len(targets)} targets, {records:,} records); PostgreSQL's buffer cache not dropped"
    )
    timer.report("results table (page)", lambda: _get(pages, f"/results/{slug}/"), **board, warm_goal=GOAL_PAGE_WARM)
    timer.report("results table (API)", lambda: _get(api, f"/api/v1/challenges/{slug}/rates/"), **page)
    timer.report("now board (API)", lambda: _get(api, f"/api/v1/challenges/{slug}/now/"), **board, warm_goal=0.3)
    timer.report("now board (page)", lambda: _get(pages, f"/challenges/{slug}/now/"), **board, warm_goal=0.3)
    with override_settings(RESULTS_MATRIX_EXACT_LIMIT=0):
        timer.report(
            "matrix, minute resolution (JSON)", lambda: _get(pages, f"/results/{slug}/matrix/?format=json"), **page
        )
    with override_settings(RESULTS_MATRIX_EXACT_LIMIT=10**15):
        timer.report("matrix, exact (JSON)", lambda: _get(pages, f"/results/{slug}/matrix/?format=json"), **page)
    timer.report("a target's plot (page)", lambda: _get(pages, f"/results/{slug}/targets/{target.pk}/"), **page)
    timer.report("failure causes (page)", lambda: _get(pages, f"/results/{slug}/failures/"), **page)
    records_url = "/api/v1/records/"
    timer.report("records API, first page", lambda: _get(api, records_url, {"challenge": slug}), **page)
    attributed = TransferRecord.objects.filter(activity__challenge=challenge).count()  # untimed
    depth = min(DEPTH, max(attributed - 100, 0))
    cursor = _deep_cursor(challenge, depth)
    timer.report(
        f"records API, a page {depth:,} records deep",
        lambda: _get(api, records_url, {"challenge": slug, "after": cursor}),
        **page,
    )
    into = next(t for t in targets if t.site_id and t.site.tier == 1)
    export_time(pages, f"/results/{slug}/records/", {"destination": into.site.name, "format": "csv"}, timer.memory)
