"""The float64 reference every implementation is checked against, in the parent process.

Where a workload has a hand-derived gradient (``loss`` and ``grad`` in NumPy) that is the
reference, the strongest check there is. Otherwise gradients, transforms and Jacobians come
from the autodiff oracle (engine/oracle_worker.py: JAX x64, else torch float64, each in a worker of
its own), which is first verified against finite differences of the NumPy forward along random
directions and, when both oracles are installed, against the other one. Training references
apply the spec's optimizer (workloads/optim.py) in float64 and round parameters and state to the case's
dtype after each step, as storage at that dtype does.

A shape whose float64 reference a CPU cannot afford (``Shape(reference="float32")``: GPT-2
124M, where the NumPy forward alone takes a minute and finite differences need eight) gets
its gradients from the autodiff oracles at float32 on the case's own device instead, JAX's
and torch's, which must agree (CROSS32): two autodiff systems, each within float32's
tolerance of the float64 truth, judging arithmetic a thousand times coarser (bfloat16,
float16, TF32; Shape.unfit refuses fp32 and fp64 cases there). Their finite-difference
verification is the workload's smaller sizes': the same forward at other dims.

NumPy here runs with one BLAS thread: the parent must not leave spinning BLAS threads on the
cores while a worker is being timed.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from pytest_mlbench.checking.asserts import assert_close, assert_grad_matches_finite_differences
from pytest_mlbench.checking.oracle_client import OracleService
from pytest_mlbench.checking.trajectory import Trajectory
from pytest_mlbench.errors import Unavailable
from pytest_mlbench.timesheet import spend
from pytest_mlbench.workloads import data
from pytest_mlbench.workloads.optim import Optimizer
from pytest_mlbench.workloads.spec import Arrays, Shape, Task, Workload

FD = {"rtol": 1e-5, "atol": 1e-9}  # finite differences of float64 functions
CROSS = {"rtol": 1e-9, "atol": 1e-12}  # two float64 autodiff systems on the same function
# two float32 oracles on the device: each within fp32's tolerance (checking/asserts.py
# TOLERANCES["fp32"].grad, 1e-4 and 1e-5) of the float64 truth, so within twice it of each other
CROSS32 = {"rtol": 2e-4, "atol": 2e-5}
CACHE_BYTES = 4 << 30  # ... and at most this many bytes of them (a GPT-2 gradient is 1 GB)
CACHE_ENTRIES = 64  # values kept by a Reference (losses, gradients, outputs), oldest out
# a companion's dither, in units in the last place of the dtype: several roundings of an
# element's arithmetic (vit at seed 7, where a loss spike parts fp32 runs from float64 near
# step 35: at 4 all three salts tried were more than a step's length away or nearer another
# step at steps 35 and 40, at 1 one of them not until step 50)
DITHER = 4

class BlasLimit:
    """BLAS limited to one thread while any thread is inside (``with one_blas_thread():``).
    Counted, not nested threadpool_limits: those save and restore a process-wide setting, so
    two threads interleaving them would leave BLAS at the other's limit."""

    def __init__(self, limit: Callable[[], Any] | None = None) -> None:
        self._limit = limit or _limit_blas
        self._lock = threading.Lock()
        self._users = 0
        self._limits: Any = None

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._users == 0:
                self._limits = self._limit()
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0 and self._limits is not None:
                    self._limits.restore_original_limits()
                    self._limits = None


def _limit_blas() -> Any:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return None
    return threadpool_limits(limits=1)


one_blas_thread = BlasLimit()  # the process's one counter


