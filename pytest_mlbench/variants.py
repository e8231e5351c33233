"""A variant is how an implementation runs: a compile mode (``eager``; ``jit``: jax.jit,
torch.compile, tf.function, numba.njit; ``xla``: tf.function with jit_compile, or torch on
torch_xla's XLA device: frameworks/torch_xla_.py), optionally
with an idiom after a ``+``: ``jit+sdpa`` is the model written with the framework's fused
attention, under jit. Idioms of one workload are variants of one comparison group, under the
same checks; the adapters see only the mode, the implementation reads the idiom
(``case.idiom``), and ``--mlbench-variants`` selects by mode (``jit`` runs ``jit+sdpa`` too).
A leaf: it imports nothing."""

from __future__ import annotations

import re

MODES = ("eager", "jit", "xla")
IDIOM = re.compile(r"[a-z][a-z0-9_]*\Z")


def mode(variant: str) -> str:
    """The compile mode of ``variant`` (``jit`` of ``jit+sdpa``)."""
    return variant.partition("+")[0]


def idiom(variant: str) -> str:
    """The idiom of ``variant`` (``sdpa`` of ``jit+sdpa``; "" for a plain mode)."""
    return variant.partition("+")[2]


def problem(variant: object) -> str | None:
    """Why ``variant`` is no variant name, in one line, or None when it is one."""
    if not isinstance(variant, str):
        return f"variant {variant!r} is not a string"
    if mode(variant) not in MODES:
        return (f"variant {variant!r}: its mode {mode(variant)!r} is none of "
                f"{', '.join(MODES)} (a variant is a mode, or mode+idiom such as jit+sdpa)")
    if "+" in variant and not IDIOM.match(idiom(variant)):
        return (f"variant {variant!r}: the idiom after '+' must be lower-case letters, digits "
                "and underscores, starting with a letter")
    return None
