"""The coordinators' forms for challenges, activities and targets. Their clean() asks challenges.validation, the
same rules as the API and the plan document, and puts each problem next to its field."""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from typing import Any

from django import forms

from sites.models import Site

from . import validation
from .choices import KNOWN_MODES
from .models import ACTIVITY_PLAN_FIELDS, Activity, Challenge, Target

DATETIME_FORMAT = "%Y-%m-%dT%H:%M"


class UtcDateTimeInput(forms.DateTimeInput):
    """A browser date-time picker; the portal's time zone is UTC, so the value is read as UTC."""

    input_type = "datetime-local"

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs=attrs, format=DATETIME_FORMAT)


class _ProblemsMixin:
    """Puts (field, message) problems from challenges.validation next to their field (or on top when the form
    has no such field)."""

    def add_problems(self, problems: list[validation.Problem]) -> None:
        form: Any = self
        for field, message in problems:
            form.add_error(field if field in form.fields else None, message)


class ChallengeForm(_ProblemsMixin, forms.ModelForm):
    class Meta:
        model = Challenge
        fields = ["name", "slug", "start", "end", "description", "compare_with", "max_window", "stable_window"]
        widgets = {"start": UtcDateTimeInput(), "end": UtcDateTimeInput(), "description": forms.Textarea({"rows": 3})}
        help_texts = {"start": "UTC", "end": "UTC"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        others = Challenge.objects.all()
        if self.instance.pk:
            others = others.exclude(pk=self.instance.pk)
        self.fields["compare_with"].queryset = others  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        self.add_problems(
            validation.challenge_problems(
                start=cleaned.get("start"),
                end=cleaned.get("end"),
                max_window=cleaned.get("max_window"),
                stable_window=cleaned.get("stable_window"),
            )
        )
        start, end = cleaned.get("start"), cleaned.get("end")
        if self.instance.pk and start is not None and end is not None and end > start:
            # Moving the window must not strand an activity outside it.
            for activity in Activity.objects.filter(challenge=self.instance).select_related("experiment"):
                for field, message in validation.activity_problems(
                    challenge_start=start,
                    challenge_end=end,
                    start=activity.start,
                    end=activity.end,
                    experiment=None,
                    source=None,
                    serving={},
                ):
                    self.add_error(field, f"activity {activity.name}: {message}")
        return cleaned


class ActivityForm(_ProblemsMixin, forms.ModelForm):
    class Meta:
        model = Activity
        fields = [
            "name",
            *ACTIVITY_PLAN_FIELDS,
        ]
        widgets = {
            "start": UtcDateTimeInput(),
            "end": UtcDateTimeInput(),
            "mode": forms.TextInput({"list": "known-modes"}),
        }
        help_texts = {
            "start": "UTC",
            "end": "UTC",
            "file_size": "bytes",
            "ddm_activities": "FTS / Rucio activity names, comma-separated (e.g. T0 Export, Data Challenge); "
            "empty: the ingested transfers of any activity name count",
        }

    known_modes = KNOWN_MODES

    def __init__(self, *args: Any, challenge: Challenge, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.challenge = challenge
        self.instance.challenge = challenge
        if not self.instance.pk and not self.is_bound:
            self.initial.setdefault("start", challenge.start)
            self.initial.setdefault("end", challenge.end)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        self.add_problems(
            validation.activity_problems(
                challenge_start=self.challenge.start,
                challenge_end=self.challenge.end,
                start=cleaned.get("start"),
                end=cleaned.get("end"),
                experiment=cleaned.get("experiment"),
                source=cleaned.get("source"),
                serving=validation.serving_index(),
                ddm_activities=cleaned.get("ddm_activities"),
            )
        )
        name = cleaned.get("name")
        if name and Activity.objects.filter(challenge=self.challenge, name=name).exclude(pk=self.instance.pk).exists():
            self.add_error("name", f"the challenge already has an activity named {name}")
        return cleaned


def _gbytes_to_bytes(value: Decimal | None) -> float | None:
    """GB/s as typed to B/s, exactly (0.29 GB/s is 290000000 B/s, not 290000000.00000006)."""
    return None if value is None else float(value * 10**9)


class TargetForm(_ProblemsMixin, forms.ModelForm):
    """A site and direction, or a link from/to; the rate in GB/s (stored in B/s). With a nominal rate and factors
    the rate may be left empty: it is nominal x factors."""

    rate = forms.DecimalField(label="Rate (GB/s)", required=False, help_text="GB/s = 10⁹ bytes per second")
    nominal_rate = forms.DecimalField(label="Nominal rate (GB/s)", required=False)
    factors = forms.CharField(
        required=False,
        help_text="e.g. headroom=1.5, efficiency=2 (or JSON)",
        widget=forms.TextInput({"placeholder": "headroom=1.5, efficiency=2"}),
    )

    class Meta:
        model = Target
        fields = ["site", "direction", "link_from", "link_to"]
        labels = {"link_from": "Link from", "link_to": "Link to"}

    def __init__(self, *args: Any, activity: Activity, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.activity = activity
        self.instance.activity = activity
        sites = Site.objects.order_by("name")
        for name in ("site", "link_from", "link_to"):
            self.fields[name].queryset = sites  # type: ignore[attr-defined]
        if self.instance.pk and not self.is_bound:
            self.initial["rate"] = Decimal(repr(self.instance.rate)) / 10**9
            if self.instance.nominal_rate is not None:
                self.initial["nominal_rate"] = Decimal(repr(self.instance.nominal_rate)) / 10**9
            self.initial["factors"] = ", ".join(f"{key}={value:g}" for key, value in self.instance.factors.items())

    def clean_factors(self) -> dict[str, Any] | None:
        text = (self.cleaned_data.get("factors") or "").strip()
        if not text:
            return {}
        if text.startswith("{"):
            try:
                parsed = json.loads(text)
            except ValueError as exc:
                raise forms.ValidationError(f"not valid JSON: {exc}") from None
            return parsed if isinstance(parsed, dict) else {"": parsed}
        factors: dict[str, Any] = {}
        for part in text.split(","):
            name, _, value = part.strip().replace("=", " ").partition(" ")
            try:
                factors[name.strip()] = float(Decimal(value.strip()))
            except (InvalidOperation, ValueError):
                raise forms.ValidationError(f"{part.strip()!r} is not name=number") from None
        return factors

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if "factors" not in cleaned:  # unparsable: its own error is shown already
            return cleaned
        rate = _gbytes_to_bytes(cleaned.get("rate"))
        nominal = _gbytes_to_bytes(cleaned.get("nominal_rate"))
        factors = cleaned.get("factors") or {}
        if rate is None and cleaned.get("nominal_rate") is not None and isinstance(factors, dict):
            try:  # the rate left empty: nominal x factors
                rate = float(cleaned["nominal_rate"] * 10**9 * _product(factors))
            except (TypeError, InvalidOperation, ValueError):
                rate = None
        site, link_from, link_to = cleaned.get("site"), cleaned.get("link_from"), cleaned.get("link_to")
        direction = cleaned.get("direction") or ""
        self.add_problems(
            validation.target_problems(
                experiment=self.activity.experiment,
                site=site,
                direction=direction,
                link_from=link_from,
                link_to=link_to,
                rate=rate,
                nominal_rate=nominal,
                factors=factors,
                serving=validation.serving_index(),
            )
        )
        key = validation.target_key(site=site, direction=direction, link_from=link_from, link_to=link_to)
        siblings = Target.objects.filter(activity=self.activity).exclude(pk=self.instance.pk)
        for other in siblings.select_related("site", "link_from", "link_to"):
            other_key = validation.target_key(
                site=other.site, direction=other.direction, link_from=other.link_from, link_to=other.link_to
            )
            if other_key == key:
                self.add_error("site" if site is not None else "link_to", f"the activity already has {other.place}")
        self.rate_bytes, self.nominal_bytes, self.factors_value = rate, nominal, factors
        return cleaned

    def save(self, commit: bool = True) -> Target:
        target: Target = super().save(commit=False)
        assert self.rate_bytes is not None
        target.rate = self.rate_bytes
        target.nominal_rate = self.nominal_bytes
        target.factors = self.factors_value
        if commit:
            target.save()
        return target


def _product(factors: dict[str, Any]) -> Decimal:
    result = Decimal(1)
    for value in factors.values():
        result *= Decimal(repr(float(value)))
    return result
