"""FTS messages decoded by msgspec into the fields the parser reads (ingest.messages): the same records and the same
rejections as the dicts of a generic decode, and every field the parser reads is decoded."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import msgspec
import orjson
import pytest

from ingest.messages import FtsMessage, fts_message_decode, fts_messages_decode
from ingest.parsers import ItemError, Registry, parse_fts
from ingest.services import ingest_items, items_from_body

from .samples import FTS_COMPLETE, fts_variant

pytestmark = pytest.mark.django_db


class _Reading(Mapping[str, Any]):
    """A message that notes every field the parser asks it for."""

    def __init__(self, message: dict[str, Any], asked: set[str]) -> None:
        self.message, self.asked = message, asked

    def __getitem__(self, name: str) -> Any:
        self.asked.add(name)
        return self.message[name]

    def get(self, name: str, default: Any = None) -> Any:
        self.asked.add(name)
        return self.message.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self.message)

    def __len__(self) -> int:
        return len(self.message)


def _variants() -> list[dict[str, Any]]:
    failed = fts_variant(2, t_final_transfer_state="Error", t__error_message="TRANSFER [110] timed out")
    failed.update(tr_error_category="TIMEOUT", tr_error_scope="TRANSFER", t_failure_phase="TRANSFER", retry="1")
    failed.update(retry_max="3", job_state="FAILED", is_recoverable=True)
    whole = fts_variant(3, timestamp_tr_st="0", timestamp_tr_comp="0")  # the whole transfer's times instead
    no_size = fts_variant(4, file_size=None, f_size="1234")
    return [fts_variant(1), failed, whole, no_size]


def test_every_field_the_fts_parser_reads_is_a_field_of_the_decoded_message(world: dict[str, Any]) -> None:
    registry, asked = Registry.load(), set()
    for message in _variants():
        parse_fts(_Reading(message, asked), registry)
    assert asked <= set(FtsMessage.__struct_fields__)


def test_a_decoded_body_makes_the_records_its_dicts_make(world: dict[str, Any]) -> None:
    registry = Registry.load()
    messages = _variants()
    decoded = fts_messages_decode(orjson.dumps(messages))
    assert decoded is not None and all(type(message) is FtsMessage for message in decoded)
    assert [parse_fts(message, registry) for message in decoded] == [parse_fts(m, registry) for m in messages]
    one = fts_message_decode(orjson.dumps(messages[1]))
    assert one is not None and parse_fts(one, registry) == parse_fts(messages[1], registry)


def test_a_decoded_message_is_rejected_for_what_its_dict_is_rejected(world: dict[str, Any]) -> None:
    registry = Registry.load()
    bad = fts_variant(5, file_size="a lot", vo=7)
    decoded = msgspec.json.decode(orjson.dumps(bad), type=FtsMessage)
    with pytest.raises(ItemError) as from_message:
        parse_fts(decoded, registry)
    with pytest.raises(ItemError) as from_dict:
        parse_fts(bad, registry)
    assert str(from_message.value) == str(from_dict.value) == "file_size: not a number: 'a lot'"


def test_a_body_with_an_item_that_is_no_object_is_decoded_the_generic_way(world: dict[str, Any]) -> None:
    body = orjson.dumps([FTS_COMPLETE, 42, fts_variant(6)])
    assert fts_messages_decode(body) is None
    items = items_from_body(body, ndjson=False, format="fts")
    assert [type(item) for item in items] == [dict, int, dict]
    result = ingest_items(format="fts", items=items, user=None)
    assert (result.accepted, result.rejected) == (2, [{"index": 1, "error": "not a JSON object"}])


def test_ndjson_lines_are_decoded_one_by_one_and_a_bad_line_rejected_by_index(world: dict[str, Any]) -> None:
    lines = [orjson.dumps(fts_variant(7)), b"{not json", orjson.dumps(copy.deepcopy(FTS_COMPLETE))]
    items = items_from_body(b"\n".join(lines), ndjson=True, format="fts")
    assert type(items[0]) is FtsMessage and type(items[2]) is FtsMessage
    result = ingest_items(format="fts", items=items, user=None)
    assert result.accepted == 2
    assert [entry["index"] for entry in result.rejected] == [1]
