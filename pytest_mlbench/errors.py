"""The few exception types the harness raises; each maps to one pytest outcome."""

from __future__ import annotations


class Unavailable(Exception):
    """Something the case needs is not on this machine (a framework, a device): the case skips."""


class Unsupported(Exception):
    """The combination is known not to make sense (bf16 in NumPy): the case skips with the reason."""


class PolicyNotApplied(AssertionError):
    """A precision policy or compile variant did not take effect: the case fails, never downgrades."""


class SpecError(AssertionError):
    """A workload's SPEC function raised or returned the wrong thing (make_data, make_params):
    the case fails with one line naming the function, the dims and what it must return."""


class StepCheck(AssertionError):
    """A check an adapter makes inside a call of the step (torch's xla mode: no copy to the
    host mid-step): the case fails, the case server naming the case in front of it."""
