"""Run and RunFile move here from the challenges app, with their rows: this migration only tells Django's state
that they now belong to runs (their tables are still challenges_run and challenges_runfile); results 0009 points
the records at them, challenges 0006 forgets them there, and 0002 renames the tables and moves the content types."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("challenges", "0005_runfile_progress"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Run",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "kind",
                            models.CharField(
                                choices=[
                                    ("transfer", "transfer"),
                                    ("staging", "staging (tape recall)"),
                                    ("tape-write", "tape write"),
                                    ("network", "network"),
                                    ("cache", "cache"),
                                    ("io", "I/O"),
                                ],
                                max_length=16,
                            ),
                        ),
                        (
                            "state",
                            models.CharField(
                                choices=[
                                    ("queued", "queued"),
                                    ("running", "running"),
                                    ("finished", "finished"),
                                    ("failed", "failed"),
                                    ("cancelled", "cancelled"),
                                ],
                                default="queued",
                                max_length=10,
                            ),
                        ),
                        (
                            "parameters",
                            models.JSONField(blank=True, default=dict, help_text="what the probe was asked to do"),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("started_at", models.DateTimeField(blank=True, null=True)),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "deadline",
                            models.DateTimeField(
                                blank=True, help_text="past it, the reaper ends the run as failed", null=True
                            ),
                        ),
                        ("message", models.TextField(blank=True, help_text="why the run ended as it did")),
                        (
                            "summary",
                            models.JSONField(
                                blank=True,
                                default=dict,
                                help_text="what a staging, network, cache or io probe reported as a whole",
                            ),
                        ),
                        (
                            "activity",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="runs",
                                to="challenges.activity",
                            ),
                        ),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "ordering": ["-created_at", "-id"],
                        "db_table": "challenges_run",
                    },
                ),
                migrations.CreateModel(
                    name="RunFile",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("index", models.PositiveIntegerField()),
                        ("source_url", models.TextField()),
                        ("destination_url", models.TextField()),
                        ("size", models.PositiveBigIntegerField(default=0, help_text="bytes")),
                        (
                            "queue",
                            models.CharField(
                                default="default", help_text="the Celery queue its task goes to", max_length=80
                            ),
                        ),
                        (
                            "state",
                            models.CharField(
                                choices=[
                                    ("queued", "queued"),
                                    ("running", "running"),
                                    ("done", "done"),
                                    ("failed", "failed"),
                                    ("cancelled", "cancelled"),
                                ],
                                default="queued",
                                max_length=10,
                            ),
                        ),
                        (
                            "attempt",
                            models.PositiveSmallIntegerField(default=0, help_text="the current (or last) try, from 1"),
                        ),
                        ("task_id", models.CharField(blank=True, max_length=64)),
                        ("dispatched_at", models.DateTimeField(blank=True, null=True)),
                        ("worker", models.CharField(blank=True, max_length=255)),
                        ("heartbeat", models.DateTimeField(blank=True, null=True)),
                        ("start", models.DateTimeField(blank=True, null=True)),
                        ("end", models.DateTimeField(blank=True, null=True)),
                        (
                            "bytes",
                            models.PositiveBigIntegerField(default=0, help_text="bytes moved by the successful try"),
                        ),
                        (
                            "progress_bytes",
                            models.PositiveBigIntegerField(
                                default=0,
                                help_text="bytes the try in flight has copied so far (gfal2's progress markers, every few seconds)",
                            ),
                        ),
                        (
                            "progress_at",
                            models.DateTimeField(blank=True, help_text="when progress_bytes was reported", null=True),
                        ),
                        (
                            "mode",
                            models.CharField(
                                blank=True, help_text="what gfal2 really did: pull, push, streamed ...", max_length=16
                            ),
                        ),
                        ("error", models.TextField(blank=True)),
                        (
                            "recorded",
                            models.BooleanField(
                                default=False,
                                help_text="the try that ended is stored as a transfer record (or there is nothing to store)",
                            ),
                        ),
                        (
                            "run",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE, related_name="files", to="runs.run"
                            ),
                        ),
                    ],
                    options={
                        "ordering": ["run_id", "index"],
                        "db_table": "challenges_runfile",
                    },
                ),
                migrations.AddIndex(
                    model_name="run",
                    index=models.Index(
                        condition=models.Q(("state__in", ["queued", "running"])), fields=["state"], name="run_active"
                    ),
                ),
                migrations.AddIndex(
                    model_name="runfile",
                    index=models.Index(fields=["run", "state", "index"], name="runfile_run_state"),
                ),
                migrations.AddIndex(
                    model_name="runfile",
                    index=models.Index(
                        condition=models.Q(("state", "running")), fields=["state", "heartbeat"], name="runfile_running"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="runfile",
                    constraint=models.UniqueConstraint(fields=("run", "index"), name="runfile_unique_index"),
                ),
            ],
            database_operations=[],
        ),
    ]
