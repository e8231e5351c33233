"""The workers' memory allocator: the same for every framework, and steady from step to step.

Runs of one case in different processes were bimodal, and some frameworks paid the allocator
in every step, for three reasons, each found on the 2-core reference machine and each a
setting of glibc's malloc (other allocators ignore these variables):

1. **Heap trimming.** When a step's freed temporaries end at the top of the heap, glibc gives
   that memory back to the OS and the next step takes it back: a brk and ~480 page faults a
   step, in some processes and not others (NumPy's MLP step 0.73 or 1.61 ms).
2. **Large blocks are mapped.** glibc serves a block above its mmap threshold (at most
   32 MiB on 64-bit) with mmap and unmaps it on free, so a step with such a temporary faults
   it in afresh every time. Whether a block crossed it depended on what the process had done
   before: TensorFlow-XLA's ViT step took 12,000 faults a step and 73 ms, or 20 and 46 ms,
   after an unrelated large matmul.
3. **Per-thread arenas.** A block allocated on a framework's pool thread comes from that
   thread's arena, whose heaps are capped at 64 MiB; anything larger is mapped whatever the
   threshold. XLA allocates a step's temporaries in one buffer on its pool thread: 68 MB for
   JAX's ViT step, 16,600 faults a step, 108 ms instead of 68 ms; JAX's CNN 65 ms instead of 36.

So workers start with one arena, no mapped blocks and no trimming (``ENV``): memory a step
frees is reused by the next step. Memory is never returned to the OS while a worker lives,
which is what a benchmark worker wants.

4. **A heap that still grows.** With all of that, some processes still took thousands of
   faults in a few timed rounds and others none: a worker's heap is fragmented by what it ran
   before (builds, compilations, checks, other cases), so a step's large temporary may fit no
   free chunk, and the heap grows into memory the OS has not yet given it (TensorFlow's
   eager LSTM: 13,824 faults and 295 ms in one round against 198 ms, its heap 783 -> 837 MB
   with 466 MB free in it), or a step first touches pages of the heap that no step had
   touched. Which rounds pay depended on the process. So before its timed rounds, a
   timed case's worker pre-touches its heap (``pretouch``, as a JVM benchmark runs with
   AlwaysPreTouch): the top of the heap is made at least ``headroom`` long, then every
   page of the heap and of its top is faulted in (MADV_POPULATE_WRITE) without changing
   what is there. A step's growth within the headroom then finds its memory mapped. The
   top is found where glibc put it: in the TensorFlow workers of a 3-process main job it
   was outside the brk heap (something had been mapped right after the heap, and glibc
   continues the heap in mapped memory then), and a pre-touch of the brk heap alone left
   their faults as they were (the mapping holding that part of the heap is faulted in too,
   unless it is more than GROW_MAX larger than the arena's part). A worker prepares several
   cases before it times them in turns, and a case prepared later, or another case's rounds,
   may use up the top an earlier pre-touch left; so before each timed turn the worker checks
   whether the heap grew or its top fell short of that headroom, and pre-touches again if so
   (``pretouch_again``).

The faults a timed round takes are still counted (``minor_faults``) and reported per step
with every result, so a case that pays the OS for memory while timed shows it.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import resource
import sys
from collections.abc import Callable
from typing import Any
from xml.etree import ElementTree

ENV = {
    "MALLOC_ARENA_MAX": "1",  # every thread allocates from the main heap (no 64 MiB cap)
    "MALLOC_MMAP_MAX_": "0",  # no block is ever mapped (and unmapped) on its own
    "MALLOC_TRIM_THRESHOLD_": str(2**62),  # the heap top is never given back
    "MALLOC_TOP_PAD_": str(16 * 2**20),  # grow the heap 16 MiB at a time
}


def minor_faults() -> int:
    """Minor page faults this process has taken so far (memory the OS had to map in)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


MADV_POPULATE_WRITE = 23  # linux/mman.h, Linux 5.14+
PAGE = resource.getpagesize()
HEADROOM_MIN = 64 * 2**20  # the top of the heap a pre-touch leaves, at least
HEADROOM_MAX = 512 * 2**20  # and at most: memory a worker keeps for a step's growth
HEADROOM_SHARE = 4  # otherwise a quarter of the heap (all the main arena has taken)
GROW_MAX = 2**30  # a top this far short of the headroom is left short (the memory it takes)

# this process's last pre-touch: the main arena's size after it, and the headroom it left
# (0 when it could not make one); empty until the first
_last: dict[str, int] = {}


class _MallInfo2(ctypes.Structure):  # glibc 2.33+ (struct mallinfo2, malloc.h)
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def heap_range() -> tuple[int, int] | None:
    """The process's brk heap, [start, end), from /proc/self/maps (None without one)."""
    return _mapping(lambda start, end, line: line.rstrip().endswith("[heap]"))


