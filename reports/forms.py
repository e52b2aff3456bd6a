"""The site report form and its formsets (rates, outages, problems, actions). The rules live in
reports.validation and are applied by reports.services.report_save; its problems come back to the field of the
row they are about. Rates are typed in GB/s (10^9 B/s) and stored in B/s; times are UTC."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

from challenges.forms import UtcDateTimeInput
from challenges.models import Challenge, Target
from sites.models import Site

from .choices import ProblemCategory, RateDirection
from .models import SiteReport

GB = 10**9


class ReportForm(forms.Form):
    """The site (when the report is new) and the free text."""

    site = forms.ModelChoiceField(queryset=Site.objects.none(), required=False)
    notes = forms.CharField(
        widget=forms.Textarea({"rows": 8}),
        required=False,
        help_text="Markdown: **bold**, lists, links, tables. Raw HTML is removed.",
    )

    def __init__(self, *args: Any, sites: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if sites is None:
            del self.fields["site"]
        else:
            self.fields["site"].queryset = sites  # type: ignore[attr-defined]
            self.fields["site"].required = True


class RateForm(forms.Form):
    target = forms.ModelChoiceField(queryset=Target.objects.none(), required=False, help_text="or a label")
    label = forms.CharField(max_length=200, required=False)
    # A blank first choice: an untouched extra row must not count as changed.
    direction = forms.ChoiceField(choices=[("", "---------"), *RateDirection.choices])
    rate = forms.DecimalField(label="Rate (GB/s)", help_text="GB/s = 10⁹ bytes per second")
    start = forms.DateTimeField(widget=UtcDateTimeInput(), help_text="UTC")
    end = forms.DateTimeField(widget=UtcDateTimeInput(), help_text="UTC")

    def __init__(self, *args: Any, targets: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["target"].queryset = targets if targets is not None else Target.objects.none()  # type: ignore[attr-defined]

    def row(self) -> dict[str, Any]:
        data = dict(self.cleaned_data)
        data.pop("DELETE", None)
        # Exactly: 0.29 GB/s is 290000000 B/s.
        data["rate"] = float(Decimal(data["rate"]) * GB)
        return data


class OutageForm(forms.Form):
    start = forms.DateTimeField(widget=UtcDateTimeInput(), help_text="UTC")
    end = forms.DateTimeField(widget=UtcDateTimeInput(), help_text="UTC")
    reason = forms.CharField(max_length=300)


class ProblemForm(forms.Form):
    category = forms.ChoiceField(choices=[("", "---------"), *ProblemCategory.choices])
    ticket = forms.CharField(max_length=300, required=False, help_text="GGUS ticket number or URL")
    description = forms.CharField(widget=forms.Textarea({"rows": 2}))


class ActionForm(forms.Form):
    description = forms.CharField(max_length=500, help_text='e.g. "raised MTU to 9000"')
    taken_at = forms.DateTimeField(widget=UtcDateTimeInput(), required=False, help_text="UTC")


FORMSETS: dict[str, type[forms.BaseFormSet]] = {
    "rates": forms.formset_factory(RateForm, extra=1, can_delete=True),
    "outages": forms.formset_factory(OutageForm, extra=1, can_delete=True),
    "problems": forms.formset_factory(ProblemForm, extra=1, can_delete=True),
    "actions": forms.formset_factory(ActionForm, extra=1, can_delete=True),
}
PLACE = re.compile(r"^(?P<kind>\w+)\[(?P<index>\d+)\]\.(?P<field>\w+)$")


def _initial(report: SiteReport | None) -> dict[str, list[dict[str, Any]]]:
    if report is None:
        return {kind: [] for kind in FORMSETS}
    return {
        "rates": [
            {
                "target": rate.target_id,
                "label": rate.label,
                "direction": rate.direction,
                "rate": Decimal(repr(rate.rate)) / GB,
                "start": rate.start,
                "end": rate.end,
            }
            for rate in report.rates.all()
        ],
        "outages": [dict(row) for row in report.outages.values("start", "end", "reason")],
        "problems": [dict(row) for row in report.problems.values("category", "ticket", "description")],
        "actions": [dict(row) for row in report.actions.values("description", "taken_at")],
    }


class ReportForms:
    """The report form and its four formsets, bound together; `content()` is what report_save takes, and
    `add_problems()` puts the service's problems back on the forms."""

    def __init__(
        self, *, data: Any, challenge: Challenge, site: Site | None, sites: Any, report: SiteReport | None
    ) -> None:
        self.report_form = ReportForm(
            data, sites=sites, initial={"notes": report.notes if report else "", "site": site}
        )
        targets = Target.objects.filter(activity__challenge=challenge).select_related(
            "activity", "site", "link_from", "link_to"
        )
        if site is not None:
            targets = targets.filter(site=site) | targets.filter(link_from=site) | targets.filter(link_to=site)
        initial = _initial(report)
        self.formsets = {
            kind: formset_class(
                data,
                prefix=kind,
                initial=initial[kind],
                form_kwargs={"targets": targets} if kind == "rates" else {},
            )
            for kind, formset_class in FORMSETS.items()
        }
        # Which form each row of content() came from, to place the service's problems.
        self._kept: dict[str, list[forms.Form]] = {}

    def is_valid(self) -> bool:
        valid = self.report_form.is_valid()
        for formset in self.formsets.values():
            valid = formset.is_valid() and valid
        return valid

    def content(self) -> dict[str, list[dict[str, Any]]]:
        content: dict[str, list[dict[str, Any]]] = {}
        for kind, formset in self.formsets.items():
            kept = [
                form
                for form in formset.forms
                if form.has_changed() and not (formset.can_delete and form.cleaned_data.get("DELETE"))
            ]
            self._kept[kind] = kept
            content[kind] = [
                form.row() if isinstance(form, RateForm) else _without_delete(form.cleaned_data) for form in kept
            ]
        return content

    def add_problems(self, error: ValidationError) -> None:
        for place, messages in error.message_dict.items():
            match = PLACE.match(place)
            if match and match["kind"] in self._kept:
                form = self._kept[match["kind"]][int(match["index"])]
                field = match["field"]
                for message in messages:
                    form.add_error(field if field in form.fields else None, message)
            else:
                field = place if place in self.report_form.fields else None
                for message in messages:
                    self.report_form.add_error(field, message)

    @property
    def cleaned_notes(self) -> str:
        return str(self.report_form.cleaned_data.get("notes", ""))

    @property
    def cleaned_site(self) -> Site | None:
        site: Site | None = self.report_form.cleaned_data.get("site")
        return site


