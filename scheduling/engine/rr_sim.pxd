# C types of rr_sim.py for the compiled core (build.py): Cython reads this file beside the
# module's source, which stays plain Python. credit_rates, which the event planning calls
# at every decision (Boinc7._order_margin, rec_drift), reads the running jobs as JobStates
# (state.pxd); the numbers stay Python floats, with the pure-Python module's operations in
# its order.

cimport cython

from scheduling.engine.state cimport JobState


@cython.locals(j=JobState)
cpdef dict credit_rates(em)
