"""What a worker's start costs on this machine, step by step, each in a fresh process: the
imports, the GPU runtime's start, a first small computation, and the compilers' first builds
(inductor on the CPU, as a timed torch worker warms it up; torch.compile and jax.jit on the
device). Standard library only; prints one line a step and the whole as JSON.

    python tools/gpu_startup.py [gpu|cpu] [--out FILE]

tools/gpu_check.sh runs it after its probe: a GPU group's minutes are mostly workers starting,
and this says which part of a start they are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TORCH = {
    "import torch": "import torch",
    "torch: first tensor on the device": "import torch; d = {dev!r}; "
        "torch.ones(8, device=d).sum().item()",
    "torch: inductor's first build (CPU)": "import torch; "
        "torch.compile(lambda x: torch.tanh(x) * 2 + 1)(torch.ones(8))",
    "torch: torch.compile on the device": "import torch; d = {dev!r}; "
        "torch.compile(lambda x: torch.tanh(x) * 2 + 1)(torch.ones(8, device=d)).sum().item()",
}
MATMUL = ("import jax, jax.numpy as jnp; "
          "a = jax.device_put(jnp.ones((1536, 1536), jnp.float32), jax.devices({plat!r})[0]); "
          "jax.jit(jnp.matmul)(a, a).block_until_ready()")
JAX = {
    "import jax": "import jax",
    "jax: first array on the device": "import jax, jax.numpy as jnp; "
        "jax.device_put(jnp.ones(8), jax.devices({plat!r})[0]).block_until_ready()",
    "jax: jax.jit on the device": "import jax, jax.numpy as jnp; "
        "x = jax.device_put(jnp.ones(8), jax.devices({plat!r})[0]); "
        "jax.jit(lambda x: jnp.tanh(x) * 2 + 1)(x).block_until_ready()",
    # a worker starts confined to its case's cores (threads.py), and XLA sizes its pools from
    # that mask: on an H200 a float32 matmul peak's jit took 34-37 s in a worker (GPU run 12,
    # docs/GPU.md). The same compile confined to one core and on every core says whether the
    # mask is why
    "jax: a 1536x1536 matmul's jit on the device, one core": "import os; "
        "os.sched_setaffinity(0, {{min(os.sched_getaffinity(0))}}); " + MATMUL,
    "jax: a 1536x1536 matmul's jit on the device, every core": MATMUL,
}


def seconds(code: str, timeout: float = 45.0) -> float | str:
    began = time.perf_counter()
    # a fresh inductor cache, as each session's workers have (engine/pools.py): cold builds
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="gpu-startup-")}
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=timeout, check=False, env=env)
    except subprocess.TimeoutExpired:
        return f"over {timeout:.0f} s"
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        return f"failed: {last[:200]}"
    return round(time.perf_counter() - began, 2)


def main(argv: list[str]) -> int:
    device = argv[0] if argv and argv[0] in ("gpu", "cpu") else "gpu"
    out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else None
    found: dict[str, float | str] = {"python -c pass": seconds("pass")}
    # the compilers' first builds last: they are the slow ones, and a cut run keeps the rest
    first = ("import torch", "torch: first tensor on the device")
    steps = {**{k: TORCH[k] for k in first}, **JAX,
             **{k: v for k, v in TORCH.items() if k not in first}}
    for name, code in steps.items():
        found[name] = seconds(code.format(dev="cuda" if device == "gpu" else "cpu",
                                          plat="gpu" if device == "gpu" else "cpu"))
        print(f"gpu_startup: {name}: {found[name]}{' s' if isinstance(found[name], float) else ''}",
              flush=True)
        if out is not None:  # after every step: a run cut by its timeout keeps what it found
            out.write_text(json.dumps(found, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