class _Once:
    """A lock per key, so that of the threads asking for one value one computes it and the
    others wait for it (then find it, or, if it failed, try themselves); other keys go on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: dict[Hashable, tuple[threading.Lock, list[int]]] = {}

    @contextlib.contextmanager
    def __call__(self, key: Hashable) -> Iterator[None]:
        with self._lock:
            lock, waiting = self._keys.setdefault(key, (threading.Lock(), [0]))
            waiting[0] += 1
        try:
            with spend("waiting"):  # for the thread computing the same value
                lock.acquire()
            try:
                yield
            finally:
                lock.release()
        finally:
            with self._lock:
                waiting[0] -= 1
                if not waiting[0]:  # the last one out: the key's lock is not kept for ever
                    del self._keys[key]


class Reference:
    """The reference of one workload at one shape and seed, from a catalogue folder.

    Safe to call from several threads: one lock guards its caches, its trajectories and what
    it has verified, and is never held while a value is computed; a value (or a task's
    verification) asked for by two threads at once is computed by one while the other waits."""

    def __init__(self, workload: Workload, shape: Shape, seed: int, folder: str,
                 oracle: OracleService, device: str = "cpu") -> None:
        self.workload, self.shape, self.seed = workload, shape, seed
        self.folder, self.oracle = folder, oracle
        # where a float32 reference's oracles run: the cases' device (Shape.reference)
        self.device = device
        self.float32 = shape.reference == "float32"
        self._cache: dict[tuple[Any, ...], Any] = {}
        self._trajectories: dict[tuple[Any, ...], Trajectory] = {}
        self.verified: set[str] = set()
        self._lock = threading.Lock()
        self._making, self._verifying = _Once(), _Once()

    def _cached(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        with self._making(key):
            with self._lock:
                if key in self._cache:  # made while this thread waited
                    return self._cache[key]
            with one_blas_thread(), spend("references"):
                value = make()
            with self._lock:
                while self._cache and (len(self._cache) >= CACHE_ENTRIES or sum(
                        map(_nbytes, self._cache.values())) + _nbytes(value) > CACHE_BYTES):
                    self._cache.pop(next(iter(self._cache)))
                self._cache[key] = value
            return value

    # -- values -------------------------------------------------------------------------------

    def loss_and_grad(self, params: Arrays, inputs: Arrays) -> tuple[float, Arrays]:
        """At float64 params and data: the loss and its gradient (hand, else oracle)."""
        p, d = data.widen(params), data.widen(inputs)
        return self._cached(("grad", data.digest(p, d)), lambda: self._loss_and_grad(p, d))

    def _loss_and_grad(self, p: Arrays, d: Arrays) -> tuple[float, Arrays]:
        """Computed, not cached, at float64 ``p`` and ``d``."""
        with one_blas_thread():
            if self.float32:
                on_device: tuple[float, Arrays] = self.oracle.call(
                    "value_and_grad", (self.folder, p, d), device=self.device, dtype="float32")
                return on_device
            if self.workload.hand_gradient:
                return (self.workload.reference_loss(p, d),
                        self.workload.grad(p, d))  # type: ignore[misc]
            found: tuple[float, Arrays] = self.oracle.call("value_and_grad", (self.folder, p, d))
        return found

    def train(self, optimizer: Optimizer, params: Arrays, state: Arrays, inputs: Arrays,
              steps: int, dtype: Any, batches: Sequence[int] | None = None,
              ) -> tuple[list[float], Arrays, Arrays]:
        """Losses before each of ``steps`` optimizer steps, and the params and state after,
        each step in float64 then rounded to ``dtype`` as storage at that dtype rounds; each
        step on the batch its key in ``batches`` draws from ``inputs`` (data.batch), or on
        ``inputs`` as they are."""
        current, st = data.widen(params), {k: np.asarray(v, np.float64) for k, v in state.items()}
        if not st:
            st = optimizer.init_state(current)
        losses = []
        for i in range(steps):
            found = inputs if batches is None else self.batch(inputs, batches[i])
            loss, current, st = self.step(optimizer, current, st, found, dtype)
            losses.append(loss)
        return losses, current, st

    def batch(self, inputs: Arrays, key: int) -> Arrays:
        """The batch of key ``key`` drawn from ``inputs`` (data.batch), widened."""
        return data.batch(self.workload, self.shape, data.widen(inputs), key)

    def batch_of(self, inputs: Arrays, secret: int | None) -> Callable[[int], Arrays] | None:
        """Training step n's batch in a pass with data secret ``secret`` (data.step_key)."""
        if secret is None:
            return None
        wide = data.widen(inputs)

        def batch_of(step: int) -> Arrays:
            return data.batch(self.workload, self.shape, wide,
                              data.step_key(secret, self.workload, self.shape, step))

        return batch_of

    def step(self, optimizer: Optimizer, params: Arrays, state: Arrays, inputs: Arrays,
             dtype: Any, *, cached: bool = True) -> tuple[float, Arrays, Arrays]:
        """One optimizer step from float64 ``params`` and ``state``: the loss before it, and
        the params and state after, in float64 rounded to ``dtype``. ``cached=False`` keeps
        the gradient out of the value cache (and ``inputs`` must already be float64)."""
        if cached:
            loss, grads = self.loss_and_grad(params, inputs)
        else:
            loss, grads = self._loss_and_grad(params, inputs)
        new, st = optimizer.update(params, grads, state)
        st = {k: (v if k == "count" else _round({k: v}, dtype)[k]) for k, v in st.items()}
        return float(loss), _round(new, dtype), st

    def trajectory(self, optimizer: Optimizer, params: Arrays, inputs: Arrays,
                   dtype: Any, secret: int | None = None) -> Trajectory:
        """The reference's steps from ``params`` (a seeded start, at ``dtype``) with fresh
        optimizer state, as ``train`` takes them, each on its step's batch of a pass with data
        secret ``secret`` (None: every step on ``inputs``): one per optimizer, dtype, start
        and secret, kept, shared by every framework of the pass. A pass's steps before its
        first secret batch (data.public_steps) are the public trajectory's (secret None),
        taken from it: the first pass computed them for its checked steps."""
        start = (optimizer, np.dtype(dtype).name, data.digest(params, inputs))
        with self._lock:
            public = self._trajectories.get((*start, None))
            if public is None:
                public = self._trajectories[(*start, None)] = Trajectory(
                    self.step, optimizer, params, inputs, dtype, one_blas_thread)
            if secret is None:
                return public
            key = (*start, secret)
            if key not in self._trajectories:
                self._trajectories[key] = Trajectory(
                    self.step, optimizer, params, inputs, dtype, one_blas_thread,
                    self.batch_of(inputs, secret),
                    shared=(public, data.public_steps(self.workload)))
            return self._trajectories[key]

    def companion(self, optimizer: Optimizer, params: Arrays, inputs: Arrays, dtype: Any,
                  salt: int = 0, secret: int | None = None) -> Trajectory:
        """Another honest run of ``trajectory``'s steps: each step the same float64 update,
        stored at ``dtype`` after a dither of up to DITHER units in the last place (what an
        implementation's arithmetic at ``dtype`` adds on top of storage's rounding), where
        ``trajectory`` rounds to nearest; ``salt`` picks the dither. Where training amplifies
        rounding (a loss spike, chaotic dynamics) such runs part from the reference by more
        than a step, and a count of steps from the start cannot be read from parameters there
        (audit.count_unreadable). Kept like ``trajectory``."""
        key = ("companion", salt, optimizer, np.dtype(dtype).name,
               data.digest(params, inputs), secret)
        with self._lock:
            if key not in self._trajectories:
                step = functools.partial(self._dithered_step, salt=salt)
                self._trajectories[key] = Trajectory(step, optimizer, params, inputs, dtype,
                                                        one_blas_thread,
                                                        self.batch_of(inputs, secret))
            return self._trajectories[key]

    def _dithered_step(self, optimizer: Optimizer, params: Arrays, state: Arrays,
                       inputs: Arrays, dtype: Any, *, cached: bool = True, salt: int = 0
                       ) -> tuple[float, Arrays, Arrays]:
        loss, new, st = self.step(optimizer, params, state, inputs, np.float64, cached=cached)
        st = {k: (v if k == "count" else _dithered({k: v}, dtype, salt)[k])
              for k, v in st.items()}
        return loss, _dithered(new, dtype, salt), st

    def expected(self, task: Task, params: Arrays, inputs: Arrays, probe: Arrays) -> Any:
        """What an inference or transform call must return for ``probe``."""
        p, d, q = data.widen(params), data.widen(inputs), data.widen(probe)
        key = (task.label, data.digest(p, d, q))
        return self._cached(key, lambda: self._expected(task, p, d, q))

    def _expected(self, task: Task, p: Arrays, d: Arrays, q: Arrays) -> Any:
        w = self.workload
        if task.kind == "infer":
            return np.asarray(w.forward(np, p, {**d, **q}), np.float64)  # type: ignore[misc]
        name = task.transform
        if name in ("jacfwd", "jacrev"):
            return self.oracle.call("jacobian", (self.folder, p, {**d, **q}))
        if name == "vjp":
            return self.oracle.call("vjp", (self.folder, p, d, q["u"]))
        return self.oracle.call(str(name), (self.folder, p, d, q))

    # -- verification ---------------------------------------------------------------------------

    def verify(self, task: Task, inputs: Arrays, params: Arrays, probe: Arrays | None) -> None:
        """Once per task: the reference agrees with finite differences of the NumPy model
        (and the two oracles agree with each other when both are installed)."""
        with self._verifying(task.label):
            with self._lock:
                if task.label in self.verified:
                    return
            with one_blas_thread(), spend("references"):
                self._verify(task, data.widen(inputs), data.widen(params),
                             data.widen(probe) if probe else None)
            with self._lock:
                self.verified.add(task.label)

    def _verify(self, task: Task, d: Arrays, p: Arrays, q: Arrays | None) -> None:
        w, where = self.workload, f"{self.workload.name} reference"
        rng = data.generator(self.seed, w.name, self.shape.label, "finite-differences",
                             task.label)
        if task.kind == "train" and self.float32:
            self._cross_check32(d, p, where)
            return
        if task.kind == "train":
            self._verify_gradient(d, p, rng, where)
        elif task.kind == "transform":
            assert q is not None
            verify_transform(self, task, d, p, q, rng, where)
        else:
            self._verify_forward(d, p, where)
        self._cross_check(task, d, p, q, where)

    def _verify_forward(self, d: Arrays, p: Arrays, where: str) -> None:
        """Inference is checked against the NumPy forward itself. Where the workload also has
        a hand-written loss, the forward's objective must reproduce it (two writings of one
        model); and the forward must compute the same in every installed array namespace
        (a forward that branches on its namespace would make the oracle's model another)."""
        w = self.workload
        assert w.forward is not None
        outputs = np.asarray(w.forward(np, p, d), np.float64)
        if w.loss is not None and w.objective is not None:
            assert_close(np.asarray(float(w.objective(np, outputs, d))),
                         np.asarray(float(w.loss(p, d))), **FD,
                         where=f"{where}: objective(forward) against the hand-written loss")
        for backend in self.oracle.backends:
            found = self.oracle.call("forward", (self.folder, p, d), backend)
            assert_close(found, outputs, **CROSS,
                         where=f"{where}: the forward in {backend} against NumPy's")

    def _verify_gradient(self, d: Arrays, p: Arrays, rng: np.random.Generator,
                         where: str) -> None:
        w = self.workload
        if w.reference_checks is not None:
            checks = w.reference_checks(p, d)
        else:
            checks = [("", lambda q: w.reference_loss(q, d), None)]
        grad = self.loss_and_grad(p, d)[1]
        for what, loss, expected in checks:
            assert_grad_matches_finite_differences(
                loss, grad if expected is None else expected, p, rng=rng,
                rtol=FD["rtol"], atol=FD["atol"],
                where=f"{where} gradient{f' of {what}' if what else ''}")

    def _cross_check(self, task: Task, d: Arrays, p: Arrays, q: Arrays | None,
                     where: str) -> None:
        """The second oracle computes the same quantity from the same model."""
        uses_oracle = task.kind == "transform" or (task.kind == "train"
                                                   and not self.workload.hand_gradient)
        if not uses_oracle or len(self.oracle.backends) < 2:
            return
        first, second = self.oracle.backends[:2]
        payload, command = self._payload(task, d, p, q)
        a = self.oracle.call(command, payload, first)
        b = self.oracle.call(command, payload, second)
        a, b = (x[1] if command == "value_and_grad" else x for x in (a, b))
        _assert_same(a, b, where=f"{where}: {first} and {second} oracles disagree on "
                                 f"{command}")

    def _cross_check32(self, d: Arrays, p: Arrays, where: str) -> None:
        """A float32 reference: JAX's and torch's float32 gradients on the device agree
        (CROSS32); both oracles are needed, each checking the other."""
        backends = self.oracle.backends
        if len(backends) < 2:
            raise Unavailable(f"{self.workload.name}'s {self.shape.label or 'shape'} is checked "
                              "against float32 oracles that check each other: install both "
                              "jax and torch (pip install 'pytest-mlbench[jax,torch]')")
        la, ga = self.loss_and_grad(p, d)  # the first backend's, kept for the checks
        lb, gb = self.oracle.call("value_and_grad", (self.folder, p, d), backends[1],
                                  device=self.device, dtype="float32")
        what = f"{where}: the {backends[0]} and {backends[1]} float32 oracles disagree on"
        assert_close(np.asarray(lb), np.asarray(la), **CROSS32, where=f"{what} the loss")
        for k in sorted(ga):
            assert_close(gb[k], ga[k], **CROSS32, where=f"{what} the gradient ({k})")

    def _payload(self, task: Task, d: Arrays, p: Arrays, q: Arrays | None,
                 ) -> tuple[tuple[Any, ...], str]:
        if task.kind == "train":
            return (self.folder, p, d), "value_and_grad"
        assert q is not None
        if task.transform in ("jacfwd", "jacrev"):
            return (self.folder, p, {**d, **q}), "jacobian"
        if task.transform == "vjp":
            return (self.folder, p, d, q["u"]), "vjp"
        return (self.folder, p, d, q), str(task.transform)


