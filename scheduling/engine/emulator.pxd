# C types of emulator.py for the compiled core (build.py): Cython reads this file beside the
# module's source, which stays plain Python. The emulator is an EmulatorState (state.pxd): the
# main loop (advance_events) and each instant's decisions and plan read its settings and state
# from its C structure, and call one another, the accounting of an interval (accounting.pxd),
# grid_time and the push of an event (EventPush) as C functions. grid_time, which every event the emulator plans goes through,
# is in C doubles, with the pure-Python module's operations in its order.

cimport cython

from scheduling.engine.accounting cimport advance_interval, job_ends, set_rates
from scheduling.engine.rpc cimport _due_time, report_cushion
from scheduling.engine.scheduler_rpc cimport rpc_poll
from scheduling.engine.state cimport EmulatorState, JobState, ProjectState, gpu_allowed


cdef bint _OWN_HEAP

@cython.locals(ta=double, tb=double, ka=long, kb=long)
cdef bint entry_before(list a, list b) except -1

cpdef heap_push(list heap, list entry)

cpdef list heap_pop(list heap)

@cython.locals(entry=list, parent=list, parent_pos=Py_ssize_t)
cdef _sift_down(list heap, Py_ssize_t start, Py_ssize_t pos)

@cython.locals(end=Py_ssize_t, start=Py_ssize_t, child=Py_ssize_t, right=Py_ssize_t, entry=list)
cdef _sift_up(list heap, Py_ssize_t pos)


cdef class EventPush:
    cdef public list heap, counter, waiting

    @cython.locals(counter=list, entry=list, waiting=dict)
    cpdef push(self, t, kind, data=*, order=*)


@cython.locals(cache=tuple, key=tuple)
cpdef current_rr(EmulatorState em)

cpdef rr_made_now(EmulatorState em)

@cython.locals(
    t=double, max_events=double, next_progress=double, next_partial=double, live=bint, light=bint,
    sample_due=bint, heap=list, waiting=list, of_kind=dict, loop=dict, entry=list, events=EventPush,
)
cpdef advance_events(EmulatorState em, double t_stop)

@cython.locals(cpu_ok=bint, gpu=bint, changed=bint)
cpdef decide(EmulatorState em)

@cython.locals(j=JobState, gpu_ok=bint)
cpdef bint schedule_unchanged(EmulatorState em) except -1

@cython.locals(j=JobState)
cpdef schedule(EmulatorState em)

@cython.locals(
    epoch=long, now=double, ends=list, events=EventPush, cushion=double, due=double, wake=double, t=double,
    any_due=bint, any_wake=bint, p=ProjectState,
)
cpdef plan(EmulatorState em)

@cython.locals(j=JobState)
cpdef bint _started_at(list running, double now) except -1

@cython.locals(x=double, c=double, g=double, first=double)
cpdef double grid_time(double now, double delta, double t) except? -1.0
