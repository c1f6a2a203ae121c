"""The scheduling lab's pages, whole and as their htmx fragments."""

import functools
import io
import json
import re
import zipfile

import django_rq
import pytest
from django.contrib.auth.models import User
from django.test import Client

from scheduling import charts, jobs
from scheduling.engine.readers import read_json
from scheduling.jobs import run_simulation
from scheduling.models import Run, StoredScenario
from scheduling.presets import BY_SLUG
from tests.factories import RunFactory, StoredScenarioFactory
from tests.pages import parse

HX = {"HTTP_HX_REQUEST": "true"}
pytestmark = pytest.mark.django_db


@pytest.fixture
def user():
    return User.objects.create_user("ann", password="pw-ann-123")


@pytest.fixture
def ann(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def stored(user):
    return StoredScenarioFactory(owner=user)


def finished_run(stored, policy="boinc7", duration=6 * 3600.0):
    run = RunFactory(scenario=stored, policy=policy, duration=duration)
    assert run_simulation(run.pk) == "done"
    run.refresh_from_db()
    return run


def form_data(stored_scenario):
    """The POST data the scenario form sends back unchanged for a scenario."""
    from scheduling.forms import ScenarioForms, scenario_initial

    return ScenarioForms(initial=scenario_initial(stored_scenario.engine_scenario())).as_post_data()


# ---------------------------------------------------------------- list, presets


def test_the_lab_index_lists_presets_and_scenarios(client, stored):
    page = client.get("/lab/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "seed 001: Scenario 1" in body and "seed 000" in body and "seed 002" in body
    assert f"/lab/{stored.pk}/" in body


def test_loading_a_preset_needs_a_login(client):
    response = client.post("/lab/presets/seed-001-scenario-1/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert StoredScenario.objects.count() == 0


def test_loading_a_preset_stores_its_scenario_and_opens_it(ann):
    response = ann.post("/lab/presets/seed-002-cpu-and-gpu/")
    stored = StoredScenario.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/lab/{stored.pk}/"
    assert stored.engine_scenario().host.gpus[0].name == "NVIDIA"
    assert stored.preset == "seed-002-cpu-and-gpu"


def test_an_unknown_preset_is_a_404_and_stores_nothing(ann):
    assert ann.post("/lab/presets/seed-999/").status_code == 404
    assert StoredScenario.objects.count() == 0


def test_posts_without_a_csrf_token_are_refused(user, stored):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.post("/lab/presets/seed-001-scenario-1/").status_code == 403
    assert strict.post(f"/lab/{stored.pk}/delete/").status_code == 403
    assert StoredScenario.objects.count() == 1


# ---------------------------------------------------------------- scenario pages


def test_the_scenario_page_shows_its_projects_and_the_compare_button(client, stored):
    page = client.get(f"/lab/{stored.pk}/")
    body = page.content.decode()
    assert page.status_code == 200
    assert "P1_app" in body and "P2_app" in body and "Compare policies" in body
    assert "P1(0.1, 1, 0.5)" in body


def test_a_preset_scenario_opens_with_its_run_length_policies_and_a_readable_buffer(ann, user):
    wrr = StoredScenarioFactory(preset="seed-001-wrr-example", owner=user)
    body = ann.get(f"/lab/{wrr.pk}/").content.decode()
    page = parse(body)
    # one run, compare policies, compare values
    assert len(page.find_all(attrs={"name": "duration", "value": "1d"})) == 3
    checked = {
        box["value"]
        for box in page.find_all("input", type="checkbox", attrs={"name": "policies"})
        if box.has_attr("checked")
    }
    assert checked == {"wrr", "boinc7"}
    assert "Work buffer: at least 2.4 h, up to 8.4 h of queued work" in body
    scenario_1 = StoredScenarioFactory(owner=user)
    assert (
        "Work buffer: at least 6 min, up to 30 min of queued work" in ann.get(f"/lab/{scenario_1.pk}/").content.decode()
    )


def test_the_scenario_fragment_is_the_run_list_and_stops_polling_when_no_run_is_going(client, stored):
    finished_run(stored)
    page = client.get(f"/lab/{stored.pk}/", **HX)
    assert page.status_code == 286
    body = page.content.decode()
    assert body.lstrip().startswith('<section id="runs"') and "hx-trigger" not in body


def test_the_scenario_fragment_keeps_polling_while_a_run_is_queued(client, stored):
    RunFactory(scenario=stored)
    page = client.get(f"/lab/{stored.pk}/", **HX)
    assert page.status_code == 200 and 'hx-trigger="every 2s"' in page.content.decode()


def test_a_missing_scenario_is_a_404(client):
    assert client.get("/lab/999/").status_code == 404


def test_the_new_scenario_form_needs_a_login(client):
    response = client.get("/lab/new/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_new_scenario_form_renders(ann):
    assert 'name="host-ncpus"' in ann.get("/lab/new/").content.decode()


def test_each_formset_has_an_add_button_and_the_empty_row_it_clones(ann):
    html = ann.get("/lab/new/").content.decode()
    assert "js/formset.js" in html and "Need more rows" not in html
    page = parse(html)
    for prefix, label in [("gpus", "Add a GPU type"), ("projects", "Add a project"), ("apps", "Add an app")]:
        assert page.find("button", attrs={"data-formset-add": prefix}).get_text() == label
        names = [
            field["name"]
            for field in page.find("template", attrs={"data-formset-empty": prefix}).find_all(attrs={"name": True})
        ]
        assert any(name.startswith(f"{prefix}-__prefix__-") for name in names)
        assert not any(name.startswith(f"{prefix}-0-") for name in names)
        assert page.find("tbody", attrs={"data-formset-rows": prefix}) is not None


def test_the_gpu_add_button_is_disabled_at_the_formsets_maximum(ann, stored):
    data = form_data(stored)
    data.update(
        {
            "gpus-TOTAL_FORMS": 3,
            "gpus-0-gpu_type": "NVIDIA",
            "gpus-1-gpu_type": "ATI",
            "gpus-2-gpu_type": "intel_gpu",
            "meta-name": "",
        }
    )
    response = ann.post("/lab/new/", data)
    page = parse(response)
    assert response.status_code == 400
    assert page.find(attrs={"data-formset-add": "gpus"}).has_attr("disabled")
    assert not page.find(attrs={"data-formset-add": "projects"}).has_attr("disabled")


def test_saving_the_form_unchanged_keeps_the_scenario_exactly(ann, stored):
    before = stored.data
    response = ann.post(f"/lab/{stored.pk}/edit/", form_data(stored))
    assert response.status_code == 302
    stored.refresh_from_db()
    assert read_json(json.dumps(stored.data)) == read_json(json.dumps(before))


def test_creating_a_scenario_through_the_form_stores_it(ann, stored):
    data = form_data(stored)
    data["meta-name"] = "a new one"
    data["host-ncpus"] = 3
    response = ann.post("/lab/new/", data)
    created = StoredScenario.objects.get(name="a new one")
    assert response.status_code == 302 and response["Location"] == f"/lab/{created.pk}/"
    assert created.engine_scenario().host.ncpus == 3


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("host-ncpus", "0", "greater than or equal to 1"),
        ("host-on_frac", "1.5", "less than or equal to 1"),
        ("prefs-cpu_scheduling_period_minutes", "0", "At least 1."),
        ("prefs-work_buf_min_days", "-1", "Cannot be negative"),
        ("projects-0-resource_share", "-5", "Cannot be negative"),
        ("apps-0-project", "Nowhere", "No project above has this name"),
        ("apps-0-resource", "NVIDIA", "needs more than 0 GPUs per job"),
        ("apps-0-gpu_usage", "-1", "greater than or equal to 0"),
        ("apps-0-size_gflop", "abc", "Enter a number"),
        ("projects-1-name", "P1", "Two projects have this name"),
    ],
)
def test_the_scenario_form_rejects_bad_input_with_a_field_error_and_changes_nothing(ann, stored, field, value, message):
    before = json.dumps(stored.data, sort_keys=True)
    data = form_data(stored)
    data[field] = value
    response = ann.post(f"/lab/{stored.pk}/edit/", data)
    assert response.status_code == 400
    assert message in response.content.decode()
    stored.refresh_from_db()
    assert json.dumps(stored.data, sort_keys=True) == before


def test_a_gpu_app_on_a_host_without_that_gpu_is_a_field_error(ann, stored):
    data = form_data(stored)
    data.update({"apps-0-resource": "ATI", "apps-0-gpu_usage": "1"})
    response = ann.post(f"/lab/{stored.pk}/edit/", data)
    assert response.status_code == 400 and "The host has no GPU of this type" in response.content.decode()


def test_duplicating_a_scenario_copies_its_data(ann, stored):
    response = ann.post(f"/lab/{stored.pk}/duplicate/")
    copy = StoredScenario.objects.exclude(pk=stored.pk).get()
    stored.refresh_from_db()
    assert response.status_code == 302 and copy.data == stored.data and copy.name.endswith("(copy)")


def test_deleting_a_scenario_removes_it_and_its_runs(ann, stored):
    finished_run(stored)
    assert ann.post(f"/lab/{stored.pk}/delete/").status_code == 302
    assert StoredScenario.objects.count() == 0 and Run.objects.count() == 0


def test_deleting_by_get_is_not_allowed(ann, stored):
    assert ann.get(f"/lab/{stored.pk}/delete/").status_code == 405
    assert StoredScenario.objects.count() == 1


# ---------------------------------------------------------------- import and export


def test_importing_pcdr_text_stores_the_scenario(ann):
    response = ann.post("/lab/import/", {"pcdr": "A(1, 10, .5) B(2, 24, .5) NCPUS = 2", "name": "two"})
    stored = StoredScenario.objects.get()
    assert response.status_code == 302 and stored.name == "two"
    assert [p.name for p in stored.engine_scenario().projects] == ["A", "B"]


@pytest.mark.parametrize(
    "text,message",
    [
        ("A(1, 10)", "needs three values"),
        ("A(1, 10, .5) NCPUS = 0", "NCPUS must be a positive whole number"),
        ("A(1, 10, .5) colour = blue", "unknown parameter"),
    ],
)
def test_importing_bad_pcdr_text_names_the_problem_and_stores_nothing(ann, text, message):
    response = ann.post("/lab/import/", {"pcdr": text})
    assert response.status_code == 400 and message in response.content.decode()
    assert StoredScenario.objects.count() == 0


def test_importing_nothing_or_two_sources_is_refused(ann):
    assert ann.post("/lab/import/", {}).status_code == 400
    upload = io.BytesIO(b"<client_state/>")
    upload.name = "client_state.xml"
    both = ann.post("/lab/import/", {"pcdr": "A(1, 10, .5)", "client_state": upload})
    assert both.status_code == 400 and "Give one source" in both.content.decode()
    assert StoredScenario.objects.count() == 0


def test_a_client_state_export_imports_back_to_the_same_scenario(ann, user):
    original = StoredScenarioFactory(scenario=BY_SLUG["seed-002-cpu-and-gpu"].scenario(), preset="", owner=user)
    archive = zipfile.ZipFile(io.BytesIO(ann.get(f"/lab/{original.pk}/client_state.zip").content))
    files = {}
    for key, name in (
        ("client_state", "client_state.xml"),
        ("global_prefs", "global_prefs.xml"),
        ("cc_config", "cc_config.xml"),
    ):
        files[key] = io.BytesIO(archive.read(name))
        files[key].name = name
    response = ann.post("/lab/import/", files)
    assert response.status_code == 302
    imported = StoredScenario.objects.exclude(pk=original.pk).get().engine_scenario()
    before = original.engine_scenario()
    assert imported.host == before.host and imported.prefs == before.prefs
    assert imported.projects == before.projects


def test_malformed_client_state_xml_is_a_field_error(ann):
    upload = io.BytesIO(b"<client_state><host_info>")
    upload.name = "client_state.xml"
    response = ann.post("/lab/import/", {"client_state": upload})
    assert response.status_code == 400 and "malformed XML" in response.content.decode()
    assert StoredScenario.objects.count() == 0


def test_the_import_page_renders(ann):
    assert "P(C, D, R)" in ann.get("/lab/import/").content.decode()


def test_exports_give_pcdr_text_and_json(client, stored):
    text = client.get(f"/lab/{stored.pk}/scenario.txt")
    assert text.status_code == 200 and "P2(1, 24, 0.25)" in text.content.decode()
    data = client.get(f"/lab/{stored.pk}/scenario.json")
    assert read_json(data.content.decode()) == read_json(json.dumps(stored.data))


# ---------------------------------------------------------------- runs


def test_starting_a_run_enqueues_the_engine_job(ann, stored, redis_client, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = ann.post(
            f"/lab/{stored.pk}/runs/", {"policy": "boinc5", "duration": "36h", "seed": 7, "compat": "bce", "delta": 60}
        )
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/lab/runs/{run.pk}/"
    assert (run.policy, run.duration, run.seed, run.compat) == ("boinc5", 36 * 3600.0, 7, "bce")
    queued = django_rq.get_queue("engine").jobs
    assert [(j.func_name, j.args) for j in queued] == [("scheduling.jobs.run_simulation", (run.pk,))]


@pytest.mark.parametrize(
    "field,value",
    [
        ("duration", "ten days"),
        ("duration", "0"),
        ("duration", "200d"),
        ("policy", "lottery"),
        ("seed", "-1"),
        ("compat", "strict"),
        ("delta", "0"),
    ],
)
def test_a_bad_run_choice_is_a_field_error_and_starts_nothing(ann, stored, field, value):
    data = {"policy": "boinc7", "duration": "1d", "seed": 1, "compat": "intended", "delta": 60, field: value}
    response = ann.post(f"/lab/{stored.pk}/runs/", data)
    assert response.status_code == 400 and "errorlist" in response.content.decode()
    assert Run.objects.count() == 0


def test_compare_policies_starts_one_run_per_policy_and_opens_the_comparison(ann, stored):
    response = ann.post(
        f"/lab/{stored.pk}/compare/",
        {"policies": ["boinc5", "boinc7"], "duration": "1d", "seed": 3, "compat": "intended"},
    )
    runs = list(Run.objects.order_by("pk"))
    assert [r.policy for r in runs] == ["boinc5", "boinc7"] and {r.seed for r in runs} == {3}
    assert response["Location"] == f"/lab/compare/?runs={runs[0].pk},{runs[1].pk}"


def test_compare_policies_needs_two_policies(ann, stored):
    response = ann.post(
        f"/lab/{stored.pk}/compare/", {"policies": ["boinc7"], "duration": "1d", "seed": 1, "compat": "intended"}
    )
    assert response.status_code == 400 and "at least two policies" in response.content.decode()
    assert Run.objects.count() == 0


def test_a_queued_run_page_shows_progress_and_polls(client, stored):
    run = RunFactory(scenario=stored)
    whole = client.get(f"/lab/runs/{run.pk}/").content.decode()
    assert "waiting for a worker" in whole and 'hx-trigger="every 2s"' in whole
    fragment = client.get(f"/lab/runs/{run.pk}/", **HX)
    assert fragment.status_code == 200
    assert fragment.content.decode().lstrip().startswith('<section id="run-status"')


def test_a_finished_run_page_carries_its_charts_card_and_decisions(client, stored):
    run = finished_run(stored)
    body = client.get(f"/lab/runs/{run.pk}/").content.decode()
    assert 'data-chart="gantt"' in body and 'data-testid="figures-card"' in body
    data = _payload(body)
    assert set(data["figures"]) == {"gantt", "rec", "priority", "buffer"}
    assert len(data["decisions"]) == len(run.records()["decisions"])


def _payload(body):
    """The first run's chart data a page embeds: its figures, and its decisions and facts."""
    scripts = [
        (*re.fullmatch(r"run-(\d+)-(\w+)", script["id"]).groups(), script.string)
        for script in parse(body).find_all("script", id=re.compile(r"^run-\d+-\w+$"), type="application/json")
    ]
    first = scripts[0][0]
    parts = {name: json.loads(text) for run, name, text in scripts if run == first}
    log = parts.pop("log")
    return {"figures": parts, **log}


def store_every_chunk(monkeypatch):
    # a clock that never moves and no wait between stores: every chunk but the last is stored
    monkeypatch.setattr(jobs, "PARTIAL_EVERY", 0.0)
    monkeypatch.setattr(jobs, "PartialRecords", functools.partial(jobs.PartialRecords, clock=lambda: 0.0))


def test_a_run_page_fetched_mid_run_shows_the_charts_so_far_and_keeps_polling(client, stored, monkeypatch):
    store_every_chunk(monkeypatch)
    monkeypatch.setattr(jobs, "PARTIAL_CHUNKS", 20)
    pages = []
    set_partial = Run.set_partial

    def store_and_look(run, fraction, records):
        assert set_partial(run, fraction, records)
        response = client.get(f"/lab/runs/{run.pk}/", **HX)
        pages.append((fraction, response.status_code, response.content.decode()))
        return True

    monkeypatch.setattr(Run, "set_partial", store_and_look)
    run = RunFactory(scenario=stored, policy="boinc5", duration=12 * 3600.0)
    assert run_simulation(run.pk) == "done"
    assert len(pages) > 10
    final = Run.objects.get(pk=run.pk).records()
    sizes = []
    for fraction, status, body in pages:
        assert status == 200 and 'hx-trigger="every 2s"' in body and 'data-chart="gantt"' in body
        assert 'data-testid="partial-note"' in body and 'data-testid="figures-card"' not in body
        data = _payload(body)
        assert data["run"]["partial"] is True and set(data["figures"]) == {"gantt", "rec", "priority", "buffer"}
        bars = [
            t for t in data["figures"]["gantt"]["data"] if t.get("mode") == "lines" and t["name"] in ("P1", "P2", "P3")
        ]
        ends = [x for t in bars for x in t["x"] if x is not None]
        assert ends and max(ends) <= fraction * 12 + 1e-3
        sizes.append(len(ends))
    assert sizes == sorted(sizes) and sizes[-1] > sizes[0], "the Gantt grows from poll to poll"
    assert final.get("partial") is None and final["figures"]
    response = client.get(f"/lab/runs/{run.pk}/", **HX)
    assert response.status_code == 286 and 'data-testid="figures-card"' in response.content.decode()


def test_partial_records_hold_open_slices_cut_at_the_time_reached(stored, monkeypatch):
    store_every_chunk(monkeypatch)
    stores = []
    monkeypatch.setattr(Run, "set_partial", lambda run, fraction, records: stores.append(records) or True)
    run = RunFactory(scenario=stored, duration=6 * 3600.0)
    assert run_simulation(run.pk) == "done"
    final = Run.objects.get(pk=run.pk).records()
    for records in stores:
        assert records["resources"] == {"cpu": {"instances": 2}} and records["policy"] == "boinc7"
        assert all(s["end"] <= records["time"] for s in records["slices"])
        closed = [s for s in records["slices"] if s["end"] < records["time"]]
        assert all(s in final["slices"] for s in closed)
        assert records["decisions"] == final["decisions"][: len(records["decisions"])]
    assert any(s["end"] == records["time"] for records in stores for s in records["slices"])


def test_a_finished_run_fragment_stops_the_polling(client, stored):
    run = finished_run(stored)
    response = client.get(f"/lab/runs/{run.pk}/", **HX)
    assert response.status_code == 286 and "hx-trigger" not in response.content.decode()


def test_a_failed_run_shows_its_error(client, stored):
    stored.data = {"host": {"ncpus": 0}, "projects": []}
    stored.save()
    run = RunFactory(scenario=stored)
    assert run_simulation(run.pk) == "failed"
    response = client.get(f"/lab/runs/{run.pk}/", **HX)
    body = response.content.decode()
    assert response.status_code == 286 and "The run failed" in body and "at least one CPU" in body


def test_a_run_with_an_unknown_policy_fails_naming_the_known_ones(client, stored):
    run = RunFactory(scenario=stored, policy="lottery")
    assert run_simulation(run.pk) == "failed"
    run.refresh_from_db()
    assert run.error.startswith("The run cannot start: unknown policy 'lottery'") and "boinc5" in run.error
    assert run.records() is None


def test_a_run_job_leaves_a_finished_run_alone(stored):
    run = finished_run(stored)
    assert run_simulation(run.pk) == "skipped"
    assert run_simulation(99999) == "skipped"


def test_run_exports_give_json_and_csv(client, stored):
    run = finished_run(stored)
    data = client.get(f"/lab/runs/{run.pk}.json").json()
    assert data["policy"] == "boinc7" and set(data["figures"]) >= {"idle_fraction", "monotony"}
    assert len(data["slices"]) == len(run.records()["slices"]) > 0
    csv = client.get(f"/lab/runs/{run.pk}.csv").content.decode().splitlines()
    assert csv[0] == "table,figure,value"
    assert sum(1 for line in csv if line.startswith("slices,")) == len(data["slices"])


def test_exports_of_an_unfinished_or_missing_run_are_refused(client, stored):
    run = RunFactory(scenario=stored)
    assert client.get(f"/lab/runs/{run.pk}.json").status_code == 409
    assert client.get(f"/lab/runs/{run.pk}.csv").status_code == 409
    assert client.get("/lab/runs/999.json").status_code == 404


# ---------------------------------------------------------------- compare


@pytest.mark.parametrize(
    "query", ["", "?runs=", "?runs=1,x", "?runs=1,1", "?runs=1,2,3,4,5,6,7", "?runs=-1,2", "?runs=99999999999999,1"]
)
def test_a_bad_compare_list_is_a_400(client, query):
    assert client.get(f"/lab/compare/{query}").status_code == 400


def test_a_compare_list_with_a_missing_run_is_a_404(client, stored):
    run = finished_run(stored)
    assert client.get(f"/lab/compare/?runs={run.pk},999").status_code == 404


def test_the_comparison_shows_both_figure_cards_and_the_differences(client, stored):
    a, b = finished_run(stored, "boinc7"), finished_run(stored, "wrr")
    body = client.get(f"/lab/compare/?runs={a.pk},{b.pk}").content.decode()
    assert body.count('data-testid="figures-card"') == 2
    assert 'data-testid="compare-table"' in body and body.count('data-chart="gantt"') == 2


def test_the_comparison_fragment_polls_until_every_run_is_over(client, stored):
    a = finished_run(stored)
    b = RunFactory(scenario=stored, policy="wrr")
    going = client.get(f"/lab/compare/?runs={a.pk},{b.pk}", **HX)
    assert going.status_code == 200 and 'hx-trigger="every 500ms"' in going.content.decode()
    run_simulation(b.pk)
    over = client.get(f"/lab/compare/?runs={a.pk},{b.pk}", **HX)
    assert over.status_code == 286 and over.content.decode().lstrip().startswith('<section id="compare-panels"')


def test_a_finished_comparison_loads_each_runs_charts_as_json_after_its_html(client, stored):
    """The comparison's HTML carries the table and cards; each run's four charts and decision log
    come from its charts URL, fetched by static/js/charts.js once the page is shown."""
    a, b = finished_run(stored, "boinc7"), finished_run(stored, "boinc5")
    page = parse(client.get(f"/lab/compare/?runs={a.pk},{b.pk}"))
    assert page.find("script", id=re.compile(r"^run-\d+-")) is None
    sources = [el["data-figures-src"] for el in page.select("[data-figures-src]")]
    assert sources == [f"/lab/runs/{a.pk}/charts.json", f"/lab/runs/{b.pk}/charts.json"]
    for run, url in zip((a, b), sources):
        response = client.get(url)
        assert response.status_code == 200 and response["Content-Type"] == "application/json"
        assert "max-age" in response["Cache-Control"]
        data = response.json()
        names = ("gantt", "rec", "priority", "buffer", "log")
        assert sorted(data) == sorted(f"run-{run.pk}-{name}" for name in names)
        assert data[f"run-{run.pk}-log"]["decisions"] == [
            [round(d["time"] / 3600, 4), d["kind"], d["project"], d["job"], d["text"]]
            for d in run.records()["decisions"]
        ]
        assert all(page.find(attrs={"data-figure": f"run-{run.pk}-{name}"}) for name in names[:-1])


def test_a_runs_charts_take_their_colours_from_the_projects_named(client, stored):
    run = finished_run(stored)
    own = [p["name"] for p in run.records()["projects"]]
    plain = client.get(f"/lab/runs/{run.pk}/charts.json").json()
    shared = client.get(f"/lab/runs/{run.pk}/charts.json", {"project": [*own, "AAA first"]}).json()

    def colours(data):
        return {
            t["name"]: t["line"]["color"]
            for t in data[f"run-{run.pk}-gantt"]["data"]
            if t["name"] in own and "line" in t
        }

    assert colours(plain) == {name: charts.project_colours(own)[name] for name in own}
    assert colours(shared) == {name: charts.project_colours([*own, "AAA first"])[name] for name in own}
    assert colours(shared) != colours(plain)


def test_a_runs_charts_are_refused_before_it_is_done_and_for_names_that_miss_its_projects(client, stored):
    queued = RunFactory(scenario=stored)
    response = client.get(f"/lab/runs/{queued.pk}/charts.json")
    assert response.status_code == 409 and "has no charts yet" in response.content.decode()
    run = finished_run(stored)
    response = client.get(f"/lab/runs/{run.pk}/charts.json", {"project": "no such project"})
    assert response.status_code == 400 and "must name each of run" in response.content.decode()
    assert client.get("/lab/runs/999999/charts.json").status_code == 404
