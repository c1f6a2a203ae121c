"""BOINC's server data model (reference/server.md §1), as Django models.

Every enum carries BOINC's numeric value, because queries depend on the order
(``server_state <= UNSENT`` counts INACTIVE and UNSENT, reference/server.md §1).
Times are Unix seconds as integers, as in BOINC's schema; ``INT_MAX`` means "never".
A transition on one row is a compare-and-set model method; daemons orchestrate.
"""

import enum
import hashlib
import hmac
import time
from pathlib import Path
from typing import TYPE_CHECKING, Self, cast

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse

if TYPE_CHECKING:
    from backend.daemons.sched_types import SchedulerConfig

INT_MAX = 2**31 - 1


# --- enums (reference/server.md §1.1–§1.6) -------------------------------------------------


class ServerState(models.IntegerChoices):
    """``result.server_state`` (§1.1). Value 3 is unused in BOINC."""

    INACTIVE = 1, "Inactive"
    UNSENT = 2, "Unsent"
    IN_PROGRESS = 4, "In progress"
    OVER = 5, "Over"


class Outcome(models.IntegerChoices):
    """``result.outcome`` (§1.2), meaningful only when server_state is OVER."""

    INIT = 0, "Init"
    SUCCESS = 1, "Success"
    COULDNT_SEND = 2, "Couldn't send"
    CLIENT_ERROR = 3, "Client error"
    NO_REPLY = 4, "No reply"
    DIDNT_NEED = 5, "Didn't need"
    VALIDATE_ERROR = 6, "Validate error"
    CLIENT_DETACHED = 7, "Client detached"


class ValidateState(models.IntegerChoices):
    """``result.validate_state`` (§1.3)."""

    INIT = 0, "Init"
    VALID = 1, "Valid"
    INVALID = 2, "Invalid"
    NO_CHECK = 3, "No check"
    INCONCLUSIVE = 4, "Inconclusive"
    TOO_LATE = 5, "Too late"


class ClientState(models.IntegerChoices):
    """``result.client_state`` (§1.4), shared with the client; numerical order matters."""

    NEW = 0, "New"
    FILES_DOWNLOADING = 1, "Downloading"
    FILES_DOWNLOADED = 2, "Downloaded"
    COMPUTE_ERROR = 3, "Compute error"
    FILES_UPLOADING = 4, "Uploading"
    FILES_UPLOADED = 5, "Uploaded"
    ABORTED = 6, "Aborted"
    UPLOAD_FAILED = 7, "Upload failed"


class FileDeleteState(models.IntegerChoices):
    """``file_delete_state`` of workunits and results (§1.5)."""

    INIT = 0, "Init"
    READY = 1, "Ready"
    DONE = 2, "Done"
    ERROR = 3, "Error"


class AssimilateState(models.IntegerChoices):
    """``workunit.assimilate_state`` (§1.5)."""

    INIT = 0, "Init"
    READY = 1, "Ready"
    DONE = 2, "Done"


class ErrorMask(enum.IntFlag):
    """``workunit.error_mask`` bits (§1.6)."""

    COULDNT_SEND_RESULT = 1
    TOO_MANY_ERROR_RESULTS = 2
    TOO_MANY_SUCCESS_RESULTS = 4
    TOO_MANY_TOTAL_RESULTS = 8
    CANCELLED = 16
    NO_CANONICAL_RESULT = 32

    @classmethod
    def names(cls, mask: int) -> list[str]:
        """The names of the bits set in ``mask``, lowest bit first."""
        # each member is a single bit, which always has a name
        return [cast(str, flag.name) for flag in cls if mask & flag.value]


class TransitionerFlags(models.IntegerChoices):
    """``workunit.transitioner_flags`` (§1.6); 0 is an ordinary workunit."""

    ORDINARY = 0, "Ordinary"
    TRANSITION_NONE = 1, "Never transition"
    TRANSITION_NO_NEW_RESULTS = 2, "No new results"


class Venue(models.TextChoices):
    """Where a computer is (BOINC's host venue, sent as <host_venue>): a volunteer's computers
    at one venue share their computing preferences, which differ from one venue to another."""

    NONE = "", "none"
    HOME = "home", "home"
    SCHOOL = "school", "school"
    WORK = "work", "work"


class GpuType(models.TextChoices):
    """The processor types of reference/client.md: CPU and the GPU vendors."""

    NONE = "", "None"
    NVIDIA = "NVIDIA", "NVIDIA"
    ATI = "ATI", "AMD/ATI"
    INTEL = "intel_gpu", "Intel GPU"
    APPLE = "apple_gpu", "Apple GPU"


class ValidatorKind(models.TextChoices):
    """The validator's comparisons (backend/daemons/validator.py), after BOINC's samples."""

    BITWISE = "bitwise", "Output checksums equal (sample_bitwise_validator)"
    NUMERIC = "numeric", "Numbers equal within a tolerance"


# --- projects ------------------------------------------------------------------------------


