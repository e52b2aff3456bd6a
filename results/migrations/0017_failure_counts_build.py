"""The failure causes' counts of the records stored before them (results.failure_counts), once 0016's unique
indexes exist (Django makes a migration's indexes at its end: an upsert inside 0016 would find none)."""

from django.db import migrations


def failure_counts_build(apps, schema_editor):
    """The counts of the failed records stored before them (results.failure_counts); none once raw records were
    retired (the page then counts from the records it has)."""
    from results.store.failure_counts import failure_counts_rebuild
    from results.store.partitions import months_retired

    with schema_editor.connection.cursor() as cursor:
        if months_retired(cursor):
            return
    failure_counts_rebuild()


class Migration(migrations.Migration):
    dependencies = [
        ("results", "0016_failure_counts"),
    ]

    operations = [
        migrations.RunPython(failure_counts_build, migrations.RunPython.noop),
    ]
