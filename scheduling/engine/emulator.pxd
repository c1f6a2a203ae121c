# C types of emulator.py for the compiled core (build.py): Cython reads this file beside the
# module's source, which stays plain Python. grid_time, which every event the emulator plans
# goes through, in C doubles, with the pure-Python module's operations in its order.

cimport cython


@cython.locals(x=double, c=double, g=double, first=double)
cpdef double grid_time(double now, double delta, double t) except? -1.0
