"""FlowRollup keeps a flow's minutes one hour per row (arrays of 60), and RateRollupHour sums RateRollup per hour:
the targets and the matrix of a three-week challenge read thousands of rows instead of a million. Both are filled
from RateRollup, which is unchanged. The SQL is frozen here (results/rollups.py may change later)."""

import django.contrib.postgres.fields
from django.db import migrations, models

FUNCTIONS = """
-- An hour's 60 minutes as an array: each value at its minute (0-59), 0 in the minutes not given.
CREATE FUNCTION results_minute_array(minutes int[], vals float8[]) RETURNS float8[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT array_agg(coalesce(v.val, 0) ORDER BY g.i)
    FROM generate_series(0, 59) AS g(i) LEFT JOIN unnest(minutes, vals) AS v(i, val) ON v.i = g.i
$$;
CREATE FUNCTION results_minute_array(minutes int[], vals int[]) RETURNS int[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT array_agg(coalesce(v.val, 0) ORDER BY g.i)
    FROM generate_series(0, 59) AS g(i) LEFT JOIN unnest(minutes, vals) AS v(i, val) ON v.i = g.i
$$;
-- Element by element sums of two arrays of one length.
CREATE FUNCTION results_array_add(a float8[], b float8[]) RETURNS float8[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT array_agg(x + y ORDER BY n) FROM unnest(a, b) WITH ORDINALITY AS u(x, y, n)
$$;
CREATE FUNCTION results_array_add(a int[], b int[]) RETURNS int[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT array_agg(x + y ORDER BY n) FROM unnest(a, b) WITH ORDINALITY AS u(x, y, n)
$$;
"""

DROP_FUNCTIONS = """
DROP FUNCTION results_minute_array(int[], float8[]);
DROP FUNCTION results_minute_array(int[], int[]);
DROP FUNCTION results_array_add(float8[], float8[]);
DROP FUNCTION results_array_add(int[], int[]);
"""

FILL = """
INSERT INTO results_raterolluphour
    (hour, experiment_id, source_site_id, destination_site_id, mode, concurrency, bytes, files_ok, files_failed)
SELECT date_trunc('hour', minute, 'UTC'), experiment_id, source_site_id, destination_site_id, mode, concurrency,
       sum(bytes), sum(files_ok), sum(files_failed)
FROM results_raterollup
GROUP BY 1, 2, 3, 4, 5, 6;

INSERT INTO results_flowrollup
    (experiment_id, flow, site_id, peer_id, hour, bytes, files_ok, files_failed, hour_files_ok, hour_files_failed)
SELECT experiment_id, flow, site_id, peer_id, hour,
       results_minute_array(array_agg(at_minute), array_agg(bytes)),
       results_minute_array(array_agg(at_minute), array_agg(files_ok)),
       results_minute_array(array_agg(at_minute), array_agg(files_failed)),
       sum(files_ok)::int, sum(files_failed)::int
FROM (
    SELECT *, date_trunc('hour', minute, 'UTC') AS hour,
           ((date_part('epoch', minute) - date_part('epoch', date_trunc('hour', minute, 'UTC'))) / 60)::int
               AS at_minute
    FROM (
        SELECT experiment_id, flow, site_id, peer_id, minute, sum(bytes) AS bytes, sum(files_ok)::int AS files_ok,
               sum(files_failed)::int AS files_failed
        FROM (
            SELECT experiment_id, 'in' AS flow, destination_site_id AS site_id, 0 AS peer_id, minute, bytes,
                   files_ok, files_failed
            FROM results_raterollup WHERE destination_site_id IS NOT NULL
            UNION ALL
            SELECT experiment_id, 'out', source_site_id, 0, minute, bytes, files_ok, files_failed
            FROM results_raterollup WHERE source_site_id IS NOT NULL
            UNION ALL
            SELECT experiment_id, 'link', source_site_id, destination_site_id, minute, bytes, files_ok, files_failed
            FROM results_raterollup WHERE source_site_id IS NOT NULL AND destination_site_id IS NOT NULL
        ) AS flows
        WHERE experiment_id IS NOT NULL
        GROUP BY experiment_id, flow, site_id, peer_id, minute
    ) AS per_minute
) AS per_hour
GROUP BY experiment_id, flow, site_id, peer_id, hour;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("results", "0006_origin_perfsonar"),
    ]

    operations = [
        migrations.RunSQL(FUNCTIONS, DROP_FUNCTIONS),
        migrations.DeleteModel(name="FlowRollup"),
        migrations.CreateModel(
            name="FlowRollup",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("hour", models.DateTimeField()),
                ("experiment_id", models.BigIntegerField()),
                ("flow", models.CharField(max_length=4)),
                ("site_id", models.BigIntegerField()),
                ("peer_id", models.BigIntegerField(default=0, help_text="the destination of a link; 0 otherwise")),
                (
                    "bytes",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.FloatField(), help_text="bytes moved in each minute", size=60
                    ),
                ),
                (
                    "files_ok",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.IntegerField(), help_text="files that ended in each minute", size=60
                    ),
                ),
                (
                    "files_failed",
                    django.contrib.postgres.fields.ArrayField(base_field=models.IntegerField(), size=60),
                ),
                (
                    "hour_files_ok",
                    models.IntegerField(default=0, help_text="sum of files_ok: whole hours read no array"),
                ),
                ("hour_files_failed", models.IntegerField(default=0, help_text="sum of files_failed")),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("experiment_id", "flow", "site_id", "peer_id", "hour"), name="flow_rollup_unique_hour"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="RateRollupHour",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("hour", models.DateTimeField()),
                ("experiment_id", models.BigIntegerField(null=True)),
                ("source_site_id", models.BigIntegerField(null=True)),
                ("destination_site_id", models.BigIntegerField(null=True)),
                ("mode", models.CharField(blank=True, max_length=16)),
                ("concurrency", models.PositiveIntegerField(null=True)),
                ("bytes", models.FloatField(default=0)),
                ("files_ok", models.PositiveIntegerField(default=0)),
                ("files_failed", models.PositiveIntegerField(default=0)),
            ],
            options={
                "indexes": [models.Index(fields=["experiment_id", "hour"], name="results_rat_experim_hour_idx")],
                "constraints": [
                    models.UniqueConstraint(
                        fields=(
                            "hour",
                            "experiment_id",
                            "source_site_id",
                            "destination_site_id",
                            "mode",
                            "concurrency",
                        ),
                        name="rollup_hour_unique_key",
                        nulls_distinct=False,
                    )
                ],
            },
        ),
        migrations.RunSQL(FILL, migrations.RunSQL.noop),
    ]