class Project(models.Model):
    """A BOINC project: its own rows, config.xml, clock, data directory and daemons
    (DESIGN.md "Projects"). BOINC gives each project a database of its own; boincweb keeps many
    in one, and every BOINC row below names the project it belongs to.

    A live project runs on the wall clock and the periodic job makes its daemon passes; a
    world's project runs on the world's simulated clock, which the world alone advances
    (``simulated_time``), and only the world makes its passes.
    """

    class Kind(models.TextChoices):
        LIVE = "live", "Live"
        WORLD = "world", "World"

    DEMO_SLUG = "demo"

    name = models.CharField(max_length=100)
    slug = models.SlugField(max_length=50, unique=True)
    kind = models.CharField(max_length=5, choices=Kind.choices, default=Kind.LIVE)
    # The project's config.xml (BOINC's names, backend.server_config); empty: the settings'
    # BOINC_CONFIG_XML and server options.
    config_xml = models.TextField(blank=True, help_text="The project's BOINC config.xml.")
    # A world's clock in Unix seconds, written as the world advances; null: the wall clock.
    simulated_time = models.BigIntegerField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.name

    @classmethod
    def demo(cls) -> "Project":
        """The default project: the live demo that ``/`` and the ``/project/...`` pages show."""
        project, _ = cls.objects.get_or_create(slug=cls.DEMO_SLUG, defaults={"name": "Demo project"})
        return project

    @property
    def is_live(self) -> bool:
        return self.kind == self.Kind.LIVE

    def master_path(self) -> str:
        """The path of the project's master page, where BOINC clients attach: ``/boinc/`` for
        the demo project, which real clients attached to before there were projects,
        ``/projects/<slug>/boinc/`` for another (protocol.urls)."""
        if self.slug == self.DEMO_SLUG:
            return reverse("boinc:master")
        return reverse("project_boinc:master", kwargs={"slug": self.slug})

    def now(self) -> int:
        """The project's clock in Unix seconds: the world's simulated time, or the wall clock."""
        if self.simulated_time is not None:
            return self.simulated_time
        return int(time.time())

    def scheduler_config(self) -> "SchedulerConfig":
        """The project's server options: its own config.xml when it has one, else the
        settings' (backend.server_config.project_config)."""
        from backend.server_config import project_config, read_config_xml

        if self.config_xml:
            return read_config_xml(
                self.config_xml,
                daily_result_quota=settings.BOINC_DAILY_RESULT_QUOTA,
                resend_lost_results=settings.BOINC_RESEND_LOST_RESULTS,
            )
        return project_config()

    @property
    def download_dir(self) -> Path:
        """The project's input files (backend.daemons.hierarchy.project_dir has the rule)."""
        from backend.daemons.hierarchy import project_dir

        return project_dir(self, "download")

    @property
    def upload_dir(self) -> Path:
        from backend.daemons.hierarchy import project_dir

        return project_dir(self, "upload")

    @property
    def keys_dir(self) -> Path:
        """The project's code-signing keys (protocol.signing)."""
        from backend.daemons.hierarchy import project_dir

        return project_dir(self, "keys")


def project_field(
    related_name: str = "+", *, db_index: bool = False, db_constraint: bool = True
) -> "models.ForeignKey[Project, Project]":
    """The project a BOINC row belongs to. Unindexed on its own: each table's indexes that a
    daemon or page filters by lead with it instead."""
    return models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name=related_name, db_index=db_index, db_constraint=db_constraint
    )


# Exit codes the daemons distinguish (lib/error_numbers.h, reference/server.md §1.4).
EXIT_ABORTED_BY_CLIENT = 194
EXIT_ABORTED_BY_PROJECT = 202
EXIT_ABORTED_VIA_GUI = 203


# --- applications --------------------------------------------------------------------------


class App(models.Model):
    project = project_field("apps")
    name = models.CharField(max_length=254)
    user_friendly_name = models.CharField(max_length=254, blank=True)
    deprecated = models.BooleanField(default=False)
    locality_scheduling = models.BooleanField(
        default=False, help_text="Send this app's work by locality (reference/server.md §3.10)."
    )
    # Work generation defaults for new workunits (create_work, reference/server.md §3.1).
    min_quorum = models.PositiveIntegerField(default=2)
    target_nresults = models.PositiveIntegerField(default=2)
    max_error_results = models.PositiveIntegerField(default=3)
    max_total_results = models.PositiveIntegerField(default=6)
    max_success_results = models.PositiveIntegerField(default=4)
    delay_bound = models.PositiveIntegerField(default=7 * 86400, help_text="Seconds.")
    rsc_fpops_est = models.FloatField(default=3600e9)
    rsc_fpops_bound = models.FloatField(default=86400e9)
    # Unsent results the work generator keeps on hand (reference/server.md §3.1).
    unsent_target = models.PositiveIntegerField(default=100)
    # Seconds between a workunit's assimilation and its file deletion (<delete_delay_hours>).
    delete_delay = models.PositiveIntegerField(default=0)
    # The validator's comparison of two results' outputs (reference/server.md §3.7).
    validator = models.CharField(max_length=16, choices=ValidatorKind.choices, default=ValidatorKind.BITWISE)
    validate_tolerance = models.FloatField(default=1e-6, help_text="Relative tolerance of the numeric validator.")
    # The assimilator's handler for this app's finished workunits (reference/server.md §3.8).
    assimilator = models.CharField(max_length=32, default="record")
    max_output_nbytes = models.BigIntegerField(
        default=10**7, help_text="Upload limit of each output file (max_nbytes)."
    )
    create_time = models.BigIntegerField(default=0)
    # CreditNew (sched/credit.cpp): the lowest average PFC/rsc_fpops_est over the app's
    # versions (update_av_scales; 1 until known), and whether host scaling waits for
    # CONS_VALID_HOST_SCALE consecutive valid results.
    min_avg_pfc = models.FloatField(default=1.0)
    host_scale_check = models.BooleanField(default=False)
    # Homogeneous redundancy (reference/server.md §3.11, backend.daemons.sched_hr): 0 uses
    # the project's <homogeneous_redundancy>; 1 (fine: OS and CPU model family) or 2 (coarse:
    # OS and CPU vendor) sends a workunit's replicas only to hosts of the class of its first.
    homogeneous_redundancy = models.PositiveSmallIntegerField(
        choices=[(0, "off"), (1, "fine"), (2, "coarse")],
        default=0,
        help_text="Homogeneous redundancy type: 0 off (or the project's), 1 fine, 2 coarse.",
    )
    # Every replica of a workunit runs the app version its first replica was sent with.
    homogeneous_app_version = models.BooleanField(
        default=False, help_text="Send all of a workunit's replicas with one app version."
    )

    class Meta:
        ordering = ["name"]
        constraints = [
            # also the index of a project's apps (the status page, the work generator)
            models.UniqueConstraint(fields=["project", "name"], name="app_project_name"),
        ]

    def __str__(self) -> str:
        return self.name


