"""A subscription keeps the scope of the token it was made with (issue #34). Those made before this migration have
no scope stored: their deliveries follow their creator's roles, as they did."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("live", "0001_alerts"),
        ("sites", "0003_storageendpoint_experiments"),
    ]

    operations = [
        migrations.AddField(
            model_name="alertsubscription",
            name="scope_experiment",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="sites.experiment",
            ),
        ),
        migrations.AddField(
            model_name="alertsubscription",
            name="scope_role",
            field=models.CharField(
                blank=True,
                help_text="the role of the token it was made with; empty: all its creator's roles",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="alertsubscription",
            name="scope_site",
            field=models.ForeignKey(
                blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="sites.site"
            ),
        ),
    ]
