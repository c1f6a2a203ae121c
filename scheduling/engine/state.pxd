# C types of state.py for the compiled core (build.py): Cython reads this file beside the
# module's source, which stays plain Python. JobState is a C type with the attributes of its
# __slots__: its numbers are C doubles (JobState.__init__ and their writers make them floats on
# the pure-Python core too, so both cores compute with the same values and print the same), the
# others Python objects; compiled code that knows a job is a JobState (rr_queue.pxd,
# cpu_sched.pxd) reads them straight from the object's C structure instead of looking them up.

cimport cython


cdef class JobState:
    cdef public object name, project, app, version, received, deadline, completed_time, slice_why
    cdef public object task_seq, pick_value
    # its processor type, state, device, place in the client's order and in the run list, and
    # its flags, which every writer sets as integers and booleans
    cdef public long rsc, index, state, instance, seqno_key, pick_seq
    cdef public bint in_memory, started, once_ran_edf, rr_miss, edf, unfinished, initial
    # its numbers, which JobState.__init__ and every writer keep floats on either core
    cdef public double avg_ncpus, gpu_usage, flops, size, fpops_est, done, ckpt_done, run_start
    cdef public double resume_left, peak_flop_count, last_deadline_miss_time, rr_finish, elapsed
    cdef public double slice_start, rate, checkpoint_period, peak_flops, left_at_end, flops_left

    cpdef runtime_remaining(self, rate)

    cpdef est_flops_remaining(self, exact)


# ProjectState likewise: its numbers C doubles and its other attributes Python objects in the
# object's C structure, read from it by compiled code that knows a project is a ProjectState
# (accounting.pxd, work_fetch.pxd); `__dict__` keeps any other attribute a caller sets working.
cdef class ProjectState:
    cdef dict __dict__
    cdef public object spec, index, name, share, jobs, jobs_version, ready, secs_this_interval
    cdef public object rsc_std, rsc_ltd, rsc_anticipated_debt, wall_rsc_interval, nrpc_failures
    cdef public object master_fetch_pending, master_fetch_failures, urls, available, last_rpc_time
    cdef public object backoff_time, backoff_interval, rsc_ok, fetch_ok, deadlines_met
    cdef public object deadlines_missed, jobs_completed, jobs_received, rpcs, rpc_failures, job_counter
    # its REC, priorities, debts, times and FLOP counts, which every writer keeps floats
    cdef public double rec, rec_time, rec_temp, priority, share_frac, std, ltd, std_shown
    cdef public double wall_cpu_interval, anticipated_debt, dcf, min_rpc_time, idle_time
    cdef public double idle_time_sumsq, flops_used, flops_wasted, flops_lost, flops_computed


# EmulatorState, the base of the Emulator: the attributes of EMULATOR_FIELDS (state.py) in the
# C structure, by kind; `__dict__` holds the emulator's other attributes. The Emulator pickles
# them as attributes (Emulator.__reduce__), so either core reads an emulator the other pickled.
cdef class EmulatorState:
    cdef dict __dict__
    cdef public double now, delta, duration, period, work_buf_min, work_buf_total, rec_half_life
    cdef public double total_peak_flops, cpu_scale, last_sample, rec_start, flops_used, active_time
    cdef public double gpu_active_time
    cdef public long events, epoch, state_version
    cdef public bint bce, exact_estimates, fixed_step, ended, on, active, connected, gpu_active, gpu_acct
    cdef public bint rec_acct, gpu_seen, gpu_recheck, must_schedule, rpc_this_instant, keeps_series
    cdef public list projects, resources, running, project_order
    cdef public object policy, prefs, n_usable_cpus, cpu_flops, sample_interval, _rr_cache, _push
    cdef public object _rates_of


cpdef bint gpu_allowed(EmulatorState em) except -1
