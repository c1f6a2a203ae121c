# C types of policies/boinc7.py for the compiled core (build.py): Cython reads this file beside
# the module's source, which stays plain Python. edf_margin, which reschedule_at calls at every
# planning step, walks the queued jobs as JobStates (state.pxd) in C doubles, with the
# pure-Python module's operations in its order; order_margin likewise the projects' REC curves.
# The typed functions of other modules it calls at every planning step or fetch check are
# cimported from their .pxd, so that they are called as C functions.

# The emulator is an EmulatorState (state.pxd): its settings and state are read from its C
# structure, without the interpreter's look-ups.

cimport cython

from scheduling.engine.cpu_sched cimport first_preemptible_at, queued_jobs_waiting
from scheduling.engine.rr_sim cimport credit_rates
from scheduling.engine.state cimport EmulatorState, JobState, ProjectState
from scheduling.engine.work_fetch cimport choose_project, job_slice_left, next_check


@cython.locals(crossing=double, reorder=double)
cpdef double edf_check_margin(EmulatorState em, now, rr, double margin) except? -1.0


@cython.locals(
    p=ProjectState, j=JobState, buf_min=double, exact=bint, near_steps=bint, fracs=list, speedup=double, s=double,
    r=Py_ssize_t, inf=double, longest=double, nearest=double, margin=double, deadline=double, finish=double,
    slack=double, distance=double, left=double, m=double, near=double,
)
cpdef tuple edf_margin(EmulatorState em)


@cython.locals(
    p=ProjectState, share=double, r=double, rec=double, margin=double, m=double, a1=double, b1=double, a=double,
    b=double, n=Py_ssize_t, i=Py_ssize_t, k=Py_ssize_t, ca=list, cb=list,
)
cpdef double order_margin(projects, dict rate, double lam) except? -1.0
