from solution import Interval, free_slots, merge_intervals


def test_examples_from_the_brief():
    assert merge_intervals([Interval(1, 3), Interval(2, 6), Interval(8, 10)]) == [
        Interval(1, 6),
        Interval(8, 10),
    ]
    assert merge_intervals([Interval(5, 7), Interval(1, 5)]) == [Interval(1, 7)]
    assert merge_intervals([]) == []
    assert merge_intervals([Interval(4, 4)]) == []


def test_contained_and_duplicate_intervals():
    assert merge_intervals([Interval(0, 10), Interval(2, 3), Interval(0, 10)]) == [
        Interval(0, 10)
    ]


def test_unsorted_input_is_not_modified():
    data = [Interval(9, 12), Interval(0, 1), Interval(3, 4), Interval(1, 2)]
    copy = list(data)
    assert merge_intervals(data) == [Interval(0, 2), Interval(3, 4), Interval(9, 12)]
    assert data == copy


def test_feeds_free_slots():
    busy = merge_intervals([Interval(10, 12), Interval(9, 10), Interval(14, 15)])
    assert free_slots(busy, Interval(8, 16)) == [
        Interval(8, 9),
        Interval(12, 14),
        Interval(15, 16),
    ]
