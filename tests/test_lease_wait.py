"""The lease timing arithmetic (swapos/policies/waits.py)."""

from __future__ import annotations

from swapos.policies.waits import LeaseWait, lease_wait, overlap

NOTHING = (0.0, 0.0)


def test_overlap_of_intervals() -> None:
    assert overlap((0.0, 2.0), (1.0, 3.0)) == 1.0
    assert overlap((0.0, 1.0), (2.0, 3.0)) == 0.0
    assert overlap((0.0, 5.0), (1.0, 2.0)) == 1.0


def test_a_resident_model_costs_nothing_but_keeps_a_prefetch_credit() -> None:
    def wait(credit: float) -> LeaseWait:
        return lease_wait(
            requested=4.0,
            ready=4.0,
            was_ready=True,
            room=NOTHING,
            load=(1.0, 3.0),
            started_speculative=credit > 0,
            hidden_credit_s=credit,
        )

    assert wait(2.0) == LeaseWait(load_s=0.0, evict_s=0.0, load_hidden_s=2.0)
    assert wait(0.0).load_hidden_s == 0


def test_a_cold_load_is_split_into_eviction_and_load() -> None:
    wait = lease_wait(
        requested=10.0,
        ready=14.0,
        was_ready=False,
        room=(10.0, 11.5),  # victims closed first
        load=(11.5, 14.0),
        started_speculative=False,
        hidden_credit_s=0.0,
    )
    assert wait == LeaseWait(load_s=2.5, evict_s=1.5, load_hidden_s=0.0)


def test_joining_a_prefetch_in_flight_credits_the_part_done_before_the_request() -> None:
    wait = lease_wait(
        requested=12.0,
        ready=13.0,
        was_ready=False,
        room=(9.5, 10.0),  # before the request: not waited for
        load=(10.0, 13.0),
        started_speculative=True,
        hidden_credit_s=0.0,
    )
    assert wait == LeaseWait(load_s=1.0, evict_s=0.0, load_hidden_s=2.0)
