"""``resa_transformer``: fairseq's Transformer whose encoder self-attention is ReSA.

Each variant layer's self-attention sublayer is ReSA (modules.resa): two RSS modules pick head
and dependent tokens, masked multi-dim attention among them, mean context for unselected heads,
fusion gate, output projection C -> C. With ``--resa-estimator reinforce`` (default) the RSS
learn only through the policy-gradient term of ``selective_label_smoothed_cross_entropy``,
which switches on by itself when the layers report a sample's log-probability; ``gumbel``
trains them by backpropagation (straight-through). The update number reaches the layers
through fairseq's ``set_num_updates`` (warm-up; kept in the checkpoint). Options
(``--resa-``) are declared once in :class:`ReSAOptions`.
"""

from dataclasses import dataclass, field

from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.models import register_model

from ..modules.resa import ESTIMATORS, RESA_DIRECTIONS, ReSAAttention
from .architectures import FAIRSEQ_SHAPES
from .variant_transformer import VariantTransformerModel, register_variant_architectures


@dataclass
class ReSAOptions(FairseqDataclass):
    resa_layers: str = field(
        default="all", metadata={"help": "encoder layers (0-based) using ReSA: all or I,J,..."}
    )
    resa_estimator: ChoiceEnum(list(ESTIMATORS)) = field(
        default="reinforce",
        metadata={"help": "reinforce: Bernoulli samples, trained by the criterion's policy "
                          "gradient; gumbel: straight-through Gumbel-sigmoid, trained by backprop"},
    )
    resa_warmup_updates: int = field(
        default=0,
        metadata={"help": "select every token (RSS not trained) for the first N >= 0 updates"},
    )
    resa_tau: float = field(
        default=0.5, metadata={"help": "Gumbel-sigmoid temperature, > 0 (gumbel only)"}
    )
    resa_sample_at_inference: bool = field(
        default=False,
        metadata={"help": "sample the selection at inference too (the reference's behaviour); "
                          "default: deterministic p > 0.5"},
    )
    resa_direction: ChoiceEnum(list(RESA_DIRECTIONS)) = field(
        default="none",
        metadata={"help": "none: one block of width C, i != j only; bi: forward and backward "
                          "blocks of C/2"},
    )
    resa_rss_hidden: int = field(
        default=0, metadata={"help": "hidden width of each RSS, >= 0; 0 = embed dim"}
    )
    resa_query_block: int = field(
        default=0, metadata={"help": "queries per block of the attention, >= 0; 0 = automatic"}
    )


@register_model("resa_transformer")
class ReSATransformerModel(VariantTransformerModel):
    """Transformer with reinforced self-attention (ReSA) in the encoder."""

    options = ReSAOptions
    layers_option = "resa_layers"

    @classmethod
    def build_variant_attention(cls, args, embed_dim, cfg):
        return ReSAAttention(
            embed_dim,
            estimator=args.resa_estimator,
            warmup_updates=args.resa_warmup_updates,
            tau=args.resa_tau,
            sample_at_inference=bool(args.resa_sample_at_inference),
            direction=args.resa_direction,
            rss_hidden=args.resa_rss_hidden,
            query_block=args.resa_query_block,
        )


register_variant_architectures("resa_transformer", ReSATransformerModel, FAIRSEQ_SHAPES)
