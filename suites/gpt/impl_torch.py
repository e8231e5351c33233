"""The GPT in PyTorch: tensor indexing for the embeddings, causal attention written out
(variants eager, jit) or through F.scaled_dot_product_attention (the fused kernel torch's users
call: variants eager+sdpa, jit+sdpa), F.cross_entropy; eager or with the whole step under
torch.compile, stepped by torch.optim.Adam. Variants eager+nn, jit+nn: the model as nanoGPT
writes it in torch.nn modules (nn.Embedding, nn.LayerNorm, nn.Linear, nn.GELU, a causal
self-attention module calling F.scaled_dot_product_attention, lm_head tied to wte), applied to
the spec's weights by torch.func.functional_call; nn.Linear holds its weight as (out, in), the
spec's transposed."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from pytest_mlbench import load_suite_file
from pytest_mlbench.builders import functional

spec = load_suite_file(Path(__file__).with_name("spec.py"))


def layer_norm(h: Any, g: Any, b: Any) -> Any:
    return F.layer_norm(h, h.shape[-1:], g, b, eps=spec.LN_EPS)


def written_out(q: Any, k: Any, v: Any) -> Any:
    """softmax(Q K^T / sqrt(d_head) + causal mask) V, op by op."""
    t = q.shape[-2]
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    causal = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
    return torch.softmax(scores.masked_fill(~causal, -math.inf), dim=-1) @ v


def sdpa(q: Any, k: Any, v: Any) -> Any:
    """The same through torch's fused scaled_dot_product_attention (its default scale is
    1 / sqrt(d_head))."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def attention(a: Any, w: Any, heads: int, attend: Any = written_out) -> Any:
    b, t, d = a.shape
    q, k, v = (a @ w).reshape(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4).unbind(0)
    return attend(q, k, v).transpose(1, 2).reshape(b, t, d)


def model(attend: Any) -> tuple[Any, Any]:
    """``(forward, loss)`` with ``attend`` as the attention core."""

    def forward(p: dict[str, Any], data: dict[str, Any]) -> Any:
        tokens = data["tokens"]
        width = p["wte"].shape[1]
        h = p["wte"][tokens] + p["wpe"][:tokens.shape[1]]
        for i in range(spec.layers(p)):
            blk = {n: p[spec.key(i, n)] for n in spec.BLOCK_KEYS}
            a = layer_norm(h, blk["ln1_g"], blk["ln1_b"])
            h = h + attention(a, blk["attn_w"], spec.heads(width), attend) \
                @ blk["proj_w"] + blk["proj_b"]
            m = layer_norm(h, blk["ln2_g"], blk["ln2_b"]) @ blk["fc_w"] + blk["fc_b"]
            h = h + F.gelu(m, approximate="tanh") @ blk["fc2_w"] + blk["fc2_b"]
        return layer_norm(h, p["lnf_g"], p["lnf_b"]) @ p["wte"].T

    def loss(p: dict[str, Any], data: dict[str, Any]) -> Any:
        logits = forward(p, data)
        # F.cross_entropy takes int64 class indices; the ids themselves stay int32
        return F.cross_entropy(logits.flatten(0, 1), data["targets"].flatten().long())

    return forward, loss


# -- the nn idiom: nanoGPT's modules --------------------------------------------------------

