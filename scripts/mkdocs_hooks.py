"""MkDocs hooks of the handbook (mkdocs.yml `hooks:`), local and offline.

- Code paths: every repository path a page names in backticks (`results/targets/rates.py`, `measure/`) must exist,
  so that the handbook never sends a reader to a file that moved. A missing one is a warning, which `mkdocs build
  --strict` (CI) turns into a failure.
- Screenshots: the browser tests write fresh ones to var/screenshots/ on every run (tests/e2e/screenshots.py); a
  build after a test run publishes those instead of the committed copies in docs/img/, so the site shows the pages
  as they are. The committed copies are refreshed with SCREENSHOTS_UPDATE=1 (docs/testbed.md says how).
"""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger("mkdocs.hooks.portal")

# Top-level directories whose paths are checked; var/ and .venv/ are local state, not the repository's.
CHECKED_ROOTS = {
    path.name
    for path in ROOT.iterdir()
    if path.is_dir() and not path.name.startswith(".") and path.name not in {"var", "site", "node_modules"}
} | {".ci"}
CODE_SPAN = re.compile(r"`([A-Za-z0-9_.][A-Za-z0-9_./-]*)`")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def code_paths_missing(markdown: str) -> list[str]:
    """The repository paths named in code spans (outside code blocks) that do not exist."""
    missing = []
    for match in CODE_SPAN.finditer(FENCE.sub("", markdown)):
        text = match.group(1)
        first = text.split("/", 1)[0]
        if "/" not in text or first not in CHECKED_ROOTS:
            continue
        if not (ROOT / text).exists():
            missing.append(text)
    return missing


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    for path in code_paths_missing(markdown):
        log.warning("%s names `%s`, which is not in the repository", page.file.src_uri, path)
    return markdown


def on_post_build(config: Any, **kwargs: Any) -> None:
    fresh = ROOT / "var" / "screenshots"
    target = Path(config["site_dir"]) / "img"
    if not fresh.is_dir() or not target.is_dir():
        return
    used = [path for path in sorted(fresh.glob("*.png")) if (target / path.name).exists()]
    for path in used:
        shutil.copyfile(path, target / path.name)
    if used:
        log.info("screenshots from the last browser test run (var/screenshots/): %d", len(used))
