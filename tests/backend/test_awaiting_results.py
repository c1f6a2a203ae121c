"""The work generator waits while a workunit has no results yet (reference/server.md §3.1),
reading only the workunits still ``awaiting_results``, which the transitioner clears when it
gives a workunit results or finds it has some (migration 0020 clears it for those that had)."""

import importlib

import pytest
from django.apps import apps

from backend.daemons import run_pass, work_generator
from backend.daemons.work_generator import waiting_for_first_results
from backend.models import TransitionerFlags, Workunit
from tests.factories import NOW, demo_project

pytestmark = pytest.mark.django_db


def test_a_new_workunit_awaits_results_until_the_transitioner_makes_them(project):
    [wu] = work_generator.create_work(project.app, ["job"], now=NOW)
    assert Workunit.objects.get(pk=wu.pk).awaiting_results
    assert waiting_for_first_results(project.app)
    run_pass("transitioner", project=demo_project(), now=NOW + 1)
    assert not Workunit.objects.get(pk=wu.pk).awaiting_results
    assert not waiting_for_first_results(project.app)


def test_a_workunit_found_with_results_no_longer_awaits_them(project):
    wu = project.workunit(transition_time=NOW)
    project.result(wu, suffix=0)
    assert Workunit.objects.get(pk=wu.pk).awaiting_results
    run_pass("transitioner", project=demo_project(), now=NOW + 1)
    assert not Workunit.objects.get(pk=wu.pk).awaiting_results


def test_a_workunit_the_transitioner_gives_no_results_still_awaits_them(project):
    wu = project.workunit(transition_time=NOW, transitioner_flags=TransitionerFlags.TRANSITION_NO_NEW_RESULTS)
    run_pass("transitioner", project=demo_project(), now=NOW + 1)
    assert not wu.results.exists()
    assert Workunit.objects.get(pk=wu.pk).awaiting_results
    assert waiting_for_first_results(project.app)


def test_the_wait_reads_only_the_workunits_awaiting_results(project):
    # a workunit with results, and one whose flag was cleared: neither is read
    project.result(project.workunit(), suffix=0)
    project.workunit(awaiting_results=False)
    Workunit.objects.filter(results__isnull=False).update(awaiting_results=False)
    assert not waiting_for_first_results(project.app)
    project.workunit()
    assert waiting_for_first_results(project.app)


def test_the_migration_clears_the_flag_of_workunits_that_have_results(project):
    with_results = project.workunit()
    project.result(with_results, suffix=0)
    without = project.workunit()
    Workunit.objects.update(awaiting_results=True)
    migration = importlib.import_module("backend.migrations.0020_workunit_bounded_queries")
    migration.clear_for_workunits_with_results(apps, None)
    assert set(Workunit.objects.filter(awaiting_results=True).values_list("pk", flat=True)) == {without.pk}
