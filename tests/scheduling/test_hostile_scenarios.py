"""Hostile scenarios through every door: generated huge, non-finite, deeply nested, unicode and
enormous-count inputs reach the readers, the lab's forms and the command line, and each gets
a clear refusal (a ScenarioError, a page with the message, exit code 2 with one line) or is
accepted within the limits and runs bounded. Never a 500, a traceback or a hang."""

import io
import json
import math
import time
import xml.sax.saxutils as saxutils

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.engine import ScenarioError, read_client_state, read_json, read_pcdr
from scheduling.engine import scenario as limits
from scheduling.engine.readers import scenario_to_dict
from scheduling.models import Run, StoredScenario
from scheduling.presets import BY_SLUG
from tests.factories import StoredScenarioFactory

pytestmark = pytest.mark.django_db
EXAMPLES = settings(
    max_examples=50,
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)

# numbers that broke something once, and anything else a float or an int can be
NUMBERS = st.one_of(
    st.sampled_from(
        [
            0,
            -1,
            1,
            0.5,
            1e-300,
            1e300,
            1e308,
            -1e308,
            1e21,
            1e22,
            2**31,
            2**63,
            10**30,
            10**400,
            math.inf,
            -math.inf,
            math.nan,
            1024,
            1025,
            1e9,
            64,
            65,
        ]
    ),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(),
)
TEXTS = st.one_of(
    st.text(max_size=40),
    st.text(min_size=200, max_size=300),
    st.sampled_from(["", "\x00", "\ud800", "P\u202e", "a" * 5000, "名前", "<x/>", "&amp;"]),
)
# what a browser can send in a form field (no lone surrogates: they cannot be encoded)
FORM_TEXTS = TEXTS.filter(lambda t: "\ud800" not in t)


def number_text(value) -> str:
    """A number as a person would type it into a field or a file (repr keeps nan and inf)."""
    return str(value) if isinstance(value, int) and abs(value) < 10**4000 else repr(value)


def base() -> dict:
    return scenario_to_dict(BY_SLUG["seed-002-cpu-and-gpu"].scenario())


# paths into the JSON form of a scenario, each a place a hostile value can go
PATHS = [
    ("host", "ncpus"),
    ("host", "cpu_flops"),
    ("host", "on", "frac"),
    ("host", "on", "mean_up"),
    ("host", "gpus", 0, "count"),
    ("host", "gpus", 0, "peak_flops"),
    ("host", "gpus", 0, "name"),
    ("prefs", "work_buf_min_days"),
    ("prefs", "cpu_scheduling_period_minutes"),
    ("prefs", "ncpus"),
    ("prefs", "rec_half_life_days"),
    ("projects", 0, "name"),
    ("projects", 0, "resource_share"),
    ("projects", 0, "downtime"),
    ("projects", 0, "apps", 0, "fpops_est"),
    ("projects", 0, "apps", 0, "latency_bound"),
    ("projects", 0, "apps", 0, "max_concurrent"),
    ("projects", 0, "apps", 0, "versions", 0, "flops"),
    ("projects", 0, "apps", 0, "versions", 0, "avg_ncpus"),
    ("projects", 0, "apps", 0, "name"),
    ("name",),
    ("description",),
]


def put(data, path, value):
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


