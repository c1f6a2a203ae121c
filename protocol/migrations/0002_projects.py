"""The project of each app version file, filled in by backend 0022."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("backend", "0021_projects"),
        ("protocol", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="appversionfile",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="backend.project",
            ),
        ),
    ]
