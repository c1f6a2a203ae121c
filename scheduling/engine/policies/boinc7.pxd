# C types of policies/boinc7.py for the compiled core (build.py): Cython reads this file beside
# the module's source, which stays plain Python. edf_margin, which reschedule_at calls at every
# planning step, walks the queued jobs as JobStates (state.pxd) in C doubles, with the
# pure-Python module's operations in its order; order_margin likewise the projects' REC curves.

cimport cython

from scheduling.engine.state cimport JobState, ProjectState


@cython.locals(margin=double, crossing=double, reorder=double)
cpdef double edf_check_margin(em, now, rr) except? -1.0


@cython.locals(
    p=ProjectState, j=JobState, buf_min=double, exact=bint, near_steps=bint, fracs=list, speedup=double, s=double,
    r=Py_ssize_t, inf=double, longest=double, nearest=double, margin=double, deadline=double, finish=double,
    slack=double, distance=double, rsc=Py_ssize_t, frac=double, flops=double, rem=double, fpops_est=double,
    done=double, left=double, m=double, near=double,
)
cpdef double edf_margin(em) except? -1.0


@cython.locals(
    p=ProjectState, share=double, r=double, rec=double, margin=double, m=double, a1=double, b1=double, a=double,
    b=double, n=Py_ssize_t, i=Py_ssize_t, k=Py_ssize_t, ca=list, cb=list,
)
cpdef double order_margin(projects, dict rate, double lam) except? -1.0
