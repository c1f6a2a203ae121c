"""Credit: what the validator grants a valid result (reference/server.md §3.7; BOINC's
sched/credit.cpp, validator.cpp handle_wu).

By default **CreditNew**, as BOINC's validator grants it unless told otherwise:

- a valid result's *peak FLOP count* (PFC) is its elapsed time (the CPU time when none was
  reported) × its app version's peak FLOPS estimate (``result.flops_estimate``; a result without
  one, or with the old default 1e9, is taken at AVG_CPU_FPOPS and marked a runtime outlier);
- the PFC is normalised by the **app version scale** (``AppVersion.pfc_scale``, set by
  ``update_av_scales`` so that every version of an app is scaled to the most efficient one,
  whose average PFC becomes ``App.min_avg_pfc``) and by the **host scale** (the version's
  average PFC / the host's average PFC with that version, at most 10), which is used only once
  the host app version has MIN_HOST_SAMPLES samples and the version MIN_VERSION_SAMPLES (and,
  with ``App.host_scale_check``, CONS_VALID_HOST_SCALE consecutive valid results);
  the result then is "normal", otherwise "approximate" (credit.cpp get_pfc);
- each valid result that is not a **runtime outlier** (``Result.runtime_outlier``) adds
  ``PFC / rsc_fpops_est`` to its host app version's average (HAV_AVG_* parameters, at once)
  and to its app version's (AV_AVG_* parameters, at the end of the pass, as BOINC's
  write_modified_app_versions); a ratio outside [1e-4, 1e4] is left out too (is_pfc_sane);
- the workunit's credit (assign_credit_set) is the pegged average, anchored at the workunit's
  estimate (rsc_fpops_est × min_avg_pfc), of the normal results' PFC when there are two or
  more, else of the approximate ones (a single normal one counted three times), else the
  estimate; each PFC is first cut to rsc_fpops_bound, and a result over ``max_granted_credit``
  is left out; then × 200/86400e9 (cobblestones).

The options, BOINC's validator command-line options (read from config.xml's validator
``<cmd>``, see backend.server_config), replace the credit but, except for
``credit_from_runtime``, still run CreditNew for its averages:

- ``credit_from_wu``: the workunit's ``canonical_credit`` as created;
- ``credit_from_runtime``: the low average of each viable result's elapsed time × FLOPS
  estimate (cut to rsc_fpops_bound above twice it; a credit of 0 or over
  ``max_granted_credit`` is left out);
- ``no_credit``: nothing is granted; ``granted_credit`` stays as it is;
- ``max_granted_credit`` (default 200 × 1000 × 365, a TeraFLOP-year) caps the credit.

A late result that matches the canonical result gets the canonical result's granted credit;
its PFC still enters the averages.

Anonymous-platform results (no AppVersion row here, so no host app version) are credited at
the workunit's estimate, as BOINC does until their host app version has MIN_HOST_SAMPLES.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING

from backend.daemons.host_app_version import HAV_AVG, running_average
from backend.models import App, AppVersion, Result, Workunit

if TYPE_CHECKING:
    from backend.daemons.sched_types import SchedulerConfig

COBBLESTONE_SCALE = 200 / 86400e9
MAX_GRANTED_CREDIT = 200 * 1000 * 365
# sched/credit.h
AVG_CPU_FPOPS = 4.3e9
MIN_HOST_SAMPLES = 10
MIN_VERSION_SAMPLES = 100
AV_AVG = (100, 0.001, 10)  # AV_AVG_THRESH, AV_AVG_WEIGHT, AV_AVG_LIMIT
# sched/sched_config.h
CONS_VALID_HOST_SCALE = 10
# credit.cpp update_av_scales: GPU-only apps are scaled to a tenth of the GPU average
DEFAULT_GPU_SCALE = 0.1
# feeder.cpp AV_UPDATE_PERIOD: update_av_scales runs at most this often
AV_UPDATE_PERIOD = 600
HOST_SCALE_LIMIT = 10
DAY = 86400
# sched_util_basic.h CREDIT_HALF_LIFE: a week.
CREDIT_HALF_LIFE = 7 * DAY

NORMAL, APPROX, WU_EST, INVALID = "normal", "approx", "wu_est", "invalid"


def check_credit_options(config: SchedulerConfig | SimpleNamespace) -> None:
    """Raise ValueError unless ``config``'s credit options are usable (validator.cpp main)."""
    for name in ("credit_from_wu", "credit_from_runtime", "no_credit", "credit_by_app"):
        if not isinstance(getattr(config, name), bool):
            raise ValueError(f"{name} must be True or False, not {getattr(config, name)!r}")
    cap = config.max_granted_credit
    if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not cap >= 0:
        raise ValueError(f"max_granted_credit must be a number, 0 or more (0: no limit), not {cap!r}")
    if config.credit_from_runtime and not cap:
        raise ValueError("credit_from_runtime needs max_granted_credit")


