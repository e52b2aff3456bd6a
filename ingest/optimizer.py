"""FTS optimizer decisions (rows of FTS's t_optimizer_evolution, as a JSON object each): the parser, and the batch
that hands them to results.services.optimizer_decisions_store.

FTS's optimizer (cern-fts/fts3 src/server/services/optimizer) sets the active transfers of each link and records
every decision: source_se, dest_se, datetime, ema, active, actual_active, queue_size, throughput, success,
filesize_avg, filesize_stddev, rationale, diff. `timestamp` is taken for `datetime`; either is epoch milliseconds
(a number or a string of one) or ISO 8601 ("2024-05-14 10:02:00", naive times are UTC).

Who may send what: a coordinator (or the operator's `manage.py consume`) any decision, stored with the experiment its
`vo` names (none: no experiment; FTS's optimizer works per link, whoever's files). A DDM token's decisions are stored
with its own experiment (a `vo` of another experiment is rejected, as for records), and only for its experiment's
links: a decision whose matched sites are not both sites of that experiment is rejected by its index. Storage
elements that match no registered endpoint are not an error: the decision is stored with no site, like a record.
Unlike records, such a decision keeps no site when the endpoint is registered later (records_attach does not look
at decisions, and the same decision sent again is a duplicate): register the storage before FTS reports on it."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from results.choices import Origin
from results.services import optimizer_decisions_store
from results.store.rows import DecisionRow
from sites.matching import url_host
from sites.models import Site

from .errors import ItemError
from .parsers import _epoch_ms, _iso
from .registry import Registry

SE_LENGTH = 512  # OptimizerDecision.source_se, dest_se
HOST_LENGTH = 255
RATIONALE_LENGTH = 2000
INTEGER_MAX = 2**31 - 1  # the integer columns (active, actual_active, queue_size, diff)
FLOAT_FIELDS = ("ema", "throughput", "success", "filesize_avg", "filesize_stddev")
COUNT_FIELDS = ("actual_active", "queue_size")


def _number(item: Mapping[str, Any], name: str) -> float | None:
    value = item.get(name)
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ItemError(f"{name}: not a number: {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise ItemError(f"{name}: not a number: {value!r}") from None
    if not math.isfinite(number):
        raise ItemError(f"{name}: not a finite number: {value!r}")
    return number


def _count(item: Mapping[str, Any], name: str, *, required: bool = False, signed: bool = False) -> int | None:
    number = _number(item, name)
    if number is None:
        if required:
            raise ItemError(f"{name}: missing")
        return None
    if number != int(number):
        raise ItemError(f"{name}: a whole number, not {item.get(name)!r}")
    if (number < 0 and not signed) or abs(number) > INTEGER_MAX:
        lowest = -INTEGER_MAX if signed else 0
        raise ItemError(f"{name}: must be between {lowest} and {INTEGER_MAX}, not {item.get(name)!r}")
    return int(number)


def _storage_element(item: Mapping[str, Any], name: str) -> tuple[str, str]:
    value = item.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ItemError(f"{name}: missing (a storage element such as davs://host or root://host:port)")
    value = value.strip()
    if "\x00" in value:
        raise ItemError(f"{name}: contains a NUL character")
    if len(value) > SE_LENGTH:
        raise ItemError(f"{name}: {len(value)} characters (at most {SE_LENGTH})")
    host = url_host(value)
    if not host:
        raise ItemError(f"{name}: no host in {value!r} (a storage element such as davs://host)")
    if len(host) > HOST_LENGTH:
        raise ItemError(f"{name}: a host name of {len(host)} characters (at most {HOST_LENGTH})")
    return value, host


def _moment(item: Mapping[str, Any]) -> Any:
    name = "datetime" if item.get("datetime") not in (None, "") else "timestamp"
    value = item.get(name)
    if value is None or value == "":
        raise ItemError("datetime: missing (or timestamp: epoch milliseconds or ISO 8601)")
    if isinstance(value, bool):
        raise ItemError(f"{name}: not a time: {value!r}")
    if isinstance(value, int | float) or (isinstance(value, str) and value.strip().replace(".", "", 1).isdigit()):
        milliseconds = _number(item, name)
        assert milliseconds is not None
        if milliseconds < 0:
            raise ItemError(f"{name}: a time before 1970: {value!r}")
        return _epoch_ms(milliseconds, name)
    return _iso(value, name)


def parse_fts_optimizer(item: Mapping[str, Any], registry: Registry, *, experiment: int | None) -> DecisionRow:
    """One optimizer decision; its sites matched from the storage elements' hosts (and ports) as FTS records'
    are. `experiment`: the experiment it is stored with when its `vo` names none."""
    source_se, source_host = _storage_element(item, "source_se")
    dest_se, destination_host = _storage_element(item, "dest_se")
    values: dict[str, Any] = {name: _number(item, name) for name in FLOAT_FIELDS}
    for name, value in values.items():
        if value is not None and value < 0:
            raise ItemError(f"{name}: must be a number >= 0, not {item.get(name)!r}")
    if values["success"] is not None and values["success"] > 100:
        raise ItemError(f"success: a percentage (0 to 100), not {item.get('success')!r}")
    rationale = item.get("rationale")
    if rationale is not None and not isinstance(rationale, str):
        raise ItemError(f"rationale: not a string: {rationale!r}")
    vo = item.get("vo")
    source = registry.storage(source_se)
    destination = registry.storage(dest_se)
    return DecisionRow(
        experiment_id=registry.experiment(vo) if vo not in (None, "") else experiment,
        source_site_id=source[0] if source else None,
        destination_site_id=destination[0] if destination else None,
        source_se=source_se,
        dest_se=dest_se,
        source_host=source_host,
        destination_host=destination_host,
        at=_moment(item),
        active=_count(item, "active", required=True),
        actual_active=_count(item, "actual_active"),
        queue_size=_count(item, "queue_size"),
        diff=_count(item, "diff", signed=True),
        rationale=(rationale or "").replace("\x00", "").strip()[:RATIONALE_LENGTH],
        origin=Origin.FTS.value,
        **values,
    )


def optimizer_items_ingest(*, items: Sequence[Any], allowed: set[int] | None, registry: Registry, result: Any) -> None:
    """Parse a batch of decisions into `result` (an ingest.services.IngestResult) and store the valid ones (one
    transaction). allowed: the experiments of a DDM token (None: a coordinator or the operator)."""
    own = next(iter(allowed)) if allowed is not None and len(allowed) == 1 else None
    experiment_sites: set[int] = set()
    if allowed is not None:
        experiment_sites = set(
            Site.experiments.through.objects.filter(experiment_id__in=allowed).values_list("site_id", flat=True)
        )
    rows: list[DecisionRow] = []
    for index, item in enumerate(items):
        try:
            if not isinstance(item, Mapping):
                raise ItemError(getattr(item, "error", None) or "not a JSON object")
            row = parse_fts_optimizer(item, registry, experiment=own)
            if allowed is not None:
                _ddm_scope_check(row, allowed, experiment_sites, registry)
        except ItemError as exc:
            result.rejected.append({"index": index, "error": str(exc)})
            continue
        except (KeyError, TypeError, AttributeError, ValueError, OverflowError) as exc:
            result.rejected.append({"index": index, "error": f"malformed message: {exc!r}"})
            continue
        rows.append(row)
    summary = optimizer_decisions_store(rows=rows)
    result.accepted, result.duplicates = summary.stored, summary.duplicates


def _ddm_scope_check(row: DecisionRow, allowed: set[int], experiment_sites: set[int], registry: Registry) -> None:
    mine = ", ".join(sorted(registry.experiment_names.get(pk, str(pk)) for pk in allowed)) or "none"
    if row.experiment_id not in allowed:
        name = registry.experiment_names.get(row.experiment_id or 0, "none")
        raise ItemError(f"experiment {name}: this token sends decisions of {mine} only")
    for side, site in (("source_se", row.source_site_id), ("dest_se", row.destination_site_id)):
        if site is not None and site not in experiment_sites:
            raise ItemError(f"{side}: the storage of a site that is not one of {mine}'s: not this token's link")