class CausalSelfAttention(nn.Module):
    """nanoGPT's attention: one fused q|k|v projection (bias=False, as the spec's), the
    flash path of F.scaled_dot_product_attention, the output projection."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d, 3 * d, bias=False)
        self.c_proj = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in self.c_attn(x).split(d, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, d))


class MLP(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(d, eps=spec.LN_EPS)
        self.attn = CausalSelfAttention(d, heads)
        self.ln_2 = nn.LayerNorm(d, eps=spec.LN_EPS)
        self.mlp = MLP(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT's GPT without dropout (the spec has none): its ``lm_head`` is ``wte``'s very
    Parameter (weight tying), so the model has one (vocab, d) parameter for both."""

    def __init__(self, vocab: int, seq: int, d: int, layers: int) -> None:
        super().__init__()
        self.transformer = nn.ModuleDict({
            "wte": nn.Embedding(vocab, d), "wpe": nn.Embedding(seq, d),
            "h": nn.ModuleList(Block(d, spec.heads(d)) for _ in range(layers)),
            "ln_f": nn.LayerNorm(d, eps=spec.LN_EPS)})
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        pos = torch.arange(t, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)  # int32 ids, as given
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def module_names(i: int) -> dict[str, str]:
    """Block ``i``'s spec names -> its parameter names in GPT."""
    h = f"transformer.h.{i}"
    return {"ln1_g": f"{h}.ln_1.weight", "ln1_b": f"{h}.ln_1.bias",
            "attn_w": f"{h}.attn.c_attn.weight",
            "proj_w": f"{h}.attn.c_proj.weight", "proj_b": f"{h}.attn.c_proj.bias",
            "ln2_g": f"{h}.ln_2.weight", "ln2_b": f"{h}.ln_2.bias",
            "fc_w": f"{h}.mlp.c_fc.weight", "fc_b": f"{h}.mlp.c_fc.bias",
            "fc2_w": f"{h}.mlp.c_proj.weight", "fc2_b": f"{h}.mlp.c_proj.bias"}


GLOBAL_NAMES = {"wte": "transformer.wte.weight", "wpe": "transformer.wpe.weight",
                "lnf_g": "transformer.ln_f.weight", "lnf_b": "transformer.ln_f.bias"}
LINEAR_WEIGHTS = ("attn_w", "proj_w", "fc_w", "fc2_w")  # (in, out) in the spec, (out, in) here


def names(layers: int) -> dict[str, str]:
    """Every spec name -> its GPT parameter name (lm_head.weight is wte's: not listed)."""
    found = dict(GLOBAL_NAMES)
    for i in range(layers):
        found.update({spec.key(i, k): v for k, v in module_names(i).items()})
    return found


def to_module(p: dict[str, Any]) -> dict[str, Any]:
    """The spec's flat params as GPT's named parameters, for functional_call; the modules
    for their shapes, dtype and device are made here, outside any torch.compile trace."""
    n = spec.layers(p)
    tree = {name: p[k].T.contiguous() if k.rpartition(".")[2] in LINEAR_WEIGHTS else p[k]
            for k, name in names(n).items()}
    gpt_for(tree)
    return tree


def from_module(tree: dict[str, Any]) -> dict[str, Any]:
    n = sum(1 for name in tree if name.endswith(".ln_1.weight"))
    return {k: tree[name].T if k.rpartition(".")[2] in LINEAR_WEIGHTS else tree[name]
            for k, name in names(n).items()}


# GPT modules by (vocab, seq, dim, layers, dtype, device): made once each, their own
# initial weights never used (functional_call runs them on the given tensors). A plain dict,
# not functools.lru_cache, which dynamo would trace through (making modules in the graph).
MODULES: dict[tuple[Any, ...], GPT] = {}


def gpt_for(tree: dict[str, Any]) -> GPT:
    wte, wpe = tree["transformer.wte.weight"], tree["transformer.wpe.weight"]
    layers = sum(1 for name in tree if name.endswith(".ln_1.weight"))
    key = (*wte.shape, wpe.shape[0], layers, wte.dtype, wte.device)
    if key not in MODULES:
        made = GPT(wte.shape[0], wpe.shape[0], wte.shape[1], layers)
        # placeholders: not trained and not read, so out of any count of trainable weights
        MODULES[key] = made.to(device=wte.device, dtype=wte.dtype).requires_grad_(False)
    return MODULES[key]


def nn_forward(tree: dict[str, Any], data: dict[str, Any]) -> Any:
    # tie_weights (functional_call's default): lm_head.weight is the given wte, as in GPT
    return torch.func.functional_call(gpt_for(tree), tree, (data["tokens"],))


def nn_loss(tree: dict[str, Any], data: dict[str, Any]) -> Any:
    logits = nn_forward(tree, data)
    return F.cross_entropy(logits.flatten(0, 1), data["targets"].flatten().long())


forward, loss = model(written_out)
build = functional.torch(forward, loss, idioms={
    "sdpa": model(sdpa), "nn": (nn_forward, nn_loss, to_module, from_module)})
