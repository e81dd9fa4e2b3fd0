"""How many workers a supervisor starts ahead (the processes themselves: test_supervisor_cpu, test_process)."""

from __future__ import annotations

from kernelcraft.verify.workers import standby_to_start


def test_standby_workers_to_start():
    """One standby per queued job; from the second candidate on at least one, as a search's next candidate comes
    with nothing queued; never more than the limit; none on the CPU; and started as a batch once none is left."""
    assert standby_to_start("cuda", ahead=0, taken=1, limit=2, have=0) == 0  # a single evaluation: no spare worker
    assert standby_to_start("cuda", ahead=0, taken=2, limit=2, have=0) == 1
    assert standby_to_start("cuda", ahead=3, taken=1, limit=2, have=0) == 2
    assert standby_to_start("cuda", ahead=1, taken=5, limit=2, have=0) == 1
    assert standby_to_start("cuda", ahead=0, taken=5, limit=0, have=0) == 0  # standby_workers=0 turns them off
    assert standby_to_start("cpu", ahead=4, taken=5, limit=2, have=0) == 0
    # a deep queue: the one left is taken next, and then two start together
    assert standby_to_start("cuda", ahead=9, taken=5, limit=2, have=1) == 0
    assert standby_to_start("cuda", ahead=8, taken=6, limit=2, have=0) == 2
