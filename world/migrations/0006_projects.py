"""The project a world's rows belong to, filled in by backend 0022."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("backend", "0021_projects"),
        ("world", "0005_engine_hosts"),
    ]

    operations = [
        migrations.AddField(
            model_name="world",
            name="project",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="worlds",
                to="backend.project",
            ),
        ),
    ]