def verify_transform(ref: Reference, task: Task, d: Arrays, p: Arrays, q: Arrays,
                     rng: np.random.Generator, where: str) -> None:
    """Each transform against central differences of the NumPy model (float64)."""
    w, name = ref.workload, task.transform

    def forward(params: Arrays, inputs: Arrays = d) -> np.ndarray:
        return np.asarray(w.forward(np, params, inputs), np.float64)  # type: ignore[misc]

    got = ref.expected(task, p, d, q)
    if name == "jvp":
        _fd_close(lambda e: forward(_axpy(p, q, e)), got, where=f"{where} jvp", unit=_scale(p))
    elif name == "hvp":
        ref._verify_gradient(d, p, rng, where)
        _fd_close(lambda e: _flat(ref.loss_and_grad(_axpy(p, q, e), d)[1]), _flat(got),
                  where=f"{where} hvp (finite differences of the verified gradient)",
                  unit=_scale(p))
    elif name == "vjp":
        v = {k: rng.standard_normal(a.shape) for k, a in p.items()}
        lhs = sum(float(np.vdot(got[k], v[k])) for k in p)
        _fd_close(lambda e: np.asarray(float(np.vdot(q["u"], forward(_axpy(p, v, e))))),
                  np.asarray(lhs), where=f"{where} vjp (<vjp(u), v> = <u, jvp(v)>)",
                  unit=_scale(p))
    else:
        key = w.input_keys[0]
        x = q[key]
        dx = rng.standard_normal(x.shape)
        expected = np.einsum(got.reshape(x.shape[0], -1, int(np.prod(x.shape[1:]))),
                             [0, 1, 2], dx.reshape(x.shape[0], -1), [0, 2], [0, 1])
        _fd_close(lambda e: forward(p, {**d, **q, key: x + e * dx}).reshape(x.shape[0], -1),
                  expected, where=f"{where} {name} (Jacobian times a direction)",
                  unit=float(np.std(x)) or 1.0)


