"""bench/report: the challenge report (issue 36) of a challenge of bench/scale.py's shape (40 sites, 6 experiments,
12 activities with 60 targets, 4 weeks, FTS-like records with 8 % failures), timed part by part, with each part's
peak resident memory above the process's before it.

    eval "$(bin/portal services | grep export)"
    .venv/bin/python bench/report.py --records 1000000            # builds <DATABASE_URL's name>_scale first
    .venv/bin/python bench/report.py --records 1000000 --reuse    # the same database again: only the report

It builds the challenge with bench/scale.py's own loader (generate_series on the server, rollups, the matrix's unions
and the failure counts rebuilt in bulk) in its own database, then, in this process, for a coordinator: the content
(every section: the targets' figures, rate plots' data, failure anatomy, central services, sites, timeline,
sweeps), the PNG figures (matplotlib), the HTML, the PDF (WeasyPrint) and the Markdown zip, each the median of
--repeat calls (the cache emptied before each content call: the report's figures are those of a cold read). The
goal (issue 36): the whole report in under a minute, in bounded memory.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GOAL_SECONDS = 60.0


def _timed(label: str, call: Callable[[], Any], repeat: int, *, before: Callable[[], None] | None = None) -> Any:
    from scale import Memory

    memory, timings, peak, result = Memory(), [], 0, None
    for _ in range(repeat):
        if before is not None:
            before()
        results: list[Any] = []
        seconds, used = memory.peak_of(lambda results=results: results.append(call()))
        timings.append(seconds)
        peak, result = max(peak, used), results[0]
    print(
        f"{label:<34} {statistics.median(timings):8.2f} s (min {min(timings):.2f}, max {max(timings):.2f}; "
        f"{len(timings)})   peak memory {peak / 1e6:7.1f} MB",
        flush=True,
    )
    return result, statistics.median(timings)


def report_time(*, challenge: Any, repeat: int) -> None:
    from django.contrib.auth import get_user_model
    from django.core.cache import cache

    from challenge_report.charts import figures_png
    from challenge_report.content import content_json, report_content
    from challenge_report.render import report_html, report_markdown_zip, report_pdf
    from sites.roles import membership_grant

    user, _ = get_user_model().objects.get_or_create(username="bench-report-coordinator")
    membership_grant(user=user, role="coordinator")
    content, t_content = _timed(
        "content (JSON), cold cache",
        lambda: content_json(report_content(challenge=challenge, user=user)),
        repeat,
        before=cache.clear,
    )
    figures, t_figures = _timed(
        f"{len(content['figures'])} figures (PNG, matplotlib)", lambda: figures_png(content), repeat
    )
    html, t_html = _timed("HTML (figures inline)", lambda: report_html(content, figures), repeat)
    pdf, t_pdf = _timed("PDF (WeasyPrint)", lambda: report_pdf(html), repeat)
    zipped, _ = _timed("Markdown zip", lambda: report_markdown_zip(content, figures), repeat)
    targets = sum(len(section["targets"]) for section in content["experiments"])
    print(
        f"the report: {targets} targets, {len(content['sites'])} sites, {len(content['timeline'])} timeline events; "
        f"HTML {len(html) / 1e6:.1f} MB, PDF {len(pdf) / 1e6:.1f} MB, zip {len(zipped) / 1e6:.1f} MB"
    )
    total = t_content + t_figures + t_html + t_pdf
    verdict = "met" if total < GOAL_SECONDS else "MISSED"
    print(
        f"the PDF from the data: {total:.1f} s (content + figures + HTML + PDF), goal < {GOAL_SECONDS:.0f} s: {verdict}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="calls for each median")
    parser.add_argument("--database", help="the bench's database (default: <DATABASE_URL's name>_scale)")
    parser.add_argument("--reuse", action="store_true", help="report on an earlier build of the same --records")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "bench"))
    from scale import bench_database, build

    os.environ["DATABASE_URL"] = bench_database(args.database)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    os.environ["LOG_LEVEL"] = "WARNING"
    import django

    django.setup()
    from django.core.management import call_command

    from challenges.models import Challenge

    call_command("migrate", verbosity=0)
    challenge = Challenge.objects.filter(slug="bench", name=f"Bench 2028, {args.records} records").first()
    if not (args.reuse and challenge):
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
        build(args.records)
        challenge = Challenge.objects.get(slug="bench")
    print(f"challenge {challenge.name!r}: {challenge.start:%Y-%m-%d} to {challenge.end:%Y-%m-%d}")
    report_time(challenge=challenge, repeat=args.repeat)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
