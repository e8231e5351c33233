"""torch's xla mode: the torch implementations on torch_xla's XLA device (PyTorch/XLA).

Made by the torch adapter for a case whose variant's mode is ``xla`` (``TorchAdapter.for_mode``),
so one torch worker serves eager, torch.compile and xla cases, sharing torch's own settings,
setters watched and counts. What differs from torch's other modes:

- **Where the tensors live.** Parameters, optimizer slots and batches are on
  ``torch_xla.device()`` (the PJRT CPU client: ``PJRT_DEVICE=CPU``), so every op a step makes is
  recorded lazily into a graph of XLA operations, not run.
- **Compiled by the graph cut.** The step runs under ``torch_xla.compile(step,
  full_graph=True)``, torch_xla's own wrapper: pending work is cut before the step, the step's
  Python runs (tracing), and ``torch_xla.sync()`` at its end compiles the graph (once: later
  steps trace the same graph, hash it and find the executable in torch_xla's in-memory cache)
  and launches it. ``full_graph`` makes any execution inside the step an error: a step that
  reads a value on the host mid-step (``.item()``, a Python branch on a tensor) is cut into
  several graphs, which the mode is not. A step that copies device data to the host
  (``TransferFromDeviceTime``) fails too: the xla mode runs the step on the device.
- **Compilations** are torch_xla's ``UncachedCompile`` counter: the step's must rise on its
  first call (the mode was applied), and nothing may rise while timed (a recompile).
- **A batch** is selected on the device and made device data by its own small graph (a cut of
  its own, as torch_xla's device loaders hand a step its batch), so that every step's graph
  reads device data, the checked steps' and the timed ones' alike.
- **Threads.** XLA's CPU client sizes its pools from ``NPROC`` (XLA's cpu_client.cc), else
  from the affinity mask as it starts; the client starts with the first xla case, when the
  worker may be free on every core, so the adapter sets ``NPROC`` to the session's threads
  before it starts and then counts the threads a matmul keeps busy (torch_xla names none of
  them): more than the session's threads fails the case.
- **Precision.** float32 matmuls at XLA's ``highest`` precision
  (``torch_xla._XLAC._xla_set_mat_mul_precision``, what ``torch_xla.backends.
  set_mat_mul_precision`` calls), read back and watched like torch's own setters; torch_xla
  already keeps XLA's CPU fast math off (``xla_cpu_enable_fast_math=false``).
- **No persistent compile cache**: torch_xla's (``XLA_PERSISTENT_CACHE_PATH``) stays off, even
  where the user's environment sets it, so every torch-xla compile figure is cold.
- **The CPU only**: XLA:CUDA was deprecated in torch-xla 2.8 and removed in 2.9 (its CUDA
  plugin, pytorch/xla#9597 and #9598), so a gpu case skips saying so.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from pytest_mlbench import threads as threading_
from pytest_mlbench.errors import PolicyNotApplied, StepCheck, Unavailable, Unsupported
from pytest_mlbench.frameworks.base import Compiled, no_donation, package_versions
from pytest_mlbench.frameworks.torch_ import TorchAdapter
from pytest_mlbench.precision import Policy

MATMUL = "highest"  # XLA's full float32 precision (torch_xla's default is "default")
COMPILES = "UncachedCompile"  # torch_xla's counter of XLA compilations (in-memory cache misses)
HOST_COPIES = "TransferFromDeviceTime"  # its metric of copies from the device to the host
NO_GPU = ("torch's xla mode has no GPU here: XLA:CUDA was deprecated in torch-xla 2.8 and "
          "removed in 2.9 (pytorch/xla#9597, #9598); the last CUDA build is torch-xla 2.8's "
          "torch_xla_cuda_plugin, from Google's wheel bucket, not PyPI")
PROBE_S = 0.2  # seconds of matmuls over which the XLA pool's busy threads are counted
UNEXPECTED = "Unexpected execution happens inside the compiled function"


class HostCopy(StepCheck):
    """An xla step read a value on the host, or copied data there: the case fails."""


class TorchXla(TorchAdapter):
    """The torch adapter for xla cases; ``torch`` is the worker's own torch adapter, whose
    settings watch, thread count and compile counts this one shares."""

    variants: tuple[str, ...] = ("xla",)

    def __init__(self, torch_adapter: TorchAdapter) -> None:
        # not TorchAdapter.__init__: it would make a second inductor cache and settings watch
        self.torch = torch_adapter
        self._watch = torch_adapter._watch
        self._device: Any = None
        self._limit: Any = None
        self._xla: Any = None
        self.pool: int | None = None  # threads the XLA CPU pool kept busy (_start_client)
        self.broken: str | None = None  # why torch_xla did not import (start), for setup

    # -- the device ---------------------------------------------------------------------------

    def start(self) -> None:
        """As the worker starts, before any case (TorchAdapter.set_threads): torch_xla and its
        device, so that torch's autograd engine knows the XLA device at its first backward.
        A torch_xla that does not import (built against another torch: "undefined symbol")
        leaves the worker's other modes running; its xla cases skip saying why (setup)."""
        try:
            self._device = self._import().device()
        except Unavailable as exc:
            self.broken = str(exc)
            return
        self._start_client()

    def _import(self) -> Any:
        """torch_xla, imported for the CPU client, its thread pool sized by ``NPROC``, and no
        persistent compile cache (each read when the client starts)."""
        if self.broken is not None:
            raise Unavailable(self.broken)
        if self._xla is not None:
            return self._xla
        os.environ["PJRT_DEVICE"] = "CPU"
        os.environ.pop("XLA_PERSISTENT_CACHE_PATH", None)
        threads = self.torch._threads
        if threads is not None:
            os.environ["NPROC"] = str(threads)
        try:
            import torch_xla
            import torch_xla.debug.metrics  # noqa: F401 (the counters read below)
        except ImportError as exc:
            how = TorchAdapter.modes_need["xla"][1]
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise Unavailable(f"torch's xla mode needs a torch_xla that imports ({first}): "
                              f"{how}") from exc
        self._xla = torch_xla
        return torch_xla

    def devices(self) -> dict[str, str]:
        return {"cpu": "host CPU through torch_xla (PJRT_DEVICE=CPU)"}

    def setup(self, device: str, policy: Policy, seed: int) -> None:
        if device != "cpu":
            raise Unsupported(NO_GPU if device == "gpu" else
                              f"torch's xla mode runs on the CPU here, not on a {device}")
        xla = self._import()
        self.torch.setup("cpu", policy, seed)  # torch's own policy, seed and settings watch
        self._device = xla.device()
        self._start_client()  # started with the worker (start), unless set up without it
        self._assert_pool()
        self._watch_precision_setter()
        with self._watch.paused():  # the adapter's own setting, not the case's
            xla._XLAC._xla_set_mat_mul_precision(MATMUL)
        xla.manual_seed(seed)
        self.verify_policy(policy)

    def _watch_precision_setter(self) -> None:
        """Record every call of XLA's matmul precision setter (torch_xla.backends calls it
        through the module, so the wrapper sees the implementation's calls too)."""
        xlac = self._xla._XLAC
        original = xlac._xla_set_mat_mul_precision
        if getattr(original, "mlbench_watched", False):
            return

        def watched(value: Any) -> Any:
            self._watch.record(f"torch_xla._XLAC._xla_set_mat_mul_precision({value!r})")
            return original(value)

        watched.mlbench_watched = True  # type: ignore[attr-defined]
        xlac._xla_set_mat_mul_precision = watched

    def verify_policy(self, policy: Policy) -> None:
        found = self._xla._XLAC._xla_get_mat_mul_precision()
        if found != MATMUL:
            raise PolicyNotApplied(f"torch_xla's matmul precision is {found!r}, the "
                                   f"{policy.name} policy needs {MATMUL!r} (full float32)")
        self.torch.verify_policy(policy)

    def _start_client(self) -> None:
        """Once a worker: start XLA's CPU client (NPROC set by _import), then count the
        threads other than this one that a few matmuls keep busy, which may be no more than
        the session's threads (_assert_pool: its pool's threads have no names to count)."""
        if self.pool is not None:
            return
        import torch

        x = torch.ones(512, 512, device=self._device)
        self.sync(self._cut(x @ x))  # the client, and XLA's compiler, started here
        main = threading.get_native_id()
        before, start = threading_.cpu_seconds(), time.perf_counter()
        while time.perf_counter() - start < PROBE_S:
            self.sync(self._cut(x @ x))
        busy = threading_.busy_threads(before, threading_.cpu_seconds(),
                                       time.perf_counter() - start)
        self.pool = len([t for t in busy if t != main])

    def _assert_pool(self) -> None:
        """Each xla case: the pool counted as the client started held the session's threads."""
        threads = self.torch._threads
        if threads is not None and self.pool is not None and self.pool > threads:
            raise AssertionError(f"thread counts differ from --mlbench-threads={threads}: "
                                 f"xla_cpu_pool={self.pool} (threads busy in a matmul on "
                                 f"torch_xla's CPU client, NPROC={os.environ.get('NPROC')})")

    def _cut(self, value: Any) -> Any:
        self._xla.sync()
        return value

    # -- compiling ----------------------------------------------------------------------------

    def compile_events(self) -> int:
        """torch's (dynamo frames, TorchScript) and XLA's compilations in this process."""
        return self.torch.compile_events() + self._compiles()

    def _compiles(self) -> int:
        if self._xla is None:  # before setup imports torch_xla (a case's phases count from build)
            return 0
        return int(self._xla.debug.metrics.counter_value(COMPILES) or 0)

    def _host_copies(self) -> int:
        found = self._xla.debug.metrics.metric_data(HOST_COPIES)
        return int(found[0]) if found else 0

    def persistent_cache(self) -> tuple[int, int] | None:  # type: ignore[override]
        """None: torch_xla's persistent cache stays off (every compile figure is cold)."""
        return None

    def compile(self, fn: Callable[..., Any], variant: str,
                donate: tuple[int, ...] = ()) -> Compiled:
        no_donation(self.name, donate)
        if variant != "xla":
            raise Unsupported(f"torch's xla adapter runs the xla mode only, not {variant}")
        name = getattr(fn, "__name__", "step")
        graph = self._xla.compile(fn, full_graph=True, name=name)
        own = [0]  # the compilations this function's calls made

        def on_device(*args: Any, **kwargs: Any) -> Any:
            compiles, copies = self._compiles(), self._host_copies()
            try:
                out = graph(*args, **kwargs)
            except RuntimeError as exc:
                if UNEXPECTED not in str(exc):
                    raise
                raise HostCopy(f"{name} ran part of its graph before its end "
                               f"({str(exc).splitlines()[0]}): something read a value on the "
                               "host mid-step (.item(), .cpu(), a Python branch on a tensor), "
                               "cutting the step into several XLA graphs; the xla mode "
                               "compiles the whole step as one") from None
            own[0] += self._compiles() - compiles
            moved = self._host_copies() - copies
            if moved:
                raise HostCopy(f"{name} copied {moved} tensor(s) from the XLA "
                               "device to the host (torch_xla's TransferFromDeviceTime): the "
                               "xla mode runs the step on the device, its results left there")
            return out

        return Compiled(on_device, variant, traces=lambda: own[0], name=name)

    def parallel(self, case: Any, loss: Callable[..., Any], dp: dict[str, Any]) -> Any:
        raise Unsupported("torch's xla mode runs on one device (the parallel layouts are "
                          "torch's own engines, on gloo)")

    # -- arrays -------------------------------------------------------------------------------

    def asarray(self, array: np.ndarray) -> Any:
        """To the XLA device as device data (a bfloat16 array cast on the host first, so
        that no conversion is left pending in the graph)."""
        import torch

        if str(array.dtype) == "bfloat16":
            host = torch.from_numpy(array.astype(np.float32)).to(torch.bfloat16)
        else:
            host = torch.from_numpy(np.array(array, copy=True))
        return host.to(self._device)

    def to_numpy(self, value: Any) -> np.ndarray:
        """A host copy; a tensor whose graph has not run yet (the checks' loss and gradients)
        is computed first, with every other pending one, as one graph."""
        if self._pending(value):
            self._xla.sync()
        return super().to_numpy(value.detach().cpu())

    def _pending(self, value: Any) -> bool:
        return bool(value.device.type == "xla"
                    and self._xla._XLAC._check_tensor_need_materialization([value])[0])

    def take(self, value: Any, rows: np.ndarray) -> Any:
        """The rows selected on the device, only the indices sent from the host, and computed
        as a graph of its own: the step reads its batch as device data."""
        import torch

        index = torch.from_numpy(rows).to(self._device)
        batch = value.index_select(0, index)
        # this tensor's graph alone: a sync of every pending tensor would take in whatever
        # else is pending (a trainer's parameters still to be copied, at build) and make
        # the selection another graph than the timed steps' (compiled while timed)
        self._xla._XLAC._xla_sync_multi([batch], devices=[], wait=False)
        return batch

    def on_device(self, value: Any) -> bool:
        """On the XLA device and computed (a tensor still pending is work owed). A 0-d tensor
        on the host passes: torch.optim keeps Adam's step count there for XLA parameters, as
        for CUDA ones, a number in tensor form."""
        if value.device.type == "cpu" and value.dim() == 0:
            return True
        return not self._pending(value) and value.device.type == "xla"

    def sync(self, value: Any) -> None:
        """Until every graph launched on the device has run (torch_xla.sync launches a step's
        graph without waiting)."""
        self._xla._XLAC._xla_wait_device_ops(devices=[])

    def peak_memory(self, run: Callable[[], None]) -> None:
        """None: XLA's CPU client keeps no allocation statistics."""
        return None

    def versions(self) -> dict[str, str]:
        return package_versions("torch", "torch-xla")