@st.composite
def hostile_dicts(draw):
    """The JSON form of a scenario with a few values made hostile and, sometimes, a list made
    enormous (projects, apps, jobs, GPUs repeated thousands of times)."""
    data = base()
    for path in draw(st.lists(st.sampled_from(PATHS), min_size=1, max_size=3)):
        if path[-1] == "downtime":
            value = [[draw(NUMBERS), draw(NUMBERS)]]
        elif path[-1] in ("name", "description"):
            value = draw(TEXTS)
        else:
            value = draw(st.one_of(NUMBERS, TEXTS) if draw(st.booleans()) else NUMBERS)
        put(data, path, value)
    if draw(st.booleans()):
        times = draw(st.sampled_from([41, 1000, 6000]))
        where = draw(st.sampled_from(["projects", "apps", "gpus", "versions", "jobs"]))
        p0 = data["projects"][0]
        if where == "projects":
            data["projects"] = [dict(data["projects"][0], name=f"P{i}") for i in range(times)]
        elif where == "apps":
            p0["apps"] = [dict(p0["apps"][0], name=f"a{i}") for i in range(times)]
        elif where == "gpus":
            data["host"]["gpus"] = [dict(data["host"]["gpus"][0], name=f"G{i}") for i in range(times)]
        elif where == "versions":
            p0["apps"][0]["versions"] = p0["apps"][0]["versions"] * times
        else:
            app = p0["apps"][0]
            p0["jobs"] = [
                {"name": f"j{i}", "app": app["name"], "fpops": 1e12, "fpops_est": 1e12, "deadline": 86400}
                for i in range(times)
            ]
    return data


def as_json(data) -> str:
    try:
        return json.dumps(data)
    except (ValueError, OverflowError):  # an int too long for str(): write what a file would hold
        return json.dumps(data, default=str)


NESTED = st.builds(lambda n, opener: opener * n, st.sampled_from([17, 1000, 100_000]), st.sampled_from(["[", '{"a":']))
JSON_TEXTS = st.one_of(
    hostile_dicts().map(as_json),
    NESTED,
    TEXTS,
    st.builds(lambda d, n: '{"projects": ' + "[" * n + "]" * n + "}", st.none(), st.sampled_from([20, 5000])),
)


@st.composite
def pcdr_texts(draw):
    """P(C, D, R) text with hostile numbers, names, parameters and project counts."""
    n = draw(st.sampled_from([1, 2, 41, 3000]))
    name = draw(st.sampled_from(["P", "Ünïcode", "x" * 300, "A"]))

    def number(plausible):
        return number_text(draw(st.one_of(st.just(plausible), st.just(plausible), NUMBERS)))

    lines = [f"{name}{i}({number(1)}, {number(24)}, {number(0.5)})" for i in range(min(n, 3))]
    lines += [f"Q{i}(1, 24, 1)" for i in range(n - len(lines))]
    for param in draw(
        st.lists(
            st.sampled_from(
                [
                    "NCPUS",
                    "min_queue",
                    "cpu_scheduling_period",
                    "checkpoint_period",
                    "resume_cost",
                    "work_buf_additional",
                    "leave_in_memory",
                    "bogus",
                ]
            ),
            max_size=3,
        )
    ):
        lines.append(f"{param} = {number(2)}")
    if draw(st.booleans()):
        lines.append(draw(TEXTS))
    return "\n".join(lines)


@st.composite
def client_states(draw):
    """A client_state.xml with hostile numbers and text in the host, project, app and jobs."""
    esc = lambda v: saxutils.escape(number_text(v) if not isinstance(v, str) else v)  # noqa: E731
    n_projects = draw(st.sampled_from([1, 41]))
    n_results = draw(st.sampled_from([0, 1, 6000]))

    def value(plausible=1):
        return draw(st.one_of(st.just(plausible), st.just(plausible), NUMBERS, TEXTS))

    projects = []
    for i in range(n_projects):
        results = "".join(
            f"<workunit><name>w{k}</name><app_name>a</app_name><rsc_fpops_est>{esc(value(1e12)) if k == 0 else 1e12}"
            f"</rsc_fpops_est></workunit><result><name>r{k}</name><wu_name>w{k}</wu_name>"
            f"<report_deadline>{esc(value(86400)) if k == 0 else 86400}</report_deadline></result>"
            for k in range(n_results if i == 0 else 0)
        )
        projects.append(
            f"<project><master_url>http://p{i}/</master_url><project_name>{esc(draw(TEXTS)) or 'p'}{i}"
            f"</project_name><resource_share>{esc(value(100))}</resource_share></project>"
            f"<app><name>a</name><fpops><mean>{esc(value(1e12))}</mean></fpops></app>"
            f"<app_version><app_name>a</app_name><avg_ncpus>{esc(value())}</avg_ncpus>"
            f"<flops>{esc(value(1e9))}</flops></app_version>{results}"
        )
    coprocs = "".join(
        f"<coproc_cuda><count>{esc(value(1))}</count><peak_flops>{esc(value(1e11))}</peak_flops></coproc_cuda>"
        for _ in range(draw(st.sampled_from([0, 1, 9])))
    )
    return (
        f"<client_state><host_info><p_ncpus>{esc(value(4))}</p_ncpus><p_fpops>{esc(value(1e9))}</p_fpops>"
        f"<coprocs>{coprocs}</coprocs></host_info>{''.join(projects)}</client_state>"
    )


