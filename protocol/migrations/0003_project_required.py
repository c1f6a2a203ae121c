"""Every app version file belongs to a project (backend 0022 filled it in)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("backend", "0023_project_required"),
        ("protocol", "0002_projects"),
    ]

    operations = [
        migrations.AlterField(
            model_name="appversionfile",
            name="project",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="backend.project"
            ),
        ),
    ]
