# C declarations for scheduler_rpc.py in the compiled core (build.py): Cython reads this file
# beside the module's source, which stays plain Python. rpc.project_with_overdue_results, which
# every scheduler RPC poll runs under bce, is cimported from rpc.pxd and called as a C function.

from scheduling.engine.rpc cimport project_with_overdue_results
