# C declarations for scheduler_rpc.py in the compiled core (build.py): Cython reads this file
# beside the module's source, which stays plain Python. rpc.project_with_overdue_results, which
# every scheduler RPC poll runs under bce, is cimported from rpc.pxd and called as a C function.
# The poll itself (rpc_poll), which every decision instant runs, reads the emulator as an
# EmulatorState and the projects as ProjectStates (state.pxd), from their C structures.

cimport cython

from scheduling.engine.rpc cimport project_with_overdue_results
from scheduling.engine.state cimport EmulatorState, ProjectState


@cython.locals(p=ProjectState, q=ProjectState)
cpdef bint rpc_poll(EmulatorState em) except -1
