"""LocalityTrigger moves to the back end (backend.models.LocalityTrigger, backend's 0018).

The world's state forgets the model; its table, ``world_localitytrigger``, stays with its rows
and is the back end's from now on.
"""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('world', '0003_world_job'),
        ('backend', '0018_localitytrigger_from_world'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name='LocalityTrigger'),
            ],
            database_operations=[],
        ),
    ]
