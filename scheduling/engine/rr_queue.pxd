# C types of rr_queue.py for the compiled core (build.py): Cython reads this file beside the
# module's source, which stays plain Python. Every column is a C array (a typed memoryview of
# the module's array.array) and every number in the loops a C double or int, so the doubles
# and the order of their operations are the pure-Python module's; the jobs are JobStates
# (state.pxd), whose attributes the fill reads from their C structure. rr_priority.pxd and
# rr_repick.pxd derive their simulations from QueuedJobs.

cimport cython

from scheduling.engine.rr_sim cimport RoundRobin
from scheduling.engine.state cimport JobState, ProjectState


cdef class QueuedJobs:
    cdef public object rr, result, jobs, mc_keys
    cdef public int nr, nprojects, nslots, njobs, napps, nactive, nmc, capacity, steps, max_steps
    cdef public double now, sim_now, buf_end, buf_min
    cdef public bint bce, gpu_cpu, detail, exact, any_mc
    cdef public int[::1] slot_first, slot_head, slot_left, slot_proj, slot_at, slot_next, rsc_lo, rsc_hi
    cdef public int[::1] rsc, proj, slot_of, gone, active, app, mc_limit, mc_running, mc_proj, mc_rsc
    cdef public int[::1] slot_lo, proj_at_limit, dropped
    cdef public double[::1] caps, frac, gpu_sum, sim_nused, p_used, pwf_used, shortfall, saturated, mc_cap, mc_short
    cdef public double[::1] left, rate, tol, gpu_usage, avg_ncpus, peak, deadline

    cdef _grow(self, int n)

    @cython.locals(
        nr=int, nprojects=int, njobs=int, nslots=int, k=int, n=int, r=int, i=int, c=int, m=int,
        a=int, pi=int, now=double, exact=bint, bce=bint, j=JobState, p=ProjectState,
        slot_first="int[::1]", slot_at="int[::1]", slot_next="int[::1]",
    )
    cpdef load(self, RoundRobin rr)

    @cython.locals(
        nr=int, nprojects=int, r=int, c=int, k=int, mc=int, pi=int, ncpus=double, size=double,
        rem=double, usage=double, ncpu=double, flops=double, j=JobState, p=ProjectState, slot_next="int[::1]", slot_at="int[::1]",
        gpu_sum="double[::1]", frac="double[::1]", jobs=list,
    )
    cdef int _fill(self, projects, dict nused_total, now, bint exact) except -1

    @cython.locals(end=int)
    cdef _take(self, int s, int k)

    @cython.locals(r=int, pi=int, pu=int, sim_now=double, dur=double, j=JobState)
    cdef _end(self, int k)

    @cython.locals(r=int, sim_now=double, buf_end=double, eps=double, idle=double)
    cdef _resource_step(self, double dt)

    @cython.locals(
        m=int, sim_now=double, buf_end=double, eps=double, x=double, span=double, used="double[::1]",
    )
    cdef _mc_fill(self, double dt)

    @cython.locals(r=int, row=int, pi=int, sim_now=double, buf_end=double, span=double, f=double, used=double)
    cdef _project_shortfall_step(self, double dt)

    @cython.locals(r=int, m=int, rr=RoundRobin)
    cdef _write_back(self)
