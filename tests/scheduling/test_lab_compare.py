"""Comparisons: a single run opens a picker, runs may differ in one preference instead of the
policy, each run is labelled by what differs, and the seed 001 preset under boinc5 and boinc7
says in words why the two differ."""

import re

import django_rq
import pytest
from rq import SimpleWorker

from scheduling.jobs import run_simulation
from scheduling.models import Run, StoredScenario
from tests.factories import RunFactory
from tests.pages import by_testid, parse, texts
from tests.scheduling.test_lab_views import ann, finished_run, stored, user  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


def compare_values(client, stored, parameter, values, policy="boinc7", **kw):  # noqa: F811
    data = {
        "parameter": parameter,
        "values": values,
        "policy": policy,
        "duration": "6h",
        "seed": 4,
        "compat": "intended",
    }
    data.update(kw)
    return client.post(f"/lab/{stored.pk}/compare/", data)


# ---------------------------------------------------------------- one run: the picker


def test_a_single_run_opens_a_picker_with_the_fair_comparisons_ticked(client, stored):
    run = finished_run(stored, "boinc7")
    same = finished_run(stored, "boinc5")
    other_seed = RunFactory(scenario=stored, policy="wrr", duration=run.duration, seed=9)
    page = client.get(f"/lab/compare/?runs={run.pk}")
    body = page.content.decode()
    assert page.status_code == 200 and 'data-testid="compare-picker"' in body
    assert f'<input type="hidden" name="runs" value="{run.pk}">' in body
    assert f'name="runs" value="{same.pk}" id="pick-{same.pk}" checked>' in body
    assert f'name="runs" value="{other_seed.pk}" id="pick-{other_seed.pk}">' in body
    # the picker's form sends runs=<id>&runs=<id>: that is the comparison
    picked = client.get(f"/lab/compare/?runs={run.pk}&runs={same.pk}").content.decode()
    assert picked.count('data-testid="figures-card"') == 2


def test_a_single_run_with_no_other_run_says_how_to_make_one(client, stored):
    run = finished_run(stored)
    body = client.get(f"/lab/compare/?runs={run.pk}").content.decode()
    assert 'data-testid="no-other-runs"' in body and f'href="/lab/{stored.pk}/"' in body


def test_the_run_page_links_to_a_comparison_with_the_runs_on_the_same_seed(client, stored):
    a = finished_run(stored, "boinc7")
    b = finished_run(stored, "boinc5")
    RunFactory(scenario=stored, policy="wrr", duration=a.duration, seed=2, status=Run.Status.DONE)
    page = parse(client.get(f"/lab/runs/{a.pk}/"))
    link = by_testid(page, "compare-same-seed")
    assert link.name == "a" and re.fullmatch(r"compare with #\d+ boinc5", link.get_text())
    assert link["href"] == f"/lab/compare/?runs={a.pk},{b.pk}"
    assert by_testid(page, "compare-pick")["href"] == f"/lab/compare/?runs={a.pk}"
    assert len(parse(client.get(link["href"])).select('[data-testid="figures-card"]')) == 2


# ---------------------------------------------------------------- one preference, several values


def test_compare_values_starts_one_run_per_value_under_one_policy(ann, stored):
    response = compare_values(ann, stored, "cpu_scheduling_period_minutes", "6, 60")
    runs = list(Run.objects.order_by("pk"))
    assert response["Location"] == f"/lab/compare/?runs={runs[0].pk},{runs[1].pk}"
    assert [(r.policy, r.seed, r.prefs) for r in runs] == [
        ("boinc7", 4, {"cpu_scheduling_period_minutes": 6.0}),
        ("boinc7", 4, {"cpu_scheduling_period_minutes": 60.0}),
    ]
    assert [r.engine_scenario().prefs.cpu_scheduling_period_minutes for r in runs] == [6.0, 60.0]
    assert StoredScenario.objects.get().engine_scenario().prefs.cpu_scheduling_period_minutes == 60.0
    for r in runs:
        assert run_simulation(r.pk) == "done"
    short, long = (Run.objects.get(pk=r.pk) for r in runs)
    assert short.summary["figures"] != long.summary["figures"], "the value changed what the engine did"
    page = parse(ann.get(response["Location"]))
    assert page.h1.get_text() == "Compare time slice 6 min and time slice 60 min"
    headings = [run.find("h2").get_text() for run in page.select('[data-testid="compare-run"]')]
    assert headings == [f"#{short.pk} time slice 6 min", f"#{long.pk} time slice 60 min"]
    assert "boinc7" not in " ".join(why.decode_contents() for why in page.select('[data-testid="why"]'))


def test_leave_in_memory_without_values_compares_no_and_yes(ann, stored):
    assert compare_values(ann, stored, "leave_apps_in_memory", "").status_code == 302
    runs = Run.objects.order_by("pk")
    assert [r.prefs for r in runs] == [{"leave_apps_in_memory": False}, {"leave_apps_in_memory": True}]
    assert [r.variant for r in runs] == ["leave apps in memory no", "leave apps in memory yes"]


