"""``manage.py bench_backend`` runs its pipeline to the end and cleans up after itself."""

import json

import pytest
from django.core.management import call_command

from backend.models import App, HostAppVersion, Result


@pytest.mark.django_db(transaction=True)
def test_bench_backend_completes_every_result_and_removes_its_rows(capsys):
    call_command("bench_backend", "--results", "40", "--json")
    figures = json.loads(capsys.readouterr().out)
    assert (figures["results"], figures["completed"]) == (40, 40)
    assert not (App.objects.exists() or Result.objects.exists() or HostAppVersion.objects.exists())
