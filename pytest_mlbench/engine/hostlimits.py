"""What the host cannot run, told apart from an implementation's own error.

A framework's library can refuse a case for want of an instruction set: torch's oneDNN has
no bfloat16 LSTM kernel on a CPU without AVX-512 and says "could not create a primitive
descriptor for the LSTM forward propagation primitive". That is no fault of the
implementation, and the same case runs on a host that has the instructions; so it skips
saying what this host lacks. Narrow on purpose: a library's own message (LIMITS), at a
precision that computes in 16 bits, on a CPU whose flags lack every instruction set its
kernels use. Any other error stays the implementation's.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from pytest_mlbench.engine.protocol import CaseSpec

HALF = ("bf16", "amp", "amp16")  # the policies that compute in 16 bits
CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class Limit:
    library: str
    message: re.Pattern[str]  # what the library says
    needs: tuple[str, ...]  # CPU flags any one of which gives it the kernels
    needs_words: str  # the same, for the skip's line


LIMITS = (
    Limit("oneDNN", re.compile(r"could not create a primitive descriptor", re.IGNORECASE),
          ("avx512bw", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16", "avx_ne_convert"),
          "AVX-512 (avx512bw), AVX512-BF16/FP16, AMX or AVX-NE-CONVERT"),
)


def cpu_flags() -> frozenset[str] | None:
    """The CPU's flags (Linux's /proc/cpuinfo), or None where they cannot be read."""
    try:
        text = CPUINFO.read_text()
    except OSError:
        return None
    found = re.search(r"^flags\s*:(.*)$", text, re.MULTILINE)
    return frozenset(found.group(1).split()) if found else None


def host_lacks(exc: BaseException, spec: CaseSpec | None,
               flags: Collection[str] | None = None) -> str | None:
    """The skip's line when ``exc``, raised by the case ``spec`` describes, is the host's
    limit rather than the implementation's fault; None otherwise (and for no case)."""
    if spec is None or spec.device != "cpu" or spec.precision not in HALF:
        return None
    error = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    limit = next((lim for lim in LIMITS if lim.message.search(error)), None)
    if limit is None:
        return None
    flags = cpu_flags() if flags is None else flags
    if flags is None or any(flag in flags for flag in limit.needs):
        return None  # the CPU has the instructions (or cannot be read): not the host's limit
    return (f"this host's CPU cannot run {spec.precision} here: {limit.library} "
            f"refused the case ({error}); its 16-bit kernels need {limit.needs_words}, which "
            "this CPU lacks (it runs on a host that has them)")