class AppVersion(models.Model):
    project = project_field("app_versions")
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="versions")
    version_num = models.PositiveIntegerField()
    platform = models.CharField(max_length=254, default="x86_64-pc-linux-gnu")
    plan_class = models.CharField(max_length=254, blank=True)
    flops = models.FloatField(default=1e9, help_text="Estimated FLOPS on a typical host.")
    avg_ncpus = models.FloatField(default=1.0)
    gpu_type = models.CharField(max_length=16, choices=GpuType.choices, blank=True, default="")
    gpu_usage = models.FloatField(default=0.0, help_text="GPU instances used (0 for CPU apps).")
    deprecated = models.BooleanField(default=False)
    create_time = models.BigIntegerField(default=0)
    # Sent only to volunteers who allow beta work (BOINC's app_version.beta).
    beta = models.BooleanField(default=False)
    # The client versions (major × 10000 + minor × 100 + release) the version is sent to;
    # 0 means no bound (app_version.min_core_version, max_core_version).
    min_core_version = models.IntegerField(default=0)
    max_core_version = models.IntegerField(default=0)
    # CreditNew (sched/credit.cpp): the average PFC/rsc_fpops_est of the version's valid
    # results (pfc_n samples), the scale update_av_scales derives from it (0: none yet), and
    # the recent average credit its results were granted.
    pfc_n = models.FloatField(default=0.0)
    pfc_avg = models.FloatField(default=0.0)
    pfc_scale = models.FloatField(default=0.0)
    expavg_credit = models.FloatField(default=0.0)
    expavg_time = models.FloatField(default=0.0)

    class Meta:
        ordering = ["app", "-version_num"]
        constraints = [
            models.UniqueConstraint(
                fields=["app", "version_num", "platform", "plan_class"],
                name="app_version_unique",
            ),
            models.CheckConstraint(condition=Q(avg_ncpus__gte=0), name="app_version_ncpus_nonneg"),
            models.CheckConstraint(condition=Q(gpu_usage=0) | ~Q(gpu_type=""), name="app_version_gpu_usage_has_type"),
        ]
        indexes = [
            # scheduler: a project's versions for a host's platforms (sched_send)
            models.Index(fields=["project", "platform"], name="av_project_platform"),
        ]

    def __str__(self) -> str:
        plan = f" ({self.plan_class})" if self.plan_class else ""
        return f"{self.app.name} {self.version_num} {self.platform}{plan}"

    @property
    def uses_gpu(self) -> bool:
        return bool(self.gpu_type) and self.gpu_usage > 0


# --- hosts ---------------------------------------------------------------------------------


