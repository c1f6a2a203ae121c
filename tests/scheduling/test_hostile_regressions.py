"""Regressions for the scenario findings of issue 14: each input once took the service down
(memory, a 500, a hang, a traceback, a pinned worker); now it gets a clear refusal."""

import io
import json
import pathlib
import subprocess
import sys

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError

from scheduling.engine import run as engine_run
from scheduling.engine.readers import read_json
from scheduling.engine.scenario import MAX_CPUS, App, AppVersion, Host, Project, Scenario
from scheduling.jobs import run_simulation
from scheduling.models import Run, StoredScenario
from tests.factories import RunFactory, StoredScenarioFactory

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"
pytestmark = pytest.mark.django_db

CLIENT_STATE = """<client_state>
<host_info><p_ncpus>{ncpus}</p_ncpus><p_fpops>{fpops}</p_fpops></host_info>
<project><master_url>http://a/</master_url><project_name>A</project_name></project>
<app><name>a</name></app>
<app_version><app_name>a</app_name><avg_ncpus>1</avg_ncpus><flops>1e9</flops></app_version>
</client_state>"""


@pytest.fixture
def ann(client):
    user = User.objects.create_user("ann", password="pw-ann-123")
    client.force_login(user)
    client.user = user
    return client


@pytest.fixture
def stored(ann):
    return StoredScenarioFactory(owner=ann.user)


def import_(client, **fields):
    data = {"name": "", "pcdr": ""}
    data.update(fields)
    return client.post("/lab/import/", data)


