"""The few exception types the harness raises; each maps to one pytest outcome."""

from __future__ import annotations


class Unavailable(Exception):
    """Something the case needs is not on this machine (a framework, a device): the case skips."""


class Unsupported(Exception):
    """The combination is known not to make sense (bf16 in NumPy): the case skips with the reason."""


class PolicyNotApplied(AssertionError):
    """A precision policy or compile variant did not take effect: the case fails, never downgrades."""
