# C types of rpc.py for the compiled core (build.py): Cython reads this file beside the
# module's source, which stays plain Python. project_with_overdue_results, which every
# scheduler RPC poll runs under bce, and the report times the event planning reads for every
# ready result: the times in C doubles, with the pure-Python module's operations in its order.
# The projects are ProjectStates (state.pxd); the results stay plain objects (tests hand in
# stand-ins).

# The emulator is an EmulatorState (state.pxd): its settings and state are read from its C
# structure, without the interpreter's look-ups.

cimport cython

from scheduling.engine.state cimport EmulatorState, ProjectState


cpdef report_due_time(EmulatorState em, j)

cpdef double report_cushion(EmulatorState em) except? -1.0

@cython.locals(before_deadline=double, after_completion=double)
cpdef double _due_time(j, double cushion) except? -1.0

@cython.locals(p=ProjectState, ready=list, counts=dict, cushion=double, n=Py_ssize_t)
cpdef project_with_overdue_results(EmulatorState em, now)

cpdef _result_index(j)