def manage(*args, timeout=120):
    return subprocess.run(
        [sys.executable, "manage.py", *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def assert_one_line_exit_2(proc, *words):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    for word in words:
        assert word in proc.stderr


# ---------------------------------------------------------------- 1: a billion CPUs


def test_a_billion_cpus_is_refused_by_every_import_naming_the_limit(ann):
    response = import_(ann, pcdr="A(1, 24, 1) NCPUS = 1000000000")
    assert response.status_code == 400
    assert "NCPUS is 1000000000; the limit is 1024" in response.content.decode()
    xml = SimpleUploadedFile("client_state.xml", CLIENT_STATE.format(ncpus="1e9", fpops="1e9").encode())
    response = import_(ann, client_state=xml)
    assert response.status_code == 400 and "p_ncpus" in response.content.decode()
    assert "the limit is 1024" in response.content.decode()
    for ncpus in ("1e9", "1000000000"):
        text = (
            f'{{"host": {{"ncpus": {ncpus}}}, '
            '"projects": [{"name": "A", "apps": [{"name": "a", "versions": [{}]}]}]}'
        )
        response = import_(ann, scenario_json=SimpleUploadedFile("s.json", text.encode()))
        assert response.status_code == 400 and "scenario.host" in response.content.decode()
    assert StoredScenario.objects.count() == 0


def test_the_engine_itself_refuses_more_cpus_than_the_limit():
    with pytest.raises(ValueError, match=f"the limit is {MAX_CPUS}"):
        Host(ncpus=MAX_CPUS + 1)


# ---------------------------------------------------------------- 2: overflow to infinity


@pytest.mark.parametrize(
    "field, value",
    [
        ("host-cpu_gflops", "1e308"),
        ("apps-0-gflops", "1e300"),
        ("apps-0-size_gflop", "1e300"),
        ("gpus-0-peak_gflops", "1e308"),
    ],
)
def test_numbers_that_overflow_to_infinity_are_field_errors_not_500s(ann, stored, field, value):
    from tests.scheduling.test_lab_views import form_data

    data = form_data(stored)
    data[field] = value
    if field.startswith("gpus"):
        data["gpus-0-gpu_type"] = "NVIDIA"
    before = json.dumps(stored.data, sort_keys=True)
    response = ann.post(f"/lab/{stored.pk}/edit/", data)
    assert response.status_code == 400 and "At most" in response.content.decode()
    stored.refresh_from_db()
    assert json.dumps(stored.data, sort_keys=True) == before


def test_a_paste_of_enormous_hours_is_refused_and_simulate_exits_at_once(ann, tmp_path):
    response = import_(ann, pcdr="A(1e308, 1e308, 1)")
    assert response.status_code == 400
    assert "C is 1e+308 hours; the limit is 87600 hours" in response.content.decode()
    assert StoredScenario.objects.count() == 0
    path = tmp_path / "inf.txt"
    path.write_text("A(1e308, 1e308, 1)\n")
    assert_one_line_exit_2(manage("simulate", path, "--duration", "1h", "--json", timeout=60), "the limit is")


def test_an_infinite_number_never_reaches_the_engine():
    with pytest.raises(ValueError, match="not a finite number"):
        App(name="a", versions=(AppVersion(flops=float("inf")),))
    with pytest.raises(ValueError, match="not a finite number"):
        engine_run(
            Scenario(host=Host(), projects=(Project("A", apps=(App("a", (AppVersion(),)),)),)), duration=float("nan")
        )


# ---------------------------------------------------------------- 3: deep JSON, big pastes


def test_deeply_nested_json_is_refused_before_parsing_by_every_door(ann, tmp_path):
    deep = "[" * 100_000
    with pytest.raises(ValueError, match="nested more than 16 levels"):
        read_json(deep)
    response = import_(ann, scenario_json=SimpleUploadedFile("deep.json", deep.encode()))
    assert response.status_code == 400 and "nested more than 16 levels" in response.content.decode()
    path = tmp_path / "deep.json"
    path.write_text(deep)
    assert_one_line_exit_2(manage("simulate", path, "--duration", "1h"), "nested")
    assert_one_line_exit_2(manage("rrsim", path, "--json"), "nested")


def test_a_three_megabyte_paste_gets_the_form_with_the_reason(ann):
    response = import_(ann, pcdr="A(1, 24, 1)\n" * 260_000)
    assert response.status_code == 413
    body = response.content.decode()
    assert 'id="import-form"' in body and "a form may send at most 2.5 MB" in body
    assert StoredScenario.objects.count() == 0


def test_a_paste_over_the_text_limit_but_under_the_form_limit_is_a_field_error(ann):
    response = import_(ann, pcdr="# " + "x" * 200_000)
    assert response.status_code == 400
    assert "Ensure this value has at most 100000 characters" in response.content.decode()


# ---------------------------------------------------------------- 4: pinned workers


def big_form(stored, ncpus=1024, projects=40):
    from tests.scheduling.test_lab_views import form_data

    data = form_data(stored)
    data["host-ncpus"] = ncpus
    data["projects-TOTAL_FORMS"] = projects
    data["apps-TOTAL_FORMS"] = projects
    for i in range(projects):
        data[f"projects-{i}-name"] = f"P{i}"
        data[f"projects-{i}-resource_share"] = 100
        data[f"projects-{i}-available_frac"] = 1
        data[f"projects-{i}-available_hours"] = 1
        for key, value in dict(
            project=f"P{i}",
            name="a",
            resource="cpu",
            avg_ncpus=1,
            gpu_usage=0,
            gflops=1,
            size_gflop=3600,
            latency_bound_hours=240,
            checkpoint_minutes=0,
            resume_cost_minutes=0,
        ).items():
            data[f"apps-{i}-{key}"] = value
    return data


def test_a_run_over_the_budget_is_refused_with_its_estimate_and_creates_nothing(ann, stored, redis_client):
    response = ann.post(f"/lab/{stored.pk}/edit/", big_form(stored))
    assert response.status_code == 302, response.content.decode()[:2000]
    page = ann.get(f"/lab/{stored.pk}/").content.decode()
    assert "Estimated engine time: about 2.7 min a run for 24 h" in page
    assert "The lab's budget is 5 min a run, which fits about 45.2 h of this scenario" in page
    response = ann.post(
        f"/lab/{stored.pk}/runs/",
        {"policy": "boinc7", "duration": "100d", "seed": 1, "compat": "intended", "delta": 60},
    )
    assert response.status_code == 400
    assert "of engine time (estimated); the lab&#x27;s budget is 5 min a run" in response.content.decode()
    assert Run.objects.count() == 0


# The cap is counted under a lock on the person's row (SELECT ... FOR UPDATE): database-specific.
@pytest.mark.database
def test_a_person_has_at_most_the_cap_of_runs_queued_and_a_comparison_counts_each(
    ann, stored, redis_client, settings, django_capture_on_commit_callbacks
):
    settings.LAB_ACTIVE_RUNS_PER_USER = 3
    with django_capture_on_commit_callbacks(execute=True):
        response = ann.post(
            f"/lab/{stored.pk}/compare/",
            {"policies": ["boinc5", "boinc7"], "duration": "1h", "seed": 1, "compat": "intended"},
        )
    assert response.status_code == 302 and Run.objects.filter(owner=ann.user).count() == 2
    response = ann.post(
        f"/lab/{stored.pk}/compare/",
        {"policies": ["boinc5", "boinc7"], "duration": "1h", "seed": 1, "compat": "intended"},
    )
    assert response.status_code == 429
    assert "You have 2 runs queued or running and this would start 2 more" in response.content.decode()
    assert Run.objects.count() == 2
    Run.objects.update(status=Run.Status.DONE)
    response = ann.post(
        f"/lab/{stored.pk}/runs/", {"policy": "boinc7", "duration": "1h", "seed": 1, "compat": "intended", "delta": 60}
    )
    assert response.status_code == 302


def test_a_run_slower_than_its_estimate_is_stopped_by_its_measured_speed(stored, settings):
    settings.LAB_RUN_BUDGET_SECONDS = 1
    heavy = StoredScenarioFactory(scenario=read_json((SCENARIOS / "standard.json").read_text()), preset="")
    run = RunFactory(scenario=heavy, duration=100 * 86400.0)
    assert run_simulation(run.pk) == "failed"
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and run.error.startswith("Stopped after")
    assert "over twice the lab's budget of 1 s" in run.error


def test_a_twenty_thousand_project_paste_is_refused_and_so_are_forty_one_projects(ann):
    response = import_(ann, pcdr="\n".join(f"P{i}(1, 24, 1)" for i in range(20_000)))
    assert response.status_code == 400
    assert "Ensure this value has at most 100000 characters" in response.content.decode()
    response = import_(ann, pcdr="\n".join(f"P{i}(1, 24, 1)" for i in range(2_000)))
    assert response.status_code == 400
    assert "line 41: more than 40 projects; the limit is 40" in response.content.decode()
    assert StoredScenario.objects.count() == 0


# ---------------------------------------------------------------- Redis down


def test_a_run_redis_cannot_take_is_not_created_and_the_page_says_why(ann, stored, settings):
    settings.RQ_QUEUES = {name: dict(conf, URL="redis://127.0.0.1:1/0") for name, conf in settings.RQ_QUEUES.items()}
    response = ann.post(
        f"/lab/{stored.pk}/runs/", {"policy": "boinc7", "duration": "1h", "seed": 1, "compat": "intended", "delta": 60}
    )
    assert response.status_code == 503 and "Redis is not reachable" in response.content.decode()
    response = ann.post(
        f"/lab/{stored.pk}/compare/",
        {"policies": ["boinc5", "boinc7"], "duration": "1h", "seed": 1, "compat": "intended"},
    )
    assert response.status_code == 503 and "nothing was started" in response.content.decode()
    assert Run.objects.count() == 0


def test_a_run_whose_enqueue_fails_after_its_commit_is_failed_with_the_reason(
    stored, settings, django_capture_on_commit_callbacks
):
    from scheduling.jobs import enqueue_run

    settings.RQ_QUEUES = {name: dict(conf, URL="redis://127.0.0.1:1/0") for name, conf in settings.RQ_QUEUES.items()}
    run = RunFactory(scenario=stored)
    with django_capture_on_commit_callbacks(execute=True):
        enqueue_run(run)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and run.error.startswith("Redis did not take its job")


# ---------------------------------------------------------------- 7: rrsim --at nan


@pytest.mark.parametrize("at", ["nan", "inf", "1e300"])
def test_rrsim_refuses_a_time_that_is_not_a_finite_time_in_range(at):
    proc = manage("rrsim", SCENARIOS / "standard.json", "--at", at, "--json")
    assert_one_line_exit_2(proc, "--at")
    assert proc.stdout == ""


def test_rrsim_json_is_strict_json():
    out = io.StringIO()
    call_command("rrsim", str(SCENARIOS / "standard.json"), "--at", "3600", "--json", stdout=out)

    def no_constant(name):
        raise AssertionError(f"{name} is not JSON")

    assert json.loads(out.getvalue(), parse_constant=no_constant)["time"] == 3600.0
    with pytest.raises(CommandError, match="not a finite number") as info:
        call_command("rrsim", str(SCENARIOS / "standard.json"), "--at", "nan", "--json", stdout=io.StringIO())
    assert info.value.returncode == 2


def test_the_import_and_scenario_forms_still_check_csrf_after_reading_the_body_first():
    from django.test import Client

    user = User.objects.create_user("bob", password="pw-bob-123")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post("/lab/import/", {"pcdr": "A(1, 24, 1)"}).status_code == 403
    assert client.post("/lab/new/", {"meta-name": "x"}).status_code == 403
    page = client.get("/lab/import/")
    token = page.cookies["csrftoken"].value
    response = client.post("/lab/import/", {"pcdr": "A(1, 24, 1)", "csrfmiddlewaretoken": token})
    assert response.status_code == 302 and StoredScenario.objects.count() == 1
    # a body too big to read is answered with the form and the reason, and saves nothing
    response = client.post("/lab/import/", {"pcdr": "A(1, 24, 1)\n" * 260_000})
    assert response.status_code == 413 and StoredScenario.objects.count() == 1
