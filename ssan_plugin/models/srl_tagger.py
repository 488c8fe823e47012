"""``srl_tagger``: encoder-only BIO tagger for semantic role labelling (task ``srl``).

Per instance (one predicate of a sentence): input = word embedding + predicate-indicator
embedding (2 rows: other word / the predicate) + fairseq's positional embedding, then
fairseq's TransformerEncoder stack whose self-attention is chosen by ``--srl-encoder``, then a
linear classifier over the label dictionary. Output: ``(logits (B, T, L), extra)`` with
``extra["selection_stats"]`` as in the translation models (empty for plain attention), so the
SSAN criterion code applies unchanged.

Extension point: :func:`register_srl_encoder` adds an encoder choice from a
``VariantTransformerModel`` subclass (the same class a translation variant registers): its
``add_args`` options (those beyond fairseq's transformer options) are added to this model,
``variant_layers(args)`` / ``build_variant_attention(args)`` build the layers. E.g. a DiSAN
module registers ``register_srl_encoder("disan", DiSANTransformerModel, DiSANTransformerModel.fill_defaults)``.
"""

import argparse
from dataclasses import dataclass
from typing import Callable, Dict, Optional

import torch.nn as nn
import torch.nn.functional as F
from fairseq.models import FairseqEncoderModel, register_model, register_model_architecture
from fairseq.models.transformer.transformer_legacy import TransformerModel, base_architecture
from fairseq.models.transformer import Embedding

from .ssan_transformer import SSANTransformerModel
from .variant_transformer import VariantTransformerEncoder


@dataclass(frozen=True)
class SRLEncoderChoice:
    """model_cls: None (fairseq's own self-attention) or a VariantTransformerModel subclass;
    fill_defaults(args): sets the defaults of its options."""

    model_cls: Optional[type] = None
    fill_defaults: Callable[[argparse.Namespace], None] = lambda args: None


SRL_ENCODERS: Dict[str, SRLEncoderChoice] = {}


def register_srl_encoder(name: str, model_cls: Optional[type] = None,
                         fill_defaults: Callable[[argparse.Namespace], None] = lambda args: None):
    if name in SRL_ENCODERS:
        raise ValueError(f"SRL encoder {name!r} is already registered")
    SRL_ENCODERS[name] = SRLEncoderChoice(model_cls, fill_defaults)


register_srl_encoder("san")
register_srl_encoder("ssan", SSANTransformerModel, SSANTransformerModel.fill_defaults)


class _NewOptionsOnly:
    """Parser proxy: ``add_argument`` of an option the parser already has is skipped, so that a
    variant's ``add_args`` (fairseq's transformer options + its own) adds only its own."""

    def __init__(self, target):
        self._target = target

    def add_argument(self, *args, **kwargs):
        try:
            return self._target.add_argument(*args, **kwargs)
        except argparse.ArgumentError as err:
            if "conflicting option string" not in str(err):
                raise
            return None

    def add_argument_group(self, *args, **kwargs):
        return _NewOptionsOnly(self._target.add_argument_group(*args, **kwargs))

    def __getattr__(self, name):
        return getattr(self._target, name)


class SRLEncoder(VariantTransformerEncoder):
    """VariantTransformerEncoder whose input adds a predicate-indicator embedding."""

    def __init__(self, args, dictionary, embed_tokens, variant_layers, build_attention):
        super().__init__(args, dictionary, embed_tokens, variant_layers, build_attention)
        dim = embed_tokens.embedding_dim
        self.embed_predicate = nn.Embedding(2, dim)  # row 0: other words, row 1: the predicate
        nn.init.normal_(self.embed_predicate.weight, mean=0, std=dim**-0.5)

    def forward(self, src_tokens, src_lengths=None, predicate=None, return_all_hiddens=False):
        """src_tokens, predicate: (B, T); predicate is 1 at the predicate word, else 0."""
        if predicate is None:
            raise ValueError("SRLEncoder needs the predicate indicator (B x T)")
        token_embeddings = self.embed_tokens(src_tokens) + self.embed_predicate(predicate)
        return super().forward(src_tokens, src_lengths, return_all_hiddens, token_embeddings)


@register_model("srl_tagger")
class SRLTaggerModel(FairseqEncoderModel):
    def __init__(self, encoder, classifier):
        super().__init__(encoder)
        self.classifier = classifier

    @staticmethod
    def add_args(parser):
        TransformerModel.add_args(parser)  # encoder shape, dropout, positions (decoder unused)
        extra = _NewOptionsOnly(parser)
        for choice in SRL_ENCODERS.values():
            if choice.model_cls is not None:
                choice.model_cls.add_args(extra)
        parser.add_argument("--srl-encoder", choices=sorted(SRL_ENCODERS),
                            help="self-attention of the encoder layers: san = fairseq's own, "
                                 "ssan = selective (SSAN); default san")

    @classmethod
    def build_model(cls, args, task):
        srl_tagger(args)
        choice = SRL_ENCODERS.get(args.srl_encoder)
        if choice is None:
            raise ValueError(f"--srl-encoder {args.srl_encoder!r}: choose from {sorted(SRL_ENCODERS)}")
        choice.fill_defaults(args)
        if choice.model_cls is None:
            layers, build_attention = [], None
        else:
            layers = choice.model_cls.variant_layers(args)
            build_attention = choice.model_cls.build_variant_attention(args)
        words = task.source_dictionary
        embed_tokens = Embedding(len(words), args.encoder_embed_dim, words.pad())
        encoder = SRLEncoder(args, words, embed_tokens, layers, build_attention)
        classifier = nn.Linear(args.encoder_embed_dim, len(task.target_dictionary))
        return cls(encoder, classifier)

    def forward(self, src_tokens, src_lengths, predicate, **kwargs):
        """-> (logits (B, T, L), {"selection_stats": [...], "encoder_padding_mask": [...]})."""
        out = self.encoder(src_tokens, src_lengths=src_lengths, predicate=predicate)
        x = out["encoder_out"][0].transpose(0, 1)  # T x B x C -> B x T x C
        logits = self.classifier(x)
        return logits, {
            "selection_stats": out.get("selection_stats", []),
            "encoder_padding_mask": out["encoder_padding_mask"],
        }

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        logits = net_output[0].float()
        return F.log_softmax(logits, dim=-1) if log_probs else F.softmax(logits, dim=-1)

    def get_targets(self, sample, net_output):
        return sample["target"]


@register_model_architecture("srl_tagger", "srl_tagger")
def srl_tagger(args):
    """A small encoder: 4 layers, 256 dims, 4 heads, pre-norm, learned positions."""
    args.srl_encoder = getattr(args, "srl_encoder", None) or "san"
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 256)
    args.encoder_ffn_embed_dim = getattr(args, "encoder_ffn_embed_dim", 1024)
    args.encoder_layers = getattr(args, "encoder_layers", 4)
    args.encoder_attention_heads = getattr(args, "encoder_attention_heads", 4)
    args.encoder_normalize_before = getattr(args, "encoder_normalize_before", True)
    args.encoder_learned_pos = getattr(args, "encoder_learned_pos", True)
    args.max_source_positions = getattr(args, "max_source_positions", 512)
    args.dropout = getattr(args, "dropout", 0.1)
    args.attention_dropout = getattr(args, "attention_dropout", 0.1)
    base_architecture(args)
