# C types of rr_repick.py for the compiled core (build.py): Cython reads this file beside the
# module's source, which stays plain Python. The columns are QueuedJobs' (rr_queue.pxd), and
# every number in the loops a C double or int, so the doubles and the order of their
# operations are the pure-Python module's.

cimport cython

from scheduling.engine.rr_queue cimport QueuedJobs


cdef class Repick(QueuedJobs):
    @cython.locals(
        nr=int, r=int, i=int, k=int, best=int, nactive=int, slices=int, max_slices=int,
        idle=double, dt=double, d=double, x=double, inf=double,
        caps="double[::1]", sim_nused="double[::1]", left="double[::1]", rate="double[::1]",
        active="int[::1]",
    )
    cpdef run(self)

    @cython.locals(
        r=int, s=int, k=int, n=int, a=int, mc=int, pi=int, pu=int, lo=int, hi=int, end=int, lo_k=int,
        nprojects=int, full=bint, gpu_cpu=bint, limit=double,
    )
    cdef repick(self)
