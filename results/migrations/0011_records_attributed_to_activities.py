"""Records count for an activity (results.attribution) and the rollups are kept per activity. Existing records are
attributed here (a run's records: its activity; ingested ones: by the rules as they stand at this migration) and
the rollups rebuilt with the new key."""

import django.db.models.deletion
from django.db import migrations, models

# results.attribution's rules as of this migration, frozen here: later changes to the module do not change what
# this step did.
ATTRIBUTE = """
UPDATE results_transferrecord AS r SET activity_id = run.activity_id
FROM runs_run AS run WHERE r.run_id = run.id AND run.activity_id IS NOT NULL;

UPDATE results_transferrecord AS b SET activity_id = c.activity_id
FROM (
    SELECT DISTINCT ON (r.id) r.id AS rid, a.id AS activity_id
    FROM results_transferrecord AS r
    JOIN challenges_activity AS a
      ON a.experiment_id = r.experiment_id AND a.start <= r."end" AND r.start < a."end"
    CROSS JOIN LATERAL (
        SELECT bool_or(t.site_id IS NULL) AS on_link
        FROM challenges_target AS t
        WHERE t.activity_id = a.id AND (
            (t.direction = 'in' AND t.site_id = r.destination_site_id)
            OR (t.direction = 'out' AND t.site_id = r.source_site_id)
            OR (t.site_id IS NULL AND t.link_from_id = r.source_site_id AND t.link_to_id = r.destination_site_id))
    ) AS flow
    WHERE r.run_id IS NULL AND flow.on_link IS NOT NULL
    ORDER BY r.id,
        (a.start <= r.start + (r."end" - r.start) / 2 AND r.start + (r."end" - r.start) / 2 < a."end") DESC,
        flow.on_link DESC, a."end" - a.start, a.id
) AS c
WHERE b.id = c.rid;
"""


def rollups_rebuild(apps, schema_editor):
    from results.store.rollups import rollups_rebuild as rebuild

    rebuild()


class Migration(migrations.Migration):
    dependencies = [
        ("challenges", "0007_activity_ddm_activities"),
        ("results", "0010_record_identity_per_experiment"),
        ("runs", "0003_run_heartbeat_copies"),
        ("sites", "0002_apitoken_membership"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="flowrollup",
            name="flow_rollup_unique_hour",
        ),
        migrations.RemoveConstraint(
            model_name="raterollup",
            name="rollup_unique_key",
        ),
        migrations.RemoveConstraint(
            model_name="raterolluphour",
            name="rollup_hour_unique_key",
        ),
        migrations.AddField(
            model_name="flowrollup",
            name="activity_id",
            field=models.BigIntegerField(default=0, help_text="the activity the records count for; 0: none"),
        ),
        migrations.AddField(
            model_name="raterollup",
            name="activity_id",
            field=models.BigIntegerField(help_text="the activity the records count for; NULL: none", null=True),
        ),
        migrations.AddField(
            model_name="raterolluphour",
            name="activity_id",
            field=models.BigIntegerField(help_text="the activity the records count for; NULL: none", null=True),
        ),
        migrations.AddField(
            model_name="transferrecord",
            name="activity",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="challenges.activity",
            ),
        ),
        migrations.AddField(
            model_name="transferrecord",
            name="ddm_activity",
            field=models.CharField(
                blank=True, help_text='the FTS / Rucio activity name ("T0 Export", "Data Challenge")', max_length=64
            ),
        ),
        migrations.AddIndex(
            model_name="transferrecord",
            index=models.Index(
                condition=models.Q(("activity__isnull", False)), fields=["activity"], name="record_activity"
            ),
        ),
        migrations.AddConstraint(
            model_name="flowrollup",
            constraint=models.UniqueConstraint(
                fields=("activity_id", "flow", "site_id", "peer_id", "hour", "experiment_id"),
                name="flow_rollup_unique_hour",
            ),
        ),
        migrations.AddConstraint(
            model_name="raterollup",
            constraint=models.UniqueConstraint(
                fields=(
                    "minute",
                    "experiment_id",
                    "activity_id",
                    "source_site_id",
                    "destination_site_id",
                    "mode",
                    "concurrency",
                ),
                name="rollup_unique_key",
                nulls_distinct=False,
            ),
        ),
        migrations.AddConstraint(
            model_name="raterolluphour",
            constraint=models.UniqueConstraint(
                fields=(
                    "hour",
                    "experiment_id",
                    "activity_id",
                    "source_site_id",
                    "destination_site_id",
                    "mode",
                    "concurrency",
                ),
                name="rollup_hour_unique_key",
                nulls_distinct=False,
            ),
        ),
        migrations.RunSQL(ATTRIBUTE, migrations.RunSQL.noop),
        migrations.RunPython(rollups_rebuild, migrations.RunPython.noop),
    ]
