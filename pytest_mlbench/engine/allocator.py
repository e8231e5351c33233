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
which is what a benchmark worker wants. The faults a timed round takes are still counted
(``minor_faults``) and reported per step with every result, so a case that pays the OS for
memory while timed shows it.
"""

from __future__ import annotations

import resource

ENV = {
    "MALLOC_ARENA_MAX": "1",  # every thread allocates from the main heap (no 64 MiB cap)
    "MALLOC_MMAP_MAX_": "0",  # no block is ever mapped (and unmapped) on its own
    "MALLOC_TRIM_THRESHOLD_": str(2**62),  # the heap top is never given back
    "MALLOC_TOP_PAD_": str(16 * 2**20),  # grow the heap 16 MiB at a time
}


def minor_faults() -> int:
    """Minor page faults this process has taken so far (memory the OS had to map in)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)
