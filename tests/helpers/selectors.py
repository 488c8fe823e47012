"""Selectors of modules/selectors built from their own option defaults, small inputs, and the
attention written out by hand from a module's weights (tests/unit/modules/selectors/)."""

import argparse
import dataclasses

import torch
from fairseq.models.transformer import TransformerConfig
from fairseq.models.transformer.transformer_config import EncDecBaseConfig
from fairseq.modules import MultiheadAttention

from ssan_plugin.models.ssan_transformer import SSANTransformerModel
from ssan_plugin.modules.selectors import SELECTORS, selector_options

C, H, T, B = 16, 4, 6, 3
D = C // H
MAX_POSITIONS = 12

torch.set_num_threads(1)


def selector_args(**overrides) -> argparse.Namespace:
    """Every selector option at its declared default (what fill_defaults gives), then
    ``overrides``; plus the model options a selector may read."""
    values = {"max_source_positions": MAX_POSITIONS}
    for options in selector_options():
        for field in dataclasses.fields(options):
            if field.name != "_name":
                values[field.name] = field.default
    values.update(overrides)
    return argparse.Namespace(**values)


def tiny_flags(name) -> list:
    """The flags a tiny training run of selector ``name`` uses (the selector's ``tiny_flags``)."""
    return list(SELECTORS[name].tiny_flags)


def own_state_names(name) -> set:
    """The names of selector ``name``'s own parameters and buffers in an attention module's
    state (``selector.NAME``), from the selector built with its options' defaults; empty for a
    selector without parameters."""
    selector = SELECTORS[name].from_args(selector_args(), C, H)
    return {"selector." + key for key in selector.state_dict()}


def build(name, dropout=0.0, seed=0, double=True, **overrides):
    """The registry's attention module of selector ``name`` (width C, H heads)."""
    torch.manual_seed(seed)
    attn = SELECTORS[name].build_attention(selector_args(**overrides), C, H, dropout=dropout)
    return attn.double() if double else attn


def inputs(seed=0, left_pad=False, dtype=torch.float64, length=T, bsz=B):
    """x (T, B, C) and a padding mask (B, T): sentence 0 whole, 1 three tokens short, 2 one
    token (on the left with ``left_pad``, as fairseq pads translation sources)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(length, bsz, C, generator=g, dtype=dtype)
    lengths = [length, length - 3, 1][:bsz]
    pad = torch.zeros(bsz, length, dtype=torch.bool)
    for b, n in enumerate(lengths):
        if left_pad:
            pad[b, :length - n] = True
        else:
            pad[b, n:] = True
    return x, pad


def logits_by_hand(attn, x):
    """E[b, h, i, j] = (q_i . k_j) / sqrt(d) from the module's projections, one head at a time."""
    q = x @ attn.q_proj.weight.T + attn.q_proj.bias  # (T, B, C)
    k = x @ attn.k_proj.weight.T + attn.k_proj.bias
    length, bsz, _ = x.shape
    out = torch.empty(bsz, H, length, length, dtype=x.dtype)
    for h in range(H):
        cols = slice(h * D, (h + 1) * D)
        out[:, h] = torch.einsum("ibd,jbd->bij", q[..., cols], k[..., cols]) / D ** 0.5
    return out


def attend_by_hand(attn, x, weights, head_scale=None):
    """out_proj(concat_h sum_j weights[b, h, i, j] v_j (times head_scale[b, h, i])), T x B x C."""
    v = x @ attn.v_proj.weight.T + attn.v_proj.bias  # (T, B, C)
    heads = []
    for h in range(H):
        o = torch.einsum("bij,jbd->ibd", weights[:, h], v[..., h * D:(h + 1) * D])
        if head_scale is not None:
            o = o * head_scale[:, h].T.unsqueeze(-1)  # (T, B, 1)
        heads.append(o)
    return torch.cat(heads, dim=-1) @ attn.out_proj.weight.T + attn.out_proj.bias


def fairseq_attention(attn):
    """fairseq's own MultiheadAttention with ``attn``'s q/k/v/out projections (float64)."""
    theirs = MultiheadAttention(C, H, self_attention=True).double()
    own = {k: v for k, v in attn.state_dict().items() if k.split(".")[0] in
           ("q_proj", "k_proj", "v_proj", "out_proj")}
    theirs.load_state_dict(own)
    return theirs.eval()


def spy_selections(attn) -> list:
    """The Selections the selector of ``attn`` returns from now on (its forward), in a list."""
    seen, forward = [], attn.selector.forward

    def spy(*args, **kwargs):
        seen.append(forward(*args, **kwargs))
        return seen[-1]

    attn.selector.forward = spy
    return seen


def call(attn, x, pad, **kwargs):
    """fairseq's encoder self-attention call."""
    return attn(query=x, key=x, value=x, key_padding_mask=pad, **kwargs)


def softmax_over(logits, keep, pad):
    """Softmax of ``logits`` over the keys where ``keep`` and not pad; a row with no such key is
    zero."""
    allowed = keep & ~pad.view(pad.size(0), 1, 1, -1)
    w = torch.where(allowed, torch.exp(logits - logits.amax(-1, keepdim=True)), torch.zeros_like(logits))
    total = w.sum(-1, keepdim=True)
    return w / torch.where(total > 0, total, torch.ones_like(total))


def ssan_model_attention(selection="hard", seed=0, **options):
    """The attention ``ssan_transformer`` builds, from the same options."""
    cfg = TransformerConfig()
    cfg.encoder = EncDecBaseConfig()
    cfg.encoder.embed_dim, cfg.encoder.attention_heads = C, H
    cfg.attention_dropout = 0.0
    args = argparse.Namespace(**vars(selector_args(**options)), ssan_selection=selection)
    torch.manual_seed(seed)
    return SSANTransformerModel.build_variant_attention(args, C, cfg).double()


def policy_logits_by_hand(attn, x):
    """E_p[b, h, i, j] = q_p,i . k_p,j over the head's P / h policy dimensions."""
    proj = x @ attn.selector.policy_proj.weight.T + attn.selector.policy_proj.bias  # (T, B, 2P)
    q_p, k_p = proj.split(attn.selector.policy_dim, dim=-1)
    d = attn.selector.policy_head_dim
    return torch.stack([torch.einsum("ibd,jbd->bij", q_p[..., h * d:(h + 1) * d], k_p[..., h * d:(h + 1) * d])
                        for h in range(H)], dim=1)
