"""Which actor a job (or a target) goes to: one that has measured its problem's baselines while it has room and
the pipeline is not starved, else the least loaded (no Ray needed: the choice is over the driver's slots)."""

from __future__ import annotations

from kernelcraft.cluster.pool import EXTRA_DEPTH, Slot, pick

DEPTH = 4


def slot(name: str, inflight: int = 0, known: tuple = (), calls: int = 0, alive: bool = True) -> Slot:
    s = Slot(actor=name, started=0.0, alive=alive, label=name, calls=calls, known=set(known))
    s.inflight = {f"{name}-{i}": None for i in range(inflight)}
    return s


def test_an_actor_that_knows_the_problem_takes_it_while_its_pipeline_is_short():
    a, b = slot("a", inflight=1, known=("p",)), slot("b")
    assert pick([b, a], "p", DEPTH) is a  # b is idle, but a has fewer than EXTRA_DEPTH in flight
    assert pick([a, b], "q", DEPTH) is b  # nobody knows q: the least loaded


def test_an_idle_device_wins_over_a_deep_queue_on_the_knowing_one():
    a, b = slot("a", inflight=EXTRA_DEPTH, known=("p",)), slot("b")
    assert pick([a, b], "p", DEPTH) is b
    b.inflight = {"x": None}  # no device idle any more: the knowing one, while it has room
    assert pick([a, b], "p", DEPTH) is a
    a.inflight = {f"a-{i}": None for i in range(DEPTH)}  # full: the other one
    assert pick([a, b], "p", DEPTH) is b


def test_of_several_knowing_actors_the_least_loaded_and_none_without_room():
    a, b, c = slot("a", 1, ("p",)), slot("b", 0, ("p",)), slot("c", 0)
    assert pick([a, b, c], "p", DEPTH) is b
    full = [slot(n, DEPTH, ("p",)) for n in "xy"]
    assert pick(full, "p", DEPTH) is None
    assert pick(full, "p", None) in full  # a target call has no depth bound


def test_targets_in_flight_count_as_load_and_lost_actors_take_nothing():
    a, b = slot("a", calls=1, known=("p",)), slot("b")
    assert pick([a, b], "q", None) is b  # a is measuring p's target: q's goes to b
    assert pick([a, b], "p", None) is a  # p's is answered where it was measured
    assert pick([slot("a", alive=False, known=("p",)), b], "p", DEPTH) is b
    assert pick([slot("a", alive=False)], "p", DEPTH) is None


def test_a_job_does_not_wait_behind_a_target_while_a_device_is_idle():
    a, b = slot("a", calls=1, known=("p",)), slot("b")  # a measures another problem's target (its baselines)
    assert pick([a, b], "p", DEPTH) is b  # p's job goes to the idle device rather than queue behind it
    assert pick([a, b], "p", None) is a  # a target call for p is still answered where p is known
    b.inflight = {"x": None}  # no device idle: the knowing one, target or not
    assert pick([a, b], "p", DEPTH) is a
