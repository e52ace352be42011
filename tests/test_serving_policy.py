"""The server's pure decisions: which queue next (starvation bound) and which model next."""

from __future__ import annotations

from swapos.policies.serving import GLOBAL_KEY, Transitions, pick_queue


def test_no_queue_no_choice() -> None:
    assert pick_queue({}, now=10.0, max_wait=5.0, current="a") is None


def test_the_current_models_queue_goes_first_below_the_bound() -> None:
    heads = {"a": 3.0, "b": 1.0}  # b's request is older, but a is resident
    assert pick_queue(heads, now=4.0, max_wait=5.0, current="a") == "a"


def test_a_queue_waiting_max_wait_goes_before_newer_requests() -> None:
    heads = {"a": 3.0, "b": 1.0}
    assert pick_queue(heads, now=6.0, max_wait=5.0, current="a") == "b"


def test_a_starving_queue_does_not_overtake_an_older_current_request() -> None:
    heads = {"a": 0.5, "b": 1.0}  # both starving; a's head is older: FIFO-fair to serve it
    assert pick_queue(heads, now=9.0, max_wait=5.0, current="a") == "a"


def test_the_oldest_starving_queue_goes_first() -> None:
    heads = {"a": 5.0, "b": 2.0, "c": 1.0}
    assert pick_queue(heads, now=8.0, max_wait=5.0, current="a") == "c"


def test_without_a_current_model_a_resident_one_is_preferred() -> None:
    heads = {"a": 2.0, "b": 1.0}
    assert pick_queue(heads, now=2.0, max_wait=5.0, resident={"a"}) == "a"
    assert pick_queue(heads, now=2.0, max_wait=5.0) == "b"


def test_ties_go_by_name() -> None:
    assert pick_queue({"b": 1.0, "a": 1.0}, now=1.0, max_wait=5.0) == "a"


def test_transitions_predict_the_most_frequent_successor() -> None:
    t = Transitions()
    for model in ["arch", "edit", "arch", "edit", "arch", "chat"]:
        t.observe(GLOBAL_KEY, model)
    assert t.successors(GLOBAL_KEY, "arch") == {"edit": 2, "chat": 1}
    assert t.predict(GLOBAL_KEY, "arch") == "edit"
    assert t.predict(GLOBAL_KEY, "edit") == "arch"
    assert t.predict(GLOBAL_KEY, "never-seen") is None


def test_transitions_are_per_client_with_the_global_ones_as_fallback() -> None:
    t = Transitions()
    for model in ["a", "b", "a", "b"]:
        t.observe("alice", model)
    for model in ["a", "c", "a", "c", "a", "c"]:
        t.observe("bob", model)
    assert t.predict("alice", "a") == "b"
    assert t.predict("bob", "a") == "c"
    assert t.predict("carol", "a") == "c"  # nothing of her own: everyone's (c 3, b 2)
    assert t.successors("alice", "b") == {"a": 1}
    assert t.successors("bob", "c") == {"a": 2}