def _axpy(p: Arrays, v: Arrays, eps: float) -> Arrays:
    return {k: a + eps * v[k] for k, a in p.items()}


def _flat(tree: Mapping[str, np.ndarray]) -> np.ndarray:
    return np.concatenate([np.ravel(tree[k]) for k in sorted(tree)])


def _scale(p: Arrays) -> float:
    size = np.sqrt(sum(float(np.sum(np.square(a))) for a in p.values()))
    return float(size / np.sqrt(max(sum(a.size for a in p.values()), 1))) or 1.0


def _fd_close(f: Any, expected: np.ndarray, *, where: str, unit: float) -> None:
    """Central differences of ``f`` at 0 agree with ``expected`` at one of several steps
    (large to small: a kink crossed by a large step is not crossed by a smaller one)."""
    last: AssertionError | None = None
    for rel in (1e-4, 1e-5, 1e-6, 1e-7):
        eps = rel * unit
        numeric = (np.asarray(f(eps)) - np.asarray(f(-eps))) / (2 * eps)
        try:
            assert_close(numeric, expected, where=f"{where}, eps {eps:.2g}", **FD)
            return
        except AssertionError as exc:
            last = exc
    assert last is not None
    raise last


def _assert_same(a: Any, b: Any, *, where: str) -> None:
    if isinstance(a, Mapping):
        for k in sorted(a):
            assert_close(b[k], a[k], where=f"{where} ({k})", **CROSS)
    else:
        assert_close(b, a, where=where, **CROSS)


