"""Fixtures for the back end's tests: private file directories and a small project."""

import pytest
from django.contrib.auth import get_user_model

from backend.daemons.scheduler import HostInfo, SchedulerRequest, TimeStats
from backend.models import (
    App, AppVersion, Host, Outcome, Result, ServerState, Workunit, name_random,
)

NOW = 1_800_000_000


@pytest.fixture(autouse=True)
def data_dirs(settings, tmp_path):
    """Each test gets its own download, upload and assimilated directories."""
    settings.BOINCWEB_DATA_DIR = tmp_path
    settings.DOWNLOAD_DIR = tmp_path / "download"
    settings.UPLOAD_DIR = tmp_path / "upload"
    return tmp_path


class Project:
    """A project with one app and its CPU version, and helpers to make rows."""

    def __init__(self, **app_fields):
        fields = dict(min_quorum=1, target_nresults=1, max_error_results=2,
                      max_total_results=4, max_success_results=2, delay_bound=86400,
                      rsc_fpops_est=3600e9, unsent_target=0)
        fields.update(app_fields)
        self.app = App.objects.create(name="uppercase", **fields)
        self.version = AppVersion.objects.create(app=self.app, version_num=100, flops=1e9)
        self.hosts = 0

    def host(self, owner=None, **fields):
        self.hosts += 1
        owner = owner or get_user_model().objects.create(username=f"volunteer{self.hosts}")
        return Host.objects.create(owner=owner, domain_name=f"host{self.hosts}", **fields)

    def workunit(self, name=None, **fields):
        params = dict(min_quorum=self.app.min_quorum, target_nresults=self.app.target_nresults,
                      max_error_results=self.app.max_error_results,
                      max_total_results=self.app.max_total_results,
                      max_success_results=self.app.max_success_results,
                      delay_bound=self.app.delay_bound, rsc_fpops_est=self.app.rsc_fpops_est,
                      transition_time=NOW + 10**6)
        params.update(fields)
        name = name or f"wu{Workunit.objects.count()}"
        return Workunit.objects.create(app=self.app, name=name, **params)

    def result(self, wu, suffix=None, **fields):
        suffix = wu.results.count() if suffix is None else suffix
        name = f"{wu.name}_{suffix}"
        fields.setdefault("server_state", ServerState.UNSENT)
        if fields.get("outcome") == Outcome.SUCCESS:
            # a run that took its estimate on a 2 GFLOPS version: CreditNew grants it the
            # workunit's estimated credit (backend.daemons.credit)
            fields.setdefault("flops_estimate", 2e9)
            fields.setdefault("elapsed_time", wu.rsc_fpops_est / 2e9)
        return Result.objects.create(workunit=wu, app=self.app, name=name,
                                     random=name_random(name), **fields)


@pytest.fixture
def project(db):
    return Project()


def work_request(host, **fields):
    """A request from ``host`` asking for a day of CPU work unless told otherwise."""
    fields.setdefault("cpu_req_secs", 86400.0)
    fields.setdefault("cpu_req_instances", 1.0)
    return SchedulerRequest(
        hostid=host.pk, userid=host.owner_id,
        host_info=HostInfo(domain_name=host.domain_name, p_ncpus=host.p_ncpus,
                           p_fpops=host.p_fpops),
        time_stats=TimeStats(on_frac=host.on_frac, active_frac=host.active_frac),
        **fields)
