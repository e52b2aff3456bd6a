"""The index on (origin, end) of the transfer records: the now board's freshness of each source (live.now).
Built on every partition; it holds the table's SHARE lock (no insert) while it builds: minutes on a table of
hundreds of millions of records."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("results", "0014_records_partitioned_by_month"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="transferrecord",
            index=models.Index(fields=["origin", "end"], name="record_origin_end"),
        ),
    ]
