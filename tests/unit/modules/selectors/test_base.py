"""modules/selectors/base.py: SelectorMultiheadAttention around every registered selector inside
fairseq's encoder layer (pre-norm, bf16 autocast), without pads, with attention dropout; the
zero-weight rule of the record; a warm start from fairseq's own self-attention."""

import pytest
import torch
from fairseq.models.transformer import TransformerConfig
from fairseq.models.transformer.transformer_config import EncDecBaseConfig
from fairseq.modules import MultiheadAttention
from helpers.selectors import (C, H, attend_by_hand, build, call, inputs, own_state_names,
                               selector_args, spy_selections)

from ssan_plugin.modules import AttentionVariantEncoderLayer
from ssan_plugin.errors import OptionError
from ssan_plugin.modules.selectors import SELECTORS, Selection, Selector, SelectorMultiheadAttention
from ssan_plugin.modules.selectors.base import tensor_name

def layer(name, normalize_before=True):
    cfg = TransformerConfig()
    cfg.encoder = EncDecBaseConfig()
    cfg.encoder.embed_dim, cfg.encoder.ffn_embed_dim, cfg.encoder.attention_heads = C, 32, H
    cfg.encoder.normalize_before = normalize_before
    args = selector_args()
    return AttentionVariantEncoderLayer(
        cfg, lambda d, c: SELECTORS[name].build_attention(args, d, c.encoder.attention_heads))


@pytest.mark.parametrize("name", list(SELECTORS))
def test_in_fairseqs_encoder_layer_under_bf16_autocast(name):
    torch.manual_seed(0)
    encoder_layer = layer(name).train()
    assert isinstance(encoder_layer.self_attn, SelectorMultiheadAttention)
    x, pad = inputs(seed=1, dtype=torch.float32, left_pad=True)
    x.requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = encoder_layer(x, pad)
    assert torch.isfinite(out.float()).all()
    out.float().sum().backward()
    assert torch.isfinite(x.grad).all()
    assert encoder_layer.self_attn.pop_selection() is not None


