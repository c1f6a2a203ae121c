# C types of rr_priority.py for the compiled core (build.py): Cython reads this file beside the
# module's source, which stays plain Python. Every column is a C array (a typed memoryview of
# the module's array.array) and every number in the loops a C double or int, so the doubles
# and the order of their operations are the pure-Python module's.

cimport cython


cdef class Contests:
    cdef public int n
    cdef public tuple columns
    cdef public int[::1] chosen, other
    cdef public double[::1] gap, moving_c, moving_o, sf_c, sf_o

    @cython.locals(
        t=double, speed=double, x=double, a=double, b=double, e=int, d="double[::1]",
        gap="double[::1]", moving_c="double[::1]", moving_o="double[::1]", sf_c="double[::1]",
        sf_o="double[::1]", chosen="int[::1]", other="int[::1]",
    )
    cpdef double time(self, drift, double rec_sum, double k) except? -1.0


cdef class ByPriority:
    cdef public object rr, result, jobs, mc_keys
    cdef public object c_gap_a, c_moving_c_a, c_moving_o_a, c_sf_c_a, c_sf_o_a, c_chosen_a, c_other_a
    cdef public int nr, nprojects, nslots, nmc, capacity, ccapacity, njobs, ncontests, nactive
    cdef public int steps, max_steps
    cdef public double now, sim_now, buf_end, buf_min, rec_sum, total_peak_flops, half_life
    cdef public bint any_mc, gpu_cpu, detail, exact
    cdef public double[::1] caps, sim_nused, shortfall, saturated, p_used
    cdef public double[::1] rec_temp, priority, share, share_frac, credit, mc_cap, mc_short, mc_last
    cdef public double[::1] left, rate, tol, gpu_usage, avg_ncpus, peak
    cdef public double[::1] c_gap, c_moving_c, c_moving_o, c_sf_c, c_sf_o
    cdef public int[::1] rsc_lo, rsc_hi, slot_first, slot_head, slot_left, slot_proj, slot_open
    cdef public int[::1] mc_proj, mc_rsc, mc_slot, rsc, proj, gone, active, app, mc_limit, mc_running
    cdef public int[::1] c_chosen, c_other

    cdef _grow(self, int n)

    cdef _grow_contests(self, int n)

    cpdef run(self, rr)

    @cython.locals(
        nr=int, njobs=int, nslots=int, k=int, r=int, s=int, m=int, i=int, a=int, mc=int,
        pi=int, nprojects=int, rem=double, frac=double, exact=bint,
    )
    cdef _load(self, rr)

    @cython.locals(
        nr=int, nactive=int, n=int, i=int, k=int, r=int, dt=double, d=double, idle=double,
        end=double, sim_now=double, now=double, buf_end=double, eps=double,
        caps="double[::1]", sim_nused="double[::1]", left="double[::1]", rate="double[::1]",
        tol="double[::1]", active="int[::1]", shortfall="double[::1]", saturated="double[::1]",
    )
    cdef _simulate(self)

    @cython.locals(
        r=int, s=int, k=int, pi=int, pu=int, lo=int, hi=int, nopen=int, best=int, nprojects=int,
        limit=double, best_pr=double, pr=double, rec_frac=double, rec_sum=double,
        total_peak_flops=double, any_mc=bint, gpu_cpu=bint,
        caps="double[::1]", sim_nused="double[::1]", p_used="double[::1]", priority="double[::1]",
        rec_temp="double[::1]", share="double[::1]", share_frac="double[::1]", credit="double[::1]",
        slot_left="int[::1]", slot_open="int[::1]", slot_proj="int[::1]", active="int[::1]",
        gpu_usage="double[::1]", avg_ncpus="double[::1]", peak="double[::1]",
    )
    cdef pick(self)

    @cython.locals(end=int, gone="int[::1]")
    cdef _take(self, int s, int k)

    @cython.locals(k=int, mc=int, gone="int[::1]", mc_limit="int[::1]")
    cdef int _next_job(self, int s) except -2

    @cython.locals(
        s=int, i=int, e=int, rec_sum=double, sf_c=double, sf_o=double, pri_c=double,
        moving_c=double, priority="double[::1]", rec_temp="double[::1]", share_frac="double[::1]",
        slot_open="int[::1]", slot_proj="int[::1]",
    )
    cdef _contest(self, int pi, int lo, int hi)

    @cython.locals(
        m=int, r=int, s=int, sim_now=double, buf_end=double, eps=double, room=double,
        other=double, fill=double, end=double,
    )
    cdef _mc_step(self, double dt)

    @cython.locals(r=int, row=int, pi=int, sim_now=double, buf_end=double, span=double, f=double, used=double)
    cdef _project_shortfall_step(self, double dt)

    @cython.locals(
        pi=int, sim_now=double, half_life=double, diff=double, w=double, rec_sum=double,
        one_w=double, days=double, credit_rate=double, rec=double, rec_frac=double,
        credit="double[::1]", rec_temp="double[::1]", priority="double[::1]", share="double[::1]",
        share_frac="double[::1]",
    )
    cdef _rec_step(self, double dt)

    @cython.locals(r=int, pi=int, pu=int, sim_now=double, dur=double, sim_nused="double[::1]")
    cdef _retire(self, int k)

    @cython.locals(r=int, m=int, n=int, pi=int)
    cdef _finish(self)
