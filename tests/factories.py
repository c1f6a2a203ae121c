"""The rows tests build: one factory per model, and the clock the tests share.

The defaults are a small BOINC project's: a single-replica app (quorum 1, a few retries, a day
to report) whose work generator keeps nothing on hand unless asked, its CPU version, a
one-CPU Linux host, workunits with the app's limits, and their results. A test names only the
fields its rule reads.
"""

import factory
from django.contrib.auth import get_user_model
from factory.django import DjangoModelFactory

from backend.models import (
    App,
    AppVersion,
    Host,
    HostAppVersion,
    HostFile,
    Outcome,
    Result,
    ServerState,
    Team,
    UserCredit,
    Workunit,
    name_random,
)
from world.models import World

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


class TeamFactory(DjangoModelFactory):
    class Meta:
        model = Team

    name = factory.Sequence(lambda n: f"team{n}")


class UserCreditFactory(DjangoModelFactory):
    class Meta:
        model = UserCredit

    user = factory.SubFactory(UserFactory)
    team = None


class AppFactory(DjangoModelFactory):
    class Meta:
        model = App

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
    version_num = 100
    flops = 1e9


class HostFactory(DjangoModelFactory):
    class Meta:
        model = Host

    owner = factory.SubFactory(UserFactory)
    domain_name = factory.Sequence(lambda n: f"host{n}")


class HostAppVersionFactory(DjangoModelFactory):
    """A host's record of an app version, as the scheduler makes it on a first send."""

    class Meta:
        model = HostAppVersion

    host = factory.SubFactory(HostFactory)
    app_version = factory.SubFactory(AppVersionFactory)


class HostFileFactory(DjangoModelFactory):
    """A sticky file a host reported holding."""

    class Meta:
        model = HostFile

    host = factory.SubFactory(HostFactory)
    name = factory.Sequence(lambda n: f"sticky_{n}.dat")
    reported_time = NOW


class WorkunitFactory(DjangoModelFactory):
    """A workunit with its app's work generation defaults (create_work, §3.1), made at NOW and
    due for the transitioner an hour later."""

    class Meta:
        model = Workunit

    app = factory.SubFactory(AppFactory)
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
    app = factory.SelfAttribute("workunit.app")
    name = factory.LazyAttribute(lambda r: f"{r.workunit.name}_{r.workunit.results.count()}")
    random = factory.LazyAttribute(lambda r: name_random(r.name))
    server_state = ServerState.UNSENT
    outcome = Outcome.INIT
    host = None
    user = factory.LazyAttribute(lambda r: r.host.owner if r.host else None)
    flops_estimate = factory.LazyAttribute(lambda r: SUCCESS_FLOPS if _succeeded(r) else 0.0)
    elapsed_time = factory.LazyAttribute(lambda r: r.workunit.rsc_fpops_est / SUCCESS_FLOPS if _succeeded(r) else 0.0)


class WorldFactory(DjangoModelFactory):
    """A small volunteer world: three hosts for a day."""

    class Meta:
        model = World

    name = factory.Sequence(lambda n: f"world{n}")
    hosts = 3
    days = 1