def _dithered(tree: Mapping[str, np.ndarray], dtype: Any, salt: int) -> Arrays:
    """Each float64 element scaled by 1 + DITHER u eps(dtype), u in [-1, 1) a hash of its own
    bits and ``salt`` (the same state always dithers alike, so a replayed step is the step
    kept), then rounded to ``dtype``."""
    eps = DITHER * _eps(dtype)
    out = {}
    for k, v in tree.items():
        a = np.ascontiguousarray(v, np.float64)
        h = (a.view(np.uint64) ^ np.uint64(salt * 0x632BE59BD9B4E019 % 2**64)) \
            * np.uint64(0x9E3779B97F4A7C15)
        h ^= h >> np.uint64(29)
        u = (h >> np.uint64(11)).astype(np.float64) * 2.0 ** -52 - 1.0
        out[k] = (a * (1.0 + eps * u)).astype(dtype).astype(np.float64)
    return out


def _eps(dtype: Any) -> float:
    try:
        return float(np.finfo(dtype).eps)
    except ValueError:  # bfloat16: numpy's finfo does not know ml_dtypes' types
        import ml_dtypes

        return float(ml_dtypes.finfo(dtype).eps)


def _nbytes(value: Any) -> int:
    """The bytes of NumPy arrays in a cached value (a loss and gradient, or an output)."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, Mapping):
        return sum(_nbytes(v) for v in value.values())
    if isinstance(value, tuple | list):
        return sum(_nbytes(v) for v in value)
    return 0


def _round(tree: Mapping[str, np.ndarray], dtype: Any) -> Arrays:
    return {k: np.asarray(v).astype(dtype).astype(np.float64) for k, v in tree.items()}
