"""Shapes of the ingestion API, for the schema (the views read the raw body themselves, for speed)."""

from rest_framework import serializers


class RejectedItemSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="position of the item in the batch (0-based; NDJSON: non-blank line)")
    error = serializers.CharField(help_text="the field and the reason")


class IngestResultSerializer(serializers.Serializer):
    accepted = serializers.IntegerField(help_text="new records stored")
    duplicates = serializers.IntegerField(help_text="valid items already stored (or repeated in the batch)")
    skipped = serializers.IntegerField(help_text="items of no transfer (e.g. other Rucio event types)")
    rejected = RejectedItemSerializer(many=True)
