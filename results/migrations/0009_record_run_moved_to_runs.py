"""Records point at runs.Run now (the same table as challenges.Run before): state only, the foreign key stays."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("results", "0008_record_indexes_covered"),
        ("runs", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="transferrecord",
                    name="run",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="records",
                        to="runs.run",
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