@dataclass
class CreditOptions:
    """The validator's credit options (see the module docstring)."""

    credit_from_wu: bool = False
    credit_from_runtime: bool = False
    no_credit: bool = False
    max_granted_credit: float = MAX_GRANTED_CREDIT


def fpops_to_credit(fpops: float) -> float:
    return fpops * COBBLESTONE_SCALE


def low_average(values: Sequence[float]) -> float:
    """credit.cpp low_average: a mean weighting each value by the sum of the others, which
    leans towards the low ones."""
    if len(values) == 1:
        return values[0]
    total = sum(values)
    return sum(x * (total - x) for x in values) / ((len(values) - 1) * total)


def pegged_average(values: Sequence[float], anchor: float) -> float:
    """credit.cpp pegged_average: a mean weighting each value by 1 / (0.1 × anchor +
    |anchor - value|), so values near the anchor count most."""
    if len(values) == 1:
        return values[0]
    weights = [1.0 / (0.1 * anchor + abs(anchor - x)) for x in values]
    return sum(w * x for w, x in zip(weights, values)) / sum(weights)


def wu_estimated_pfc(wu: Workunit, app: App) -> float:
    """credit.cpp wu_estimated_pfc: rsc_fpops_est × the app's min_avg_pfc (when set)."""
    return wu.rsc_fpops_est * app.min_avg_pfc if app.min_avg_pfc else wu.rsc_fpops_est


def is_pfc_sane(ratio: float) -> bool:
    """credit.cpp is_pfc_sane: a PFC/rsc_fpops_est ratio far from 1 means a wrong estimate."""
    return 1e-4 <= ratio <= 1e4


@dataclass
class Samples:
    """What a pass's valid results add to app versions: PFC ratios and credit with its start
    time (DB_APP_VERSION_VAL's pfc_samples, credit_samples and credit_times)."""

    pfc: dict[int, list[float]] = field(default_factory=dict)  # app version id -> [ratio]
    credit: dict[int, list[tuple[float, int]]] = field(default_factory=dict)  # app version id -> [(credit, sent_time)]


@dataclass
class HavPfc:
    """A host app version's PFC average as the pass sees it (after this pass's samples)."""

    pfc_n: float = 0.0
    pfc_avg: float = 0.0
    consecutive_valid: int = 0


def get_pfc(
    result: Result, wu: Workunit, app: App, version: AppVersion | None, hav: HavPfc | None, samples: Samples
) -> tuple[float, str, float | None]:
    """``(pfc, mode, ratio)`` of one valid result (credit.cpp get_pfc): ``version`` is its
    AppVersion (None: anonymous platform), ``hav`` its host app version's HavPfc (None: no
    host app version); ``ratio`` is the PFC/rsc_fpops_est sample to add to ``hav`` (None: not
    a sample). The version's samples go to ``samples``."""
    if hav is None and version is not None:
        return wu_estimated_pfc(wu, app), WU_EST, None
    outlier = result.runtime_outlier
    elapsed = result.elapsed_time if result.elapsed_time >= 1e-6 else result.cpu_time
    flops = result.flops_estimate
    if flops <= 0 or flops == 1e9:
        flops, outlier = AVG_CPU_FPOPS, True
    raw_pfc = elapsed * flops
    mode = APPROX
    if version is None:
        # anonymous platform: never enough host samples here (no host app version)
        pfc = wu_estimated_pfc(wu, app)
    else:
        assert hav is not None  # with a version and no host app version it returned above
        host_scale = 0.0
        do_scale = not (app.host_scale_check and hav.consecutive_valid < CONS_VALID_HOST_SCALE)
        if do_scale and (hav.pfc_n < MIN_HOST_SAMPLES or hav.pfc_avg == 0):
            do_scale = False
        if do_scale and version.pfc_n < MIN_VERSION_SAMPLES:
            do_scale = False
        if do_scale and hav.pfc_avg <= 0:
            do_scale = False
        if do_scale:
            host_scale = min(version.pfc_avg / hav.pfc_avg, HOST_SCALE_LIMIT)
        pfc = raw_pfc
        if version.pfc_scale:
            pfc *= version.pfc_scale
            if host_scale:
                pfc *= host_scale
                mode = NORMAL
        elif host_scale:
            pfc *= host_scale
        ratio = raw_pfc / wu.rsc_fpops_est
        if not outlier and is_pfc_sane(ratio):
            samples.pfc.setdefault(version.pk, []).append(ratio)
        samples.credit.setdefault(version.pk, []).append((fpops_to_credit(pfc), result.sent_time))
    ratio = raw_pfc / wu.rsc_fpops_est if wu.rsc_fpops_est else 0.0
    sample = ratio if hav is not None and not outlier and is_pfc_sane(ratio) else None
    if sample is not None:
        assert hav is not None  # a sample is taken only with a host app version
        hav.pfc_avg, hav.pfc_n = running_average(hav.pfc_avg, hav.pfc_n, sample, HAV_AVG)
    return pfc, mode, sample


