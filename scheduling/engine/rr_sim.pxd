# C types of rr_sim.py for the compiled core (build.py): Cython reads this file beside the
# module's source, which stays plain Python. credit_rates, which the event planning calls
# at every decision (boinc7.edf_check_margin, rec_drift), reads the running jobs as JobStates
# (state.pxd); the numbers stay Python floats, with the pure-Python module's operations in
# its order. A simulation's RoundRobin, its RRResult and their RscSims are C types whose
# attributes are Python objects, as their __slots__ and attributes were: made and read at
# every simulation without the interpreter's look-ups; RoundRobin's times, counts and flags
# are C doubles, ints and bints, and its tail (after the last job) runs over them in C. The
# emulator is an EmulatorState (state.pxd), whose settings and state are read from its C
# structure.

cimport cython

from scheduling.engine.state cimport EmulatorState, JobState, gpu_allowed


@cython.locals(j=JobState)
cpdef dict credit_rates(EmulatorState em)


cpdef _static(em)


cdef class RscSim:
    cdef public object shortfall, nidle_now, saturated_time, busy_time, sim_nused


cdef class RRResult:
    cdef public object time, rsc, misses, nused_total, project_shortfall, total_shortfall
    cdef public object project_rsc_shortfall, mc_shortfall, last_mc_limit, contested, rec_sum, gpu_cpu


cdef class RoundRobin:
    cdef public EmulatorState em
    cdef public object static, caps, projects, result, mc_cap, busy
    cdef public double now, buf_end, sim_now, rec_sum
    cdef public int nr, steps, max_steps
    cdef public bint detail, by_priority, gpu_cpu

    @cython.locals(
        r=int, i=int, sim_now=double, buf_end=double, least=double, x=double, result=RRResult,
        rs=RscSim, busy=list, caps=list,
    )
    cpdef tail(self)
