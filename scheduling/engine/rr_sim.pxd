# C types of rr_sim.py for the compiled core (build.py): Cython reads this file beside the
# module's source, which stays plain Python. credit_rates, which the event planning calls
# at every decision (Boinc7._order_margin, rec_drift), reads the running jobs as JobStates
# (state.pxd); the numbers stay Python floats, with the pure-Python module's operations in
# its order. A simulation's RoundRobin, its RRResult and their RscSims are C types whose
# attributes are Python objects, as their __slots__ and attributes were: made and read at
# every simulation without the interpreter's look-ups.

cimport cython

from scheduling.engine.state cimport JobState


@cython.locals(j=JobState)
cpdef dict credit_rates(em)


cdef class RscSim:
    cdef public object shortfall, nidle_now, saturated_time, busy_time, sim_nused


cdef class RRResult:
    cdef public object time, rsc, misses, nused_total, project_shortfall, total_shortfall
    cdef public object project_rsc_shortfall, mc_shortfall, last_mc_limit, contested, rec_sum, gpu_cpu


cdef class RoundRobin:
    cdef public object em, now, detail, static, caps, nr, projects, result, buf_end, by_priority
    cdef public object gpu_cpu, mc_cap, busy, sim_now, rec_sum, steps, max_steps