def assert_within_limits(scenario):
    """An accepted scenario holds only finite numbers within the limits (the dataclasses
    checked them; this reads them back from its JSON form)."""
    text = json.dumps(scenario_to_dict(scenario), allow_nan=False)
    assert len(text) < 3_000_000
    host = scenario.host
    assert 1 <= host.ncpus <= limits.MAX_CPUS and limits.MIN_FLOPS <= host.cpu_flops <= limits.MAX_FLOPS
    assert len(scenario.projects) <= limits.MAX_PROJECTS
    assert sum(len(p.jobs) for p in scenario.projects) <= limits.MAX_JOBS


def assert_clear(exc):
    message = str(exc)
    assert message and len(message) < 600 and "Traceback" not in message


# ---------------------------------------------------------------- the readers


def read_client_state_text(text, directory):
    path = directory / "client_state.xml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return read_client_state(str(path))


READERS = {
    "json": (JSON_TEXTS, lambda text, _dir: read_json(text)),
    "pcdr": (pcdr_texts(), lambda text, _dir: read_pcdr(text)),
    "client_state": (client_states(), read_client_state_text),
}


@pytest.mark.parametrize("door", list(READERS))
@EXAMPLES
@given(data=st.data())
def test_every_reader_refuses_clearly_or_returns_a_scenario_within_limits(door, data, tmp_path_factory):
    texts, read = READERS[door]
    try:
        scenario = read(data.draw(texts), tmp_path_factory.mktemp("reader"))
    except ScenarioError as exc:
        assert_clear(exc)
    else:
        assert_within_limits(scenario)


# ---------------------------------------------------------------- the lab's pages


@pytest.fixture
def ann(client):
    user = User.objects.create_user("ann", password="pw-ann-123")
    client.force_login(user)
    return client


def assert_page_answer(response, *, saved_ok=True):
    """A page answer to bad input: saved (a redirect), or the form back with the reason."""
    assert response.status_code in ((302, 400, 413) if saved_ok else (400, 413)), response.status_code
    if response.status_code != 302:
        body = response.content.decode()
        assert 'class="errorlist' in body and "Traceback" not in body


@EXAMPLES
@given(kind=st.sampled_from(["pcdr", "scenario_json", "client_state"]), data=st.data())
def test_every_import_refuses_clearly_or_stores_a_scenario_within_limits(ann, kind, data):
    before = StoredScenario.objects.count()
    if kind == "pcdr":
        fields = {"pcdr": data.draw(pcdr_texts().filter(lambda t: "\ud800" not in t))}
    elif kind == "scenario_json":
        fields = {"scenario_json": SimpleUploadedFile("s.json", data.draw(JSON_TEXTS).encode("utf-8", "surrogatepass"))}
    else:
        fields = {
            "client_state": SimpleUploadedFile(
                "client_state.xml", data.draw(client_states()).encode("utf-8", "surrogatepass")
            )
        }
    fields["name"] = data.draw(st.one_of(st.just(""), FORM_TEXTS))
    response = ann.post("/lab/import/", fields)
    assert_page_answer(response)
    if response.status_code == 302:
        stored = StoredScenario.objects.order_by("-pk").first()
        assert_within_limits(stored.engine_scenario())
        assert len(json.dumps(stored.data)) < 3_000_000
    else:
        assert StoredScenario.objects.count() == before


