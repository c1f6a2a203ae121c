# C types of cpu_sched.py for the compiled core (build.py): Cython reads this file beside the
# module's source, which stays plain Python. make_run_list's picks reach each project's head
# through C types, and charge and compare the projects' priorities in C doubles, with the
# pure-Python module's operations in its order; the jobs are JobStates and the projects
# ProjectStates (state.pxd), whose attributes the picks, the sort keys and enforce_run_list
# read from their C structure.

# The emulator is an EmulatorState (state.pxd): its settings and state are read from its C
# structure, without the interpreter's look-ups.

cimport cython

from scheduling.engine.state cimport EmulatorState, JobState, ProjectState


@cython.final
cdef class _Candidates:
    cdef public object em
    cdef public int r
    cdef public dict heads, kept
    cdef public bint split
    cdef public Py_ssize_t nprojects

    @cython.locals(r=int, keep=bint, kept=dict, hit=tuple)
    cpdef list _order(self, str rule, ProjectState p, key)

    @cython.locals(k=Py_ssize_t, n=Py_ssize_t, i=Py_ssize_t, order=list, entries=list, entry=list)
    cpdef head(self, str rule, ProjectState p, set taken, key)


cdef class _Picks:
    cdef public int n
    cdef public object projects
    cdef public double rec_sum, total_peak_flops
    cdef public int[::1] place, charged, is_open
    cdef public double[::1] rec_temp, priority, share, share_frac

    @cython.locals(k=int, p=ProjectState)
    cpdef start(self, double rec_sum, double total_peak_flops)

    @cython.locals(rec_sum=double, rec_frac=double)
    cpdef charge(self, int k, double job_peak_flops)

    @cython.locals(k=int, p=ProjectState)
    cpdef write_back(self)

    @cython.locals(k=int, npr=double)
    cpdef first_coproc_result(self, _Candidates cands, set taken)

    @cython.locals(k=int)
    cpdef open_all(self)

    @cython.locals(k=int, best=int, best_pr=double, pr=double, priority="double[::1]", is_open="int[::1]")
    cpdef highest_priority_best(self, _Candidates cands, set taken, key)


@cython.locals(j=JobState, p=ProjectState, period=double, t=double, last=double)
cpdef promote_once_ran_edf(EmulatorState em, now, rr)

cpdef tuple more_important_key(JobState j)

@cython.locals(ea=bint, ga=bint, ua=bint, na=double, nb=double, sa=Py_ssize_t, sb=Py_ssize_t)
cpdef bint _more_important(JobState a, JobState b) except -1

@cython.locals(i=Py_ssize_t, k=Py_ssize_t, j=JobState)
cpdef _sort_more_important(list jobs)

@cython.locals(i=Py_ssize_t, k=Py_ssize_t, j=JobState, out=list, a=Py_ssize_t, b=Py_ssize_t)
cpdef list _by_arrival(jobs)

@cython.locals(k=Py_ssize_t)
cpdef bint _listed(list run_list, JobState j) except -1

@cython.locals(p=ProjectState)
cpdef _earliest_deadline_result(EmulatorState em, _Candidates cands, int r, dict misses, set taken, key)

@cython.locals(
    picks=_Picks, k=int, mc=int, used_st=double, used_mt=double, cpu=bint, place="int[::1]", j=JobState,
    p=ProjectState, ri=Py_ssize_t, nres=Py_ssize_t, r=int, cands=_Candidates, limit=double, taken=set, out=list,
    pick_log=list, misses=dict, logs=bint,
)
cpdef list make_run_list(EmulatorState em, now, rr, use_edf, gpu_allowed=*)


cpdef next_checkpoint_after(EmulatorState em, JobState j, t)

cpdef bint finished_time_slice(EmulatorState em, JobState j, now) except -1

@cython.locals(u=double)
cpdef bint _has_free(list usage) except -1

@cython.locals(need=double, u=double, free=double, i=int)
cpdef bint _reserve_gpu(list usage, double x) except -1

@cython.locals(
    ncpus=double, ncpus_used=double, rsc=int, avg_ncpus=double, extra=int, seq=Py_ssize_t, n=Py_ssize_t, j=JobState,
    ordered=list, bce=bint, period=double, slice_end=double, chosen=list, napp=dict, devices=dict,
)
cpdef list enforce(EmulatorState em, now, list run_list, gpu_allowed, keep_unfinished=*)

cpdef list _devices_of(JobState j, Py_ssize_t count)

@cython.locals(
    usage=list, pending=list, use=list, pend=list, held=list, out=dict, taken=list, first_pass=list,
    n=Py_ssize_t, i=Py_ssize_t, r=Py_ssize_t, need=Py_ssize_t, free=Py_ssize_t, u=double, x=double, eps=double,
    fits=bint, placed=bint, gpu_jobs=list, rsc=Py_ssize_t, j=JobState, d=Py_ssize_t,
)
cpdef dict assign_coprocs(em, list ordered)

cpdef bint _holds(list held, JobState j) except -1

cpdef str _why(JobState j)

@cython.locals(j=JobState, p=ProjectState)
cpdef bint queued_jobs_waiting(EmulatorState em) except -1

cpdef preemptible_at(EmulatorState em, JobState j)

@cython.locals(j=JobState)
cpdef first_preemptible_at(EmulatorState em)

cpdef _runtime_remaining(EmulatorState em, JobState j)

cpdef _results_index(JobState j)

cpdef _arrival(JobState j)
