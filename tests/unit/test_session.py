"""session.py's wait on the campaign's thread: Ctrl-C while the main thread waits cancels the
campaign (its workers are killed) whatever the interpreter's join does with the interrupt."""

from __future__ import annotations

import _thread
import queue
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import Future

import pytest

from pytest_mlbench.session import RunState


class Campaign:
    def __init__(self) -> None:
        self.cancelled = threading.Event()

    def cancel(self) -> None:
        self.cancelled.set()


def waiting_state(campaign: Campaign) -> RunState:
    """A RunState with only what ``_wait`` uses: a campaign thread that runs until cancelled."""
    state = RunState.__new__(RunState)
    state._found = Future()
    state._lines = queue.SimpleQueue()
    state._campaign = campaign  # type: ignore[assignment]

    def run() -> None:
        campaign.cancelled.wait(30)
        state._found.set_exception(KeyboardInterrupt("the campaign was cancelled"))

    state._thread = threading.Thread(target=run, daemon=True)
    state._thread.start()
    return state


@pytest.fixture(autouse=True)
def _ctrl_c_raises() -> Iterator[None]:
    """Python's own SIGINT handler while the test runs: a shell that starts pytest in the
    background ignores SIGINT, and interrupt_main then simulates nothing."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize("after", [0.05, 0.3, 0.55])
def test_ctrl_c_while_waiting_for_the_campaign_cancels_it(after: float) -> None:
    """On CPython 3.11 and 3.12 a KeyboardInterrupt inside ``Thread.join`` leaves
    ``is_alive()`` False for a thread still running: a wait built on join let the campaign
    run on after Ctrl-C (found on a GPU, where the call in flight was a long compile)."""
    campaign = Campaign()
    state = waiting_state(campaign)
    timer = threading.Timer(after, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        state._wait()
    timer.join()
    assert campaign.cancelled.is_set(), "Ctrl-C left the campaign running"
    assert state._found.done()  # _stop waited for the campaign to end


def test_a_campaign_that_ends_is_waited_for_and_not_cancelled() -> None:
    campaign = Campaign()
    state = waiting_state(campaign)
    threading.Timer(0.2, campaign.cancel).start()  # it ends by itself (as if done)
    state._wait()
    state._stop()
    assert state._found.done()
