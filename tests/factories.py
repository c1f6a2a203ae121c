"""The rows tests build: one factory per model, and the clock the tests share.

The defaults are a small BOINC project's: a single-replica app (quorum 1, a few retries, a day
to report) whose work generator keeps nothing on hand unless asked, its CPU version, a
one-CPU Linux host, workunits with the app's limits, their results and files; then the
scheduling lab's stored scenarios and runs, and a volunteer world and its samples. A test
names only the fields its rule reads.
"""

import factory
from django.contrib.auth import get_user_model
from factory.django import DjangoModelFactory

from backend.models import (
    App,
    AppVersion,
    File,
    Host,
    HostAppVersion,
    HostFile,
    Outcome,
    Project,
    Result,
    ServerState,
    Team,
    UserCredit,
    Workunit,
    name_random,
)
from scheduling.engine.readers import scenario_to_dict
from scheduling.models import Run, StoredScenario
from scheduling.presets import BY_SLUG
from world.models import World, WorldSample

# The tests' clock, in Unix seconds: in the past of the wall clock, as a test that mixes its
# rows' times with the pages' "ago" needs.
NOW = 1_700_000_000

# The speed of the version a successful result ran on, by default: a run that took its
# estimate at 2 GFLOPS is granted the workunit's estimated credit (backend.daemons.credit).
SUCCESS_FLOPS = 2e9


class UserFactory(DjangoModelFactory):
    """A volunteer; ``password="..."`` sets a password to log in with."""

    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"volunteer{n}")

    @factory.post_generation
    def password(user, create, raw, **kwargs):
        if raw is None:
            return
        user.set_password(raw)
        if create:
            user.save(update_fields=["password"])


def demo_project() -> Project:
    """The project rows belong to unless a test names another: the default, "demo"."""
    return Project.demo()


class ProjectFactory(DjangoModelFactory):
    """A live project of its own, beside the demo."""

    class Meta:
        model = Project

    name = factory.Sequence(lambda n: f"Project {n}")
    slug = factory.Sequence(lambda n: f"project{n}")


class TeamFactory(DjangoModelFactory):
    class Meta:
        model = Team

    project = factory.LazyFunction(demo_project)
    name = factory.Sequence(lambda n: f"team{n}")


class UserCreditFactory(DjangoModelFactory):
    class Meta:
        model = UserCredit

    user = factory.SubFactory(UserFactory)
    project = factory.LazyFunction(demo_project)
    team = None


class AppFactory(DjangoModelFactory):
    class Meta:
        model = App

    project = factory.LazyFunction(demo_project)
    name = factory.Sequence(lambda n: f"app{n}")
    min_quorum = 1
    target_nresults = 1
    max_error_results = 2
    max_total_results = 4
    max_success_results = 2
    delay_bound = 86400
    unsent_target = 0


class AppVersionFactory(DjangoModelFactory):
    class Meta:
        model = AppVersion

    app = factory.SubFactory(AppFactory)
    project = factory.SelfAttribute("app.project")
    version_num = 100
    flops = 1e9


class HostFactory(DjangoModelFactory):
    class Meta:
        model = Host

    project = factory.LazyFunction(demo_project)
    owner = factory.SubFactory(UserFactory)
    domain_name = factory.Sequence(lambda n: f"host{n}")


class HostAppVersionFactory(DjangoModelFactory):
    """A host's record of an app version, as the scheduler makes it on a first send."""

    class Meta:
        model = HostAppVersion

    host = factory.SubFactory(HostFactory)
    project = factory.SelfAttribute("host.project")
    app_version = factory.SubFactory(AppVersionFactory, app__project=factory.SelfAttribute("...project"))


class HostFileFactory(DjangoModelFactory):
    """A sticky file a host reported holding."""

    class Meta:
        model = HostFile

    host = factory.SubFactory(HostFactory)
    project = factory.SelfAttribute("host.project")
    name = factory.Sequence(lambda n: f"sticky_{n}.dat")
    reported_time = NOW


