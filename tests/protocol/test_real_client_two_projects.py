"""One Debian boinc client attached to two projects at once (DESIGN.md "Projects";
reference/protocol.md §2, §11): the demo project at /boinc/ and a second live project at
/projects/second/boinc/, with one account key each and different resource shares. Both
projects have an app called "upper", so nothing but the project tells their work apart.

The shares are the volunteer's project preferences on each server (Account.resource_share),
not the client's: its account files carry none, so it starts with BOINC's 100 for each, and
takes each project's share from that project's scheduler reply (<project_preferences>).

The client runs a job of each, uploads each output to its project's handler and reports it to
its project's scheduler; every row and file lands in that project. Skipped, saying so, where
the client is not installed; CI installs it.
"""

import xml.etree.ElementTree as ElementTree

import pytest
from django.db.models import F

from backend.daemons.hierarchy import assimilated_path, upload_path
from backend.models import File, Host, LifecycleEvent, Outcome, Result, ServerState, ValidateState
from protocol.client import ClientDir, escape_project_url
from protocol.models import Account
from protocol.scheduler_rpc import scheduler_rpc
from protocol.xml_request import parse_request
from tests.factories import ProjectFactory, UserFactory, demo_project
from tests.protocol.conftest import make_app, make_jobs, reload, result_of, run_daemons

pytestmark = [pytest.mark.real_client, pytest.mark.django_db(transaction=True)]

SHARES = {"demo": 100, "second": 25}


def test_a_client_attached_to_two_projects_reports_each_job_to_its_own_project(real_client, monkeypatch):
    demo, second = demo_project(), ProjectFactory(slug="second", name="Second project")
    inputs = {"demo": b"for the demo project\n" * 50, "second": b"for the second project\n" * 50}
    wus = {
        project.slug: make_jobs(
            make_app("upper", project=project), [f"{project.slug}_wu"], inputs=lambda name: inputs[name.split("_")[0]]
        )[0]
        for project in (demo, second)
    }
    person = UserFactory(username="volunteer")
    keys = {}
    for project in (demo, second):
        account = Account.for_user(person, project)
        Account.objects.filter(pk=account.pk).update(resource_share=SHARES[project.slug])
        keys[project.slug] = account.authenticator
    reported: dict[str, list[str]] = {"demo": [], "second": []}

    def spy(body, *, project, **kwargs):
        """The real scheduler; notes which results each project's scheduler was told of."""
        reported[project.slug] += [r.name for r in parse_request(body).request.results]
        return scheduler_rpc(body, project=project, **kwargs)

    monkeypatch.setattr("protocol.views.scheduler_rpc", spy)

    client = real_client()
    dirs = {
        "demo": client.dir,
        "second": ClientDir(client.dir.path, client.dir.master_url.replace("/boinc/", "/projects/second/boinc/")),
    }
    for slug, project_dir in dirs.items():
        project_dir.install_anonymous_app("upper")
        project_dir.write_account_file(keys[slug])
    client.start(None)
    client.wait()

    hosts = {}
    for project in (demo, second):
        result = result_of(wus[project.slug])
        assert (result.server_state, result.outcome) == (ServerState.OVER, Outcome.SUCCESS), client.diagnostics()
        assert reported[project.slug] == [result.name]
        hosts[project.slug] = Host.objects.get(project=project)
        assert result.host == hosts[project.slug] and hosts[project.slug].owner == person
        output = result.output_files.get()
        assert output.project == project
        assert upload_path(project, output.name).read_bytes() == inputs[project.slug].upper() + b"upper done\n"
        other = second if project == demo else demo
        assert not upload_path(other, output.name).exists()
    assert hosts["demo"] != hosts["second"]

    # no row names one project and refers to another's
    assert not Result.objects.exclude(host=None).exclude(host__project=F("project")).exists()
    assert not Result.objects.exclude(workunit__project=F("project")).exists()
    assert not File.objects.exclude(result=None).exclude(result__project=F("project")).exists()
    assert not LifecycleEvent.objects.exclude(workunit=None).exclude(workunit__project=F("project")).exists()

    # the client holds both projects with the resource shares their servers sent, and keeps
    # each project's preferences in its account file
    state = ElementTree.parse(client.dir.path / "client_state.xml").getroot()
    shares = {p.findtext("master_url"): float(p.findtext("resource_share")) for p in state.iter("project")}
    assert shares == {dirs[slug].master_url: float(SHARES[slug]) for slug in dirs}, client.diagnostics()
    for slug, project_dir in dirs.items():
        account_file = ElementTree.parse(client.dir.path / f"account_{escape_project_url(project_dir.master_url)}.xml")
        assert account_file.findtext("project_preferences/resource_share") == str(SHARES[slug])

    # each project's daemons finish its own job in its own directories
    for project in (demo, second):
        run_daemons(project=project)
        wu = reload(wus[project.slug])
        assert result_of(wu).validate_state == ValidateState.VALID
        assert assimilated_path(project, "upper", wu.name).read_bytes().startswith(inputs[project.slug].upper())
        assert not upload_path(project, result_of(wu).output_file_name(0)).exists()
