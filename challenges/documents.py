"""The plan document: a challenge with its activities and targets as one file (JSON, or the same in YAML).

Loading turns text into a mapping; validation checks the whole mapping against the planning rules of
`challenges.validation` and the registry, collects every problem with its place
(`activities[0].targets[1].rate`) and gives back typed entries for `challenges.plan.plan_import`. Rates are in
bytes per second, sizes in bytes, windows in seconds, times ISO 8601 with a timezone (stored in UTC).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db.models.functions import Lower

from common.documents import DocumentError, DocumentValidator, document_load, is_number, type_name
from sites.models import Experiment, Site

from . import validation
from .choices import ActivityKind, CopyMode
from .injection import injection_settings_problems
from .models import ACTIVITY_PLAN_FIELDS, Challenge, Target
from .thresholds import thresholds_problems

DOCUMENT_KEYS = (
    "name",
    "slug",
    "start",
    "end",
    "max_window",
    "stable_window",
    "description",
    "compare_with",
    "alerts",
    "activities",
)
DOCUMENT_REQUIRED_KEYS = ("name", "slug", "start", "end", "activities")
ACTIVITY_KEYS = ("name", *ACTIVITY_PLAN_FIELDS, "injection", "targets")
ACTIVITY_REQUIRED_KEYS = ("name", "experiment", "mode", "kind", "start", "end", "targets")
TARGET_KEYS = ("site", "direction", "link", "rate", "nominal_rate", "factors")
LINK_KEYS = ("from", "to")

DEFAULT_MAX_WINDOW = 3600
DEFAULT_STABLE_WINDOW = 18000

# Column sizes of the models, so that an over-long or too large value is a document error, not a database error.
NAME_LENGTH = 200
SLUG_LENGTH = 64
MODE_LENGTH = 32
INTEGER_MAXIMUM = 2**31 - 1  # PositiveIntegerField
BIG_INTEGER_MAXIMUM = 2**63 - 1  # PositiveBigIntegerField
ACTIVITY_INTEGER_KEYS = {
    "file_size": BIG_INTEGER_MAXIMUM,
    "file_count": INTEGER_MAXIMUM,
    "concurrency": INTEGER_MAXIMUM,
}

_DOCUMENT_SHAPE = "a mapping (a challenge with its activities)"
# Where a rule's field lands in a target of the document.
_TARGET_FIELD_PLACES = {"link_from": "link.from", "link_to": "link.to"}
# Activity bounds when the challenge's own times are unusable, so that the other activity rules still run.
_UNBOUNDED = (datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC))


class PlanDocumentError(DocumentError):
    """A plan document that cannot be imported. `errors` lists every problem as
    `{"place": "activities[0].targets[1].rate", "error": "reason"}`; the place `document` is the whole document."""

    kind = "plan document"


@dataclass(frozen=True)
class TargetEntry:
    """A target as the document gives it, with its sites looked up and its rate derived when it was left out."""

    rate: float
    site: Site | None = None
    direction: str = ""
    link_from: Site | None = None
    link_to: Site | None = None
    nominal_rate: float | None = None
    factors: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ActivityEntry:
    """An activity as the document gives it, with its experiment and source looked up."""

    name: str
    experiment: Experiment
    mode: str
    kind: str
    start: datetime
    end: datetime
    source: Site | None = None
    file_size: int | None = None
    file_count: int | None = None
    concurrency: int | None = None
    copy_mode: str = ""
    auto_run: bool = False
    auto_run_repeat: bool = False
    ddm_activities: list[str] = field(default_factory=list)
    injection: dict[str, Any] = field(default_factory=dict)  # challenges.injection's settings it overrides
    targets: list[TargetEntry] = field(default_factory=list)


@dataclass(frozen=True)
class ParsedPlan:
    """A validated plan document: the challenge's fields and its activities. Times are in UTC."""

    name: str
    slug: str
    start: datetime
    end: datetime
    max_window: int = DEFAULT_MAX_WINDOW
    stable_window: int = DEFAULT_STABLE_WINDOW
    description: str = ""
    compare_with: Challenge | None = None
    activities: list[ActivityEntry] = field(default_factory=list)
    alert_thresholds: dict[str, float] = field(default_factory=dict)


