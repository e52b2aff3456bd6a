"""Reading the documents coordinators keep as files (the sites document, plan documents): JSON or YAML."""

from __future__ import annotations

import json
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


def _json_load(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DocumentParseError(f"not valid JSON: {exc}") from exc


def _yaml_load(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        reason = " ".join(str(exc).replace('in "<unicode string>", ', "").split())
        raise DocumentParseError(f"not valid YAML: {reason}") from exc
