"""``pair_classifier``: one sentence encoder for both sentences of a pair, then an MLP.

The protocol of DiSAN, Bi-BloSAN and ReSAN for NLI/relatedness: each sentence becomes one
vector (no attention across the two sentences), ``u`` and ``v``; the pair is classified from
``[u; v; u - v; u * v]`` by an MLP (one ReLU hidden layer of ``--pair-mlp-dim`` units, dropout)
with one linear head per target of the task (``task.heads``: ``entailment`` -> 3 logits,
``relatedness`` -> 5 logits for Tai et al.'s KL form or 1 for regression to [1, 5]). The task's
``--relatedness-loss`` comes with it (``task.relatedness_loss``, kept as ``relatedness_loss``):
``predict`` reads the relatedness head as that option says (``pairs.relatedness``).

Encoder: fairseq's TransformerEncoder whose self-attention is chosen by ``--pair-encoder``
from the registry models.variants.ENCODER_VARIANTS (each variant's own options, layer list and
attention builder, as ``srl_tagger``). Both sentences go through it as ONE batch of 2B
sentences (right-padded to the longer), so the two share every weight and every layer sees
each sentence alone. Pooling (``--pair-pooling``): ``mean`` over non-pad tokens, or DiSAN's
multi-dimensional ``source2token`` attention, ``alpha = softmax_tokens(W2 elu(W1 h + b1) + b2)``
per feature, ``s = sum_i alpha_i * h_i``.

Output: ``({head: logits (B, K)}, extra)`` with ``extra["selection_stats"]`` as in the
translation models, for the selective criteria: the encoder's per-sentence records, where a
sampled selector's ``log_prob`` and ``sentence_token_rate`` (2B,) become per pair (B,):
``log pi(z_pair) = log pi(z_u) + log pi(z_v)``, rate = mean of the two sentences'.
Shapes: ``pair_classifier`` = fairseq's ``transformer`` encoder; ``pair_classifier_small`` =
``transformer_small``'s encoder (3 layers, 128, FFN 512, 4 heads), so the *_small translation
encoders transfer (``--encoder-init``, task option).

Options (``--pair-``) are declared once, in :class:`PairClassifierOptions` (the encoder-only
models' declaration, ``variants.EncoderModelOptions``); the model reads them as that one
typed object.
"""

import dataclasses
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.dataclass import ChoiceEnum
from fairseq.models import BaseFairseqModel, register_model, register_model_architecture
from fairseq.models.transformer import DEFAULT_MAX_SOURCE_POSITIONS, Embedding
from fairseq.models.transformer.transformer_legacy import base_architecture

from ..modules.multidim_attention import Source2Token
from ..modules.selection import SelectionStats
from ..pairs.relatedness import check_relatedness_loss, relatedness_scores
from .architectures import transformer_small
from .variant_transformer import VariantTransformerEncoder
from .variants import (ENCODER_CHOICES, ENCODER_VARIANTS, EncoderModelOptions, encoder_field,
                       refuse_decoder_sites)

POOLINGS = ("mean", "source2token")


@dataclass
class PairClassifierOptions(EncoderModelOptions):
    pair_encoder: ENCODER_CHOICES = encoder_field()
    pair_pooling: ChoiceEnum(POOLINGS) = field(default="source2token", metadata={
        "help": "sentence vector: mean of the token states, or DiSAN's multi-dimensional "
                "source2token attention; default source2token"})
    pair_mlp_dim: Optional[int] = field(default=None, metadata={
        "help": "hidden units of the classifier MLP; default the embed dim",
        "metavar": "N", "rule": (">= 1", lambda value: value >= 1),
        "default_from": "encoder_embed_dim"})


def mean_pool(x, pad_mask):
    """x (N, T, C), pad_mask (N, T) True at pads -> (N, C): the mean over non-pad tokens."""
    keep = (~pad_mask).unsqueeze(-1).to(x.dtype)
    return (x * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1)


def pair_features(u, v):
    """Two sentence vectors (N, C) -> (N, 4C): [u, v, u - v, u * v]."""
    return torch.cat([u, v, u - v, u * v], dim=-1)


def stack_pair(a, b, pad: int):
    """(B, T1), (B, T2) right-padded token ids -> (2B, max(T1, T2))."""
    width = max(a.size(1), b.size(1))
    a = F.pad(a, (0, width - a.size(1)), value=pad)
    b = F.pad(b, (0, width - b.size(1)), value=pad)
    return torch.cat([a, b], dim=0)


