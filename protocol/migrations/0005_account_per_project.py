"""Every account belongs to a project (0004 filled it in), and a user holds at most one account
in each project. App version files are named uniquely within their project, whose download
directory holds them."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("backend", "0023_project_required"),
        ("protocol", "0004_account_project"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterField(
            model_name="account",
            name="project",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="accounts",
                to="backend.project",
            ),
        ),
        migrations.AlterField(
            model_name="account",
            name="user",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="boinc_accounts", to=settings.AUTH_USER_MODEL
            ),
        ),
        migrations.AddConstraint(
            model_name="account",
            constraint=models.UniqueConstraint(fields=("project", "user"), name="account_project_user"),
        ),
        migrations.AlterField(
            model_name="appversionfile",
            name="name",
            field=models.CharField(max_length=254),
        ),
        migrations.AddConstraint(
            model_name="appversionfile",
            constraint=models.UniqueConstraint(fields=("project", "name"), name="app_version_file_project_name"),
        ),
    ]
