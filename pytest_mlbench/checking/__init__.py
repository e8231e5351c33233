"""Correctness: the assert_* primitives and tolerance table, the checks of each phase (before and
after timing), the audit of timed rounds, the float64 references and trajectories, the parent's
side of the autodiff oracle."""
