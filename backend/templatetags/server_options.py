"""The project's homogeneous redundancy, job limit and locality scheduling options, for the
pages where an admin looks for them: the status page's configuration and a workunit's HR
settings."""

from django import template

from backend.daemons import sched_hr
from backend.daemons.sched_limit import RscLimit, project_job_limits
from backend.models import App, Project

register = template.Library()


def _limit(rsc: RscLimit) -> str:
    if not rsc.jobs:
        return "–"
    return f"{rsc.jobs} per processor" if rsc.per_proc else str(rsc.jobs)


@register.simple_tag
def server_options(project: Project) -> list[tuple[str, str | int, str]]:
    """(config.xml name, value, what it does) rows of ``project``, or one row saying why its
    config.xml could not be read."""
    from backend.server_config import ConfigError

    try:
        config = project.scheduler_config()
    except ConfigError as error:
        return [("config.xml", "unreadable", str(error))]
    limits = project_job_limits(config)
    rows = [
        (
            "homogeneous_redundancy",
            {0: "0 (off)", 1: "1 (fine)", 2: "2 (coarse)"}[config.homogeneous_redundancy],
            "HR type of apps that set none; replicas go only to hosts of the first one's class",
        ),
        (
            "hr_class_static",
            "yes" if config.hr_class_static else "no",
            "never un-commit a workunit's hr_class and app version",
        ),
        (
            "max_wus_to_send",
            config.max_wus_to_send or "no limit",
            "jobs per request, per CPU (+ gpu_multiplier per GPU)",
        ),
        ("gpu_multiplier", config.gpu_multiplier, "what a GPU counts in jobs per request"),
        ("max_wus_in_progress", config.max_wus_in_progress or "no limit", "jobs in progress per CPU"),
        ("max_wus_in_progress_gpu", config.max_wus_in_progress_gpu or "no limit", "jobs in progress per GPU"),
        (
            "min_sendwork_interval",
            f"{config.min_sendwork_interval} s" if config.min_sendwork_interval else "0 (off)",
            "least time between two requests that get work",
        ),
        ("report_max", config.report_max or "no limit", "reported results handled per request"),
        (
            "max_results_accepted",
            config.max_results_accepted or "no limit",
            "reported results read per request; past it, lost results wait for another request",
        ),
        (
            "locality_scheduling_sorted_order",
            "yes" if config.locality_scheduling_sorted_order else "no",
            "locality: look at a host's files in name order, not at random",
        ),
        (
            "locality_scheduling_wait_period",
            f"{config.locality_scheduling_wait_period} s",
            "locality: wait for the on-demand work generator when a file has no work",
        ),
        (
            "locality_scheduling_send_timeout",
            f"{config.locality_scheduling_send_timeout} s" if config.locality_scheduling_send_timeout else "0 (off)",
            "locality: send results older than this first, to fast hosts",
        ),
        (
            "file_deletion_strategy",
            config.file_deletion_strategy,
            "locality: 1 tells a host to delete a file that gave it no work",
        ),
        (
            "seed004_scan_only_excluded",
            "yes" if config.seed004_scan_only_excluded else "no",
            "locality: scan every file only when the working-set file is excluded (seed 004)",
        ),
        (
            "seed004_delete_only_finished",
            "yes" if config.seed004_delete_only_finished else "no",
            "locality: delete a held file only when no more work can be made for it (seed 004)",
        ),
        (
            "boinc_locality_limits",
            "yes" if config.boinc_locality_limits else "no",
            "locality: BOINC's way, the daily quota checked only when a version is chosen, and no "
            "limit for a workunit committed to a version",
        ),
        (
            "boinc_locality_full_delay_bound",
            "yes" if config.boinc_locality_full_delay_bound else "no",
            "locality: BOINC's way, every job's deadline checked against its workunit's full delay "
            "bound, never the reduced one of a job for reliable hosts",
        ),
        (
            "boinc_locality_full_disk_bound",
            "yes" if config.boinc_locality_full_disk_bound else "no",
            "locality: BOINC's way, every job's whole disk bound counted against the host's disk, "
            "even for a file the host already has",
        ),
        (
            "boinc_committed_never_reliable",
            "yes" if config.boinc_committed_never_reliable else "no",
            "BOINC's way, a job for reliable hosts never sent when its workunit is committed to an app version",
        ),
        (
            "default_disk_min_free_gb",
            f"{config.default_disk_min_free_gb:g} GB",
            "least free disk a host keeps, whatever its preferences",
        ),
    ]
    overall = limits.project
    if overall.any_limit():
        rows.append(
            (
                "max_jobs_in_progress (project)",
                f"total {_limit(overall.total)}, CPU {_limit(overall.cpu)}, GPU {_limit(overall.gpu)}",
                "config_aux.xml and max_wus_in_progress",
            )
        )
    for name, limit in limits.apps:
        rows.append(
            (
                f"max_jobs_in_progress ({name})",
                f"total {_limit(limit.total)}, CPU {_limit(limit.cpu)}, GPU {_limit(limit.gpu)}",
                "config_aux.xml",
            )
        )
    return rows


@register.simple_tag
def app_hr_type(app: App) -> str:
    """An app's HR type in words, its project's (from the project's own config.xml) when the
    app sets none."""
    from backend.server_config import ConfigError

    own = app.homogeneous_redundancy
    if own:
        return f"{own} ({app.get_homogeneous_redundancy_display()})"
    try:
        project = app.project.scheduler_config().homogeneous_redundancy
    except ConfigError:
        project = 0
    if project:
        return f"{project} ({'fine' if project == 1 else 'coarse'}, the project's)"
    return "off"


@register.filter
def hr_class_name(value: int) -> str:
    """``267`` -> "267 (Linux, Intel Xeon)"; 0 -> "0 (not committed)"."""
    return f"{value} ({sched_hr.class_name(value)})"
