"""The workers' allocator (engine/allocator.py): a large temporary allocated again and again on
a framework's pool thread is reused, not mapped and faulted in afresh each time. Without the
settings glibc maps it on every allocation (a per-thread arena cannot hold it), which is what
made JAX's ViT step 60% slower and TensorFlow's bimodal."""

from __future__ import annotations

import gc
import json
import mmap
import os
import subprocess
import sys
import weakref

import pytest

from pytest_mlbench import threads
from pytest_mlbench.engine import allocator
from pytest_mlbench.engine.framework_worker import release
from pytest_mlbench.engine.pools import FrameworkPool, PoolKey

glibc = pytest.mark.skipif(not sys.platform.startswith("linux"),
                           reason="the settings are glibc malloc's")

# a step's temporaries, as XLA allocates them: one large buffer on a pool thread, written,
# freed; the faults of each step after the first
STEP = """
import ctypes, threading, resource
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
SIZE = 68_000_000
faults = []
def step():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    buf = libc.malloc(SIZE)  # as XLA's AlignedMalloc does, through glibc
    ctypes.memset(buf, 1, SIZE)
    libc.free(buf)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
for _ in range(6):
    t = threading.Thread(target=step)
    t.start()
    t.join()
print(max(faults[1:]))
"""


def faults_per_step(env: dict[str, str]) -> int:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    done = subprocess.run([sys.executable, "-c", STEP], env={**clean, **env},
                          capture_output=True, text=True, check=True)
    return int(done.stdout.split()[-1])


PAGES = 68_000_000 // 4096


@glibc
def test_a_large_temporary_on_a_pool_thread_is_reused_not_faulted_in_each_step() -> None:
    assert faults_per_step({}) > PAGES // 2  # glibc's defaults: mapped afresh every step
    assert faults_per_step(dict(allocator.ENV)) < PAGES // 20


@glibc
@pytest.mark.parametrize("setting", ["MALLOC_ARENA_MAX", "MALLOC_MMAP_MAX_"])
def test_either_setting_alone_is_not_enough(setting: str) -> None:
    """A thread's arena maps what it cannot hold whatever the mmap limit, and the main heap
    maps what is above the threshold: both settings are needed."""
    without = {k: v for k, v in allocator.ENV.items() if k != setting}
    assert faults_per_step(without) > PAGES // 2


def test_workers_start_with_the_allocator_settings() -> None:
    pool = FrameworkPool(PoolKey("numpy", 1), "x:y", 1, "off", "")
    spec_env: dict[str, str] = {}

    class Spy:
        def __init__(self, spec: object, **_: object) -> None:
            spec_env.update(spec.env)  # type: ignore[attr-defined]

        def spawn(self) -> None:
            pass

    import pytest_mlbench.engine.pools as workers

    original = workers.Pool
    workers.Pool = Spy  # type: ignore[assignment,misc]
    try:
        pool.spawn()
    finally:
        workers.Pool = original  # type: ignore[misc]
    for key, value in allocator.ENV.items():
        assert spec_env[key] == value
    assert spec_env["OMP_NUM_THREADS"] == "1" and threads.environment(1)["OMP_NUM_THREADS"] == "1"


def test_minor_faults_counts_this_process() -> None:
    # an anonymous mapping: fresh pages whatever the heap holds (a bytearray this large can
    # come from a heap whose pages a long session has already touched)
    block = mmap.mmap(-1, 8 * 2**20)  # 8 MiB
    before = allocator.minor_faults()
    block[::4096] = b"x" * len(block[::4096])
    assert allocator.minor_faults() - before > 1000
    block.close()


# a worker's heap after its builds and checks: a block it allocated and freed without
# touching it (pages a later step is the first to write) below a block still in use, then
# two steps whose temporaries land there and past it, in the top's headroom; their faults,
# with or without the pre-touch
GROWTH = """
import ctypes, json, sys
from pytest_mlbench.engine import allocator
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[2] == "blocked":  # something mapped right after the heap (a JIT's code, say):
    libc.sbrk.restype, libc.sbrk.argtypes = ctypes.c_void_p, [ctypes.c_ssize_t]
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    end = libc.sbrk(0)  # the heap cannot grow: glibc continues it in mapped memory
    assert libc.mmap(end, 4096, 1, 0x22 | 0x100000, -1, 0) == end  # FIXED_NOREPLACE
built = libc.malloc(48 * 2**20)
kept = libc.malloc(20 * 2**20)  # in use above it (past the brk heap): not part of the top
libc.free(built)
facts = allocator.pretouch() if sys.argv[1] == "pretouch" else {}
faults = []
for size in (32 * 2**20, 24 * 2**20):  # in the untouched block, then past it
    before = allocator.minor_faults()
    step = libc.malloc(size)
    ctypes.memset(step, 1, size)
    faults.append(allocator.minor_faults() - before)
print(json.dumps({"faults": faults, "facts": facts}))
"""


