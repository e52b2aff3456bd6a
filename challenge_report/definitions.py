"""The report's appendix: the definitions of every figure it gives, read from the handbook's one page of them
(docs/numbers.md, which "About these numbers" says too), and the few the report adds."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from django.conf import settings

# The sections of docs/numbers.md whose figures the report shows.
SECTIONS = ("Units", "Target versus achieved", "So far and projection (while a window runs)", "FROM x TO matrix",
            "Tape rate")  # fmt: skip
REPORT_OWN = (
    ("Site traffic in and out",
     "Bytes the challenge's own activities moved into (out of) the site per experiment, from the hourly rollup, "
     "over the challenge's window up to the report's minute; the rate is that volume over the same span."),
    ("Limited by",
     "What held a link back by FTS's optimizer decision: `fts_max_active` (the optimizer at its maximum actives "
     "with files queued, under target), `fts_optimizer` (lowering actives for the success rate), `source` or "
     "`destination` (its rationale names a throughput limit there). Counted per decision over the challenge; the "
     "link panel's reading (live/links.py)."),
    ("Summary",
     "Each target counted once by its verdict under its experiment, and under each site it names (both ends of a "
     "link)."),
)  # fmt: skip


@cache
def _numbers_page() -> str:
    path = Path(settings.BASE_DIR) / "docs" / "numbers.md"
    return path.read_text(encoding="utf-8") if path.exists() else ""


def _sections(text: str) -> dict[str, str]:
    """{heading: its Markdown} of the page's level-2 sections (their level-3 subsections inside)."""
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return {title.strip(): body.strip() for title, body in zip(parts[1::2], parts[2::2], strict=True)}


def _plain_links(markdown: str) -> str:
    """Links between handbook pages mean nothing in a report: keep their words."""
    return re.sub(r"\[([^\]]+)\]\((?!https?:)[^)]*\)", r"\1", markdown)


def _terms(markdown: str) -> str:
    """Definition lists ("term" then ":   what it is", which the renderers do not read) as "**term**: what it is"."""
    return re.sub(r"^([^\n:][^\n]*)\n:   ", r"**\1**: ", markdown, flags=re.MULTILINE)


def definitions_section() -> list[dict[str, Any]]:
    sections = _sections(_numbers_page())
    found = [
        {"title": title, "markdown": _terms(_plain_links(sections[title]))} for title in SECTIONS if title in sections
    ]
    own = "\n\n".join(f"**{term}**: {text}" for term, text in REPORT_OWN)
    return [*found, {"title": "The report's own figures", "markdown": own}]
