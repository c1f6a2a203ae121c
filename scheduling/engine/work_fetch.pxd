# C types of work_fetch.py for the compiled core (build.py): Cython reads this file beside the
# module's source, which stays plain Python. slice_bound, which the scheduler and the fetch
# checks call after every round-robin simulation under bce, walks the queued jobs as JobStates
# (state.pxd) in C doubles, with the pure-Python module's operations in its order; the
# projects are ProjectStates.

cimport cython

from scheduling.engine.state cimport JobState, ProjectState


@cython.locals(
    j=JobState, p=ProjectState, longest=double, inf=double, frac=double, flops=double, rem=double, left=double, exact=bint,
)
cpdef double slice_bound(em) except? -1.0


@cython.locals(j=JobState, p=ProjectState)
cpdef _charge_queued_work(projects, bce, denom, exact)


# the reasons and choose_project's walk of the projects by priority, which every fetch check
# runs: the projects as ProjectStates, the processor types as C ints
cpdef project_reason(ProjectState p, now)

cpdef rsc_reason(em, ProjectState p, int r, now, rr)

@cython.locals(p=ProjectState, r=int, nres=int)
cpdef choose_project(em, now, rr)

cpdef bint _higher_priority(ProjectState p1, ProjectState p2) except -1
