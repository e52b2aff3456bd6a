from django.apps import AppConfig


class CommonConfig(AppConfig):
    """The ground every app stands on: document parsing, processes, pagination, units, time, table exports.
    It imports no app of the project."""

    name = "common"
    verbose_name = "common ground"

    def ready(self) -> None:
        # Every model serializer's text fields take strings only, its booleans booleans and its numbers numbers, as
        # the schema says.
        from django.db import models
        from rest_framework.serializers import ModelSerializer

        from .fields import StrictBooleanField, StrictCharField, StrictFloatField, StrictIntegerField

        ModelSerializer.serializer_field_mapping[models.CharField] = StrictCharField
        ModelSerializer.serializer_field_mapping[models.TextField] = StrictCharField
        ModelSerializer.serializer_field_mapping[models.BooleanField] = StrictBooleanField
        ModelSerializer.serializer_field_mapping[models.FloatField] = StrictFloatField
        for integer in (
            models.IntegerField,
            models.SmallIntegerField,
            models.BigIntegerField,
            models.PositiveIntegerField,
            models.PositiveSmallIntegerField,
            models.PositiveBigIntegerField,
        ):
            ModelSerializer.serializer_field_mapping[integer] = StrictIntegerField