def step_faults(mode: str, heap: str = "contiguous") -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    done = subprocess.run([sys.executable, "-c", GROWTH, mode, heap],
                          env={**clean, **allocator.ENV}, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


@glibc
@pytest.mark.parametrize("heap", ["contiguous", "blocked"])
def test_a_pretouched_heap_gives_a_steps_growth_memory_already_mapped(heap: str) -> None:
    """Untouched pages inside the heap and growth past its top both fault while timed unless
    the heap was pre-touched with headroom (allocator.pretouch); also when the heap could
    not grow in place and glibc continued it in mapped memory, as in a worker whose JIT
    mapped code right after the heap: there the untouched block is in that mapped memory,
    below the top."""
    pages = 24 * 2**20 // 4096
    plain = step_faults("plain", heap)
    assert all(f > pages // 2 for f in plain["faults"]), plain  # type: ignore[attr-defined]
    touched = step_faults("pretouch", heap)
    facts = touched["facts"]
    assert facts["top_in_heap"] == (heap == "contiguous"), facts  # type: ignore[index]
    if not facts["pretouched"]:  # type: ignore[index]
        pytest.skip(f"no pre-touch here: {facts['why']}")  # type: ignore[index]
    assert facts["top_mb"] >= allocator.HEADROOM_MIN / 2**20  # type: ignore[index]
    assert all(f < pages // 20 for f in touched["faults"]), touched  # type: ignore[attr-defined]


@glibc
def test_a_heap_with_too_much_free_memory_in_pieces_is_touched_without_headroom(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Making the headroom takes a block larger than all free memory together; past
    GROW_MAX the pre-touch leaves the heap's size alone and says so."""
    monkeypatch.setattr(allocator, "HEADROOM_MIN", 2**40)  # never already there
    monkeypatch.setattr(allocator, "GROW_MAX", 0)
    facts = allocator.pretouch()
    if not facts["pretouched"]:
        pytest.skip(f"no pre-touch here: {facts['why']}")
    assert "not made" in facts["headroom"] and facts["top_mb"] < 2**20


# a worker after one case's pre-touch: another case's build takes most of the top, then a
# step needs more memory than is left; the pre-touch's check before the turn, or not
AGAIN = """
import ctypes, json, sys
from pytest_mlbench.engine import allocator
libc = allocator._glibc()
never = allocator.pretouch_again()  # no pre-touch in this process yet
first = allocator.pretouch()
unchanged = allocator.pretouch_again()
kept = libc.malloc(libc.mallinfo2().keepcost - 2**20)  # another case's build
again = allocator.pretouch_again() if sys.argv[1] == "again" else None
before = allocator.minor_faults()
step = libc.malloc(32 * 2**20)
ctypes.memset(step, 1, 32 * 2**20)
print(json.dumps({"never": never, "first": first, "unchanged": unchanged, "again": again,
                  "faults": allocator.minor_faults() - before}))
"""


@glibc
def test_a_top_used_up_after_the_pretouch_is_pretouched_again_before_the_turn() -> None:
    """A worker prepares its cases, then times them in turns: a case built after another's
    pre-touch takes the top it left, and the first case's next step grows the heap while
    timed, unless the turn first checks the heap and pre-touches again (allocator.
    pretouch_again). The check does nothing when nothing changed, or in a process that never
    pre-touched."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    found = {}
    for mode in ("plain", "again"):
        done = subprocess.run([sys.executable, "-c", AGAIN, mode], env={**clean, **allocator.ENV},
                              capture_output=True, text=True, check=True)
        found[mode] = json.loads(done.stdout.splitlines()[-1])
    if not found["plain"]["first"]["pretouched"]:
        pytest.skip(f"no pre-touch here: {found['plain']['first']['why']}")
    pages = 32 * 2**20 // 4096
    assert found["plain"]["never"] is None and found["plain"]["unchanged"] is None, found
    assert found["plain"]["faults"] > pages // 2, found["plain"]
    assert (found["again"]["again"] or {}).get("pretouched"), found["again"]
    assert found["again"]["faults"] < pages // 20, found["again"]


# -- a closed case's garbage, and the collector's cost between cases ----------------------------

class Held:
    """A case's object graph in miniature: a cycle holding a buffer."""

    def __init__(self) -> None:
        self.me = self
        self.buffer = bytearray(1_000_000)


def tracked(obj: object) -> bool:
    """Still seen by the collector (not frozen)."""
    return any(o is obj for o in gc.get_objects())


def test_a_closed_case_is_collected_even_after_another_case_closed_before_it() -> None:
    """worker.release collects what a closed case leaves and freezes the survivors only when no
    case is open: with a case open, freezing would keep it from ever being collected."""
    first, second = Held(), Held()
    alive = weakref.ref(first), weakref.ref(second)
    cases: dict[int, object] = {0: first, 1: second}
    del first, second
    try:
        release(cases, 0)
        assert alive[0]() is None and alive[1]() is not None
        assert tracked(alive[1]()), "a case still open was frozen"
        release(cases, 1)
        assert alive[1]() is None, "the second case survived its own close"
        assert gc.get_freeze_count() > 0, "nothing frozen with every case closed"
        assert tracked(Held()), "objects made later are not collected"
    finally:
        gc.unfreeze()
