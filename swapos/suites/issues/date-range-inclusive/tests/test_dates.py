from datetime import date

from solution import count_weekdays, date_range, days_in_month, month_bounds


def test_range_includes_both_ends_across_a_leap_day():
    assert date_range(date(2024, 2, 27), date(2024, 3, 1)) == [
        date(2024, 2, 27),
        date(2024, 2, 28),
        date(2024, 2, 29),
        date(2024, 3, 1),
    ]


def test_one_day_range():
    assert date_range(date(2024, 1, 5), date(2024, 1, 5)) == [date(2024, 1, 5)]


def test_reversed_range_is_empty():
    assert date_range(date(2024, 1, 6), date(2024, 1, 5)) == []


def test_weekdays_of_a_full_week():
    # Monday 2024-01-01 .. Sunday 2024-01-07
    assert count_weekdays(date(2024, 1, 1), date(2024, 1, 7)) == 5
    assert count_weekdays(date(2024, 1, 5), date(2024, 1, 5)) == 1


def test_month_helpers():
    assert month_bounds(2023, 12) == (date(2023, 12, 1), date(2023, 12, 31))
    assert len(days_in_month(2023, 2)) == 28
    assert days_in_month(2024, 2)[-1] == date(2024, 2, 29)
