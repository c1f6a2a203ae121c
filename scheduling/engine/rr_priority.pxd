# C types of rr_priority.py for the compiled core (build.py): Cython reads this file beside the
# module's source, which stays plain Python. The job columns are QueuedJobs' (rr_queue.pxd);
# every column is a C array (a typed memoryview of the module's array.array) and every number
# in the loops a C double or int, so the doubles and the order of their operations are the
# pure-Python module's.

cimport cython

from scheduling.engine.rr_queue cimport QueuedJobs
from scheduling.engine.rr_sim cimport RoundRobin
from scheduling.engine.state cimport ProjectState


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


cdef class ByPriority(QueuedJobs):
    cdef public object c_gap_a, c_moving_c_a, c_moving_o_a, c_sf_c_a, c_sf_o_a, c_chosen_a, c_other_a
    cdef public int ccapacity, ncontests
    cdef public double rec_sum, total_peak_flops, half_life
    cdef public double[::1] rec_temp, priority, share, share_frac, credit, mc_last
    cdef public double[::1] c_gap, c_moving_c, c_moving_o, c_sf_c, c_sf_o
    cdef public int[::1] slot_open, mc_slot, c_chosen, c_other

    cdef _grow_contests(self, int n)

    cpdef run(self, RoundRobin rr)

    @cython.locals(pi=int, m=int, r=int, p=ProjectState)
    cdef _load_projects(self, RoundRobin rr)

    @cython.locals(
        nr=int, nactive=int, n=int, i=int, k=int, r=int, dt=double, d=double, idle=double,
        caps="double[::1]", sim_nused="double[::1]", left="double[::1]", rate="double[::1]",
        tol="double[::1]", active="int[::1]",
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

    @cython.locals(k=int, mc=int, gone="int[::1]", mc_limit="int[::1]")
    cdef int _next_job(self, int s) except -2

    @cython.locals(
        s=int, i=int, e=int, rec_sum=double, sf_c=double, sf_o=double, pri_c=double,
        moving_c=double, priority="double[::1]", rec_temp="double[::1]", share_frac="double[::1]",
        slot_open="int[::1]", slot_proj="int[::1]",
    )
    cdef _contest(self, int pi, int lo, int hi)

    @cython.locals(m=int, s=int)
    cdef _mc_step(self, double dt)

    @cython.locals(
        pi=int, sim_now=double, half_life=double, diff=double, w=double, rec_sum=double,
        one_w=double, days=double, credit_rate=double, rec=double, rec_frac=double,
        credit="double[::1]", rec_temp="double[::1]", priority="double[::1]", share="double[::1]",
        share_frac="double[::1]",
    )
    cdef _rec_step(self, double dt)

    @cython.locals(pi=int)
    cdef _retire(self, int k)

    @cython.locals(m=int, n=int, pi=int)
    cdef _finish(self)
