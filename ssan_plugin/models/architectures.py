"""The model shapes every variant is registered with, and the recipes' own sizes: one place.

``FAIRSEQ_SHAPES`` maps an architecture suffix to the fairseq function that sets the shape
(``ssan_transformer_wmt_en_de`` = SSAN's defaults + ``transformer_wmt_en_de``). ``_small`` is
the size the project's CPU recipes use (demo, Multi30k, benchmarks); it is registered for
fairseq's own ``transformer`` too (``transformer_small``), so a baseline and a variant of the
same size differ only in ``--arch``.
"""

from fairseq.models import register_model_architecture
from fairseq.models.transformer.transformer_legacy import (
    base_architecture,
    transformer_iwslt_de_en,
    transformer_vaswani_wmt_en_de_big,
    transformer_wmt_en_de,
)


@register_model_architecture("transformer", "transformer_small")
def transformer_small(args):
    """3 + 3 layers, width 128, FFN 512, 4 heads: trains in minutes on 2 CPU cores."""
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 128)
    args.encoder_ffn_embed_dim = getattr(args, "encoder_ffn_embed_dim", 512)
    args.encoder_attention_heads = getattr(args, "encoder_attention_heads", 4)
    args.encoder_layers = getattr(args, "encoder_layers", 3)
    args.decoder_embed_dim = getattr(args, "decoder_embed_dim", 128)
    args.decoder_ffn_embed_dim = getattr(args, "decoder_ffn_embed_dim", 512)
    args.decoder_attention_heads = getattr(args, "decoder_attention_heads", 4)
    args.decoder_layers = getattr(args, "decoder_layers", 3)
    base_architecture(args)


# architecture suffix -> fairseq shape function, for every variant
FAIRSEQ_SHAPES = {
    "": base_architecture,
    "_small": transformer_small,
    "_iwslt_de_en": transformer_iwslt_de_en,
    "_wmt_en_de": transformer_wmt_en_de,
}
# shapes too large to be useful with the memory-hungry multi-dimensional variants
LARGE_SHAPES = {"_vaswani_wmt_en_de_big": transformer_vaswani_wmt_en_de_big}