def plan_document_load(*, text: str | bytes, content_type: str | None = None) -> dict[str, Any]:
    """Parse a plan document. A content type naming JSON or YAML decides the format; otherwise JSON is tried
    first and YAML (a superset) second. Raises PlanDocumentError when the text is not a mapping."""
    return document_load(text=text, content_type=content_type, error=PlanDocumentError, shape=_DOCUMENT_SHAPE)


def plan_document_validate(*, document: Any) -> ParsedPlan:
    """Check a whole plan document against the planning rules and the registry, and return it as typed entries.

    Raises PlanDocumentError listing every problem found, in document order. Reads the database (experiments,
    sites, which sites serve which experiments, the challenge to compare with) in at most four queries.
    """
    return _Validator(document).validate()


def _mappings(value: Any) -> Iterator[dict[Any, Any]]:
    """The mappings in a list, skipping anything else (for the lenient scan ahead of validation)."""
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, dict))


class _Validator(DocumentValidator):
    """One pass over a document, in document order. The names the document refers to are gathered first and
    looked up together, so that the pass itself does not query."""

    error = PlanDocumentError
    yaml_exponent_example = "3.5e+9"

    def __init__(self, document: Any) -> None:
        super().__init__()
        self._document = document
        self._experiments: dict[str, Experiment] = {}  # by lower-case name
        self._sites: dict[str, Site] = {}
        self._serving: dict[int, set[int]] = {}
        self._compare_with: Challenge | None = None

    def validate(self) -> ParsedPlan:
        document = self.document_mapping(self._document, _DOCUMENT_SHAPE)
        self._look_up_references(document)
        plan = self._challenge(document)
        self.raise_if_errors()
        assert plan is not None  # no errors means every part was parsed
        return plan

    def _look_up_references(self, document: dict[Any, Any]) -> None:
        experiment_names: set[str] = set()
        site_names: set[str] = set()
        for activity in _mappings(document.get("activities")):
            if isinstance(activity.get("experiment"), str):
                experiment_names.add(activity["experiment"].lower())
            if isinstance(activity.get("source"), str):
                site_names.add(activity["source"])
            for target in _mappings(activity.get("targets")):
                if isinstance(target.get("site"), str):
                    site_names.add(target["site"])
                link = target.get("link")
                if isinstance(link, dict):
                    site_names.update(end for end in (link.get("from"), link.get("to")) if isinstance(end, str))
        if experiment_names:
            self._experiments = {
                experiment.lower_name: experiment
                for experiment in Experiment.objects.annotate(lower_name=Lower("name")).filter(
                    lower_name__in=experiment_names
                )
            }
        if site_names:
            self._sites = Site.objects.in_bulk(site_names, field_name="name")
            self._serving = validation.serving_index()
        compare_with = document.get("compare_with")
        if isinstance(compare_with, str) and compare_with:
            self._compare_with = Challenge.objects.filter(slug=compare_with).first()

    # Values

    def _text(self, mapping: dict[Any, Any], key: str, place: str, max_length: int) -> str | None:
        if key not in mapping:
            return None
        return self.name_value(mapping[key], place, max_length)

    def _time(self, mapping: dict[Any, Any], key: str, place: str) -> datetime | None:
        if key not in mapping:
            return None
        value = mapping[key]
        moment: datetime | None = None
        if isinstance(value, datetime):  # YAML reads an unquoted timestamp itself
            moment = value
        elif isinstance(value, str):
            try:
                moment = datetime.fromisoformat(value)
            except ValueError:
                moment = None
        if moment is None:
            shown = value.isoformat() if isinstance(value, date) else repr(value)
            self.add(place, f"must be an ISO 8601 date and time such as 2022-03-07T00:00:00Z, not {shown}")
            return None
        if moment.tzinfo is None or moment.utcoffset() is None:
            self.add(place, "must carry a timezone, such as 2022-03-07T00:00:00Z or 2022-03-07T01:00:00+01:00")
            return None
        if moment.microsecond:
            self.add(place, "must be in whole seconds")
            return None
        return moment.astimezone(UTC)

    def _integer(self, mapping: dict[Any, Any], key: str, place: str, maximum: int) -> int | None:
        value = mapping.get(key)
        if value is None:
            return None
        # 5e9 is a natural way to write a size: an integral float counts as an integer.
        if not is_number(value) or value != int(value) or not 0 < value <= maximum:
            self.add(place, f"must be a positive integer up to {maximum}, not {value!r}{self.yaml_hint(value)}")
            return None
        return int(value)

    def _list(self, mapping: dict[Any, Any], key: str, place: str) -> list[Any]:
        return self.list_value(mapping.get(key), place)

    def _site(self, value: Any, place: str) -> Site | None:
        if not isinstance(value, str) or not value:
            self.add(place, f"must be a site name, not {type_name(value)}")
            return None
        site = self._sites.get(value)
        if site is None:
            self.add(place, f"no site named {value!r} in the registry")
        return site

    # Parts

    def _challenge(self, document: dict[Any, Any]) -> ParsedPlan | None:
        errors_before = len(self._errors)
        self.unknown_keys(document, DOCUMENT_KEYS, "")
        self.required(document, DOCUMENT_REQUIRED_KEYS, "")
        name = self._text(document, "name", "name", NAME_LENGTH)
        slug = self._slug(document)
        start = self._time(document, "start", "start")
        end = self._time(document, "end", "end")
        windows = {key: self._integer(document, key, key, INTEGER_MAXIMUM) for key in ("max_window", "stable_window")}
        for key, problem in validation.challenge_problems(
            start=start, end=end, max_window=windows["max_window"], stable_window=windows["stable_window"]
        ):
            self.add(key, problem)
        description = document.get("description")
        if description is not None and not isinstance(description, str):
            self.add("description", f"must be a string, not {type_name(description)}")
        compare_with = self._compare_with_check(document, slug)
        alerts = document.get("alerts", {})
        for problem in thresholds_problems(alerts):
            self.add("alerts", problem)
        usable_window = start is not None and end is not None and end > start
        bounds = (start, end) if usable_window else _UNBOUNDED
        activities = self._activities(document, bounds)  # type: ignore[arg-type]  # bounds are set when usable
        if len(self._errors) != errors_before:
            return None
        return ParsedPlan(
            name=name,  # type: ignore[arg-type]  # required and checked above
            slug=slug,  # type: ignore[arg-type]
            start=start,  # type: ignore[arg-type]
            end=end,  # type: ignore[arg-type]
            max_window=DEFAULT_MAX_WINDOW if windows["max_window"] is None else windows["max_window"],
            stable_window=DEFAULT_STABLE_WINDOW if windows["stable_window"] is None else windows["stable_window"],
            description=description or "",
            compare_with=compare_with,
            activities=activities,
            alert_thresholds=dict(alerts),
        )

    def _slug(self, document: dict[Any, Any]) -> str | None:
        slug = self._text(document, "slug", "slug", SLUG_LENGTH)
        if slug is None:
            return None
        try:
            validate_slug(slug)
        except ValidationError:
            self.add("slug", f"must be letters, digits, hyphens or underscores, not {slug!r}")
            return None
        return slug

    def _compare_with_check(self, document: dict[Any, Any], slug: str | None) -> Challenge | None:
        value = document.get("compare_with")
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            self.add("compare_with", f"must be the slug of an existing challenge, not {type_name(value)}")
        elif value == slug:
            self.add("compare_with", "a challenge cannot be compared with itself")
        elif self._compare_with is None:
            self.add("compare_with", f"no challenge with the slug {value!r}")
        else:
            return self._compare_with
        return None

    def _activities(self, document: dict[Any, Any], bounds: tuple[datetime, datetime]) -> list[ActivityEntry]:
        activities: list[ActivityEntry] = []
        first_place: dict[str, str] = {}
        for index, entry in enumerate(self._list(document, "activities", "activities")):
            place = f"activities[{index}]"
            if self.mapping_value(entry, place) is None:
                continue
            name = self._text(entry, "name", f"{place}.name", NAME_LENGTH)
            if name is not None and name in first_place:
                self.add(f"{place}.name", f"{name!r} repeats {first_place[name]}")
            elif name is not None:
                first_place[name] = f"{place}.name"
            activity = self._activity(entry, place, bounds)
            if activity is not None and name is not None:
                activities.append(activity)
        return activities

    def _activity(self, mapping: dict[Any, Any], place: str, bounds: tuple[datetime, datetime]) -> ActivityEntry | None:
        errors_before = len(self._errors)
        self.unknown_keys(mapping, ACTIVITY_KEYS, place)
        self.required(mapping, ACTIVITY_REQUIRED_KEYS, place)
        experiment = None
        if "experiment" in mapping:
            value = mapping["experiment"]
            if not isinstance(value, str) or not value:
                self.add(f"{place}.experiment", f"must be an experiment name, not {type_name(value)}")
            elif (experiment := self._experiments.get(value.lower())) is None:
                self.add(f"{place}.experiment", f"no experiment named {value!r} in the registry")
        mode = self._text(mapping, "mode", f"{place}.mode", MODE_LENGTH)
        kind = mapping.get("kind")
        if "kind" in mapping and kind not in ActivityKind.values:
            self.add(f"{place}.kind", f"must be one of {', '.join(ActivityKind.values)}, not {kind!r}")
        start = self._time(mapping, "start", f"{place}.start")
        end = self._time(mapping, "end", f"{place}.end")
        source = None
        if mapping.get("source") is not None:
            source = self._site(mapping["source"], f"{place}.source")
        for key, problem in validation.activity_problems(
            challenge_start=bounds[0],
            challenge_end=bounds[1],
            start=start,
            end=end,
            experiment=experiment,
            source=source,
            serving=self._serving,
            ddm_activities=mapping.get("ddm_activities"),
        ):
            self.add(f"{place}.{key}", problem)
        integers = {
            key: self._integer(mapping, key, f"{place}.{key}", maximum)
            for key, maximum in ACTIVITY_INTEGER_KEYS.items()
        }
        copy_mode = mapping.get("copy_mode") or ""
        if copy_mode and copy_mode not in CopyMode.values:
            self.add(f"{place}.copy_mode", f"must be one of {', '.join(CopyMode.values)}, not {copy_mode!r}")
        auto_run, repeat = mapping.get("auto_run"), mapping.get("auto_run_repeat")
        for key, value in (("auto_run", auto_run), ("auto_run_repeat", repeat)):
            if value is not None and not isinstance(value, bool):
                self.add(f"{place}.{key}", f"must be true or false, not {value!r}")
        if repeat is True and auto_run is not True:
            self.add(f"{place}.auto_run_repeat", "repeats the clock's runs: give auto_run: true as well")
        for key, problem in injection_settings_problems(mapping.get("injection")):
            self.add(f"{place}.{key}", problem)
        targets = self._targets(mapping, place, experiment)
        if len(self._errors) != errors_before:
            return None
        return ActivityEntry(
            name=mapping["name"],
            experiment=experiment,  # type: ignore[arg-type]  # required and checked above
            mode=mode,  # type: ignore[arg-type]
            kind=kind,  # type: ignore[arg-type]
            start=start,  # type: ignore[arg-type]
            end=end,  # type: ignore[arg-type]
            source=source,
            copy_mode=copy_mode,
            auto_run=bool(auto_run),
            auto_run_repeat=bool(repeat),
            ddm_activities=list(mapping.get("ddm_activities") or []),
            injection=dict(mapping.get("injection") or {}),
            targets=targets,
            **integers,
        )

    def _targets(self, mapping: dict[Any, Any], place: str, experiment: Experiment | None) -> list[TargetEntry]:
        targets: list[TargetEntry] = []
        first_place: dict[tuple[Any, ...], str] = {}
        for index, entry in enumerate(self._list(mapping, "targets", f"{place}.targets")):
            target_place = f"{place}.targets[{index}]"
            if self.mapping_value(entry, target_place) is None:
                continue
            target = self._target(entry, target_place, experiment)
            if target is None:
                continue
            key = validation.target_key(
                site=target.site, direction=target.direction, link_from=target.link_from, link_to=target.link_to
            )
            if key in first_place:
                where = "site" if target.site is not None else "link"
                self.add(f"{target_place}.{where}", f"a second target for the same {where}; see {first_place[key]}")
            else:
                first_place[key] = target_place
                targets.append(target)
        return targets

    def _target(self, mapping: dict[Any, Any], place: str, experiment: Experiment | None) -> TargetEntry | None:
        errors_before = len(self._errors)
        self.unknown_keys(mapping, TARGET_KEYS, place)
        site = link_from = link_to = None
        if mapping.get("site") is not None:
            site = self._site(mapping["site"], f"{place}.site")
        link = mapping.get("link")
        if link is not None:
            if not isinstance(link, dict):
                self.add(
                    f"{place}.link",
                    f'must be a mapping such as {{"from": "CERN", "to": "BNL"}}, not {type_name(link)}',
                )
            else:
                self.unknown_keys(link, LINK_KEYS, f"{place}.link")
                self.required(link, LINK_KEYS, f"{place}.link")
                if "from" in link:
                    link_from = self._site(link["from"], f"{place}.link.from")
                if "to" in link:
                    link_to = self._site(link["to"], f"{place}.link.to")
        reference_failed = len(self._errors) != errors_before
        direction = mapping.get("direction")
        if site is None and link is not None and direction is not None:
            self.add(f"{place}.direction", "only a site has a direction; a link goes from one site to the other")
        nominal_rate = mapping.get("nominal_rate")
        factors = mapping.get("factors")
        rate_given = "rate" in mapping
        problems = validation.target_problems(
            experiment=experiment,
            site=site,
            direction=direction if isinstance(direction, str) else "",
            link_from=link_from,
            link_to=link_to,
            rate=mapping.get("rate"),
            nominal_rate=nominal_rate,
            factors=factors,
            serving=self._serving,
        )
        rate: Any = mapping.get("rate")
        if not rate_given:
            # Without a rate, nominal x factors is the rate, once the rules accept the nominal rate and factors.
            problems = [problem for problem in problems if problem[0] != "rate"]
            if nominal_rate is None:
                problems.append(("rate", "required unless nominal_rate is given"))
            elif not any(field_name in ("nominal_rate", "factors") for field_name, _ in problems):
                rate = Target(nominal_rate=nominal_rate, factors=factors or {}).derived_rate
        if reference_failed and site is None:
            # The site or a link end is already reported; "a site or a link" would say it twice.
            problems = [problem for problem in problems if problem[0] != "site"]
        for field_name, problem in problems:
            self.add(
                self._target_field_place(mapping, place, field_name),
                f"{problem}{self.yaml_hint(mapping.get(field_name))}",
            )
        if len(self._errors) != errors_before:
            return None
        return TargetEntry(
            rate=float(rate),
            site=site,
            direction=direction or "",
            link_from=link_from,
            link_to=link_to,
            nominal_rate=None if nominal_rate is None else float(nominal_rate),
            factors=dict(factors or {}),
        )

    @staticmethod
    def _target_field_place(mapping: dict[Any, Any], place: str, field_name: str) -> str:
        if field_name == "site" and "site" not in mapping:
            # "a site and a direction, or a link": about the target as a whole unless it has a link.
            return f"{place}.link" if "link" in mapping else place
        return f"{place}.{_TARGET_FIELD_PLACES.get(field_name, field_name)}"


__all__ = [
    "ActivityEntry",
    "ParsedPlan",
    "PlanDocumentError",
    "TargetEntry",
    "plan_document_load",
    "plan_document_validate",
]
