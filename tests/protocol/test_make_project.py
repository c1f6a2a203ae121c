"""``manage.py make_project``: a live project made from the command line has its row, its
directories and key pair, an app the work generator fills, and BOINC endpoints that answer;
a refused argument makes nothing (docs/projects.md)."""

import io

import pytest
from django.core.management import CommandError, call_command

from backend.daemons import work_generator
from backend.models import App, Project, Workunit
from protocol import signing
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db

CONFIG = "<boinc><config><daily_result_quota>7</daily_result_quota></config></boinc>\n"


def make(*args):
    out = io.StringIO()
    call_command("make_project", *args, stdout=out)
    return out.getvalue()


def test_a_made_project_is_live_with_its_own_dirs_keys_app_and_endpoints(client, tmp_path):
    call_command("make_signing_keys", stdout=io.StringIO())  # the demo project's pair
    config = tmp_path / "config.xml"
    config.write_text(CONFIG)
    said = make(
        "science", "--name", "Science at home", "--config", str(config), "--app", "fold", "--unsent-target", "6"
    )
    project = Project.objects.get(slug="science")
    assert (project.name, project.kind, project.simulated_time) == ("Science at home", "live", None)
    assert project.scheduler_config().daily_result_quota == 7
    assert project.download_dir.is_dir() and project.upload_dir.is_dir()
    assert "projects/science" in str(project.download_dir)
    key = signing.parse_public_key(signing.load_public_key_text(project.keys_dir))
    assert key.n.bit_length() == signing.BITS
    assert signing.load_public_key_text(Project.demo().keys_dir) != signing.load_public_key_text(project.keys_dir)
    assert "add_app_version fold VERSION EXECUTABLE --project science" in said
    # the work generator tops its app up to the target, in its project only (2 results a workunit)
    app = App.objects.get(project=project, name="fold")
    assert work_generator.run_once(project=project, now=project.now(), batch_size=100) == 3
    assert Workunit.objects.filter(project=project, app=app).count() == 3
    assert not Workunit.objects.exclude(project=project).exists()
    page = client.get("/projects/science/boinc/")
    assert page.status_code == 200
    assert b"/projects/science/boinc/cgi" in page.content


@pytest.mark.parametrize(
    "args, message",
    [
        (["bad slug"], "not a slug"),
        (["taken"], "already a project 'taken'"),
        (["world-9"], "worlds' projects"),
        (["x" * 51], "more than 50"),
        (["fine", "--config", "/nonexistent/config.xml"], "cannot read"),
        (["fine", "--config", "BROKEN"], "not well-formed"),
        (["fine", "--name", "  "], "--name"),
        (["fine", "--unsent-target", "-1"], "negative"),
    ],
)
def test_a_refused_argument_makes_nothing(args, message, tmp_path, settings):
    ProjectFactory(slug="taken")
    broken = tmp_path / "broken.xml"
    broken.write_text("<boinc><config>")
    args = [str(broken) if a == "BROKEN" else a for a in args]
    before = sorted(Project.objects.values_list("slug", flat=True))
    with pytest.raises(CommandError, match=message) as refused:
        make(*args)
    assert refused.value.returncode == 2
    assert sorted(Project.objects.values_list("slug", flat=True)) == before
    assert not (settings.BOINCWEB_DATA_DIR / "projects" / "fine").exists()
