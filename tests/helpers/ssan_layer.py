"""A small SSAN encoder layer (fairseq's layer with selective self-attention) and its inputs,
shared by tests/unit/modules/test_selective_weights.py and test_encoder_layer.py."""

import argparse

import torch
from fairseq.models.transformer import TransformerConfig
from fairseq.models.transformer.transformer_config import EncDecBaseConfig

from ssan_plugin.models.ssan_transformer import SSANTransformerModel
from ssan_plugin.modules import AttentionVariantEncoderLayer
from ssan_plugin.modules.selective_weights import STRAIGHT_THROUGH_EXP_CAP


C, H, T, B = 32, 4, 7, 3


def config(dropout=0.0):
    cfg = TransformerConfig()
    cfg.encoder = EncDecBaseConfig()  # the dataclass default instance is shared between configs
    cfg.encoder.embed_dim, cfg.encoder.ffn_embed_dim, cfg.encoder.attention_heads = C, 64, H
    cfg.dropout = cfg.attention_dropout = cfg.activation_dropout = dropout
    return cfg


def build_selective_attention(embed_dim, cfg, tau=0.5, selection="hard", policy_dim=0,
                              straight_through_cap=STRAIGHT_THROUGH_EXP_CAP, kernel="torch"):
    """The SSAN model's own attention builder, with these options."""
    args = argparse.Namespace(ssan_tau=tau, ssan_selection=selection, ssan_scale_policy_logits=False,
                              ssan_policy_dim=policy_dim,
                              ssan_straight_through_cap=straight_through_cap, ssan_kernel=kernel)
    SSANTransformerModel.fill_defaults(args)  # the options not given: their declared defaults
    return SSANTransformerModel.build_variant_attention(args, embed_dim, cfg)


def ssan_layer(cfg, tau=0.5, selection="hard", policy_dim=0, kernel="torch"):
    build = lambda d, c: build_selective_attention(  # noqa: E731
        d, c, tau, selection, policy_dim, kernel=kernel)
    return AttentionVariantEncoderLayer(cfg, build)


def force_select_all(layer):
    """Policy logits E_p = (q_p . k_p) = 40^2 * d: every pair selected whatever the noise."""
    with torch.no_grad():
        layer.self_attn.selector.policy_proj.weight.zero_()
        layer.self_attn.selector.policy_proj.bias.fill_(40.0)


def inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, B, C, generator=g)
    pad = torch.zeros(B, T, dtype=torch.bool)
    pad[1, -3:] = True
    pad[2, -1:] = True
    return x, pad
