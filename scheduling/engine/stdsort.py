"""`std_sort`: the order in which C++'s std::sort (GNU libstdc++'s introsort) leaves items
that compare equal.

BOINC's client sorts its projects for work fetch with std::sort and a strict "higher
priority" comparison (work_fetch.cpp, WORK_FETCH::setup), so projects with equal priority,
such as projects that never ran, end up in the order introsort happens to leave them, and the
first of them is the one asked for work. `--compat bce` follows that order
(docs/engine-fidelity.md). The algorithm is libstdc++'s, step for step: median-of-three
partitioning while more than 16 items remain, heapsort past the depth limit, then insertion
sort.
"""

from __future__ import annotations

THRESHOLD = 16


def std_sort(items: list, less) -> list:
    """A new list of `items` in std::sort's order for the strict weak ordering `less`."""
    a = list(items)
    n = len(a)
    if n > 1:
        _introsort_loop(a, 0, n, 2 * (n.bit_length() - 1), less)
        _final_insertion_sort(a, 0, n, less)
    return a


def _introsort_loop(a, first, last, depth, less):
    while last - first > THRESHOLD:
        if depth == 0:
            _partial_sort(a, first, last, less)
            return
        depth -= 1
        cut = _unguarded_partition_pivot(a, first, last, less)
        _introsort_loop(a, cut, last, depth, less)
        last = cut


def _move_median_to_first(a, result, i, j, k, less):
    if less(a[i], a[j]):
        if less(a[j], a[k]):
            m = j
        elif less(a[i], a[k]):
            m = k
        else:
            m = i
    elif less(a[i], a[k]):
        m = i
    elif less(a[j], a[k]):
        m = k
    else:
        m = j
    a[result], a[m] = a[m], a[result]


def _unguarded_partition_pivot(a, first, last, less):
    mid = first + (last - first) // 2
    _move_median_to_first(a, first, first + 1, mid, last - 1, less)
    lo, hi = first + 1, last
    pivot = a[first]
    while True:
        while less(a[lo], pivot):
            lo += 1
        hi -= 1
        while less(pivot, a[hi]):
            hi -= 1
        if not lo < hi:
            return lo
        a[lo], a[hi] = a[hi], a[lo]
        lo += 1


def _unguarded_linear_insert(a, last, less):
    val = a[last]
    nxt = last - 1
    while less(val, a[nxt]):
        a[last] = a[nxt]
        last = nxt
        nxt -= 1
    a[last] = val


def _insertion_sort(a, first, last, less):
    for i in range(first + 1, last):
        if less(a[i], a[first]):
            val = a[i]
            a[first + 1 : i + 1] = a[first:i]
            a[first] = val
        else:
            _unguarded_linear_insert(a, i, less)


def _final_insertion_sort(a, first, last, less):
    if last - first > THRESHOLD:
        _insertion_sort(a, first, first + THRESHOLD, less)
        for i in range(first + THRESHOLD, last):
            _unguarded_linear_insert(a, i, less)
    else:
        _insertion_sort(a, first, last, less)


# heapsort (std::__partial_sort with middle == last): __make_heap, then __pop_heap to the end


def _adjust_heap(a, first, hole, length, value, less):
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if less(a[first + child], a[first + child - 1]):
            child -= 1
        a[first + hole] = a[first + child]
        hole = child
    if (length & 1) == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        a[first + hole] = a[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and less(a[first + parent], value):
        a[first + hole] = a[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    a[first + hole] = value


def _partial_sort(a, first, last, less):
    length = last - first
    if length >= 2:
        parent = (length - 2) // 2
        while True:
            _adjust_heap(a, first, parent, length, a[first + parent], less)
            if parent == 0:
                break
            parent -= 1
    while last - first > 1:
        last -= 1
        value = a[last]
        a[last] = a[first]
        _adjust_heap(a, first, 0, last - first, value, less)
