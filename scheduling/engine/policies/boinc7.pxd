# C types of policies/boinc7.py for the compiled core (build.py): Cython reads this file beside
# the module's source, which stays plain Python. miss_margin, which reschedule_at calls at every
# decision, walks the queued jobs as JobStates (state.pxd) in C doubles, with the pure-Python
# module's operations in its order; order_margin likewise the projects' REC curves.

cimport cython

from scheduling.engine.state cimport JobState, ProjectState


@cython.locals(j=JobState, buf_min=double, margin=double, slack=double, m=double)
cpdef double miss_margin(em, double speedup, double near) except? -1.0


@cython.locals(
    p=ProjectState, share=double, r=double, margin=double, m=double, a1=double, b1=double, a2=double, b2=double,
    a=double, b=double, n=int, i=int, k=int, curves=list,
)
cpdef double order_margin(projects, dict rate, double lam) except? -1.0
