"""Reading the documents coordinators keep as files (the sites document, plan documents): JSON or YAML, and the
checks their validators share (DocumentValidator)."""

from __future__ import annotations

import itertools
import json
import math
import sys
from collections.abc import Iterator
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
    except ValueError as exc:  # an integer of more than 4300 digits: Python refuses to convert it
        raise DocumentParseError(f"not a document: {exc}") from None
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
    except ValueError as exc:  # an integer of more than 4300 digits, as for JSON
        raise DocumentParseError(f"not a document: {exc}") from None


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


def document_load(
    *, text: str | bytes, content_type: str | None, error: type[DocumentError], shape: str
) -> dict[str, Any]:
    """Parse a document that must be a mapping (`shape` says which, for the message). Raises `error` (a
    DocumentError of the document's kind) with the place `document` when the text is not a mapping."""
    try:
        document = document_parse(text=text, content_type=content_type)
    except DocumentParseError as exc:
        raise error([{"place": "document", "error": str(exc)}]) from exc
    if document is None:
        raise error([{"place": "document", "error": "the document is empty"}])
    if not isinstance(document, dict):
        raise error([{"place": "document", "error": f"must be {shape}, not {type_name(document)}"}])
    return document


def type_name(value: Any) -> str:
    """What a document value is, as its reader calls it: a mapping, a list, a string, a number, ..."""
    names = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number" if isinstance(value, int | float) else type(value).__name__)


def is_number(value: Any) -> bool:
    """A finite int or float; a boolean is not a number here, nor an integer beyond what a double holds (10**400:
    every rule compares it as a float, and float() of it raises)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


NOT_FINITE = (
    "not a finite number: NaN, Infinity and numbers beyond what a double holds (about 1.8e308) are no quantity a "
    "document can mean"
)


def non_finite_places(value: Any, place: str = "") -> Iterator[str]:
    """The places (`activities[0].targets[1].rate`) of every number in a parsed document that is not finite: the
    NaN and Infinity JSON's parser takes, 1e400 (which it reads as Infinity), YAML's .nan and .inf, and integers
    too large for a double (10**400). Each would overflow the arithmetic of whatever reads it."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from non_finite_places(item, place_join(place, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from non_finite_places(item, f"{place}[{index}]")
    elif isinstance(value, int | float) and not isinstance(value, bool) and not is_number(value):
        yield place or "document"


def place_join(place: str, key: str) -> str:
    """The place of a key in the mapping at `place` (the document itself is the place "")."""
    return f"{place}.{key}" if place else key


class DocumentValidator:
    """The checks every document of the portal makes, for one pass over a document. Problems are collected with
    their order, so that checks deferred to the end (those that read the database) still come out in document
    order; `raise_if_errors` raises them all as `error` (the document's DocumentError)."""

    error: type[DocumentError] = DocumentError
    # A number PyYAML reads as a string when written without a dot, as the document would write it with one.
    yaml_exponent_example = "1.0e15"

    def __init__(self) -> None:
        self._order = itertools.count()
        self._errors: list[tuple[int, str, str]] = []

    def add(self, place: str, error: str) -> None:
        self._errors.append((self.position(), place, error))

    def position(self) -> int:
        """The place in document order of a value read now, for a problem `add_at` adds later."""
        return next(self._order)

    def add_at(self, order: int, place: str, error: str) -> None:
        """A problem found later, at the position `order` taken when its value was read."""
        self._errors.append((order, place, error))

    def raise_if_errors(self) -> None:
        if self._errors:
            ordered = sorted(self._errors, key=lambda error: error[0])
            raise self.error([{"place": place, "error": error} for _, place, error in ordered])

    def document_mapping(self, document: Any, shape: str) -> dict[Any, Any]:
        """The whole document, which must be `shape` (a mapping of some kind) holding only finite numbers; raises at
        once when it is not, naming the place of each number that is not finite (the rules after would each say
        it again in their own words)."""
        if not isinstance(document, dict):
            self.add("document", f"must be {shape}, not {type_name(document)}")
        else:
            for place in non_finite_places(document):
                self.add(place, NOT_FINITE)
        self.raise_if_errors()
        return document

    def unknown_keys(self, mapping: dict[Any, Any], allowed: tuple[str, ...], place: str) -> None:
        for key in mapping:
            if key not in allowed:
                self.add(place_join(place, str(key)), f"unknown key; allowed: {', '.join(allowed)}")

    def required(self, mapping: dict[Any, Any], keys: tuple[str, ...], place: str) -> None:
        for key in keys:
            if key not in mapping:
                self.add(place_join(place, key), "required")

    def list_value(self, value: Any, place: str) -> list[Any]:
        """A list, or [] for null; anything else is a problem (and [])."""
        if value is None:
            return []
        if not isinstance(value, list):
            self.add(place, f"must be a list, not {type_name(value)}")
            return []
        return value

    def mapping_value(self, value: Any, place: str) -> dict[Any, Any] | None:
        if not isinstance(value, dict):
            self.add(place, f"must be a mapping, not {type_name(value)}")
            return None
        return value

    def name_value(self, value: Any, place: str, max_length: int) -> str | None:
        """A non-empty string without surrounding spaces, at most `max_length` characters."""
        if not isinstance(value, str) or not value.strip():
            self.add(
                place, "must be a non-empty string" + ("" if isinstance(value, str) else f", not {type_name(value)}")
            )
            return None
        if value != value.strip():
            self.add(place, "must not start or end with spaces")
            return None
        if len(value) > max_length:
            self.add(place, f"longer than {max_length} characters")
            return None
        return value

    def yaml_hint(self, value: Any) -> str:
        # PyYAML reads 1e15 (no dot) as a string; say so rather than leave the reader puzzled.
        if isinstance(value, str):
            try:
                float(value)
            except ValueError:
                return ""
            return f" (a string; in YAML write exponents with a dot, such as {self.yaml_exponent_example})"
        return ""
