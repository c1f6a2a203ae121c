"""The policies are listed once, in the engine: the run model's choices, the forms and the run
pages' notes follow it."""

from io import StringIO

import pytest
from django.core.management import call_command

from scheduling import views
from scheduling.engine import POLICIES
from scheduling.engine.policies import LABELS, NOTES
from scheduling.forms import CompareForm, RunForm
from scheduling.models import Run


def test_the_run_model_offers_the_engines_policies_in_its_order():
    assert Run.Policy.values == list(POLICIES) == ["boinc7", "boinc5", "wrr", "fifo"]
    assert Run.Policy("boinc7").label == "boinc7: REC priority (BOINC 7)"
    assert Run.Policy.BOINC5 == "boinc5"


def test_every_policy_has_a_label_and_a_note():
    assert list(LABELS) == list(NOTES) == list(POLICIES)
    assert all(NOTES.values()) and views.POLICY_NOTES is NOTES


def test_the_run_and_compare_forms_offer_every_policy():
    assert [v for v, _ in RunForm().fields["policy"].choices] == list(POLICIES)
    assert [v for v, _ in CompareForm().fields["policies"].choices] == list(POLICIES)


@pytest.mark.django_db
def test_the_choices_need_no_migration():
    call_command("makemigrations", "scheduling", "--check", "--dry-run", stdout=StringIO())
