"""Hostile form posts (issue 34's findings 10-12): each gets a form error and changes nothing,
never a 500 or a thousand forms; a host's domain name is shown to its owner and staff only.
The bounds come from one place (boincweb.bounds)."""

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from backend.models import Host, LifecycleEvent
from boincweb.bounds import INT_MAX
from scheduling.forms import APP_ROWS, ScenarioForms
from scheduling.models import StoredScenario
from tests.factories import HostFactory, StoredScenarioFactory, UserFactory
from tests.scheduling.test_lab_views import form_data
from tests.web.test_project_hosts import PREFS
from world.models import World

pytestmark = pytest.mark.django_db


@pytest.fixture
def ann(client):
    user = User.objects.create_user("ann", password="pw-ann-123", is_staff=True)
    client.force_login(user)
    return user


def test_the_delete_box_on_an_app_row_is_a_form_error_not_a_500(client, ann):
    # finding 10: KeyError 'name' once the project left without an app was marked
    stored = StoredScenarioFactory(owner=ann)
    before = StoredScenario.objects.get(pk=stored.pk).data
    for row in (0, 1):
        data = form_data(stored)
        data[f"apps-{row}-DELETE"] = "on"
        response = client.post(reverse("lab:edit", args=[stored.pk]), data)
        assert response.status_code == 400
        assert "This project has no app; add one below." in response.content.decode()
    stored.refresh_from_db()
    assert stored.data == before


def test_the_delete_box_on_a_new_scenarios_app_row_is_a_form_error(client, ann):
    data = form_data(StoredScenarioFactory(owner=ann))
    data["apps-0-DELETE"] = "on"
    count = StoredScenario.objects.count()
    response = client.post(reverse("lab:new"), data)
    assert response.status_code == 400
    assert "This project has no app; add one below." in response.content.decode()
    assert StoredScenario.objects.count() == count


def test_a_forged_form_count_builds_no_more_forms_than_the_limit(client, ann):
    # finding 10: TOTAL_FORMS=2147483648 built a thousand forms (6.8 s)
    stored = StoredScenarioFactory(owner=ann)
    data = form_data(stored)
    data["apps-TOTAL_FORMS"] = "2147483648"
    forms = ScenarioForms(data)
    assert not forms.is_valid()
    assert len(forms.apps.forms) <= APP_ROWS
    assert f"Please submit at most {APP_ROWS} forms." in forms.apps.non_form_errors()
    response = client.post(reverse("lab:edit", args=[stored.pk]), data)
    assert response.status_code == 400


@pytest.mark.parametrize("seed", [str(2**31), str(2**63), "9" * 400, "-1"])
def test_a_seed_beyond_its_column_is_a_form_error_on_the_compare_and_attach_forms(client, ann, seed):
    # finding 11: DataError (integer out of range), and a 400-digit seed overflowed the name
    compare = {"hosts": 3, "days": 1, "seed": seed, "speedup": 3600}
    response = client.post(reverse("worlds:compare_start"), compare)
    assert response.status_code in (200, 400)
    assert f"{INT_MAX}" in response.content.decode()
    stored = StoredScenarioFactory(preset="seed-002-cpu-and-gpu")
    attach = {
        "engine_hosts": 2,
        "simple_hosts": 0,
        "policy": "boinc7",
        "days": 1,
        "seed": seed,
        "speedup": 3600,
        "resource_share": 100,
        "delay_bound_hours_a": 72,
    }
    response = client.post(reverse("worlds:attach", args=[stored.pk]), attach)
    assert response.status_code in (200, 400)
    assert f"{INT_MAX}" in response.content.decode()
    assert not World.objects.exists()


def test_a_buffer_under_a_second_is_refused_and_a_short_one_is_shown_briefly(client):
    # finding 12: 1e-320 days was saved, and 20 s showed as 0.0002314814814814815 days
    owner = UserFactory(username="owner", password="pw-owner-1")
    host = HostFactory(owner=owner, work_buf_min_days=20 / 86400)
    client.force_login(owner)
    url = f"/project/hosts/{host.pk}/prefs/"
    page = client.get(url).content.decode()
    assert 'value="0.000231481"' in page and "0.0002314814814814815" not in page
    response = client.post(url, {**PREFS, "work_buf_min_days": "1e-320"})
    assert response.status_code == 400
    assert "0, or at least one second" in response.content.decode()
    host.refresh_from_db()
    assert host.work_buf_min_days == 20 / 86400
    # the value as shown, sent back, is no change
    same = {**PREFS, "work_buf_min_days": "0.000231481", "work_buf_additional_days": "0.5", "max_ncpus_pct": "100"}
    client.post(url, same)
    assert not LifecycleEvent.objects.filter(host=host, field="work_buf_min_days").exists()
    host.refresh_from_db()
    assert host.work_buf_min_days == 20 / 86400


def test_the_lab_refuses_a_buffer_under_a_second(client, ann):
    stored = StoredScenarioFactory(owner=ann)
    data = form_data(stored)
    data["prefs-work_buf_additional_days"] = "1e-320"
    response = client.post(reverse("lab:edit", args=[stored.pk]), data)
    assert "0, or at least one second" in response.content.decode()


def test_the_host_pages_show_domain_names_to_their_owner_and_staff_only(client):
    owner = UserFactory(username="owner", password="pw-owner-1")
    stranger = UserFactory(username="stranger", password="pw-stranger-1")
    staff = UserFactory(username="staff", password="pw-staff-1", is_staff=True)
    host = HostFactory(owner=owner, domain_name="owners-box.example.org")
    for viewer, shown in [(None, False), (stranger, False), (owner, True), (staff, True)]:
        client.logout()
        if viewer:
            client.force_login(viewer)
        page = client.get("/project/hosts/").content.decode()
        assert ("owners-box.example.org" in page) is shown, viewer
        assert f'href="/project/hosts/{host.pk}/"' in page
        # the host's own page and its owner's page name it the same way
        for path in (f"/project/hosts/{host.pk}/", f"/project/users/{owner.pk}/"):
            response = client.get(path)
            assert response.status_code == 200, path
            assert ("owners-box.example.org" in response.content.decode()) is shown, (viewer, path)
            assert shown or f"host {host.pk}" in response.content.decode(), path
    assert Host.objects.count() == 1