class Host(models.Model):
    """A volunteer's computer: BOINC's host row."""

    project = project_field("hosts")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="hosts")
    domain_name = models.CharField(max_length=254)
    create_time = models.BigIntegerField(default=0)
    rpc_seqno = models.PositiveIntegerField(default=0)
    rpc_time = models.BigIntegerField(default=0)
    # Hardware (host_info).
    p_ncpus = models.PositiveIntegerField(default=1)
    p_fpops = models.FloatField(default=1e9, help_text="FLOPS per CPU.")
    os_name = models.CharField(max_length=254, default="Linux")
    platform = models.CharField(max_length=254, default="x86_64-pc-linux-gnu")
    gpu_type = models.CharField(max_length=16, choices=GpuType.choices, blank=True, default="")
    gpu_count = models.PositiveIntegerField(default=0)
    gpu_peak_flops = models.FloatField(default=0.0, help_text="Peak FLOPS per GPU.")
    # Memory the client reports (host_info m_nbytes; 0: not said).
    m_nbytes = models.FloatField(default=0.0, help_text="Bytes of RAM.")
    # Availability (time_stats): fractions of time.
    on_frac = models.FloatField(default=1.0)
    connected_frac = models.FloatField(default=1.0)
    active_frac = models.FloatField(default=1.0)
    gpu_active_frac = models.FloatField(default=1.0)
    # Reliability and credit (maintained by the scheduler and validator).
    avg_turnaround = models.FloatField(default=0.0)
    max_results_day = models.IntegerField(default=0)
    total_credit = models.FloatField(default=0.0)
    expavg_credit = models.FloatField(default=0.0)
    expavg_time = models.FloatField(default=0.0)
    # Preferences (global_prefs, reference/client.md §2); edited through the prefs form by the
    # owner or staff, and sent to the host's client in <global_preferences> when newer than
    # the client's (reference/protocol.md §4.3). Each column is named as its element of
    # BOINC's global_prefs.xml, with the client's defaults (lib/prefs.cpp), but for the
    # network rates, which the element gives in bytes per second as here.
    work_buf_min_days = models.FloatField(default=0.1)
    work_buf_additional_days = models.FloatField(default=0.5)
    max_ncpus_pct = models.FloatField(default=100.0)
    cpu_usage_limit = models.FloatField(default=100.0)
    cpu_scheduling_period_minutes = models.FloatField(default=60.0)
    leave_apps_in_memory = models.BooleanField(default=False)
    run_on_batteries = models.BooleanField(default=True)
    run_if_user_active = models.BooleanField(default=True)
    # percent of the CPU used by other programs above which computing stops; 0: never
    suspend_cpu_usage = models.FloatField(default=25.0)
    # hours of the day (0-24) between which computing / network use is allowed; equal: always
    start_hour = models.FloatField(default=0.0)
    end_hour = models.FloatField(default=0.0)
    net_start_hour = models.FloatField(default=0.0)
    net_end_hour = models.FloatField(default=0.0)
    # disk: the least of the three limits holds; 0 GB: no limit of that kind
    disk_max_used_gb = models.FloatField(default=0.0)
    disk_max_used_pct = models.FloatField(default=90.0)
    disk_min_free_gb = models.FloatField(default=0.1)
    ram_max_used_busy_pct = models.FloatField(default=50.0)
    ram_max_used_idle_pct = models.FloatField(default=90.0)
    # bytes per second; 0: no limit
    max_bytes_sec_down = models.FloatField(default=0.0)
    max_bytes_sec_up = models.FloatField(default=0.0)
    prefs_mod_time = models.BigIntegerField(default=0)
    venue = models.CharField(max_length=8, choices=Venue.choices, blank=True, default="")

    class Meta:
        ordering = ["id"]
        indexes = [
            # the hosts page and the scheduler's speed percentiles: a project's hosts
            models.Index(fields=["project", "id"], name="host_project_id"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(p_ncpus__gte=1), name="host_has_a_cpu"),
            models.CheckConstraint(
                condition=Q(on_frac__gte=0, on_frac__lte=1)
                & Q(connected_frac__gte=0, connected_frac__lte=1)
                & Q(active_frac__gte=0, active_frac__lte=1)
                & Q(gpu_active_frac__gte=0, gpu_active_frac__lte=1),
                name="host_fractions_in_unit_interval",
            ),
            models.CheckConstraint(
                condition=Q(work_buf_min_days__gte=0, work_buf_additional_days__gte=0),
                name="host_buffers_nonneg",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.domain_name} (#{self.pk})"


# A host's computing preferences, each named as its element of BOINC's <global_preferences>
# (lib/prefs.cpp), in the order its preferences page shows them.
PREF_FIELDS = [
    "run_on_batteries",
    "run_if_user_active",
    "max_ncpus_pct",
    "cpu_usage_limit",
    "suspend_cpu_usage",
    "start_hour",
    "end_hour",
    "net_start_hour",
    "net_end_hour",
    "disk_max_used_gb",
    "disk_max_used_pct",
    "disk_min_free_gb",
    "ram_max_used_busy_pct",
    "ram_max_used_idle_pct",
    "max_bytes_sec_down",
    "max_bytes_sec_up",
    "work_buf_min_days",
    "work_buf_additional_days",
    "cpu_scheduling_period_minutes",
    "leave_apps_in_memory",
]


class HostAppVersion(models.Model):
    """Per host × app version reliability and quota record (reference/server.md §1.9).

    Maintained by ``backend.daemons.host_app_version`` (§3.11): the scheduler creates it on
    the first send and counts sends and reports, the transitioner counts timeouts, the
    validator valid and invalid results.
    """

    project = project_field()
    # Indexed by host_app_version_unique, which leads with it.
    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="app_versions", db_index=False)
    app_version = models.ForeignKey(AppVersion, on_delete=models.CASCADE)
    max_jobs_per_day = models.IntegerField(default=0)
    n_jobs_today = models.IntegerField(default=0)
    # The UTC day (Unix seconds // 86400) n_jobs_today counts the jobs of.
    jobs_day = models.IntegerField(default=0)
    turnaround_avg = models.FloatField(default=0.0, help_text="Seconds.")
    # Samples in turnaround_avg (BOINC's turnaround_n).
    turnaround_n = models.FloatField(default=0.0)
    consecutive_valid = models.IntegerField(default=0)
    # BOINC's host_app_version.et and .pfc averages: elapsed seconds per estimated FLOP of the
    # host's successful jobs (backend.daemons.sched_version's speed estimate), and the claimed
    # peak FLOP count per estimated FLOP of its valid results, runtime outliers left out
    # (CreditNew's host scale, backend.daemons.credit get_pfc); _n is the samples taken.
    et_avg = models.FloatField(default=0.0)
    et_n = models.FloatField(default=0.0)
    pfc_avg = models.FloatField(default=0.0)
    pfc_n = models.FloatField(default=0.0)

    @property
    def et_gflops(self) -> float | None:
        """The speed the scheduler estimates this host's jobs of the version at from their
        runtimes (1 / et_avg, in GFLOPS), once it has more than 10 (MIN_HOST_SAMPLES)."""
        return 1e-9 / self.et_avg if self.et_n > 10 and self.et_avg > 0 else None

    class Meta:
        constraints = [models.UniqueConstraint(fields=["host", "app_version"], name="host_app_version_unique")]


# --- credit of volunteers and teams (BOINC's user and team rows' credit fields) ------------


class Team(models.Model):
    """A team of volunteers, with the credit its members' valid results earn
    (sched/credit.cpp grant_credit)."""

    project = project_field("teams")
    name = models.CharField(max_length=254)
    create_time = models.BigIntegerField(default=0)
    total_credit = models.FloatField(default=0.0)
    expavg_credit = models.FloatField(default=0.0)
    expavg_time = models.FloatField(default=0.0)

    class Meta:
        ordering = ["name"]
        indexes = [
            # the teams page: teams by recent average credit
            models.Index(fields=["project", "-expavg_credit", "id"], name="team_rac"),
        ]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="team_project_name")]

    def __str__(self) -> str:
        return self.name


class UserCredit(models.Model):
    """A volunteer's credit and team in one project: the fields of BOINC's user row that the
    validator writes (sched/credit.cpp grant_credit). BOINC gives each project a user table of
    its own, so a volunteer of two projects has a row in each, with the credit and the team of
    that project. Created on a volunteer's first credit in the project."""

    project = project_field()
    # Indexed by user_credit_project_user, which leads with the project.
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="credits", db_index=False)
    # A team of the same project (BOINC's user.teamid); see clean().
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="members")
    total_credit = models.FloatField(default=0.0)
    expavg_credit = models.FloatField(default=0.0)
    expavg_time = models.FloatField(default=0.0)

    class Meta:
        constraints = [
            # one row per volunteer and project; also the index of a user's row (the validator,
            # the user page)
            models.UniqueConstraint(fields=["project", "user"], name="user_credit_project_user"),
        ]
        indexes = [
            # the users page: users by recent average credit
            models.Index(fields=["project", "-expavg_credit", "user"], name="user_credit_rac"),
        ]

    def __str__(self) -> str:
        return f"user {self.user_id} in project {self.project_id}"

    def clean(self) -> None:
        """A volunteer's team is one of the row's project."""
        from django.core.exceptions import ValidationError

        if self.team_id is not None and self.team is not None and self.team.project_id != self.project_id:
            raise ValidationError({"team": "the team belongs to another project"})


