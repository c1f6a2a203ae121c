# C types of work_fetch.py for the compiled core (build.py): Cython reads this file beside the
# module's source, which stays plain Python. slice_bound and next_check, which every planning
# step runs under bce, walk the queued jobs as JobStates (state.pxd) and the times in C
# doubles, with the pure-Python module's operations in its order; the projects are
# ProjectStates. priority_init and std_sort, which every fetch check runs, are cimported from
# their .pxd and called as C functions.

# The emulator is an EmulatorState (state.pxd): its settings and state are read from its C
# structure, without the interpreter's look-ups.

cimport cython

from scheduling.engine.rec cimport priority_init
from scheduling.engine.state cimport EmulatorState, JobState, ProjectState
from scheduling.engine.stdsort cimport std_sort


cpdef double slice_bound(EmulatorState em) except? -1.0

@cython.locals(inf=double, frac=double, flops=double, left=double)
cpdef double job_slice_left(JobState j, list fracs, bint exact) except? -1.0

@cython.locals(j=JobState, p=ProjectState, longest=double, left=double)
cpdef double _slice_bound(projects, resources, bint exact) except? -1.0


@cython.locals(
    t=double, bce=bint, buf_min=double, step=double, chained=Py_ssize_t, running=Py_ssize_t, zero=double,
    r=Py_ssize_t, frac=double, sat=double, ahead=double, at=double, p=ProjectState, total=double, held=bint,
    least=double, last=double, slowest=double,
)
cpdef double next_check(EmulatorState em, double now, rr, jump=*) except? -1.0


@cython.locals(j=JobState, p=ProjectState, priority=double, left=double)
cpdef _charge_queued_work(projects, bce, double denom, exact)

@cython.locals(left=double, fpops_est=double, done=double)
cpdef double _flops_remaining(JobState j, bint exact) except? -1.0


# the reasons and choose_project's walk of the projects by priority, which every fetch check
# runs: the projects as ProjectStates, the processor types as C ints
cpdef project_reason(ProjectState p, now)

cpdef rsc_reason(EmulatorState em, ProjectState p, int r, now, rr)

cpdef _rsc_reason(ProjectState p, int r, now, double sat, double zero, mc_shortfall, rr, double total)

@cython.locals(p=ProjectState, r=int, nres=int, trigger=int, found=list, zero=double, total=double)
cpdef choose_project(EmulatorState em, now, rr)

cpdef bint _higher_priority(ProjectState p1, ProjectState p2) except -1
