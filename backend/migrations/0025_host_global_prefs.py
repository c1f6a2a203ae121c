"""BOINC's computing preferences on each host beside the six it had: running on batteries and
while in use, the non-BOINC CPU usage that suspends computing, the hours of computing and of
network use, the disk, memory and network limits; each named as its element of
<global_preferences> with the client's default (lib/prefs.cpp), so that every existing host
sends its client what the client would assume anyway. And each host's venue (home, school,
work or none), which its owner's computers at one venue share their preferences by."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("backend", "0024_user_credit_per_project"),
    ]

    operations = [
        migrations.AddField(
            model_name="host",
            name="disk_max_used_gb",
            field=models.FloatField(default=0.0),
        ),
        migrations.AddField(
            model_name="host",
            name="disk_max_used_pct",
            field=models.FloatField(default=90.0),
        ),
        migrations.AddField(
            model_name="host",
            name="disk_min_free_gb",
            field=models.FloatField(default=0.1),
        ),
        migrations.AddField(
            model_name="host",
            name="end_hour",
            field=models.FloatField(default=0.0),
        ),
        migrations.AddField(
            model_name="host",
            name="max_bytes_sec_down",
            field=models.FloatField(default=0.0),
        ),
        migrations.AddField(
            model_name="host",
            name="max_bytes_sec_up",
            field=models.FloatField(default=0.0),
        ),
        migrations.AddField(
            model_name="host",
            name="net_end_hour",
            field=models.FloatField(default=0.0),
        ),
        migrations.AddField(
            model_name="host",
            name="net_start_hour",
            field=models.FloatField(default=0.0),
        ),
        migrations.AddField(
            model_name="host",
            name="ram_max_used_busy_pct",
            field=models.FloatField(default=50.0),
        ),
        migrations.AddField(
            model_name="host",
            name="ram_max_used_idle_pct",
            field=models.FloatField(default=90.0),
        ),
        migrations.AddField(
            model_name="host",
            name="run_if_user_active",
            field=models.BooleanField(default=True),
        ),
        migrations.AddField(
            model_name="host",
            name="run_on_batteries",
            field=models.BooleanField(default=True),
        ),
        migrations.AddField(
            model_name="host",
            name="start_hour",
            field=models.FloatField(default=0.0),
        ),
        migrations.AddField(
            model_name="host",
            name="suspend_cpu_usage",
            field=models.FloatField(default=25.0),
        ),
        migrations.AddField(
            model_name="host",
            name="venue",
            field=models.CharField(
                blank=True,
                choices=[("", "none"), ("home", "home"), ("school", "school"), ("work", "work")],
                default="",
                max_length=8,
            ),
        ),
    ]
