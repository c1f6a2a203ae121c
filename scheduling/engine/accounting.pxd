# C types of accounting.py for the compiled core (build.py): Cython reads this file beside the
# module's source, which stays plain Python. The emulator is an EmulatorState (state.pxd), whose
# settings and state set_rates and advance_interval read from its C structure. The walks of the
# running jobs that set their rates (job_rates) and account an interval (advance_jobs), at every
# event, read and write the jobs as JobStates (state.pxd), from their C structure; advance_jobs
# computes in C doubles (the values of Python's floats) and counts steps in a C long, with the
# pure-Python module's operations in its order.

cimport cython

from scheduling.engine.rec cimport update_average
from scheduling.engine.state cimport EmulatorState, JobState, ProjectState


@cython.locals(cpu_on=bint, gpu_on=bint, running=list, last=tuple)
cpdef set_rates(EmulatorState em)

@cython.locals(
    t0=double, dt=double, delta=double, bce=bint, scale=double, flops_used=double, split=double, limit=double,
    elapsed=double, finished=list, executing=set, usage=list, before=dict, extra=dict,
)
cpdef advance_interval(EmulatorState em, double t1)


@cython.locals(j=JobState, usage=double, gpu_cpu=double, cpu_cpu=double, scale=double)
cpdef double job_rates(list running, cpu_on, gpu_on, n, bce=*) except? -1.0

@cython.locals(j=JobState)
cpdef bint _in_task_order(list running) except -1

@cython.locals(
    j=JobState, p=ProjectState, rate=double, wait=double, work=double, run_time=double, charged=double, done0=double,
    size=double, left=double, step=double, n=long, _i=long, per_step=double, ncpus=double, peak=double, pf=double,
)
cpdef double advance_jobs(
    acct, list running, double t0, double dt, bint bce, double scale, double cpu_flops, list resources,
    double flops_used, list finished, set executing, list usage,
) except? -1.0

@cython.locals(j=JobState)
cpdef list job_ends(list running, now)

@cython.locals(
    p=ProjectState, splitting=bint, r=int, credit=double, head=double, secs=double, scale_r=double, secs_this_interval=list,
    i0=double,
)
cpdef account_projects(
    acct, list projects, set executing, double dt, long k, double d, double split, double t0, double t1, dict before,
    dict extra, any_finished, list credit_scale, bint bce, double half_life,
)

@cython.locals(p=ProjectState, r=int, wall=list)
cpdef reset_wall_intervals(list projects)

@cython.locals(pending=double, span=double, rate=double, inner_end=double, first_end=double)
cpdef bce_rec(
    acct, ProjectState p, double credit, double t0, double t1, bint finished, double extra, double delta, bint on,
    bint rec_acct, dict rec_pending, double start, double half_life,
)

cpdef rec_span(ProjectState p, double a, double b, double rate, double first, double delta, double half_life)
