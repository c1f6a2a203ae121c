"""Fixtures for the back end's tests: private file directories and a small project."""

import pytest

from backend.daemons.scheduler import HostInfo, SchedulerRequest, TimeStats
from backend.models import Workunit
from tests.factories import (
    NOW,
    AppFactory,
    AppVersionFactory,
    HostFactory,
    ResultFactory,
    UserFactory,
    WorkunitFactory,
)


@pytest.fixture(autouse=True)
def data_dirs(settings, tmp_path):
    """Each test gets its own download, upload and assimilated directories."""
    settings.BOINCWEB_DATA_DIR = tmp_path
    settings.DOWNLOAD_DIR = tmp_path / "download"
    settings.UPLOAD_DIR = tmp_path / "upload"
    return tmp_path


class Project:
    """A project with one app and its CPU version; its helpers name rows as the tests read
    them (volunteer<n>'s host<n>, wu<n>, wu<n>_<k>)."""

    def __init__(self, **app_fields):
        self.app = AppFactory(**{"name": "uppercase", **app_fields})
        self.version = AppVersionFactory(app=self.app)
        self.hosts = 0

    def host(self, owner=None, **fields):
        self.hosts += 1
        owner = owner or UserFactory(username=f"volunteer{self.hosts}")
        return HostFactory(owner=owner, domain_name=f"host{self.hosts}", **fields)

    def workunit(self, name=None, **fields):
        # not due for the transitioner at any time a test passes, unless the test says so
        fields.setdefault("transition_time", NOW + 10**6)
        name = name or f"wu{Workunit.objects.count()}"
        return WorkunitFactory(app=self.app, name=name, **fields)

    def result(self, wu, suffix=None, **fields):
        if suffix is not None:
            fields["name"] = f"{wu.name}_{suffix}"
        return ResultFactory(workunit=wu, **fields)


@pytest.fixture
def project(db):
    return Project()


def work_request(host, **fields):
    """A request from ``host`` asking for a day of CPU work unless told otherwise."""
    fields.setdefault("cpu_req_secs", 86400.0)
    fields.setdefault("cpu_req_instances", 1.0)
    return SchedulerRequest(
        hostid=host.pk,
        userid=host.owner_id,
        host_info=HostInfo(domain_name=host.domain_name, p_ncpus=host.p_ncpus, p_fpops=host.p_fpops),
        time_stats=TimeStats(on_frac=host.on_frac, active_frac=host.active_frac),
        **fields,
    )
