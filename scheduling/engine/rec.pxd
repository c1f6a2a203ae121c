# C types of rec.py for the compiled core (build.py): Cython reads this file beside the
# module's source, which stays plain Python. project_priority_init, which every schedule and
# every work-fetch check runs over all the projects, calls compute_priority as a C function;
# the numbers stay Python floats, with the pure-Python module's operations in its order.


cpdef compute_priority(p, rec_sum)
