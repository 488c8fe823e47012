"""ssan_plugin/modules/decoder_layer.py: AttentionVariantDecoderLayer with SSAN selecting every
pair at both decoder sites reproduces fairseq's TransformerDecoderLayerBase (values and
gradients in training, step by step with the incremental state in evaluation); a site without a
builder is fairseq's module; cross_self_attention is refused."""

import argparse
import copy

import pytest
import torch
from fairseq.models.transformer.transformer_config import DecoderConfig
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase
from helpers.ssan_layer import C, config

from ssan_plugin.errors import OptionError
from ssan_plugin.models.ssan_transformer import SSANTransformerModel
from ssan_plugin.modules.decoder_layer import AttentionVariantDecoderLayer
from ssan_plugin.modules.selectors import SELECTORS, SelectorMultiheadAttention


def decoder_config(normalize_before=False):
    cfg = config()
    cfg.decoder = DecoderConfig()
    cfg.decoder.embed_dim, cfg.decoder.ffn_embed_dim, cfg.decoder.attention_heads = C, 64, 4
    cfg.decoder.normalize_before = normalize_before
    return cfg


def gumbel_builder(site):
    args = argparse.Namespace(ssan_kernel="torch", selector_site=site)
    SSANTransformerModel.fill_defaults(args)

    def build(embed_dim, cfg):
        attention = SELECTORS["gumbel"].build_attention(args, embed_dim, cfg.decoder.attention_heads,
                                                        site=site, kdim=C)
        with torch.no_grad():  # E_p = 40^2 * d at every pair: everything selected
            attention.selector.policy_proj.weight.zero_()
            attention.selector.policy_proj.bias.fill_(40.0)
        return attention
    return build


@pytest.mark.parametrize("normalize_before", [False, True])
def test_select_all_at_both_sites_reproduces_fairseqs_layer(normalize_before):
    torch.manual_seed(0)
    cfg = decoder_config(normalize_before)
    ours = AttentionVariantDecoderLayer(cfg, gumbel_builder("decoder"), gumbel_builder("cross"))
    theirs = TransformerDecoderLayerBase(cfg)
    missing, unexpected = ours.load_state_dict(theirs.state_dict(), strict=False)
    assert not unexpected and all(".selector" in name for name in missing)
    assert isinstance(ours.self_attn, SelectorMultiheadAttention) and ours.self_attn.site == "decoder"
    assert isinstance(ours.encoder_attn, SelectorMultiheadAttention) and ours.encoder_attn.site == "cross"
    T, S, B = 6, 5, 3
    x, enc = torch.randn(T, B, C), torch.randn(S, B, C)
    enc_pad = torch.zeros(B, S, dtype=torch.bool)
    enc_pad[1, :2] = True  # fairseq pads sources on the left
    future = torch.triu(torch.full((T, T), float("-inf")), 1)
    ours.train(), theirs.train()
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    y1, _, _ = ours(x1, enc, enc_pad, self_attn_mask=future)
    y2, _, _ = theirs(x2, enc, enc_pad, self_attn_mask=future)
    torch.testing.assert_close(y1, y2, rtol=1e-5, atol=1e-5)
    g = torch.randn_like(y1)
    (y1 * g).sum().backward(), (y2 * g).sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-4, atol=1e-5)

    ours.eval(), theirs.eval()
    # beam search: three hypotheses of one sentence, reordered (one dropped, one doubled) at t = 2
    enc, enc_pad = enc[:, 1:2].expand(S, B, C), enc_pad[1:2].expand(B, S)
    states = ({}, {})
    for t in range(T):
        step = [layer(x[t:t + 1], enc, enc_pad, incremental_state=state)[0]
                for layer, state in zip((ours, theirs), states)]
        torch.testing.assert_close(step[0], step[1], rtol=1e-5, atol=1e-5)
        order = torch.tensor([2, 0, 0]) if t == 2 else torch.arange(B)
        for layer, state in zip((ours, theirs), states):
            for attention in (layer.self_attn, layer.encoder_attn):
                attention.reorder_incremental_state(state, order)
        if t == 2:
            x = x[:, order]


def test_a_site_without_builder_is_fairseqs_and_cross_self_attention_is_refused():
    cfg = decoder_config()
    layer = AttentionVariantDecoderLayer(cfg, None, gumbel_builder("cross"))
    assert type(layer.self_attn).__name__ == "MultiheadAttention"
    cfg = copy.deepcopy(cfg)
    cfg.cross_self_attention = True
    with pytest.raises(OptionError, match="--cross-self-attention with a decoder selector"):
        AttentionVariantDecoderLayer(cfg, gumbel_builder("decoder"), None)