def assign_credit_set(
    wu: Workunit,
    app: App,
    valid: Iterable[tuple[Result, AppVersion | None, HavPfc | None]],
    options: CreditOptions,
    samples: Samples,
) -> tuple[float, list[tuple[Result, float]]]:
    """The workunit's credit from its valid results (credit.cpp assign_credit_set).

    ``valid`` is ``[(result, version, hav)]`` in id order. Returns ``(credit, hav_samples)``,
    ``hav_samples`` a list of ``(result, ratio)`` for the host app version averages."""
    normal: list[float] = []
    approx: list[float] = []
    hav_samples: list[tuple[Result, float]] = []
    anchor = wu_estimated_pfc(wu, app)
    for result, version, hav in valid:
        pfc, mode, sample = get_pfc(result, wu, app, version, hav, samples)
        if sample is not None:
            hav_samples.append((result, sample))
        pfc = min(pfc, wu.rsc_fpops_bound)
        cap = options.max_granted_credit
        if cap and fpops_to_credit(pfc) > cap:
            continue  # PFC_MODE_INVALID
        (normal if mode == NORMAL else approx).append(pfc)
    if len(normal) == 1:
        approx.extend(normal * 2)
        normal = []
    if normal:
        x = pegged_average(normal, anchor)
    elif approx:
        x = pegged_average(approx, anchor)
    else:
        x = anchor
    return fpops_to_credit(x), hav_samples


def credit_from_runtime(wu: Workunit, viable: Iterable[Result], options: CreditOptions) -> float:
    """validator.cpp's --credit_from_runtime: the low average of the viable results' runtime
    credit."""
    found: list[float] = []
    for result in viable:
        flops = AVG_CPU_FPOPS if result.flops_estimate == 1e9 else result.flops_estimate
        pfc = flops * result.elapsed_time
        if pfc > wu.rsc_fpops_bound * 2:
            pfc = wu.rsc_fpops_bound
        credit = fpops_to_credit(pfc)
        if 0 < credit <= options.max_granted_credit:
            found.append(credit)
    return low_average(found) if found else 0.0


def canonical_credit(
    wu: Workunit,
    app: App,
    viable: Iterable[Result],
    valid: Iterable[tuple[Result, AppVersion | None, HavPfc | None]],
    options: CreditOptions,
    samples: Samples,
) -> tuple[float, list[tuple[Result, float]]]:
    """``(credit, hav_samples)`` for a workunit that just found its canonical result
    (validator.cpp handle_wu): CreditNew's statistics unless credit_from_runtime, then the
    option's credit, capped at max_granted_credit. ``viable`` are the results checked,
    ``valid`` as assign_credit_set takes them."""
    hav_samples: list[tuple[Result, float]] = []
    credit = 0.0
    if not options.credit_from_runtime:
        credit, hav_samples = assign_credit_set(wu, app, valid, options, samples)
    if options.credit_from_wu:
        credit = wu.canonical_credit
    elif options.credit_from_runtime:
        credit = credit_from_runtime(wu, viable, options)
    elif options.no_credit:
        credit = 0.0
    if options.max_granted_credit and credit > options.max_granted_credit:
        credit = options.max_granted_credit
    return credit, hav_samples


