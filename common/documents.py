"""Reading the documents coordinators keep as files (the sites document, plan documents): JSON or YAML."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml


class DocumentParseError(ValueError):
    """The text is not a JSON or YAML document; the message says why, with the position where known."""


def document_parse(*, text: str | bytes, content_type: str | None = None) -> Any:
    """Parse text as JSON or YAML. A content type naming JSON or YAML decides the format; otherwise JSON is tried
    first and YAML (a superset) second, and text that looks like JSON is explained by the JSON parser's message."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DocumentParseError(f"not UTF-8 text: {exc}") from exc
    kind = (content_type or "").lower()
    if "json" in kind:
        return _json_load(text)
    if "yaml" in kind or "yml" in kind:
        return _yaml_load(text)
    try:
        return _json_load(text)
    except DocumentParseError as json_error:
        try:
            return _yaml_load(text)
        except DocumentParseError:
            if text.lstrip()[:1] in ("{", "["):
                raise json_error from None
            raise


TOO_DEEP = "nested too deeply (a document of the portal is a few levels deep)"


def _json_load(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DocumentParseError(f"not valid JSON: {exc}") from exc
    except RecursionError:  # [[[[...]]]] 10,000 deep: Python's parser gives up, and so do we, with the reason
        raise DocumentParseError(f"not a document: {TOO_DEEP}") from None


def _yaml_load(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except RecursionError:
        raise DocumentParseError(f"not a document: {TOO_DEEP}") from None
    except yaml.YAMLError as exc:
        reason = " ".join(str(exc).replace('in "<unicode string>", ', "").split())
        raise DocumentParseError(f"not valid YAML: {reason}") from exc


class DocumentError(Exception):
    """A document that cannot be imported. `errors` lists every problem as `{"place": ..., "error": ...}` (the place
    `document` is the whole document); subclasses name the kind of document."""

    kind = "document"

    def __init__(self, errors: list[dict[str, str]]) -> None:
        self.errors = errors
        count = len(errors)
        super().__init__(f"{count} problem{'s' if count != 1 else ''} in the {self.kind}")

    def __str__(self) -> str:
        lines = [super().__str__()]
        lines.extend(f"  {error['place']}: {error['error']}" for error in self.errors)
        return "\n".join(lines)


def document_file_read(name: str) -> tuple[bytes, str | None]:
    """The bytes of a document file (`-` for standard input) and the content type its name implies (YAML for
    .yaml/.yml, else None: guess). Raises OSError when it cannot be read."""
    text = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
    return text, ("application/yaml" if name.lower().endswith((".yaml", ".yml")) else None)


def document_errors_report(*, errors: list[dict[str, str]], name: str, write: Any) -> str:
    """Write each problem as `place: error` and return the one-line summary a command fails with."""
    for error in errors:
        write(f"{error['place']}: {error['error']}")
    count = len(errors)
    source = "standard input" if name == "-" else name
    return f"{count} problem{'s' if count != 1 else ''} in {source}; nothing was imported"