def _without_delete(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if key != "DELETE"}


class ExperimentReportForm(forms.Form):
    """An experiment report's texts."""

    narrative = forms.CharField(
        widget=forms.Textarea({"rows": 10}),
        required=False,
        help_text="What happened, in Markdown: **bold**, lists, links, tables. Raw HTML is removed.",
    )
    lessons = forms.CharField(
        widget=forms.Textarea({"rows": 4}), required=False, help_text="lessons learned, one a line"
    )
    next_steps = forms.CharField(widget=forms.Textarea({"rows": 4}), required=False, help_text="next steps, one a line")


EXPERIMENT_FORMSETS: dict[str, type[forms.BaseFormSet]] = {
    "problems": FORMSETS["problems"],
    "actions": FORMSETS["actions"],
}


class ExperimentReportForms:
    """The experiment report form and its problems and actions, bound together: `texts()` and `rows()` are what
    reports.experiments.experiment_report_save takes; `add_problems()` puts its problems back on the forms."""

    def __init__(self, *, data: Any, report: Any) -> None:
        initial = {name: getattr(report, name) for name in ("narrative", "lessons", "next_steps")} if report else {}
        self.report_form = ExperimentReportForm(data, initial=initial)
        rows = {
            "problems": [dict(row) for row in report.problems.values("category", "ticket", "description")]
            if report
            else [],
            "actions": [dict(row) for row in report.actions.values("description", "taken_at")] if report else [],
        }
        self.formsets = {
            kind: formset_class(data, prefix=kind, initial=rows[kind])
            for kind, formset_class in EXPERIMENT_FORMSETS.items()
        }

    def is_valid(self) -> bool:
        valid = self.report_form.is_valid()
        for formset in self.formsets.values():
            valid = formset.is_valid() and valid
        return valid

    def texts(self) -> dict[str, str]:
        return {name: str(self.report_form.cleaned_data.get(name, "")) for name in ExperimentReportForm.base_fields}

    def rows(self) -> dict[str, list[dict[str, Any]]]:
        return {
            kind: [
                _without_delete(form.cleaned_data)
                for form in formset.forms
                if form.has_changed() and not form.cleaned_data.get("DELETE")
            ]
            for kind, formset in self.formsets.items()
        }

    def add_problems(self, error: ValidationError) -> None:
        for place, messages in error.message_dict.items():
            field = place if place in self.report_form.fields else None
            for message in messages:
                named = field is not None or place == NON_FIELD_ERRORS
                self.report_form.add_error(field, message if named else f"{place}: {message}")
