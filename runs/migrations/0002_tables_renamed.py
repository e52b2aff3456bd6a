"""The moved tables take the runs app's names (runs_run, runs_runfile; PostgreSQL keeps rows, indexes and foreign
keys across a rename), and the content types (with their permissions) follow the models."""

from django.db import migrations


def content_types_move(apps, schema_editor):
    content_type = apps.get_model("contenttypes", "ContentType")
    for model in ("run", "runfile"):
        if not content_type.objects.filter(app_label="runs", model=model).exists():
            content_type.objects.filter(app_label="challenges", model=model).update(app_label="runs")


def content_types_back(apps, schema_editor):
    content_type = apps.get_model("contenttypes", "ContentType")
    content_type.objects.filter(app_label="runs", model__in=["run", "runfile"]).update(app_label="challenges")


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0001_initial"),
        ("challenges", "0006_run_moved_to_runs"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AlterModelTable(name="run", table=None),
        migrations.AlterModelTable(name="runfile", table=None),
        migrations.RunPython(content_types_move, content_types_back),
    ]
