"""The float64 autodiff oracle, run in a worker of its own (never beside a timed case).

A workload that gives only its model, ``forward(xp, params, data)`` and ``objective(xp,
outputs, data)`` written against the Python array API, gets its reference gradients, updates,
transforms and Jacobians from here: the same two functions evaluated with ``xp`` = jax.numpy
under x64 (backend "jax") or with torch float64 through array_api_compat (backend "torch").
Two independent autodiff systems, so the parent can cross-check them when both are installed;
the parent also verifies the oracle against finite differences of the NumPy forward.

A shape whose float64 reference a CPU cannot afford gets a worker configured ``dtype``
"float32" and ``device`` "gpu" (checking/reference.py): floating arrays computed at float32
on the device (matmuls at full float32, never TF32), integers kept, results back as float64.

Commands (payload: workload folder path, then arrays as float64 NumPy):
    value_and_grad  (path, params, data) -> (loss, grads)
    forward         (path, params, data) -> outputs
    jvp             (path, params, data, tangent) -> output tangent
    vjp             (path, params, data, cotangent) -> parameter cotangent
    hvp             (path, params, data, vector) -> Hessian of the objective times vector
    jacobian        (path, params, data) -> per-example d outputs / d inputs[input_keys[0]]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench.workloads import catalogue

Arrays = dict[str, np.ndarray]
# the floating dtype and device of this worker's arithmetic (Oracle sets them at start)
FLOAT: Any = np.float64
DEVICE = "cpu"


def _floating(array: np.ndarray) -> np.ndarray:
    """``array`` at FLOAT when it is floating (integer token ids and labels stay integers)."""
    return np.asarray(array, FLOAT) if np.issubdtype(np.asarray(array).dtype, np.floating) \
        else np.asarray(array)


class Oracle:
    def __init__(self, rank: int, world: int, config: dict[str, Any]) -> None:
        global FLOAT, DEVICE
        self.backend = config["backend"]
        FLOAT, DEVICE = np.dtype(config.get("dtype", "float64")), config.get("device", "cpu")
        if self.backend == "jax":
            import jax

            jax.config.update("jax_enable_x64", FLOAT == np.float64)
            jax.config.update("jax_default_matmul_precision", "highest")
        else:
            _torch_setup()
        self.specs: dict[str, Any] = {}

    def spec(self, path: str) -> Any:
        if path not in self.specs:
            self.specs[path] = catalogue.load_workload(Path(path))
        return self.specs[path]

    def __call__(self, command: str, payload: Any) -> Any:
        if command == "ping":
            return self.backend
        path, params, data, *rest = payload
        spec = self.spec(path)
        fn = getattr(JaxOps if self.backend == "jax" else TorchOps, command)
        try:
            return fn(spec, params, data, *rest)
        finally:
            if DEVICE == "gpu" and self.backend == "torch":
                import torch

                torch.cuda.empty_cache()  # the session's framework workers share the device

    def close(self) -> None:
        pass


def _first_input(spec: Any) -> str:
    return spec.input_keys[0]


def _torch_setup() -> None:
    """torch's float32 matmuls at float32 (no TF32); on a GPU every tensor the model makes
    (an arange, a mask) there too."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if DEVICE == "gpu":
        torch.set_default_device("cuda")


