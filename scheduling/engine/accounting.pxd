# C types of accounting.py for the compiled core (build.py): Cython reads this file beside the
# module's source, which stays plain Python. The walks of the running jobs that set their
# rates (job_rates) and account an interval (advance_jobs), at every event, read and write the
# jobs as JobStates (state.pxd), from their C structure; the numbers stay Python floats, with
# the pure-Python module's operations in its order.

cimport cython

from scheduling.engine.state cimport JobState, ProjectState


@cython.locals(j=JobState)
cpdef job_rates(list running, cpu_on, gpu_on, n, bce=*)

@cython.locals(j=JobState)
cpdef advance_jobs(acct, list running, t0, dt, bce, scale, cpu_flops, list resources, flops_used, list finished, set executing, list usage)

@cython.locals(j=JobState)
cpdef list job_ends(list running, now)

@cython.locals(
    p=ProjectState, splitting=bint, r=int, credit=double, head=double, secs=double, scale_r=double, secs_this_interval=list,
)
cpdef account_projects(
    acct, list projects, set executing, dt, k, d, split, t0, t1, dict before, dict extra, any_finished,
    list credit_scale, bce, half_life,
)

@cython.locals(p=ProjectState, r=int, wall=list)
cpdef reset_wall_intervals(list projects)

cpdef bce_rec(
    acct, ProjectState p, credit, t0, t1, finished, extra, delta, on, rec_acct, dict rec_pending, start, half_life,
)

cpdef rec_span(ProjectState p, a, b, rate, first, delta, half_life)