@pytest.mark.parametrize(
    "parameter,values,message",
    [
        ("cpu_scheduling_period_minutes", "60", "Give between 2 and 6 values to compare."),
        ("cpu_scheduling_period_minutes", "30, 30", "Give each value once."),
        ("cpu_scheduling_period_minutes", "0, 60", "0: At least 1."),
        ("work_buf_min_days", "-1, 0.5", "-1: Cannot be negative."),
        ("work_buf_additional_days", "1, lots", "lots: Enter a number."),
        ("leave_apps_in_memory", "yes, maybe", "maybe: say yes or no."),
        ("cpu_scheduling_period_minutes", "1, 2, 3, 4, 5, 6, 7", "Give between 2 and 6 values to compare."),
        ("colour", "1, 2", "Select a valid choice."),
    ],
)
def test_bad_values_are_a_field_error_and_start_nothing(ann, stored, parameter, values, message):
    response = compare_values(ann, stored, parameter, values)
    assert response.status_code == 400 and message in response.content.decode()
    assert Run.objects.count() == 0


# ---------------------------------------------------------------- labels and chart headings


@pytest.mark.parametrize("first,second", [("boinc7", "boinc5"), ("boinc5", "boinc7")])
def test_each_rec_or_debt_chart_is_headed_by_its_own_runs_policy(client, stored, first, second):
    a, b = finished_run(stored, first), finished_run(stored, second)
    page = parse(client.get(f"/lab/compare/?runs={a.pk},{b.pk}"))
    heading = by_testid(page, "rec-heading")
    assert heading.name == "h2" and heading.get_text() == "REC (boinc7) and long-term debt (boinc5) per project"
    labels = [label.get_text() for label in page.select('h3[data-testid="rec-label"]')]
    what = {"boinc7": "REC", "boinc5": "long-term debt"}
    assert labels == [f"#{a.pk} {first}: {what[first]}", f"#{b.pk} {second}: {what[second]}"]


def test_runs_of_one_policy_differing_in_seed_are_labelled_by_seed(client, stored):
    a = finished_run(stored, "boinc7")
    b = RunFactory(scenario=stored, duration=a.duration, seed=2)
    assert run_simulation(b.pk) == "done"
    page = parse(client.get(f"/lab/compare/?runs={a.pk},{b.pk}"))
    assert page.h1.get_text() == "Compare seed 1 and seed 2"
    heading = by_testid(page, "rec-heading")
    assert heading.name == "h2" and heading.get_text() == "REC per project"


# ---------------------------------------------------------------- the seed 001 preset, boinc5 against boinc7


def test_the_seed_001_preset_under_boinc5_and_boinc7_says_why_they_differ(
    ann, redis_client, django_capture_on_commit_callbacks
):
    response = ann.post("/lab/presets/seed-001-scenario-1/")
    form = by_testid(parse(ann.get(response["Location"])), "compare-form")
    duration = form.find(attrs={"name": "duration"})["value"]
    assert duration == "1d"
    stored = StoredScenario.objects.get()
    with django_capture_on_commit_callbacks(execute=True):
        response = ann.post(
            f"/lab/{stored.pk}/compare/",
            {"policies": ["boinc5", "boinc7"], "duration": duration, "seed": 1, "compat": "intended"},
        )
    queue = django_rq.get_queue("engine")
    SimpleWorker([queue], connection=queue.connection).work(burst=True)
    boinc5, boinc7 = Run.objects.order_by("pk")
    assert (boinc5.policy, boinc7.policy) == ("boinc5", "boinc7")
    assert boinc5.status == boinc7.status == Run.Status.DONE

    body = ann.get(response["Location"]).content.decode()
    page = parse(body)
    why = page.select_one('section.why.card[data-testid="why"]')
    assert why and why.find("h2").get_text() == "Why they differ", "the comparison has a why-they-differ box"
    lines = texts(why.find("ul").find_all("li"))

    def part_of_p1(run):
        used = {p["name"]: p["flops_used"] for p in run.records()["projects"]}
        return round(100 * used["P1"] / sum(used.values()))

    share = (
        f"P1 (resource share 50%) got {part_of_p1(boinc5)}% of the computing under boinc5 and "
        f"{part_of_p1(boinc7)}% under boinc7."
    )
    assert share in lines and part_of_p1(boinc5) - part_of_p1(boinc7) >= 5
    violation = [line for line in lines if line.startswith("Share violation: boinc5 ")]
    assert violation and violation[0].endswith("(lower is better).")
    assert len(page.select('[data-testid="figures-card"]')) == 2
    assert "BOINC 5: runs the project with the most short-term debt" in body
    assert "BOINC 7: runs the project that has had the least recent credit" in body
