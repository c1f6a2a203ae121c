# C types of rec.py for the compiled core (build.py): Cython reads this file beside the
# module's source, which stays plain Python. project_priority_init, which every schedule and
# every work-fetch check runs over all the projects, walks them as ProjectStates (state.pxd)
# and calls compute_priority as a C function; the numbers stay Python floats but for the sums
# of the shares and RECs, C doubles added in the same order, with the pure-Python module's
# operations in its order. update_average, which REC's accounting calls for every project at
# every event, computes in C doubles, with the same operations in the same order.

cimport cython

from scheduling.engine.state cimport ProjectState


@cython.locals(diff=double, w=double)
cpdef tuple update_average(double now, double start, double work, double half_life, double avg, double avg_time)

@cython.locals(p=ProjectState)
cpdef double priority_init(projects, selected, bce=*) except? -1.0

@cython.locals(p=ProjectState)
cpdef double priority_init_with_jobs(projects, bce=*) except? -1.0

@cython.locals(p=ProjectState, chosen_set=set, counted=bint, every=bint, rs_sum=double, rec_sum=double)
cdef double _priority_init_chosen(projects, list chosen, bint bce) except? -1.0


cpdef compute_priority(ProjectState p, rec_sum)
