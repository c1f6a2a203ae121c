# C types of rr_repick.py for the compiled core (build.py): Cython reads this file beside the
# module's source, which stays plain Python. Every column is a C array (a typed memoryview of
# the module's array.array) and every number in the loops a C double or int, so the doubles
# and the order of their operations are the pure-Python module's.

cimport cython


cdef class Repick:
    cdef public object rr, result, jobs, mc_keys
    cdef public int nr, nprojects, njobs, nslots, nmc, nactive, steps, max_steps, capacity, napps
    cdef public double now, sim_now, buf_end, buf_min
    cdef public bint gpu_cpu, detail
    cdef public int[::1] slot_first, slot_head, slot_proj, slot_left, rsc_lo, rsc_hi
    cdef public int[::1] slot_of, rsc, proj, app, mc_limit, gone, active, mc_running, mc_proj, mc_rsc
    cdef public double[::1] left, rate, gpu_usage, avg_ncpus, deadline
    cdef public double[::1] caps, sim_nused, p_used, shortfall, saturated, mc_cap, mc_short

    cdef _grow(self, int n)

    @cython.locals(nr=int, njobs=int, nslots=int, r=int, i=int, m=int, pi=int)
    cpdef load(self, rr)

    @cython.locals(s=int, r=int, k=int, mc=int, pi=int, slot_first="int[::1]", slot_proj="int[::1]")
    cdef int _fill(self, rscs, bint exact) except -1

    @cython.locals(
        nr=int, r=int, i=int, k=int, best=int, nactive=int, slices=int, max_slices=int,
        idle=double, dt=double, d=double, x=double, inf=double,
        caps="double[::1]", sim_nused="double[::1]", left="double[::1]", rate="double[::1]",
        active="int[::1]",
    )
    cpdef run(self)

    @cython.locals(
        r=int, s=int, k=int, n=int, a=int, mc=int, pu=int, nprojects=int,
        full=bint, at_limit=bint, gpu_cpu=bint, limit=double,
        caps="double[::1]", sim_nused="double[::1]", p_used="double[::1]", gpu_usage="double[::1]",
        avg_ncpus="double[::1]", active="int[::1]", mc_limit="int[::1]", mc_running="int[::1]",
        slot_first="int[::1]", slot_head="int[::1]", slot_left="int[::1]", slot_proj="int[::1]",
        gone="int[::1]",
    )
    cdef repick(self)

    @cython.locals(s=int, end=int, gone="int[::1]")
    cdef _remove(self, int k)

    @cython.locals(r=int, pu=int, sim_now=double, dur=double, sim_nused="double[::1]")
    cdef _retire(self, int k)

    @cython.locals(
        r=int, sim_now=double, buf_end=double, eps=double, idle=double, end=double,
        caps="double[::1]", sim_nused="double[::1]",
    )
    cdef _resource_step(self, double dt)

    @cython.locals(
        m=int, r=int, sim_now=double, buf_end=double, eps=double, room=double, other=double,
        fill=double, end=double,
    )
    cdef _mc_step(self, double dt)

    @cython.locals(r=int, row=int, pi=int, sim_now=double, buf_end=double, span=double, f=double, used=double)
    cdef _project_shortfall_step(self, double dt)

    @cython.locals(r=int, m=int)
    cdef _finish(self)
