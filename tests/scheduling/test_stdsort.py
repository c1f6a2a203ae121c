"""std_sort: C++ std::sort's (libstdc++ introsort) order of equal items, which decides which
of several projects with equal priority BOINC's client asks for work first."""

import random

from scheduling.engine.stdsort import std_sort


def test_up_to_sixteen_items_it_is_an_insertion_sort_and_keeps_ties_in_order():
    items = [(k % 3, i) for i, k in enumerate(range(16))]
    assert std_sort(items, lambda a, b: a[0] > b[0]) == sorted(items, key=lambda x: -x[0])


def test_twenty_equal_items_come_out_as_one_median_of_three_partition_leaves_them():
    # 20 > 16 items: the median of items 1, 10 and 19 (all equal: the middle one, 10) is
    # swapped to the front; the unguarded partition then swaps 1<->19, 2<->18 ... 9<->11 and
    # stops at 10, which now holds the old first item; both halves are then short enough
    # for the final insertion sort, which moves nothing
    out = std_sort(list(range(20)), lambda a, b: False)
    assert out == [10, 19, 18, 17, 16, 15, 14, 13, 12, 11, 0, 9, 8, 7, 6, 5, 4, 3, 2, 1]


def test_it_sorts_whatever_the_ties():
    rng = random.Random(5)
    for n in range(1, 80):
        keys = [rng.randrange(4) for _ in range(n)]
        out = std_sort(list(range(n)), lambda a, b, keys=keys: keys[a] > keys[b])
        assert sorted(out) == list(range(n))
        assert [keys[i] for i in out] == sorted(keys, reverse=True)


def test_the_heapsort_past_the_depth_limit_sorts_too():
    from scheduling.engine import stdsort

    items = list(range(40))
    random.Random(2).shuffle(items)
    stdsort._partial_sort(items, 0, len(items), lambda a, b: a < b)
    assert items == list(range(40))
