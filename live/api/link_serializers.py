"""Shapes of the link panel's API (GET /api/v1/challenges/SLUG/links/), for the schema."""

from __future__ import annotations

import copy
from typing import Any

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

from results.api.views import RATE_ROW_FIELDS

from ..links import LINK_TARGET_FIELDS


class OptimizerDecisionSerializer(serializers.Serializer[Any]):
    active = serializers.IntegerField(help_text="the active transfers FTS's optimizer allows")
    actual_active = serializers.IntegerField(allow_null=True, help_text="transfers running when it decided")
    queue_size = serializers.IntegerField(allow_null=True, help_text="files waiting on the link")
    ema = serializers.FloatField(allow_null=True, help_text="moving average of the throughput, bytes per second")
    throughput = serializers.FloatField(allow_null=True, help_text="bytes per second")
    success = serializers.FloatField(allow_null=True, help_text="success rate, percent")
    rationale = serializers.CharField()
    at = serializers.DateTimeField()


class LinkErrorSerializer(serializers.Serializer[Any]):
    category = serializers.CharField(allow_null=True, help_text="FTS tr_error_category (null: none given)")
    scope = serializers.CharField(allow_null=True, help_text="FTS tr_error_scope")
    phase = serializers.CharField(allow_null=True, help_text="FTS t_failure_phase")
    count = serializers.IntegerField()
    example = serializers.CharField(help_text="one of the error messages")


class LinkRowSerializer(serializers.Serializer[Any]):
    source = serializers.CharField(help_text="the source site's name")
    destination = serializers.CharField(help_text="the destination site's name")
    link = inline_serializer(
        "LinkEnds",
        {"from": serializers.CharField(), "to": serializers.CharField()},
        help_text="the link's ends named as every target row names a link",
    )
    target_rate = serializers.FloatField(allow_null=True, help_text="bytes per second (null: no running target)")
    last_hour_rate = serializers.FloatField(help_text="bytes per second over the hour before `at`")
    average_rate = serializers.FloatField(allow_null=True, help_text="bytes per second over the window so far")
    window_start = serializers.DateTimeField(help_text="the first minute the average counts")
    files_ok_last_hour = serializers.IntegerField()
    files_failed_last_hour = serializers.IntegerField()
    fts = OptimizerDecisionSerializer(allow_null=True, help_text="FTS's latest optimizer decision on the link")
    limited_by = serializers.ChoiceField(
        choices=["fts_max_active", "fts_optimizer", "source", "destination"], allow_null=True
    )
    errors = LinkErrorSerializer(many=True, help_text="failures of the last hour by FTS category, scope, phase")
    targets = inline_serializer(
        "LinkTarget",
        {name: copy.deepcopy(RATE_ROW_FIELDS[name]) for name in LINK_TARGET_FIELDS},
        many=True,
        help_text="the running targets whose flow is this link, with their figures as the rates API gives them",
    )


class LinkPanelSerializer(serializers.Serializer[Any]):
    at = serializers.DateTimeField(help_text="the board's minute (UTC): every rate ends here")
    links = LinkRowSerializer(many=True)
