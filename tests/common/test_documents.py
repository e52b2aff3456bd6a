"""The checks every document shares (common.documents): the sites and plan documents subclass one validator."""

from __future__ import annotations

from typing import Any

import pytest

from common.documents import DocumentError, DocumentValidator, document_load, is_number, type_name


class _ExampleError(DocumentError):
    kind = "example document"


class _Example(DocumentValidator):
    error = _ExampleError
    yaml_exponent_example = "2.0e3"


@pytest.mark.parametrize(
    ("value", "name"),
    [({}, "a mapping"), ([], "a list"), ("x", "a string"), (True, "a boolean"), (None, "null"), (1.5, "a number")],
)
def test_a_value_is_named_as_its_reader_calls_it(value: Any, name: str) -> None:
    assert type_name(value) == name


@pytest.mark.parametrize(("value", "number"), [(1, True), (2.5, True), (True, False), (float("nan"), False)])
def test_a_number_is_finite_and_not_a_boolean(value: Any, number: bool) -> None:
    assert is_number(value) is number


def test_a_document_that_is_not_a_mapping_is_an_error_of_its_kind_with_its_shape() -> None:
    with pytest.raises(_ExampleError) as caught:
        document_load(text="[1]", content_type=None, error=_ExampleError, shape="a mapping of examples")

    assert caught.value.errors == [{"place": "document", "error": "must be a mapping of examples, not a list"}]


def test_problems_found_later_come_out_in_document_order() -> None:
    validator = _Example()
    validator.add("first", "one")
    order_of_second = validator.position()
    validator.add("third", "three")
    validator.add_at(order_of_second, "second", "two")

    with pytest.raises(_ExampleError) as caught:
        validator.raise_if_errors()

    assert [error["place"] for error in caught.value.errors] == ["first", "second", "third"]


def test_the_yaml_hint_gives_the_documents_own_example() -> None:
    assert _Example().yaml_hint("2e3") == " (a string; in YAML write exponents with a dot, such as 2.0e3)"
    assert _Example().yaml_hint("two") == ""
    assert _Example().yaml_hint(2000) == ""


def test_unknown_and_missing_keys_are_placed_under_their_mapping() -> None:
    validator = _Example()
    validator.unknown_keys({"name": 1, "colour": 2}, ("name",), "items[0]")
    validator.required({}, ("name",), "")

    with pytest.raises(_ExampleError) as caught:
        validator.raise_if_errors()

    assert caught.value.errors == [
        {"place": "items[0].colour", "error": "unknown key; allowed: name"},
        {"place": "name", "error": "required"},
    ]