def update_average(
    now: float, work_start_time: float, work: float, avg: float, avg_time: float, half_life: float = CREDIT_HALF_LIFE
) -> tuple[float, float]:
    """``(avg, avg_time)`` after ``work`` done since ``work_start_time`` (lib/util.cpp
    update_average): an exponentially decaying average of work per day. The first work gives
    work / days since it started; a first work started at ``now`` (BOINC divides by zero)
    takes the limit used for back-to-back updates."""
    day = DAY
    if avg_time:
        diff = max(now - avg_time, 0)
        weight = math.exp(-diff * math.log(2) / half_life)
        avg *= weight
        if 1 - weight > 1e-6:
            avg += (1 - weight) * (work / (diff / day))
        else:
            avg += math.log(2) * work * day / half_life
    elif work:
        days = (now - work_start_time) / day
        avg = work / days if days > 0 else math.log(2) * work * day / half_life
    return avg, now


def write_app_versions(samples: Samples, now: float, half_life: float) -> None:
    """Add a pass's samples to its app versions' PFC averages and recent average credit
    (credit.cpp write_modified_app_versions), the rows locked in id order."""
    ids = sorted(set(samples.pfc) | set(samples.credit))
    if not ids:
        return
    versions = list(AppVersion.objects.select_for_update(no_key=True).filter(id__in=ids).order_by("id"))
    for version in versions:
        for ratio in samples.pfc.get(version.pk, ()):
            version.pfc_avg, version.pfc_n = running_average(version.pfc_avg, version.pfc_n, ratio, AV_AVG)
        for credit, start in samples.credit.get(version.pk, ()):
            version.expavg_credit, version.expavg_time = update_average(
                now, start, credit, version.expavg_credit, version.expavg_time, half_life
            )
    AppVersion.objects.bulk_update(versions, ["pfc_n", "pfc_avg", "expavg_credit", "expavg_time"])


# project id -> the ``now`` of this process's last update_av_scales of the project's apps
_last_av_update: dict[int, int] = {}


def update_av_scales_when_due(project_id: int, now: int) -> None:
    """Run update_av_scales over project ``project_id``'s apps when AV_UPDATE_PERIOD has
    passed since this process last did (feeder.cpp keeps its next update time in memory too,
    the first one at once); a clock set back counts as due."""
    last = _last_av_update.get(project_id)
    if last is None or not last <= now < last + AV_UPDATE_PERIOD:
        update_av_scales(project_id=project_id)
        _last_av_update[project_id] = now


def update_av_scales(app_ids: Iterable[int] | None = None, *, project_id: int | None = None) -> list[int]:
    """Scale each app's versions to its most efficient one (credit.cpp update_av_scales,
    which BOINC's feeder runs every AV_UPDATE_PERIOD): among versions with more than
    MIN_VERSION_SAMPLES samples, the sample-weighted average PFC of the CPU versions and of
    the GPU versions; with both, the lower; with two or more CPU versions, the CPU one; with a
    GPU version only, a tenth of the GPU one. Every version with MIN_VERSION_SAMPLES samples
    gets ``pfc_scale = that / its average``, and the app ``min_avg_pfc = that``. With
    ``project_id``, only that project's apps. Returns the apps changed."""
    apps = App.objects.all() if app_ids is None else App.objects.filter(id__in=app_ids)
    if project_id is not None:
        apps = apps.filter(project_id=project_id)
    changed: list[int] = []
    for app in apps:
        versions = list(app.versions.all())
        totals = {"cpu": [0.0, 0.0, 0], "gpu": [0.0, 0.0, 0]}  # pfc sum, n, versions
        for version in versions:
            kind = "gpu" if version.gpu_type else "cpu"
            if version.pfc_n > MIN_VERSION_SAMPLES:
                totals[kind][0] += version.pfc_avg * version.pfc_n
                totals[kind][1] += version.pfc_n
                totals[kind][2] += 1
        avg = {kind: pfc / n for kind, (pfc, n, count) in totals.items() if count}
        if totals["cpu"][2] and totals["gpu"][2]:
            scale_to = min(avg["cpu"], avg["gpu"])
        elif totals["cpu"][2] > 1:
            scale_to = avg["cpu"]
        elif totals["gpu"][2] > 0:
            scale_to = avg["gpu"] * DEFAULT_GPU_SCALE
        else:
            continue
        for version in versions:
            if version.pfc_n >= MIN_VERSION_SAMPLES and version.pfc_avg:
                AppVersion.objects.filter(pk=version.pk).update(pfc_scale=scale_to / version.pfc_avg)
        App.objects.filter(pk=app.pk).update(min_avg_pfc=scale_to)
        changed.append(app.pk)
    return changed