FORM_FIELDS = [
    "host-ncpus",
    "host-cpu_gflops",
    "host-on_frac",
    "host-on_hours",
    "prefs-work_buf_min_days",
    "prefs-cpu_scheduling_period_minutes",
    "prefs-rec_half_life_days",
    "prefs-ncpus",
    "projects-0-name",
    "projects-0-resource_share",
    "projects-0-available_hours",
    "apps-0-gflops",
    "apps-0-size_gflop",
    "apps-0-latency_bound_hours",
    "apps-0-avg_ncpus",
    "apps-0-checkpoint_minutes",
    "meta-name",
    "meta-description",
    "projects-TOTAL_FORMS",
    "apps-TOTAL_FORMS",
]


@EXAMPLES
@given(
    changes=st.dictionaries(
        st.sampled_from(FORM_FIELDS), st.one_of(NUMBERS.map(number_text), FORM_TEXTS), min_size=1, max_size=4
    )
)
def test_the_scenario_form_refuses_clearly_or_saves_a_scenario_within_limits(ann, changes):
    from tests.scheduling.test_lab_views import form_data

    stored = StoredScenarioFactory(scenario=BY_SLUG["seed-002-cpu-and-gpu"].scenario(), preset="")
    data = form_data(stored)
    data.update(changes)
    response = ann.post("/lab/new/", data)
    assert_page_answer(response)
    if response.status_code == 302:
        assert_within_limits(StoredScenario.objects.order_by("-pk").first().engine_scenario())


@EXAMPLES
@given(
    duration=st.one_of(NUMBERS.map(number_text), FORM_TEXTS, st.sampled_from(["100d", "101d", "1e3d", "36h"])),
    delta=st.one_of(NUMBERS.map(number_text), st.just("60")),
    seed=st.one_of(NUMBERS.map(number_text), st.just("1")),
    policies=st.lists(st.sampled_from(["boinc5", "boinc7", "wrr", "fifo", "nope"]), max_size=5),
)
def test_the_run_forms_refuse_clearly_or_queue_only_runs_within_budget(
    ann, redis_client, duration, delta, seed, policies, settings
):
    stored = StoredScenario.objects.first() or StoredScenarioFactory(
        scenario=BY_SLUG["seed-002-cpu-and-gpu"].scenario(), preset=""
    )
    Run.objects.all().delete()
    response = ann.post(
        f"/lab/{stored.pk}/runs/",
        {
            "policy": (policies or ["boinc7"])[0],
            "duration": duration,
            "seed": seed,
            "compat": "intended",
            "delta": delta,
        },
    )
    assert response.status_code in (302, 400, 429)
    response = ann.post(
        f"/lab/{stored.pk}/compare/", {"policies": policies, "duration": duration, "seed": seed, "compat": "bce"}
    )
    assert response.status_code in (302, 400, 429)
    for run in Run.objects.all():
        limits.check_run(duration=run.duration, delta=run.delta)
        assert run.status == Run.Status.QUEUED


# ---------------------------------------------------------------- the command line


def command(name, path, *args):
    out = io.StringIO()
    call_command(name, str(path), *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def strict_json(text):
    def refuse(name):
        raise AssertionError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


@EXAMPLES
@given(kind=st.sampled_from(["txt", "json", "xml"]), at=st.one_of(NUMBERS, st.just(0)), data=st.data())
def test_the_commands_refuse_clearly_or_run_bounded(kind, at, data, tmp_path_factory):
    directory = tmp_path_factory.mktemp("cmd")
    text = {"txt": pcdr_texts(), "json": JSON_TEXTS, "xml": client_states()}[kind]
    path = directory / f"scenario.{kind}"
    path.write_text(data.draw(text), encoding="utf-8", errors="surrogatepass")
    started = time.monotonic()
    for name, args in (("rrsim", ["--at", number_text(at), "--json"]), ("simulate", ["--duration", "10m", "--json"])):
        try:
            strict_json(command(name, path, *args))
        except CommandError as exc:
            assert exc.returncode == 2
            assert_clear(exc)
    assert time.monotonic() - started < 120
