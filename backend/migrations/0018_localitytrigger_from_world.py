"""LocalityTrigger moves from the world app to the back end (backend.daemons.sched_locality).

The table stays where world's 0001_initial made it (``world_localitytrigger``, with its rows
and its indexes): this migration only adds the model to the back end's state, and world's
0004 takes it out of the world's.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('backend', '0017_locality_no_delete_old_work'),
        ('world', '0001_initial'),  # which made the table
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='LocalityTrigger',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('file_name', models.CharField(max_length=254, unique=True)),
                        ('need_work', models.BooleanField(default=False)),
                        ('need_work_time', models.BigIntegerField(default=0, help_text='When need_work was set.')),
                        ('no_work_available', models.BooleanField(default=False, help_text='The work generator can make no more workunits for the file.')),
                        ('in_working_set', models.BooleanField(default=False)),
                        ('no_work', models.BooleanField(default=False, help_text='The scheduler found no sendable result for the file.')),
                        ('app', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='backend.app')),
                    ],
                    options={
                        'db_table': 'world_localitytrigger',
                        'ordering': ['file_name'],
                        'indexes': [models.Index(fields=['app', 'need_work', 'file_name'], name='locality_need_work'), models.Index(fields=['app', 'in_working_set', 'file_name'], name='locality_working_set')],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
