"""GPT-style causal language model, one Adam step: token and position embeddings, pre-norm
blocks of causal multi-head attention and a GELU MLP, next-token cross-entropy.

What is compared: one Adam step (torch.optim.Adam, optax.adam, Keras Adam: lr 1e-3, betas 0.9
and 0.999, eps 1e-12; see mlp_optim for why not 1e-8) of the GPT-2 architecture at small sizes:

    h = wte[tokens] + wpe[:T]                      # token ids stay integers end to end
    for each block i:                              # pre-norm
        a = ln(h, ln1);  q, k, v = split(a @ attn_w)   # no bias: see below
        h = h + merge(softmax(causal(q k^T / sqrt(d_head))) v) @ proj_w + proj_b
        h = h + gelu_tanh(ln(h, ln2) @ fc_w + fc_b) @ fc2_w + fc2_b
    logits = ln(h, lnf) @ wte^T                    # the output projection is tied to wte
    loss = mean over every position of -log softmax(logits)[next token]

The query, key and value projection has no bias (as nanoGPT's bias=False and LLaMA-style
models): a key bias has an exactly zero gradient (the softmax does not see a shift common to a
query's scores), which Adam turns into steps of +-lr driven by rounding noise alone, different
in every framework. Heads are HEAD_DIM = 32 wide below width 768 and 64 wide from there
(``head_dim``: GPT-2 small's 12 heads of 64). ``causal`` sets the scores above the
diagonal to -inf before the softmax (explicit attention in every framework; no fused or flash
kernel). LayerNorm has eps LN_EPS and the biased variance;
GELU is the tanh approximation. Embedding lookups are each framework's gather (jnp indexing,
torch indexing, tf.gather), the loss its own integer-label cross-entropy
(optax.softmax_cross_entropy_with_integer_labels, F.cross_entropy,
tf.nn.sparse_softmax_cross_entropy_with_logits). Data: random token ids, the targets the
sequence shifted by one. The reference is only the forward below in the Python array API
(a one-hot gather and a one-hot cross-entropy); gradients come from the float64 oracle.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from pytest_mlbench import Arrays, Shape, Workload, adam, train

LN_EPS = 1e-5
HEAD_DIM = 32  # heads = dim / head_dim(dim) (the model is given no dims: it reads its width)
WIDE, WIDE_HEAD_DIM = 768, 64  # from GPT-2 small's width up, its heads of 64


def head_dim(width: int) -> int:
    """A head's width at model width ``width``: 32 at the CPU sizes, 64 from 768 (GPT-2 124M's
    12 heads of 64, the head width fused attention kernels are built for)."""
    return WIDE_HEAD_DIM if width >= WIDE else HEAD_DIM


def heads(width: int) -> int:
    return width // head_dim(width)


GELU_C = math.sqrt(2.0 / math.pi)
BLOCK_KEYS = ("ln1_g", "ln1_b", "attn_w", "proj_w", "proj_b",
              "ln2_g", "ln2_b", "fc_w", "fc_b", "fc2_w", "fc2_b")


def key(i: int, name: str) -> str:
    return f"h{i}.{name}"


def layers(p: Mapping[str, Any]) -> int:
    return sum(1 for k in p if k.endswith(".ln1_g"))


def make_data(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    """Random token ids as int32 (kept integer by every framework); targets = next tokens."""
    seq = rng.integers(0, dims["vocab"], size=(dims["batch"], dims["seq"] + 1), dtype=np.int32)
    return {"tokens": seq[:, :-1].copy(), "targets": seq[:, 1:].copy()}


def make_params(rng: np.random.Generator, dims: Mapping[str, int]) -> Arrays:
    """GPT-2's init: N(0, 0.02), the residual projections N(0, 0.02 / sqrt(2 layers)); biases
    0.02 N(0, 1) and LayerNorm gains 1 + 0.1 N(0, 1), shifts 0.1 N(0, 1), away from 0 and 1
    so that a dropped one fails the gradient check."""
    d, n = dims["dim"], dims["layers"]

    def normal(scale: float, *shape: int) -> np.ndarray:
        return scale * rng.standard_normal(shape)

    p = {"wte": normal(0.02, dims["vocab"], d), "wpe": normal(0.02, dims["seq"], d)}
    for i in range(n):
        p.update({key(i, "ln1_g"): 1 + normal(0.1, d), key(i, "ln1_b"): normal(0.1, d),
                  key(i, "attn_w"): normal(0.02, d, 3 * d),
                  key(i, "proj_w"): normal(0.02 / math.sqrt(2 * n), d, d),
                  key(i, "proj_b"): normal(0.02, d),
                  key(i, "ln2_g"): 1 + normal(0.1, d), key(i, "ln2_b"): normal(0.1, d),
                  key(i, "fc_w"): normal(0.02, d, 4 * d), key(i, "fc_b"): normal(0.02, 4 * d),
                  key(i, "fc2_w"): normal(0.02 / math.sqrt(2 * n), 4 * d, d),
                  key(i, "fc2_b"): normal(0.02, d)})
    p.update({"lnf_g": 1 + normal(0.1, d), "lnf_b": normal(0.1, d)})
    return p


# -- the reference, in the Python array API -------------------------------------------------

def layer_norm(xp: Any, h: Any, g: Any, b: Any) -> Any:
    centred = h - xp.mean(h, axis=-1, keepdims=True)
    var = xp.mean(centred * centred, axis=-1, keepdims=True)
    return centred / xp.sqrt(var + LN_EPS) * g + b


def attention(xp: Any, a: Any, w: Any, heads: int) -> Any:
    b, t, d = a.shape
    qkv = xp.permute_dims(xp.reshape(a @ w, (b, t, 3, heads, d // heads)),
                          (2, 0, 3, 1, 4))  # (3, B, heads, T, d_head)
    q, k, v = qkv[0, ...], qkv[1, ...], qkv[2, ...]
    scores = q @ xp.matrix_transpose(k) / math.sqrt(d // heads)
    causal = xp.arange(t)[:, None] >= xp.arange(t)[None, :]
    scores = xp.where(causal, scores, xp.full_like(scores, -math.inf))
    e = xp.exp(scores - xp.max(scores, axis=-1, keepdims=True))
    out = (e / xp.sum(e, axis=-1, keepdims=True)) @ v
    return xp.reshape(xp.permute_dims(out, (0, 2, 1, 3)), (b, t, d))


def forward(xp: Any, p: Mapping[str, Any], d: Mapping[str, Any]) -> Any:
    """Logits (B, T, vocab)."""
    tokens = d["tokens"]
    b, t = tokens.shape
    width = p["wte"].shape[1]
    h = xp.reshape(xp.take(p["wte"], xp.reshape(tokens, (-1,)), axis=0), (b, t, width))
    h = h + p["wpe"][:t, ...]
    for i in range(layers(p)):
        blk = {n: p[key(i, n)] for n in BLOCK_KEYS}
        a = layer_norm(xp, h, blk["ln1_g"], blk["ln1_b"])
        h = h + attention(xp, a, blk["attn_w"], heads(width)) \
            @ blk["proj_w"] + blk["proj_b"]
        m = layer_norm(xp, h, blk["ln2_g"], blk["ln2_b"]) @ blk["fc_w"] + blk["fc_b"]
        gelu = 0.5 * m * (1.0 + xp.tanh(GELU_C * (m + 0.044715 * m * m * m)))
        h = h + gelu @ blk["fc2_w"] + blk["fc2_b"]
    return layer_norm(xp, h, p["lnf_g"], p["lnf_b"]) @ xp.matrix_transpose(p["wte"])


def objective(xp: Any, logits: Any, d: Mapping[str, Any]) -> Any:
    """Mean next-token cross-entropy, the target picked by a one-hot mask."""
    shifted = logits - xp.max(logits, axis=-1, keepdims=True)
    log_probs = shifted - xp.log(xp.sum(xp.exp(shifted), axis=-1, keepdims=True))
    vocab = logits.shape[-1]
    hot = xp.astype(d["targets"][..., None] == xp.arange(vocab)[None, None, :], logits.dtype)
    return -xp.mean(xp.sum(hot * log_probs, axis=-1))


def flops(dims: Mapping[str, int]) -> int:
    """Matmul FLOPs, N = B T tokens: per block qkv 6 N D^2, q k^T and weights v 4 N T D
    (computed in full: the causal half is masked, not skipped), proj 2 N D^2, MLP 16 N D^2; the
    tied output projection 2 N D V. Backward is twice the forward (both operands of every
    matmul take a gradient; the lookups are gathers).

    This is the count nanoGPT's ``estimate_mfu`` and PaLM's appendix B use (Chowdhery et al.
    2022; Kaplan et al. 2020's 6 N): per token 6 P + 12 L D T, P the parameters in matmuls,
    here L (3 D^2 + D^2 + 8 D^2) + V D (the tied head), so 6 P = 72 L D^2 + 6 V D, and the
    attention's 12 L D T (scores and values, 2 + 2 FLOPs a multiply-add pair, times 3). The
    sum over N tokens is the expression below, term for term. nanoGPT's P counts every
    parameter but the positions (biases and LayerNorms too: 13 L D + 2 D more, 0.05% at GPT-2
    124M); it does not count the causal mask's saving either."""
    n, d, t = dims["batch"] * dims["seq"], dims["dim"], dims["seq"]
    block = 24 * n * d * d + 4 * n * t * d
    return 3 * (dims["layers"] * block + 2 * n * d * dims["vocab"])


def size(batch: int, seq: int, vocab: int, dim: int, layers: int) -> dict[str, int]:
    return {"batch": batch, "seq": seq, "vocab": vocab, "dim": dim, "layers": layers}


# jit+cudnn: cuDNN's fused attention takes bfloat16 or float16 on an NVIDIA GPU, nothing else
CUDNN_ONLY = {("jit+cudnn", "cpu"): "cuDNN's fused attention (jit+cudnn) runs on NVIDIA GPUs only",
              **{("jit+cudnn", p): f"cuDNN's fused attention (jit+cudnn) takes bfloat16 or "
                                   f"float16, not {p}'s float32 or float64"
                 for p in ("fp64", "fp32", "tf32")}}


SPEC = Workload(
    name="gpt",
    summary=__doc__.splitlines()[0],
    sizes={
        "smoke": (Shape(size(batch=4, seq=16, vocab=64, dim=64, layers=1)),),
        # a character-level model, 8 sequences of 64: about 1.4 GFLOP a step
        "default": (Shape(size(batch=8, seq=64, vocab=256, dim=128, layers=2)),),
        # nanoGPT's shakespeare_char baby GPT (its 6 heads of 64 are 12 heads of 32 here:
        # the same FLOPs)
        "paper": (Shape(size(batch=64, seq=256, vocab=65, dim=384, layers=6), "shakespeare",
                        rounds=3),),
        # GPT-2 small (124M parameters; its 50257 tokens padded to 50304, as nanoGPT and
        # llm.c pad them) at its full context, 8 sequences a step: 7.0 TFLOP; for one GPU, in
        # bf16 mixed precision (amp) against the float32 oracles on the device (docs/GPU.md)
        "gpu": (Shape(size(batch=8, seq=1024, vocab=50304, dim=768, layers=12), "124m",
                      devices=("gpu",), reference="float32"),),
    },
    tasks=(train(adam(1e-3, eps=1e-12)),),
    make_data=make_data,
    make_params=make_params,
    forward=forward,
    objective=objective,
    input_keys=("tokens",),
    flops_per_step=flops,
    # a block: q|k|v, scores, values, projection, two MLP matmuls; then the head
    depth=lambda d: 6 * d["layers"] + 1,
    # parallel cases (--mlbench-workers above 1, docs/DISTRIBUTED.md); Megatron's split of a
    # block's MLP: the first matmul by columns (its bias with it), the second by rows. The
    # attention stays whole: its fused weight's columns are [q | k | v], so an even split by
    # columns does not fall on head boundaries (DTensor refuses the head reshape after it)
    parallel={s: {"jax": "jit", "torch": "eager", "tensorflow": "jit"}
              for s in ("dp", "fsdp", "tp")},
    tensor_parallel={"*fc_w": 1, "*fc_b": 0, "*fc2_w": 0},
    # the main job's scaling question: the same model replicated, sharded and split
    main_strategies=("dp", "fsdp", "tp", "dpxtp"),
    # +sdpa: the attention through the framework's fused call (F.scaled_dot_product_attention,
    # jax.nn.dot_product_attention: XLA's) instead of written out; +cudnn: JAX's call with
    # cuDNN's fused flash attention (a GPU, bfloat16); +nn, +flax, +keras: the model as
    # the framework's layer library (torch.nn modules, Flax Linen, Keras layers with Keras's
    # MultiHeadAttention): one comparison group (IDIOMS.md)
    implementations={
        "jax": ("eager", "jit", "jit+sdpa", "jit+cudnn", "jit+donate", "jit+flax"),
        "torch": ("eager", "jit", "xla", "eager+sdpa", "jit+sdpa", "eager+nn", "jit+nn"),
        "tensorflow": ("eager", "jit", "xla", "xla+sdpa", "xla+keras"),
    },
    unsupported=CUDNN_ONLY,
)
