"""What a researcher reads on the worlds pages after a real (small) run: the days asked for and
how long the world actually ran, comparisons that state the difference in work before figures
per job, one unit system (decimal SI, boincweb.human), the credit the chart shows, and a form
that explains itself."""

import json
import re

import pytest
from django.test import override_settings
from django.urls import reverse

from boincweb.human import data_size, duration, number
from tests.factories import UserFactory, WorldFactory, WorldSampleFactory
from tests.pages import by_testid, parse
from tests.shared_rows import shared_rows
from world import charts
from world.jobs import run_in_process
from world.management.commands.world import text_report
from world.models import World
from world.simulation import DAY

pytestmark = pytest.mark.django_db

DAYS = 0.25
SETTINGS = {
    "cushion": 8,
    "file_nbytes": 2_000_000,
    "workunits_per_file": 10,
    "job_gflop": 2.0 * 3600,
    "daemon_interval": 3600.0,
}


@pytest.fixture(scope="module")
def twins(django_db_setup, django_db_blocker, tmp_path_factory):
    """A plain and a locality world on one seed, each run to its end: built once for the module
    (shared_rows), as its tests only read them, each in a transaction rolled back."""
    data_dir = tmp_path_factory.mktemp("twins")
    with override_settings(
        BOINCWEB_DATA_DIR=data_dir, DOWNLOAD_DIR=data_dir / "download", UPLOAD_DIR=data_dir / "upload"
    ):
        yield from shared_rows(django_db_blocker, run_twins)


def run_twins():
    worlds = []
    for locality in (False, True):
        world = WorldFactory(
            name=f"twin {'locality' if locality else 'plain'}",
            hosts=6,
            days=DAYS,
            seed=3,
            locality=locality,
            settings=SETTINGS,
        )
        run_in_process(world)
        world.refresh_from_db()
        worlds.append(world)
    return worlds


def parse_figure(tree, figure_id):
    return json.loads(tree.select_one(f"script#{figure_id}").string)


def shown(tree):
    """The page's text with the figures as shown (the raw values sit in tooltips)."""
    return " ".join(tree.get_text(" ").split())


def test_a_finished_world_says_its_days_of_new_work_and_how_long_it_really_ran(client, twins):
    plain = twins[0]
    assert plain.status == World.Status.FINISHED
    # the premise: the world drains its work past the days of new work
    assert plain.clock > DAYS * DAY
    tree = parse(client.get(reverse("worlds:detail", args=[plain.pk])))
    words = by_testid(tree, "run-length").get_text()
    assert words == (
        f"0.25 days of new work, then {duration(plain.clock - DAYS * DAY)} finishing it: "
        f"{duration(plain.clock)} simulated in all"
    )
    assert by_testid(tree, "clock").get_text() == duration(plain.clock)
    assert by_testid(tree, "input").get_text() == data_size(plain.summary["bytes_downloaded"])


def test_the_comparison_states_the_difference_in_work_before_the_transfer_per_job(client, twins):
    plain, local = twins
    tree = parse(client.get(reverse("worlds:compare") + f"?worlds={plain.pk},{local.pk}"))
    lead = shown(by_testid(tree, "compare-lead"))
    assert lead.startswith("The same population (seed 3, 6 hosts) and the same 0.25 days of new work:")
    assert "only the scheduling differs" in lead
    plain_jobs, local_jobs = plain.summary["jobs_received"], local.summary["jobs_received"]
    if plain_jobs != local_jobs:
        assert "did not get through the same number of jobs" in lead
    saved = by_testid(tree, "transfer-saved").get_text()
    assert saved.startswith(charts.jobs_words(plain_jobs, local_jobs))
    # each column's figures, in the world's order
    sent = [td.get_text() for td in tree.select("[data-testid=jobs-sent]")]
    assert sent == [number(plain_jobs), number(local_jobs)]
    per_job = [td.get_text() for td in tree.select("[data-testid=input-per-job]")]
    assert per_job == [data_size(w.summary["bytes_downloaded"] / w.summary["jobs_received"]) for w in twins]
    assert f"against plain scheduling's {per_job[0]}" in saved
    assert f"locality scheduling downloaded {per_job[1]} per job" in saved
    runs = [td.get_text() for td in tree.select("[data-testid=run-length]")]
    assert runs == [
        f"0.25 days of new work, then {duration(w.clock - DAYS * DAY)} finishing it: "
        f"{duration(w.clock)} simulated in all"
        for w in twins
    ]


def test_the_comparison_table_shows_the_credit_its_chart_ends_at(client, twins):
    plain, local = twins
    page = client.get(reverse("worlds:compare") + f"?worlds={plain.pk},{local.pk}")
    tree = parse(page)
    figure = parse_figure(tree, "compare-credit")
    ends = [trace["y"][-1] for trace in figure["data"]]
    assert ends[0] > 0
    credit = [td.get_text() for td in tree.select("[data-testid=credit]")]
    assert credit == [number(y) for y in ends]


def test_a_running_world_s_credit_comes_from_its_samples_not_a_dash(client):
    """A running world's stored figures hold no credit yet; the table reads the samples the
    chart is drawn from."""
    worlds = [
        WorldFactory(seed=2, locality=locality, status=World.Status.PAUSED, clock=7200.0, summary={"jobs_received": 40})
        for locality in (False, True)
    ]
    for world, credit in zip(worlds, (10_000.0, 12_400.0), strict=True):
        WorldSampleFactory(world=world, t=0.0)
        WorldSampleFactory(world=world, t=3600.0, credit=credit)
    tree = parse(client.get(reverse("worlds:compare") + f"?worlds={worlds[0].pk},{worlds[1].pk}"))
    assert [td.get_text() for td in tree.select("[data-testid=credit]")] == ["10,000", "12,400"]
    assert [td.get_text() for td in tree.select("[data-testid=credit-per-job]")] == ["250", "310"]
    runs = [td.get_text() for td in tree.select("[data-testid=run-length]")]
    assert runs == ["1 day of new work, then as long as finishing it takes; now at day 1, 02:00"] * 2


def test_world_pages_and_the_world_report_use_decimal_units_only(client, twins):
    plain, local = twins
    UserFactory(username="hedy", password="pw", is_staff=True)
    client.login(username="hedy", password="pw")
    for path in (
        reverse("worlds:list"),
        reverse("worlds:detail", args=[plain.pk]),
        reverse("worlds:compare") + f"?worlds={plain.pk},{local.pk}",
    ):
        text = shown(parse(client.get(path)))
        assert not re.search(r"\b[KMGT]iB\b", text), path
    listing = parse(client.get(reverse("worlds:list")))
    row = listing.select_one(f"tr[data-world='{plain.pk}']")
    assert data_size(plain.summary["bytes_downloaded"]) in row.get_text()
    report = text_report(plain.summary)
    assert "MiB" not in report
    assert f"input downloaded: {data_size(plain.summary['bytes_downloaded'])} " in report
    assert f"simulated {duration(plain.clock)} in all" in report


def test_the_world_forms_explain_days_without_citing_files_a_reader_lacks(client):
    UserFactory(username="hedy", password="pw", is_staff=True)
    client.login(username="hedy", password="pw")
    page = client.get(reverse("worlds:list")).content.decode()
    assert "reference/" not in page and ".md" not in page
    tree = parse(page)
    labels = [label.get_text() for label in tree.select("label[for$=days]")]
    assert labels == ["Days of new work:", "Days of new work:"]
    assert page.count("runs longer than this, and its page says how long") == 2
    assert "downloads each file once for many jobs" in page
