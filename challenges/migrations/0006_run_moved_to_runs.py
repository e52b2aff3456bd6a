"""Run and RunFile now belong to the runs app (runs 0001): forget them here, state only; their rows stay."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("challenges", "0005_runfile_progress"),
        ("runs", "0001_initial"),
        ("results", "0009_record_run_moved_to_runs"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="RunFile"),
                migrations.DeleteModel(name="Run"),
            ],
            database_operations=[],
        ),
    ]
