"""What was measured: transfer records, rate rollups, reports, ingestion, rate analytics."""
