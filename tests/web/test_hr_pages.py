"""Where an admin looks for homogeneous redundancy and the job limits: a workunit's page shows
its app's HR type, the class and app version it is committed to; the status page shows the
project's options as config.xml and config_aux.xml set them."""

import pytest

from backend.models import Workunit
from tests.pages import by_testid, parse
from tests.web.project_data import (  # noqa: F401
    app,
    busy_workunit,
    host,
    make_results,
    make_workunits,
    owner,
    versions,
)

pytestmark = pytest.mark.django_db


def test_the_workunit_page_shows_the_hr_class_and_the_committed_app_version(client, app, versions):
    app.homogeneous_redundancy, app.homogeneous_app_version = 1, True
    app.save()
    wu = make_workunits(app, 1)[0]
    Workunit.objects.filter(pk=wu.pk).update(hr_class=256 + 11, app_version=versions[0])
    html = client.get(f"/project/workunits/{wu.id}/").content.decode()
    assert "1 (fine); HR class 267 (Linux, Intel Xeon)" in html
    assert f"on; committed to {versions[0]}" in html


def test_an_app_without_hr_shows_the_projects_or_off(client, app, settings, tmp_path):
    wu = make_workunits(app, 1)[0]
    html = client.get(f"/project/workunits/{wu.id}/").content.decode()
    assert "off; HR class 0 (not committed)" in html
    config = tmp_path / "config.xml"
    config.write_text("<config><homogeneous_redundancy>2</homogeneous_redundancy></config>")
    settings.BOINC_CONFIG_XML = str(config)
    html = client.get(f"/project/workunits/{wu.id}/").content.decode()
    assert "2 (coarse, the project&#x27;s); HR class 0" in html


def test_the_status_page_shows_the_hr_and_job_limit_options(client, settings, tmp_path):
    (tmp_path / "config.xml").write_text(
        "<boinc><config><homogeneous_redundancy>1</homogeneous_redundancy><hr_class_static/>"
        "<max_wus_in_progress>2</max_wus_in_progress>"
        "<min_sendwork_interval>600</min_sendwork_interval><report_max>50</report_max>"
        "</config></boinc>"
    )
    (tmp_path / "config_aux.xml").write_text(
        "<config><max_jobs_in_progress><app><app_name>einstein</app_name><gpu_limit><jobs>1"
        "</jobs></gpu_limit></app></max_jobs_in_progress></config>"
    )
    settings.BOINC_CONFIG_XML = str(tmp_path / "config.xml")
    section = by_testid(parse(client.get("/project/status/")), "server-options")
    for name, value in [
        ("homogeneous_redundancy", "1 (fine)"),
        ("hr_class_static", "yes"),
        ("max_wus_in_progress", "2"),
        ("min_sendwork_interval", "600 s"),
        ("report_max", "50"),
        ("max_jobs_in_progress (project)", "CPU 2 per processor"),
        ("max_jobs_in_progress (einstein)", "GPU 1"),
    ]:
        assert value in section.find("tr", attrs={"data-option": name}).get_text(), name


def test_an_unreadable_config_is_said_on_the_status_page_not_a_500(client, settings, tmp_path):
    (tmp_path / "config.xml").write_text("<config><report_max>x</report_max></config>")
    settings.BOINC_CONFIG_XML = str(tmp_path / "config.xml")
    page = client.get("/project/status/")
    assert page.status_code == 200
    assert "unreadable" in page.content.decode()