class UserAppCredit(models.Model):
    """A volunteer's credit from one app (BOINC's credit_user row, written by
    grant_credit_by_app when config.xml sets <credit_by_app>)."""

    project = project_field()
    # Indexed by user_app_credit_unique, which leads with the project.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="app_credit", db_index=False
    )
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="+")
    njobs = models.IntegerField(default=0)
    total = models.FloatField(default=0.0)
    expavg = models.FloatField(default=0.0)
    expavg_time = models.FloatField(default=0.0)

    class Meta:
        constraints = [
            # also the index of the user page's credit by app
            models.UniqueConstraint(fields=["project", "user", "app"], name="user_app_credit_unique")
        ]


class TeamAppCredit(models.Model):
    """A team's credit from one app (BOINC's credit_team row, see UserAppCredit)."""

    project = project_field()
    # Indexed by team_app_credit_unique, which leads with the project.
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="app_credit", db_index=False)
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="+")
    njobs = models.IntegerField(default=0)
    total = models.FloatField(default=0.0)
    expavg = models.FloatField(default=0.0)
    expavg_time = models.FloatField(default=0.0)

    class Meta:
        constraints = [
            # also the index of the team page's credit by app
            models.UniqueConstraint(fields=["project", "team", "app"], name="team_app_credit_unique")
        ]


class CreditHistory(models.Model):
    """The credit of a user or team at the end of a UTC day on which they were granted
    credit: one row per day with credit, written by the validator, for RAC charts over time
    (BOINC keeps such history only in its stats exports)."""

    class Kind(models.TextChoices):
        USER = "user"
        TEAM = "team"

    project = project_field()
    kind = models.CharField(max_length=4, choices=Kind.choices)
    # the user's or the team's id
    owner_id = models.BigIntegerField()
    day = models.IntegerField(help_text="Unix seconds // 86400 (UTC).")
    total_credit = models.FloatField(default=0.0)
    expavg_credit = models.FloatField(default=0.0)
    expavg_time = models.FloatField(default=0.0)

    class Meta:
        ordering = ["kind", "owner_id", "day"]
        # also the index the user and team pages' charts read (one owner's days in order)
        constraints = [
            models.UniqueConstraint(fields=["project", "kind", "owner_id", "day"], name="credit_history_unique")
        ]


# --- files ---------------------------------------------------------------------------------


class File(models.Model):
    """A workunit's input file, or a result's output file, on disk in download/ or upload/."""

    class Kind(models.TextChoices):
        INPUT = "input", "Input"
        OUTPUT = "output", "Output"

    # Unchecked by the database, as a workunit's project is (Workunit.project): a file is made
    # with the project of a row its maker read (create_work's app, a reported result, the
    # locality app registering its data files) and goes before it.
    project = project_field(db_constraint=False)
    name = models.CharField(max_length=254, unique=True)
    kind = models.CharField(max_length=6, choices=Kind.choices)
    nbytes = models.BigIntegerField(default=0)
    max_nbytes = models.BigIntegerField(default=0, help_text="Upload limit (output files).")
    md5_cksum = models.CharField(max_length=32, blank=True)
    sticky = models.BooleanField(default=False, help_text="Stays on the host (locality).")
    # Seed 004: a locality scheduling project's big input files carry <report_on_rpc/> too.
    report_on_rpc = models.BooleanField(
        default=False, help_text="The client names it in each scheduler request (locality)."
    )
    # BOINC's <no_delete/> in the file's <file_info>: the file deleter leaves it on disk
    # (file_deleter.cpp wu_delete_files, result_delete_files).
    no_delete = models.BooleanField(default=False, help_text="The file deleter never deletes it (<no_delete/>).")
    # For an output file: the result it belongs to.
    result = models.ForeignKey(
        "Result",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="output_files",
        db_index=False,  # file_result below
    )
    file_delete_state = models.IntegerField(choices=FileDeleteState.choices, default=FileDeleteState.INIT)

    class Meta:
        ordering = ["name"]
        indexes = [
            # file_deleter and the upload handler: a result's output files (file_result)
            models.Index(fields=["result"], name="file_result"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(nbytes__gte=0), name="file_nbytes_nonneg"),
            models.CheckConstraint(
                condition=Q(kind="output") | Q(result__isnull=True),
                name="file_only_outputs_have_result",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class HostFile(models.Model):
    """A sticky file a host reported it holds (locality scheduling, reference/server.md §3.10)."""

    project = project_field()
    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="files")
    name = models.CharField(max_length=254)
    reported_time = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["host", "name"], name="host_file_unique")]
        indexes = [
            # locality: which hosts hold a file (working-set manager, delete-file instructions)
            models.Index(fields=["project", "name"], name="host_file_name"),
        ]


class LocalityTrigger(models.Model):
    """Locality scheduling's triggers for one data file (reference/server.md §3.10; seed 004):
    BOINC's ``sched_trigger`` table of ``db/schema_locality.sql``, with the directories of the
    locality-scheduling document folded into columns: ``need_work`` is
    ``locality_scheduling/need_work/X``, ``no_work_available`` is ``no_work_available/X``,
    ``in_working_set`` is ``file_working_set/X`` and ``no_work`` is ``files_no_work/X``
    (backend.daemons.sched_locality).

    The table keeps the name it had when the model lived in the world app, so that a database
    made then keeps its rows.
    """

    project = project_field()
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="+")
    file_name = models.CharField(max_length=254, unique=True)
    need_work = models.BooleanField(default=False)
    need_work_time = models.BigIntegerField(default=0, help_text="When need_work was set.")
    no_work_available = models.BooleanField(
        default=False, help_text="The work generator can make no more workunits for the file."
    )
    in_working_set = models.BooleanField(default=False)
    no_work = models.BooleanField(default=False, help_text="The scheduler found no sendable result for the file.")

    class Meta:
        db_table = "world_localitytrigger"
        ordering = ["file_name"]
        indexes = [
            # on-demand work generator: files whose need_work trigger is set
            models.Index(fields=["app", "need_work", "file_name"], name="locality_need_work"),
            # scheduler: an app's working set, by file name
            models.Index(fields=["app", "in_working_set", "file_name"], name="locality_working_set"),
        ]

    def __str__(self) -> str:
        return self.file_name