class JaxOps:
    """Each command one jax.jit-compiled pure function of (params, data, extra), cached per
    workload and command (jit caches the shapes): the checks ask for many points of one
    workload, and op-by-op float64 dispatch of a transformer costs seconds a call."""

    compiled: dict[tuple[int, str], Any] = {}

    @staticmethod
    def _in(tree: Arrays) -> Any:
        import jax.numpy as jnp

        return {k: jnp.asarray(_floating(v)) for k, v in tree.items()}

    @staticmethod
    def _out(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: np.asarray(v, np.float64) for k, v in value.items()}
        return np.asarray(value, np.float64)

    @classmethod
    def _run(cls, spec: Any, command: str, params: Arrays, data: Arrays, extra: Any = None,
             ) -> Any:
        import jax

        key = (id(spec), command)
        if key not in cls.compiled:
            cls.compiled[key] = jax.jit(getattr(cls, f"_{command}")(spec))
        if isinstance(extra, dict):
            extra = cls._in(extra)
        elif extra is not None:
            extra = jax.numpy.asarray(_floating(extra))
        return cls.compiled[key](cls._in(params), cls._in(data), extra)

    @staticmethod
    def _value_and_grad(spec: Any) -> Any:
        import jax
        import jax.numpy as jnp

        def value_and_grad(p: Any, d: Any, _: Any) -> Any:
            return jax.value_and_grad(lambda q: spec.objective(jnp, spec.forward(jnp, q, d), d))(p)

        return value_and_grad

    @staticmethod
    def _forward(spec: Any) -> Any:
        import jax.numpy as jnp

        return lambda p, d, _: spec.forward(jnp, p, d)

    @staticmethod
    def _jvp(spec: Any) -> Any:
        import jax
        import jax.numpy as jnp

        return lambda p, d, t: jax.jvp(lambda q: spec.forward(jnp, q, d), (p,), (t,))[1]

    @staticmethod
    def _vjp(spec: Any) -> Any:
        import jax
        import jax.numpy as jnp

        return lambda p, d, u: jax.vjp(lambda q: spec.forward(jnp, q, d), p)[1](u)[0]

    @staticmethod
    def _hvp(spec: Any) -> Any:
        import jax
        import jax.numpy as jnp

        def hvp(p: Any, d: Any, v: Any) -> Any:
            grad = jax.grad(lambda q: spec.objective(jnp, spec.forward(jnp, q, d), d))
            return jax.jvp(grad, (p,), (v,))[1]

        return hvp

    @staticmethod
    def _jacobian(spec: Any) -> Any:
        import jax
        import jax.numpy as jnp

        key = _first_input(spec)

        def jacobian(p: Any, d: Any, _: Any) -> Any:
            def summed(x: Any) -> Any:  # examples are independent: d sum_b out_b / dx_b
                return jnp.sum(spec.forward(jnp, p, {**d, key: x}), axis=0)

            jac = jax.jacrev(summed)(d[key])  # [*O, B, *I]
            return jnp.moveaxis(jac, jac.ndim - d[key].ndim, 0)

        return jacobian

    @classmethod
    def value_and_grad(cls, spec: Any, params: Arrays, data: Arrays) -> Any:
        value, grads = cls._run(spec, "value_and_grad", params, data)
        return float(value), cls._out(grads)

    @classmethod
    def forward(cls, spec: Any, params: Arrays, data: Arrays) -> Any:
        return cls._out(cls._run(spec, "forward", params, data))

    @classmethod
    def jvp(cls, spec: Any, params: Arrays, data: Arrays, tangent: Arrays) -> Any:
        return cls._out(cls._run(spec, "jvp", params, data, tangent))

    @classmethod
    def vjp(cls, spec: Any, params: Arrays, data: Arrays, cotangent: np.ndarray) -> Any:
        return cls._out(cls._run(spec, "vjp", params, data, cotangent))

    @classmethod
    def hvp(cls, spec: Any, params: Arrays, data: Arrays, vector: Arrays) -> Any:
        return cls._out(cls._run(spec, "hvp", params, data, vector))

    @classmethod
    def jacobian(cls, spec: Any, params: Arrays, data: Arrays) -> Any:
        return cls._out(cls._run(spec, "jacobian", params, data))


class TorchOps:
    @staticmethod
    def _xp() -> Any:
        import array_api_compat.torch as xp

        return xp

    @staticmethod
    def _in(tree: Arrays) -> Any:
        import torch

        device = "cuda" if DEVICE == "gpu" else "cpu"
        return {k: torch.from_numpy(np.array(_floating(v), copy=True)).to(device)
                for k, v in tree.items()}

    @staticmethod
    def _out(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: v.detach().cpu().numpy().astype(np.float64) for k, v in value.items()}
        return value.detach().cpu().numpy().astype(np.float64)

    @classmethod
    def _fns(cls, spec: Any, data: Arrays) -> tuple[Any, Any]:
        xp, d = cls._xp(), cls._in(data)
        return (lambda p: spec.forward(xp, p, d),
                lambda p: spec.objective(xp, spec.forward(xp, p, d), d))

    @classmethod
    def value_and_grad(cls, spec: Any, params: Arrays, data: Arrays) -> Any:
        import torch

        _, loss = cls._fns(spec, data)
        grads, value = torch.func.grad_and_value(loss)(cls._in(params))
        return float(value), cls._out(grads)

    @classmethod
    def forward(cls, spec: Any, params: Arrays, data: Arrays) -> Any:
        forward, _ = cls._fns(spec, data)
        return cls._out(forward(cls._in(params)))

    @classmethod
    def jvp(cls, spec: Any, params: Arrays, data: Arrays, tangent: Arrays) -> Any:
        import torch

        forward, _ = cls._fns(spec, data)
        return cls._out(torch.func.jvp(forward, (cls._in(params),), (cls._in(tangent),))[1])

    @classmethod
    def vjp(cls, spec: Any, params: Arrays, data: Arrays, cotangent: np.ndarray) -> Any:
        import torch

        forward, _ = cls._fns(spec, data)
        _, pullback = torch.func.vjp(forward, cls._in(params))  # type: ignore[misc]
        return cls._out(pullback(cls._in({"u": cotangent})["u"])[0])

    @classmethod
    def hvp(cls, spec: Any, params: Arrays, data: Arrays, vector: Arrays) -> Any:
        import torch

        _, loss = cls._fns(spec, data)
        grad = torch.func.grad(loss)
        return cls._out(torch.func.jvp(grad, (cls._in(params),), (cls._in(vector),))[1])

    @classmethod
    def jacobian(cls, spec: Any, params: Arrays, data: Arrays) -> Any:
        import torch

        xp, key, p, d = cls._xp(), _first_input(spec), cls._in(params), cls._in(data)

        def summed(x: Any) -> Any:
            return torch.sum(spec.forward(xp, p, {**d, key: x}), dim=0)

        jac = torch.func.jacrev(summed)(d[key])
        return cls._out(torch.movedim(jac, jac.ndim - d[key].ndim, 0))


def build(rank: int, world: int, config: dict[str, Any]) -> Oracle:
    return Oracle(rank, world, config)
