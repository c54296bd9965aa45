"""`HaState` alone, on a clock of the test's: the lease's arithmetic, the fence, stepping down
and the gate's two reasons (leading; a copy not yet aligned with the next term)."""

from __future__ import annotations

import pytest

from cdc.config import DumperConfig
from dumper.ha.state import SURE_RENEWALS, FencedError, HaState
from tests.dumper.ha.fakes import MARGIN_S


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def leading(term: int = 1) -> tuple[HaState, Clock, DumperConfig]:
    d = DumperConfig(id=1, lease_ms=3000, lease_renew_ms=1000)
    clock = Clock()
    state = HaState(d, clock)
    state.granted()
    state.lead(term)
    return state, clock, d


def test_a_candidate_may_not_write_and_is_not_gated():
    state = HaState(DumperConfig(id=1), Clock())
    with pytest.raises(FencedError):
        state.fence()
    assert (state.role, state.sure_until(), state.gated()) == ("candidate", 0.0, False)


def test_the_fence_refuses_once_the_lease_less_its_margin_ran_out():
    state, clock, d = leading()
    state.fence()  # just granted
    assert state.lease_left() == pytest.approx(d.lease_ms / 1000 - MARGIN_S)
    clock.now += d.lease_ms / 1000 - MARGIN_S - 0.01
    state.fence()
    clock.now += 0.02
    with pytest.raises(FencedError, match="term 1"):
        state.fence()
    state.renewed(clock.now)  # a renewal sent now and confirmed moves the end on
    state.fence()
    state.refused()  # another dumper holds the lease
    with pytest.raises(FencedError):
        state.fence()


def test_the_lease_is_sure_for_one_and_a_half_renewals_after_the_last_confirmed_one():
    state, clock, d = leading()
    sent = clock.now
    assert state.sure_until() == sent + SURE_RENEWALS * d.lease_renew_ms / 1000
    clock.now += 5.0
    state.renewed(clock.now - 0.5)  # confirmed late: counted from when it was sent
    assert state.sure_until() == clock.now - 0.5 + SURE_RENEWALS * d.lease_renew_ms / 1000


def test_stepping_down_fences_at_once_and_gates_until_aligned_with_a_later_term():
    state, _, _ = leading(term=4)
    state.step_down(4, fenced=True)
    state.step_down(4, fenced=False)  # once only
    assert (state.role, state.unaligned_term, state.sure_until()) == ("candidate", 4, 0.0)
    with pytest.raises(FencedError):
        state.fence()  # the lease had time left: stepped down all the same
    assert state.gated()  # its copy may hold bytes the next term lacks
    state.aligned_with(4)
    assert state.gated()
    state.aligned_with(5)
    assert not state.gated()