class WorkunitFactory(DjangoModelFactory):
    """A workunit with its app's work generation defaults (create_work, §3.1), made at NOW and
    due for the transitioner an hour later."""

    class Meta:
        model = Workunit

    app = factory.SubFactory(AppFactory)
    project = factory.SelfAttribute("app.project")
    name = factory.Sequence(lambda n: f"wu_{n:05d}")
    create_time = NOW
    transition_time = NOW + 3600
    min_quorum = factory.SelfAttribute("app.min_quorum")
    target_nresults = factory.SelfAttribute("app.target_nresults")
    max_error_results = factory.SelfAttribute("app.max_error_results")
    max_total_results = factory.SelfAttribute("app.max_total_results")
    max_success_results = factory.SelfAttribute("app.max_success_results")
    delay_bound = factory.SelfAttribute("app.delay_bound")
    rsc_fpops_est = factory.SelfAttribute("app.rsc_fpops_est")


def _succeeded(result):
    return result.outcome == Outcome.SUCCESS


class ResultFactory(DjangoModelFactory):
    """An instance of a workunit, named ``<workunit>_<n>`` as the transitioner names them.

    A successful one ran for its estimate at SUCCESS_FLOPS; a result on a host is its owner's.
    """

    class Meta:
        model = Result

    workunit = factory.SubFactory(WorkunitFactory)
    project = factory.SelfAttribute("workunit.project")
    app = factory.SelfAttribute("workunit.app")
    name = factory.LazyAttribute(lambda r: f"{r.workunit.name}_{r.workunit.results.count()}")
    random = factory.LazyAttribute(lambda r: name_random(r.name))
    server_state = ServerState.UNSENT
    outcome = Outcome.INIT
    host = None
    user = factory.LazyAttribute(lambda r: r.host.owner if r.host else None)
    flops_estimate = factory.LazyAttribute(lambda r: SUCCESS_FLOPS if _succeeded(r) else 0.0)
    elapsed_time = factory.LazyAttribute(lambda r: r.workunit.rsc_fpops_est / SUCCESS_FLOPS if _succeeded(r) else 0.0)

    class Params:
        # reported a success a minute before NOW, sent an hour before (``sent_time=`` to change)
        reported = factory.Trait(
            server_state=ServerState.OVER, outcome=Outcome.SUCCESS, sent_time=NOW - 3600, received_time=NOW - 60
        )


class FileFactory(DjangoModelFactory):
    """A workunit's input file; given ``result=``, that result's output file, named as its first
    one is (Result.output_file_name), as the scheduler names it on sending the result."""

    class Meta:
        model = File

    result = None
    project = factory.LazyAttribute(lambda f: f.result.project if f.result else demo_project())
    kind = factory.LazyAttribute(lambda f: File.Kind.OUTPUT if f.result else File.Kind.INPUT)
    name = factory.LazyAttributeSequence(lambda f, n: f.result.output_file_name(0) if f.result else f"input_{n}.dat")


class StoredScenarioFactory(DjangoModelFactory):
    """A lab scenario stored as loading a preset stores it (scheduling.views._save): the preset
    ``seed-001-scenario-1`` unless ``preset=`` names another. ``scenario=`` stores an engine
    scenario of the test's own instead, with ``preset=""`` when it comes from no preset."""

    class Meta:
        model = StoredScenario

    class Params:
        scenario = factory.LazyAttribute(lambda s: BY_SLUG[s.preset].scenario())

    preset = "seed-001-scenario-1"
    name = factory.LazyAttribute(lambda s: s.scenario.name)
    description = factory.LazyAttribute(lambda s: s.scenario.description)
    data = factory.LazyAttribute(lambda s: scenario_to_dict(s.scenario))
    owner = None


class RunFactory(DjangoModelFactory):
    """A queued lab run, as starting one makes it: BOINC 7's policy over a simulated hour."""

    class Meta:
        model = Run

    scenario = factory.SubFactory(StoredScenarioFactory)
    policy = "boinc7"
    duration = 3600.0


class WorldFactory(DjangoModelFactory):
    """A small volunteer world: three hosts for a day."""

    class Meta:
        model = World

    name = factory.Sequence(lambda n: f"world{n}")
    hosts = 3
    days = 1


class WorldSampleFactory(DjangoModelFactory):
    """A sample of a world at its start: nothing counted yet."""

    class Meta:
        model = WorldSample

    world = factory.SubFactory(WorldFactory)
    t = 0.0
    unsent = 0
    in_progress = 0
    over = 0
    success = 0
    client_error = 0
    no_reply = 0
    other_outcome = 0
    valid = 0
    invalid = 0
    hosts_active = 0
    rpcs = 0
    rpcs_with_work = 0
    rpcs_without_work = 0
    rpcs_report_only = 0
    credit = 0.0
    bytes_downloaded = 0