def _mapping(wanted: Callable[[int, int, str], bool]) -> tuple[int, int] | None:
    """The first mapping of /proc/self/maps for which ``wanted(start, end, line)`` holds."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            start, end = (int(v, 16) for v in line.split()[0].split("-"))
            if wanted(start, end, line):
                return start, end
    return None


def pretouch() -> dict[str, Any]:
    """Leave the heap's top at least a headroom long, then fault every page of the heap and
    of its top in (the contents stay as they are). Untimed: before a case's timed rounds.
    Returns what was done, or why nothing was (not Linux and glibc, or a kernel before 5.14).

    The top is not always inside the brk heap: once something is mapped right after the
    heap (a JIT's code, say), glibc continues the main arena in mapped memory elsewhere. It
    is found as the start of a block larger than every free chunk (malloc_info), which only
    the top can serve."""
    if not sys.platform.startswith("linux"):
        return {"pretouched": False, "why": "not Linux"}
    libc = _glibc()
    if libc is None:
        return {"pretouched": False, "why": "the C library is not glibc 2.33+ (mallinfo2)"}
    heap = heap_range()
    if heap is None:
        return {"pretouched": False, "why": "no brk heap in /proc/self/maps"}
    info = libc.mallinfo2()  # arena: all the main arena has taken, in the brk heap or not
    headroom = max(HEADROOM_MIN, min(HEADROOM_MAX, info.arena // HEADROOM_SHARE))
    size = max(_largest_free(libc) + PAGE, headroom)  # no free chunk can serve it: the top does
    grow = max(0, size - info.keepcost)
    facts: dict[str, Any] = {"pretouched": True}
    if grow > GROW_MAX:  # the memory it would take: faults past the top show
        facts["headroom"] = (f"not made: the heap would have grown by {grow / 2**20:.0f} MB, "
                             f"more than {GROW_MAX / 2**20:.0f} MB")
        top = None
    else:
        block = libc.malloc(size)
        if not block:
            return {"pretouched": False, "why": f"no memory for a {size >> 20} MB headroom"}
        top = (block, block + size + libc.mallinfo2().keepcost)  # the top, once it is freed
        error = _populate(libc, *top)
        libc.free(block)
        if error:
            return {"pretouched": False, "why": error}
    heap = heap_range()
    assert heap is not None
    error = _populate(libc, *heap)
    if not error and top is not None and not heap[0] <= top[0] < heap[1]:
        # the heap continues in mapped memory, in one or more blocks that the kernel merges
        # into one mapping (mmap places each below the last): all of that mapping, unless it
        # holds far more than the arena's part (other anonymous memory it merged with)
        outside = libc.mallinfo2().arena - (heap[1] - heap[0])
        region = _mapping(lambda start, end, line: start <= top[0] < end)
        if region is not None and region[1] - region[0] - outside <= GROW_MAX:
            error = _populate(libc, *region)
        else:
            facts["mapped"] = "only the top faulted in: the mapping holding it is more than " \
                              f"{GROW_MAX / 2**20:.0f} MB larger than the arena's part"
    if error:
        return {"pretouched": False, "why": error}
    _last.update(arena=libc.mallinfo2().arena, headroom=0 if top is None else headroom)
    facts.update({"heap_mb": round((heap[1] - heap[0]) / 2**20, 1),
                  "top_mb": round(libc.mallinfo2().keepcost / 2**20, 1),
                  "top_in_heap": None if top is None else heap[0] <= top[0] < heap[1]})
    return facts


def pretouch_again() -> dict[str, Any] | None:
    """Before a timed turn: pre-touch again if the heap changed since this process's last
    pre-touch in a way a step would pay for, else None (one mallinfo2 call). It changed if the
    heap grew (pages no pre-touch reached) or its top is shorter than the headroom that
    pre-touch left (another case's build or rounds took it since: the next step that needs
    more memory grows the heap while timed). Cases are prepared, then timed in turns, so the
    cases prepared after a case, and their rounds, use the top its pre-touch left. None also in
    a process that never pre-touched (a session that times nothing)."""
    if not _last:
        return None
    libc = _glibc()
    info = libc.mallinfo2()
    if info.arena <= _last["arena"] and info.keepcost >= _last["headroom"]:
        return None
    return pretouch()


def _populate(libc: Any, start: int, end: int) -> str:
    """Fault [start, end) in, page-aligned outwards, contents unchanged; an error or ""."""
    first, last = start & ~(PAGE - 1), (end + PAGE - 1) & ~(PAGE - 1)
    if libc.madvise(first, last - first, MADV_POPULATE_WRITE) == 0:
        return ""
    code = ctypes.get_errno()
    return ("the kernel has no MADV_POPULATE_WRITE (Linux 5.14+)" if code == errno.EINVAL
            else f"madvise failed: {errno.errorcode.get(code, code)}")


def _largest_free(libc: Any) -> int:
    """The largest free chunk of the main arena (the only one: MALLOC_ARENA_MAX=1), from
    malloc_info's report of its bins (the top is not in them)."""
    buf, length = ctypes.c_char_p(), ctypes.c_size_t()
    stream = libc.open_memstream(ctypes.byref(buf), ctypes.byref(length))
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    report = ctypes.string_at(buf, length.value)
    libc.free(ctypes.cast(buf, ctypes.c_void_p))
    heap = ElementTree.fromstring(report).find("heap")
    sizes = heap.find("sizes") if heap is not None else None
    return max((int(e.get("to", "0")) for e in (sizes if sizes is not None else ())),
               default=0)


@functools.cache
def _glibc() -> Any:
    """The C library with the prototypes the pre-touch calls, or None when it is not glibc
    2.33+ (no mallinfo2 or malloc_info)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "mallinfo2") or not hasattr(libc, "malloc_info"):
        return None
    libc.mallinfo2.restype = _MallInfo2
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.restype, libc.free.argtypes = None, [ctypes.c_void_p]
    libc.madvise.restype = ctypes.c_int
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.open_memstream.restype = ctypes.c_void_p
    libc.open_memstream.argtypes = [ctypes.POINTER(ctypes.c_char_p),
                                    ctypes.POINTER(ctypes.c_size_t)]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    return libc