class DropoutSpy(torch.nn.Module):
    """The module's attention dropout, keeping what it was given and what it gave."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.seen = inner, []

    def forward(self, t):
        out = self.inner(t)
        self.seen.append((t, out))
        return out


@pytest.mark.parametrize("name", list(SELECTORS))
def test_no_pads_and_attention_dropout(name):
    attn = build(name, dropout=0.5, double=False).train()
    x, _ = inputs(seed=2, dtype=torch.float32)
    attn.keep_selection = True
    attn.dropout_module = DropoutSpy(attn.dropout_module)
    torch.manual_seed(3)
    given = spy_selections(attn)
    out, weights = call(attn, x, None, need_head_weights=True)
    record = attn.pop_selection()
    (selection,) = given
    # the weights go through attention dropout (p = 0.5: kept ones doubled, some dropped), and
    # the output is the values weighted by what dropout gave (times a gated head's gate)
    ((before, after),) = attn.dropout_module.seen
    gate = None if selection.output_gate is None else selection.output_gate.squeeze(-1)
    returned = before if gate is None else before * gate.unsqueeze(-1)  # returned gated
    torch.testing.assert_close(returned, weights.transpose(0, 1))
    kept = after != 0
    assert (before.ne(0) & ~kept).any() and torch.equal(after[kept], 2 * before[kept])
    torch.testing.assert_close(out, attend_by_hand(attn, x, after, head_scale=gate), rtol=1e-4, atol=1e-5)
    # weights are returned before dropout; a row sums to 1, or 0 when nothing is selected (times
    # the gate of a gated head)
    rows = weights.sum(-1)
    if selection.output_gate is None:
        assert torch.all((rows - 1).abs().lt(1e-5) | rows.eq(0))
    # a pair is selected where its weight is nonzero, unless the selector says which it selected
    selected = weights.transpose(0, 1) > 0
    if selection.selected is not None:
        selected = selection.selected.expand_as(selected)
    assert torch.equal(record.selection, selected)
    assert float(record.pairs_selected) == float(selected.sum())
    assert float(record.pairs_possible) == H * x.size(1) * x.size(0) ** 2


class HalfSelector(Selector):
    """Attends to the even keys only, uniformly (a selector written for this test)."""

    name = "half"

    def reference(self, logits, key_padding_mask, query, rate_gradient=True, noise=None, site=None):
        keep = torch.zeros_like(logits, dtype=torch.bool)
        keep[..., ::2] = True
        if key_padding_mask is not None:
            keep &= ~key_padding_mask.view(key_padding_mask.size(0), 1, 1, -1)
        probs = keep.to(logits.dtype)
        return Selection(probs / probs.sum(-1, keepdim=True).clamp_min(1))


def test_a_new_selector_needs_only_its_reference():
    attn = SelectorMultiheadAttention(C, H, HalfSelector()).train()
    x, pad = inputs(seed=4, dtype=torch.float32)
    call(attn, x, pad)
    record = attn.pop_selection()
    n = (~pad).sum(-1).float()
    kept = torch.tensor([float((~pad[b, ::2]).sum()) for b in range(pad.size(0))])
    torch.testing.assert_close(record.pair_rate, H * (kept / n * n).sum() / n.sum())
    assert float(record.pairs_selected) == H * float((kept * n).sum())


@pytest.mark.parametrize("name", list(SELECTORS))
def test_warm_start_from_fairseqs_self_attention(name):
    torch.manual_seed(0)
    plain = MultiheadAttention(C, H, self_attention=True)
    state = {"layers.0.self_attn." + k: v for k, v in plain.state_dict().items()}
    attn = build(name, double=False)
    fresh = {k: v.clone() for k, v in attn.selector.state_dict().items()}
    attn.upgrade_state_dict_named(state, "layers.0.self_attn")
    attn.load_state_dict({k[len("layers.0.self_attn."):]: v for k, v in state.items()})
    assert torch.equal(attn.q_proj.weight, plain.q_proj.weight)
    assert all(torch.equal(attn.selector.state_dict()[k], v) for k, v in fresh.items())


@pytest.mark.parametrize("name", list(SELECTORS))
def test_a_layer_trained_with_another_selector_is_refused(name):
    """The selector's name travels in the state: loading it as another selector (fairseq's
    --model-overrides, a resume with another --encoder-selector) is refused naming both; a
    state without the name (older checkpoints, fairseq's own attention) takes this one's."""
    names = list(SELECTORS)
    other = names[(names.index(name) + 1) % len(names)]
    state = {"l." + k: v for k, v in build(name, double=False).state_dict().items()}
    assert tensor_name(state["l.selector_name"]) == name
    with pytest.raises(OptionError, match=f"trained with the {name} selector, this model has {other}"):
        build(other, double=False).upgrade_state_dict_named(dict(state), "l")
    del state["l.selector_name"]
    own = {key[2:] for key in state if key.startswith("l.selector.")}
    if not own <= own_state_names(other):  # an unnamed state with parameters the other lacks
        with pytest.raises(OptionError, match=f"parameters the {other} selector's attention does not have"):
            build(other, double=False).upgrade_state_dict_named(dict(state), "l")
    same = build(name, double=False)
    same.upgrade_state_dict_named(state, "l")
    same.load_state_dict({k[2:]: v for k, v in state.items()})
    assert tensor_name(same.selector_name) == name


def test_an_older_ssan_layer_is_renamed_and_refused_as_another_selector():
    """SSAN's attention before the selector contract kept its policy as ``policy_proj.*``: renamed
    under ``selector.`` for SSAN, refused (by name) for a selector without those parameters."""
    state = {"l." + k: v for k, v in build("gumbel", double=False).state_dict().items()}
    old = {k.replace("l.selector.policy_proj", "l.policy_proj"): v for k, v in state.items()
           if k != "l.selector_name"}
    ours = build("gumbel", double=False)
    ours.upgrade_state_dict_named(old, "l")
    ours.load_state_dict({k[2:]: v for k, v in old.items()})
    with pytest.raises(OptionError, match=r"parameters the topk selector's attention does not have "
                                          r"\(policy_proj.bias, policy_proj.weight\)"):
        build("topk", double=False).upgrade_state_dict_named(
            {k.replace("l.selector.policy_proj", "l.policy_proj"): v for k, v in state.items()
             if k != "l.selector_name"}, "l")
