# C types of stdsort.py for the compiled core (build.py): Cython reads this file beside the
# module's source, which stays plain Python. The sort's places and counts are C integers, with
# Python's floor division, over the list the pure-Python module sorts; `less` stays the
# caller's function, called as often and on the same items.

cimport cython


cpdef list std_sort(list items, less)

cpdef _introsort_loop(list a, Py_ssize_t first, Py_ssize_t last, Py_ssize_t depth, less)

@cython.locals(m=Py_ssize_t)
cpdef _move_median_to_first(list a, Py_ssize_t result, Py_ssize_t i, Py_ssize_t j, Py_ssize_t k, less)

@cython.locals(mid=Py_ssize_t, lo=Py_ssize_t, hi=Py_ssize_t)
cpdef Py_ssize_t _unguarded_partition_pivot(list a, Py_ssize_t first, Py_ssize_t last, less) except? -1

@cython.locals(nxt=Py_ssize_t)
cpdef _unguarded_linear_insert(list a, Py_ssize_t last, less)

@cython.locals(i=Py_ssize_t)
cpdef _insertion_sort(list a, Py_ssize_t first, Py_ssize_t last, less)

@cython.locals(i=Py_ssize_t)
cpdef _final_insertion_sort(list a, Py_ssize_t first, Py_ssize_t last, less)

@cython.locals(top=Py_ssize_t, child=Py_ssize_t, parent=Py_ssize_t)
cpdef _adjust_heap(list a, Py_ssize_t first, Py_ssize_t hole, Py_ssize_t length, value, less)

@cython.locals(length=Py_ssize_t, parent=Py_ssize_t)
cpdef _partial_sort(list a, Py_ssize_t first, Py_ssize_t last, less)