def pair_records(records: List[SelectionStats], bsz: int) -> List[SelectionStats]:
    """Per-sentence records of a 2B batch -> records whose REINFORCE fields are per pair."""
    out = []
    for record in records:
        if record.log_prob is not None:
            lp, rate = record.log_prob, record.sentence_token_rate
            record = dataclasses.replace(
                record, log_prob=lp[:bsz] + lp[bsz:],
                sentence_token_rate=None if rate is None else (rate[:bsz] + rate[bsz:]) / 2)
        out.append(record)
    return out


@register_model("pair_classifier")
class PairClassifierModel(BaseFairseqModel):
    def __init__(self, args, options: PairClassifierOptions, encoder, pooling, mlp,
                 heads: Dict[str, int], relatedness_loss: str):
        super().__init__()
        self.args = args
        self.options = options
        self.relatedness_loss = check_relatedness_loss(relatedness_loss)  # the task's option
        self.encoder = encoder
        self.pooling = pooling  # a Source2Token, or None for mean pooling
        self.mlp = mlp
        self.dropout = nn.Dropout(args.dropout)
        self.heads = nn.ModuleDict({name: nn.Linear(options.pair_mlp_dim, size)
                                    for name, size in heads.items()})

    @staticmethod
    def add_args(parser):
        PairClassifierOptions.add_args(parser)

    @classmethod
    def build_model(cls, args, task):
        options = PairClassifierOptions.from_args(args)
        refuse_decoder_sites(args, "sentence-pair classifier")
        words = task.source_dictionary
        dim = args.encoder_embed_dim
        embed_tokens = Embedding(len(words), dim, words.pad())
        variant = ENCODER_VARIANTS[options.pair_encoder]
        if variant is None:
            encoder = VariantTransformerEncoder(args, words, embed_tokens, [], None)
        else:
            encoder = variant.build_variant_encoder(args, words, embed_tokens)
        # DiSAN's pooling: its hidden layer as wide as the states (parameters hidden, score)
        pooling = Source2Token(dim, hidden=dim) if options.pair_pooling == "source2token" \
            else None
        mlp = nn.Linear(4 * dim, options.pair_mlp_dim)
        return cls(args, options, encoder, pooling, mlp, task.heads, task.relatedness_loss)

    def max_positions(self):
        return self.encoder.max_positions()

    def encode(self, src_tokens, src_lengths, src2_tokens, src2_lengths):
        """-> (u (B, C), v (B, C), encoder_out of the 2B batch)."""
        bsz = src_tokens.size(0)
        pad = self.encoder.padding_idx
        tokens = stack_pair(src_tokens, src2_tokens, pad)
        out = self.encoder(tokens, src_lengths=torch.cat([src_lengths, src2_lengths]))
        x = out["encoder_out"][0].transpose(0, 1)  # T x 2B x C -> 2B x T x C
        pad_mask = tokens.eq(pad)
        vectors = mean_pool(x, pad_mask) if self.pooling is None else self.pooling(x, pad_mask)
        return vectors[:bsz], vectors[bsz:], out

    def forward(self, src_tokens, src_lengths, src2_tokens, src2_lengths, **kwargs):
        u, v, out = self.encode(src_tokens, src_lengths, src2_tokens, src2_lengths)
        hidden = self.dropout(F.relu(self.mlp(self.dropout(pair_features(u, v)))))
        logits = {name: head(hidden) for name, head in self.heads.items()}
        return logits, {"selection_stats": pair_records(out.get("selection_stats", []),
                                                        src_tokens.size(0))}

    @torch.no_grad()
    def predict(self, net_output):
        """{"label": (B,) argmax label ids, "score": (B,) relatedness} for the heads it has."""
        logits = net_output[0]
        out = {}
        if "entailment" in logits:
            out["label"] = logits["entailment"].argmax(dim=-1)
        if "relatedness" in logits:
            out["score"] = relatedness_scores(logits["relatedness"], self.relatedness_loss)
        return out


@register_model_architecture("pair_classifier", "pair_classifier")
def pair_classifier(args):
    """fairseq's base Transformer encoder shape; the --pair- options' (--pair-mlp-dim: the
    embed dim) and every variant's defaults where args lack them (older checkpoints), the
    --pair- options checked."""
    for variant in ENCODER_VARIANTS.values():
        if variant is not None:
            variant.fill_defaults(args)
    base_architecture(args)
    # the positions the encoder is built for (fairseq's default, as TransformerConfig's), which
    # a selector may size itself by (fixed_mask's table)
    args.max_source_positions = getattr(args, "max_source_positions", DEFAULT_MAX_SOURCE_POSITIONS)
    PairClassifierOptions.fill_defaults(args)  # after the shape: --pair-mlp-dim's default


@register_model_architecture("pair_classifier", "pair_classifier_small")
def pair_classifier_small(args):
    """transformer_small's encoder: 3 layers, width 128, FFN 512, 4 heads."""
    transformer_small(args)
    pair_classifier(args)
