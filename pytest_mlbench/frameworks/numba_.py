"""Numba: hand-written gradients compiled with numba.njit (nopython mode), CPU only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_mlbench.errors import Unsupported
from pytest_mlbench.frameworks.base import Compiled, no_donation, package_versions
from pytest_mlbench.frameworks.numpy_ import NumpyAdapter


class NumbaAdapter(NumpyAdapter):
    name = "numba"
    modules = ("numba",)
    extra = "numba"
    variants = ("jit",)

    def __init__(self) -> None:
        super().__init__()
        self._compiles = 0
        self._jitted: list[Any] = []  # the dispatchers compile() made, for their cache counts
        from numba.core import event

        class Listener(event.Listener):  # numba announces every compilation as an event
            def on_start(listener, ev: Any) -> None:  # noqa: N805
                pass

            def on_end(listener, ev: Any) -> None:  # noqa: N805
                self._compiles += 1

        event.install_listener("numba:compile", Listener())

    def set_threads(self, threads: int) -> None:
        import numba

        super().set_threads(threads)  # numba's np.dot calls BLAS through scipy
        numba.set_num_threads(threads)

    def threads(self) -> dict[str, Any]:
        import numba

        return {**super().threads(), "numba.get_num_threads": numba.get_num_threads()}

    def compile_events(self) -> int:
        """Compilations, and signatures loaded from numba's cache instead (a load while timed
        is a new signature too)."""
        return self._compiles + self.persistent_cache()[0]

    def persistent_cache(self) -> tuple[int, int]:
        """Signatures of the compiled functions numba's cache served, and those it compiled,
        so far."""
        return (sum(sum(d.stats.cache_hits.values()) for d in self._jitted),
                sum(sum(d.stats.cache_misses.values()) for d in self._jitted))

    def compile(self, fn: Callable[..., Any], variant: str,
                donate: tuple[int, ...] = ()) -> Compiled:
        no_donation(self.name, donate)
        if variant != "jit":
            raise Unsupported(f"numba has no {variant} variant (plain NumPy is the eager one)")
        import numba

        # cache=True: in the NUMBA_CACHE_DIR the campaign sets (the compile cache kept across
        # runs, or the session's own), so what one process compiled the next loads; functions
        # numba cannot cache compile as usual
        jitted = numba.njit(fn, cache=True, fastmath=False)
        self._jitted.append(jitted)
        # One signature per compilation: a new one during timing is a recompile.
        return Compiled(jitted, variant, traces=lambda: len(jitted.signatures),
                        name=getattr(fn, "__name__", ""))

    def warm_up_compiler(self, device: str = "cpu") -> None:
        """LLVM's start-up in this process, outside every case's compile time."""
        import numba

        numba.njit(lambda x: x * 2.0 + 1.0)(1.0)

    def versions(self) -> dict[str, str]:
        return package_versions("numba", "llvmlite", "numpy")

    def peak_memory(self, run: Callable[[], None]) -> tuple[int, str] | None:
        return None  # nopython code allocates through numba's NRT, which tracemalloc cannot see
