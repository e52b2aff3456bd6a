"""FTS transfer-complete messages decoded straight into the fields the parser reads (msgspec), skipping the rest.

An FTS message has about 70 fields, of which parse_fts reads 22: decoding a batch into dicts of all of them (orjson)
took longer than parsing it. FtsMessage holds the 22, each of any JSON type (the parser checks each value and says
what is wrong with it, item by item, as it did of a dict), and answers get() as a dict does, so parse_fts reads either.
A body that is not a JSON array of objects is not decoded here: the generic path (orjson) then tells the sender what
is wrong with the body, or rejects its items that are not objects by their index.
"""

from __future__ import annotations

from typing import Any

import msgspec


class FtsMessage(msgspec.Struct, gc=False):
    """The fields of an FTS3 transfer-complete message that parse_fts reads (a test keeps the list whole); None: absent
    or null, as dict.get() would say."""

    tr_id: Any = None
    t_final_transfer_state: Any = None
    file_metadata: Any = None
    file_size: Any = None
    f_size: Any = None
    timestamp_tr_st: Any = None
    timestamp_tr_comp: Any = None
    tr_timestamp_start: Any = None
    tr_timestamp_complete: Any = None
    src_url: Any = None
    dst_url: Any = None
    job_id: Any = None
    retry: Any = None
    retry_max: Any = None
    job_state: Any = None
    is_recoverable: Any = None
    vo: Any = None
    t__error_message: Any = None
    activity: Any = None
    tr_error_category: Any = None
    tr_error_scope: Any = None
    t_failure_phase: Any = None

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self, name, default)


_ARRAY = msgspec.json.Decoder(list[FtsMessage])
_ONE = msgspec.json.Decoder(FtsMessage)


def fts_messages_decode(body: bytes) -> list[FtsMessage] | None:
    """The messages of a JSON array of FTS messages; None when the body is not one (not JSON, not an array, an item
    that is not an object): the caller then decodes it the generic way."""
    try:
        return _ARRAY.decode(body)
    except msgspec.DecodeError:  # ValidationError too: an item that is not an object
        return None


def fts_message_decode(text: bytes) -> FtsMessage | None:
    """One FTS message (a line of NDJSON, a STOMP message's body); None when it is not a JSON object."""
    try:
        return _ONE.decode(text)
    except msgspec.DecodeError:
        return None
