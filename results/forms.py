"""Forms of the results pages: the coordinators' failure rules (errors next to their field)."""

from __future__ import annotations

from typing import Any

from django import forms

from .failures.causes import failure_pattern_problem, failure_rule_next_position
from .models import FailureRule


class FailureRuleForm(forms.ModelForm):
    """A failure rule; a new one goes to the end of the order unless given a position."""

    class Meta:
        model = FailureRule
        fields = ["position", "pattern", "category", "enabled", "note"]
        widgets = {"pattern": forms.TextInput(attrs={"size": 60, "spellcheck": "false"})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["position"].required = False

    def clean_pattern(self) -> str:
        pattern: str = self.cleaned_data["pattern"]
        problem = failure_pattern_problem(pattern)
        if problem:
            raise forms.ValidationError(problem)
        return pattern

    def clean_position(self) -> int:
        position = self.cleaned_data.get("position")
        return failure_rule_next_position() if position is None else int(position)
