"""``manage.py create_work``: BOINC's create_work tool for a project admin (reference/server.md
§1.7): workunits of an app with their input files, the app's parameters or the ones given,
one transaction, and a clear refusal that creates nothing."""

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from backend.daemons import run_pass
from backend.models import File, Result, Workunit

pytestmark = pytest.mark.django_db


def create(*argv, stdin=None, monkeypatch=None):
    out = io.StringIO()
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    call_command("create_work", *argv, stdout=out)
    return out.getvalue().strip()


def test_one_workunit_takes_its_input_file_and_the_parameters_given(project, tmp_path, data_dirs):
    infile = tmp_path / "input.dat"
    infile.write_bytes(b"\x00three numbers: 1 2 3\n")
    said = create("--appname", project.app.name, "--wu_name", "job_1", str(infile), "--delay_bound", "7200")
    assert said == f"created 1 workunit of {project.app.name} in project demo"
    wu = Workunit.objects.get(name="job_1")
    assert (wu.delay_bound, wu.min_quorum, wu.rsc_fpops_est) == (
        7200,
        project.app.min_quorum,
        project.app.rsc_fpops_est,
    )
    (stored,) = wu.input_files.all()
    assert (data_dirs / "download" / stored.name).read_bytes() == infile.read_bytes()
    assert stored.nbytes == len(infile.read_bytes())
    # the transitioner's next pass makes its first results, as after BOINC's create_work
    assert run_pass("transitioner", project=wu.project, now=wu.transition_time + 1) == 1
    assert Result.objects.filter(workunit=wu).count() == wu.target_nresults


def test_stdin_takes_one_job_a_line_as_boincs_create_work_does(project, tmp_path, monkeypatch):
    for i in range(3):
        (tmp_path / f"in {i}").write_text(f"input {i}")
    lines = "".join(f"--wu_name batch_{i} '{tmp_path / f'in {i}'}'\n" for i in range(3)) + "\n"
    said = create("--appname", project.app.name, "--stdin", stdin=lines, monkeypatch=monkeypatch)
    assert said.startswith("created 3 workunits")
    assert list(Workunit.objects.order_by("id").values_list("name", flat=True)) == [f"batch_{i}" for i in range(3)]


@pytest.mark.parametrize(
    "argv, stdin, message",
    [
        (
            ["--appname", "nosuch", "--wu_name", "a", "IN"],
            None,
            "project demo has no app 'nosuch' \\(its apps: uppercase\\)",
        ),
        (["--appname", "uppercase"], None, "give one of --wu_name NAME INFILE and --stdin"),
        (
            ["--appname", "uppercase", "--wu_name", "a", "/no/such/file"],
            None,
            "input of a: /no/such/file: No such file",
        ),
        (["--appname", "uppercase", "--wu_name", "../a", "IN"], None, "workunit name '../a'"),
        (["--appname", "uppercase", "--wu_name", "a", "IN", "--min_quorum", "5"], None, "min_quorum must not exceed"),
        (["--appname", "uppercase", "--wu_name", "taken", "IN"], None, "already taken: taken$"),
        (
            ["--appname", "uppercase", "--wu_name", "clash", "IN"],
            None,
            "already taken: clash \\(a file clash.in exists\\)",
        ),
        (["--appname", "uppercase", "--stdin"], "--wu_name b IN\n--wu_name c IN --priority 3\n", "line 2: expected"),
        (["--appname", "uppercase", "--stdin"], "--wu_name b IN\n--wu_name b IN\n", "given twice"),
        (["--appname", "uppercase", "--stdin"], "\n", "no jobs on standard input"),
        (["--appname", "uppercase", "--wu_name", "a", "IN", "--project", "nosuch"], None, "nosuch"),
    ],
)
def test_a_refused_batch_says_why_and_creates_nothing(project, tmp_path, monkeypatch, argv, stdin, message):
    project.workunit(name="taken")
    File.objects.create(project_id=project.app.project_id, name="clash.in", kind=File.Kind.OUTPUT)
    (tmp_path / "IN").write_text("input")
    monkeypatch.chdir(tmp_path)
    before = (Workunit.objects.count(), File.objects.count())
    with pytest.raises(CommandError, match=message) as info:
        create(*argv, stdin=stdin, monkeypatch=monkeypatch)
    assert info.value.returncode == 2
    assert (Workunit.objects.count(), File.objects.count()) == before
    assert not (tmp_path / "download").exists() or not any((tmp_path / "download").iterdir())
