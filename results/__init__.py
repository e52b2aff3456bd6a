"""What was measured: transfer records, rollups, rates, matrices, failure causes, figures. The only writer of its
tables: runs/ and ingest/ hand it records through results.services (site reports are reports/')."""
