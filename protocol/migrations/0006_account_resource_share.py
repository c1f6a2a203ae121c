"""Project preferences on each account (BOINC's user.project_prefs): the resource share, BOINC's
default 100 for every existing account, whose other values stay as they were."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("protocol", "0005_account_per_project"),
    ]

    operations = [
        migrations.AddField(
            model_name="account",
            name="resource_share",
            field=models.FloatField(default=100.0),
        ),
    ]