# --- workunits and results -----------------------------------------------------------------


class WorkunitQuerySet(models.QuerySet["Workunit"]):
    def transition_due(self, now: int) -> Self:
        """Workunits whose transition_time has come (the transitioner's enumeration, §3.2)."""
        return self.filter(transition_time__lt=now).exclude(transitioner_flags=TransitionerFlags.TRANSITION_NONE)

    def need_validation(self) -> Self:
        return self.filter(need_validate=True)

    def ready_to_assimilate(self) -> Self:
        return self.filter(assimilate_state=AssimilateState.READY)

    def files_ready_to_delete(self) -> Self:
        return self.filter(file_delete_state=FileDeleteState.READY)


class Workunit(models.Model):
    """BOINC's workunit (reference/server.md §1.7): a bundle of independent sub-states."""

    # Written by create_work, which read the app (and so its project) in the same transaction,
    # and never changed; a workunit goes before its app and project (Django's cascade and
    # PROTECT, world.deletion's ordered deletes). So, as in BOINC's schema, which has no
    # foreign keys, the database does not check the two references: on PostgreSQL they were
    # two deferred queries per workunit at the commit of creating work, a fifth of its time.
    project = project_field("workunits", db_constraint=False)
    # Indexed by wu_app_id, which leads with app.
    app = models.ForeignKey(
        App, on_delete=models.PROTECT, related_name="workunits", db_index=False, db_constraint=False
    )
    name = models.CharField(max_length=254, unique=True)
    create_time = models.BigIntegerField(default=0)
    batch = models.IntegerField(default=0)
    # Written only by create_work, in the transaction that creates the workunit and its files,
    # and removed with them (Django's cascade, world.deletion's ordered deletes), so no
    # database check of the two references (on PostgreSQL, two deferred queries per workunit
    # at the commit of creating work).
    input_files = models.ManyToManyField(File, blank=True, related_name="workunits", db_constraint=False)
    rsc_fpops_est = models.FloatField(default=3600e9)
    rsc_fpops_bound = models.FloatField(default=86400e9)
    rsc_memory_bound = models.FloatField(default=5e8)
    rsc_disk_bound = models.FloatField(default=1e9)
    # The download speed (bytes/s) a host needs for this job; 0: any (sched_check.cpp
    # check_bandwidth).
    rsc_bandwidth_bound = models.FloatField(default=0.0)
    need_validate = models.BooleanField(default=False)
    canonical_result = models.ForeignKey("Result", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    canonical_credit = models.FloatField(default=0.0)
    transition_time = models.BigIntegerField(default=INT_MAX)
    delay_bound = models.PositiveIntegerField(default=7 * 86400)
    error_mask = models.IntegerField(default=0)
    file_delete_state = models.IntegerField(choices=FileDeleteState.choices, default=FileDeleteState.INIT)
    assimilate_state = models.IntegerField(choices=AssimilateState.choices, default=AssimilateState.INIT)
    hr_class = models.IntegerField(default=0)
    opaque = models.FloatField(default=0.0)
    priority = models.IntegerField(default=0)
    min_quorum = models.PositiveIntegerField(default=1)
    target_nresults = models.PositiveIntegerField(default=1)
    max_error_results = models.PositiveIntegerField(default=1)
    max_total_results = models.PositiveIntegerField(default=1)
    max_success_results = models.PositiveIntegerField(default=1)
    transitioner_flags = models.IntegerField(choices=TransitionerFlags.choices, default=TransitionerFlags.ORDINARY)
    app_version = models.ForeignKey(AppVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    mod_time = models.DateTimeField(auto_now=True)
    # The version number the job must run with, 0 for any (BOINC's workunit.app_version_num).
    app_version_num = models.IntegerField(default=0)
    # Not BOINC's: true until the transitioner has seen the workunit with results (results are
    # never deleted but with their workunit), so false means it has some. The work generator
    # waits while a workunit has no results yet (§3.1); it looks only at these rows
    # (wu_awaiting_results), not at every workunit the app ever had.
    awaiting_results = models.BooleanField(default=True)

    objects = WorkunitQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        constraints = [
            # create_work's checks (reference/server.md §1.7).
            models.CheckConstraint(
                condition=Q(target_nresults__gte=1, max_error_results__gte=1)
                & Q(max_total_results__gte=1, max_success_results__gte=1)
                & Q(rsc_fpops_est__gt=0, rsc_fpops_bound__gt=0, rsc_disk_bound__gt=0),
                name="workunit_limits_nonzero",
            ),
            # target_nresults <= max_success_results holds at creation only: the validator
            # raises target_nresults to n_viable + 1 when there is no consensus (§3.7).
            models.CheckConstraint(
                condition=Q(max_success_results__lte=models.F("max_total_results"))
                & Q(max_error_results__lte=models.F("max_total_results")),
                name="workunit_limits_ordered",
            ),
            models.CheckConstraint(condition=Q(min_quorum__gte=1), name="workunit_quorum_positive"),
        ]
        indexes = [
            # BOINC's wu_val and wu_assim (app, need_validate / assimilate_state) are not here:
            # the validator and the assimilator claim a project's rows, found through the
            # partial indexes wu_need_validate and wu_assimilate_ready below, which hold only
            # the rows waiting; the two full indexes cost every new workunit two entries.
            # file_deleter: workunits whose input files are READY to delete (wu_filedel)
            models.Index(fields=["project", "file_delete_state"], name="wu_filedel"),
            # dashboard workunit list: keyset pagination by app and id
            models.Index(fields=["app", "id"], name="wu_app_id"),
            # transitioner: workunits whose transition_time has come (BOINC's wu_timeout), and
            # the dashboard's workunit list sorted by transition_time, ties by id
            models.Index(fields=["project", "transition_time", "id"], name="wu_transition_id"),
            # validator, assimilator and status page: workunits waiting for validation and for
            # assimilation; only those rows are in them, so a pass or a count reads a few
            # entries, not every workunit's
            models.Index(fields=["app"], name="wu_need_validate", condition=Q(need_validate=True)),
            models.Index(
                fields=["app"], name="wu_assimilate_ready", condition=Q(assimilate_state=AssimilateState.READY)
            ),
            # work generator: the workunits that may still wait for their first results, per
            # app; a workunit leaves it at the transitioner pass that gives it results
            models.Index(fields=["app"], name="wu_awaiting_results", condition=Q(awaiting_results=True)),
            # a world's drain: the app's earliest transition_time to come (world.simulation
            # quiet_until) and whether any of its workunits is still unfinished (all_done), read
            # off the app's live rows, not past every other app's
            models.Index(
                fields=["app", "transition_time"], name="wu_app_transition", condition=Q(transition_time__lt=INT_MAX)
            ),
            models.Index(
                fields=["app"],
                name="wu_app_unfinished",
                condition=~Q(assimilate_state=AssimilateState.DONE, file_delete_state=FileDeleteState.DONE),
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def error_names(self) -> list[str]:
        return ErrorMask.names(self.error_mask)


class ResultQuerySet(models.QuerySet["Result"]):
    def unsent(self) -> Self:
        """UNSENT and INACTIVE: BOINC counts ``server_state <= UNSENT`` (§1)."""
        return self.filter(server_state__lte=ServerState.UNSENT)

    def in_progress(self) -> Self:
        return self.filter(server_state=ServerState.IN_PROGRESS)

    def timed_out(self, now: int) -> Self:
        """IN_PROGRESS results whose report_deadline has passed (transitioner §3.2 step 2)."""
        return self.filter(server_state=ServerState.IN_PROGRESS, report_deadline__lt=now)

    def files_ready_to_delete(self) -> Self:
        return self.filter(file_delete_state=FileDeleteState.READY)


class Result(models.Model):
    """BOINC's result: one instance of a workunit (reference/server.md §1.8)."""

    project = project_field("results")
    workunit = models.ForeignKey(
        Workunit, on_delete=models.CASCADE, related_name="results", db_index=False
    )  # res_wuid below
    # app, host and user are indexed by res_app_state, res_hostid_id and res_userid_id, which
    # lead with them; one index fewer each to keep up on every write of a result.
    app = models.ForeignKey(App, on_delete=models.PROTECT, related_name="results", db_index=False)
    name = models.CharField(max_length=254, unique=True)
    create_time = models.BigIntegerField(default=0)
    server_state = models.IntegerField(choices=ServerState.choices, default=ServerState.UNSENT)
    outcome = models.IntegerField(choices=Outcome.choices, default=Outcome.INIT)
    client_state = models.IntegerField(choices=ClientState.choices, default=ClientState.NEW)
    validate_state = models.IntegerField(choices=ValidateState.choices, default=ValidateState.INIT)
    file_delete_state = models.IntegerField(choices=FileDeleteState.choices, default=FileDeleteState.INIT)
    host = models.ForeignKey(
        Host,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="results",
        db_index=False,
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="results",
        db_index=False,
    )
    app_version = models.ForeignKey(
        AppVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="results"
    )
    report_deadline = models.BigIntegerField(default=0)
    sent_time = models.BigIntegerField(default=0)
    received_time = models.BigIntegerField(default=0)
    exit_status = models.IntegerField(default=0)
    stderr_out = models.TextField(blank=True)
    xml_doc_out = models.TextField(blank=True)
    claimed_credit = models.FloatField(default=0.0)
    granted_credit = models.FloatField(default=0.0)
    elapsed_time = models.FloatField(default=0.0)
    cpu_time = models.FloatField(default=0.0)
    flops_estimate = models.FloatField(default=0.0)
    # Left out of CreditNew's averages (BOINC's result.runtime_outlier; a validator's
    # init_result may set it).
    runtime_outlier = models.BooleanField(default=False)
    priority = models.IntegerField(default=0)
    random = models.IntegerField(default=0, help_text="Send order (feeder --random_order).")
    opaque = models.FloatField(default=0.0)
    # When a scheduler first found no host able to meet the deadline (0: not infeasible).
    infeasible_since = models.BigIntegerField(default=0)
    mod_time = models.DateTimeField(auto_now=True)

    objects = ResultQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        indexes = [
            # transitioner and validator: a workunit's results (res_wuid)
            models.Index(fields=["workunit"], name="res_wuid"),
            # feeder/scheduler: unsent results by priority (ind_res_st)
            models.Index(fields=["project", "server_state", "-priority"], name="ind_res_st"),
            # scheduler: the unsent results in the feeder's order (priority, then workunit), so
            # a request reads just the candidates it looks at; only UNSENT rows are in it
            models.Index(
                fields=["project", "-priority", "workunit", "id"],
                name="res_unsent_order",
                condition=Q(server_state=ServerState.UNSENT),
            ),
            # locality scheduling's old work: the oldest unsent results (Einstein@home's
            # res_create_server_state, which sched_locality.cpp send_old_work names)
            models.Index(
                fields=["project", "create_time", "id"],
                name="res_unsent_create",
                condition=Q(server_state=ServerState.UNSENT),
            ),
            # work generator: unsent count per app (res_app_state)
            models.Index(fields=["app", "server_state"], name="res_app_state"),
            # transitioner: timed-out results (IN_PROGRESS past report_deadline)
            models.Index(fields=["project", "server_state", "report_deadline"], name="res_deadline"),
            # file_deleter: outputs READY to delete (res_filedel)
            models.Index(fields=["project", "file_delete_state"], name="res_filedel"),
            # host page and scheduler reports: a host's results (res_hostid_id)
            models.Index(fields=["host", "id"], name="res_hostid_id"),
            # user page, one result per user per workunit (res_userid_id)
            models.Index(fields=["user", "id"], name="res_userid_id"),
            # status page: run times of the valid results received in the past day
            models.Index(
                fields=["project", "received_time"],
                name="res_received_valid",
                condition=Q(validate_state=ValidateState.VALID),
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_over(self) -> bool:
        """server_state is OVER (BOINC's RESULT_SERVER_STATE_OVER): its outcome means something."""
        return self.server_state == ServerState.OVER

    def output_file_name(self, i: int = 0) -> str:
        """The physical name of output file ``i``: ``<result name>_r<random>_<i>`` (§3.1).

        The random part stops a volunteer uploading a fake output for a wingman's instance.
        """
        return f"{self.name}_r{self.random}_{i}"


def name_random(name: str) -> int:
    """A result's ``random``: unpredictable without SECRET_KEY, yet repeatable for a name."""
    digest = hmac.new(settings.SECRET_KEY.encode(), name.encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


# --- lifecycle events ----------------------------------------------------------------------


class LifecycleEvent(models.Model):
    """One state change of a workunit, a result or a host: who did it, old -> new, and why.

    ``old``/``new`` hold the integer states of workunits and results (BOINC's enums); a change
    whose values are not integers, such as a host's preference of 0.25 days, leaves them empty
    and spells the values out in ``detail`` ("0.1 → 0.25").

    A log, so its references are not checked by the database: an event is written by the
    pass that holds its subject's row, in the project of that row, and goes with the row
    (Django's cascade, world.deletion's ordered deletes). Every pass writes events, and each
    would cost four deferred checks at its commit (PostgreSQL), two of them queries.
    """

    project = project_field(db_constraint=False)
    time = models.BigIntegerField(help_text="Unix seconds (the world's clock when simulated).")
    actor = models.CharField(max_length=32, help_text="Daemon or person that made the change.")
    # Indexed by event_wu_time and event_result_time, which lead with them.
    workunit = models.ForeignKey(
        Workunit,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="events",
        db_index=False,
        db_constraint=False,
    )
    result = models.ForeignKey(
        Result,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="events",
        db_index=False,
        db_constraint=False,
    )
    # Indexed by event_host_time, which leads with it.
    host = models.ForeignKey(
        Host,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="events",
        db_index=False,
        db_constraint=False,
    )
    field = models.CharField(max_length=32, help_text="The state that changed, e.g. server_state.")
    old = models.IntegerField(null=True, blank=True)
    new = models.IntegerField(null=True, blank=True)
    reason = models.CharField(max_length=254, blank=True)
    detail = models.CharField(
        max_length=254, blank=True, default="", help_text="The values of a change old/new cannot hold."
    )

    class Meta:
        ordering = ["time", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(workunit__isnull=False) | Q(result__isnull=False) | Q(host__isnull=False),
                name="event_has_subject",
            )
        ]
        indexes = [
            # workunit page: its timeline in order
            models.Index(fields=["workunit", "time"], name="event_wu_time"),
            # result page: its timeline in order
            models.Index(fields=["result", "time"], name="event_result_time"),
            # host page: its preference changes, newest first
            models.Index(fields=["host", "time"], name="event_host_time"),
        ]

    def __str__(self) -> str:
        if self.result_id:
            subject = f"result {self.result_id}"
        elif self.workunit_id:
            subject = f"workunit {self.workunit_id}"
        else:
            subject = f"host {self.host_id}"
        change = self.detail or f"{self.old} -> {self.new}"
        return f"{subject}: {self.field} {change} by {self.actor}"

    @property
    def old_label(self) -> str:
        return state_label(self.field, self.old)

    @property
    def new_label(self) -> str:
        return state_label(self.field, self.new)


STATE_ENUMS = {
    "server_state": ServerState,
    "outcome": Outcome,
    "validate_state": ValidateState,
    "client_state": ClientState,
    "file_delete_state": FileDeleteState,
    "assimilate_state": AssimilateState,
}


def state_label(field: str, value: int | None) -> str:
    """A state's BOINC name for display: ``state_label("server_state", 4) == "IN_PROGRESS"``."""
    if value is None:
        return ""
    if field == "error_mask":
        return "|".join(ErrorMask.names(value)) or "0"
    enum = STATE_ENUMS.get(field)
    if enum is None:
        return str(value)
    try:
        return enum(value).name
    except ValueError:
        return str(value)


# --- assimilated output ---------------------------------------------------------------------


class AssimilatedResult(models.Model):
    """What the default assimilator handler recorded for one finished workunit (§3.8)."""

    project = project_field()
    workunit = models.OneToOneField(Workunit, on_delete=models.CASCADE, related_name="assimilated")
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="assimilated")
    canonical_result = models.ForeignKey(Result, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    error_mask = models.IntegerField(default=0)
    output_md5 = models.CharField(max_length=32, blank=True)
    output_nbytes = models.BigIntegerField(default=0)
    path = models.CharField(max_length=1024, blank=True, help_text="Copy of the canonical output.")
    time = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"assimilated {self.workunit_id}"


# --- daemon status -------------------------------------------------------------------------


class DaemonStatus(models.Model):
    """The last pass of each daemon of each project, for the server status page."""

    project = project_field("daemons")
    name = models.CharField(max_length=32)
    enabled = models.BooleanField(default=True)
    last_pass_time = models.DateTimeField(null=True, blank=True)
    last_work_done = models.IntegerField(default=0)
    total_work_done = models.BigIntegerField(default=0)
    passes = models.BigIntegerField(default=0)
    last_error = models.TextField(blank=True)
    # The file deleter's last retry of FILE_DELETE_ERROR rows (simulated or wall-clock seconds).
    last_retry_time = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["project", "name"]
        verbose_name_plural = "daemon status"
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="daemon_status_unique")]

    def __str__(self) -> str:
        return self.name
