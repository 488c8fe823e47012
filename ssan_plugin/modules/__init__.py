from .encoder_layer import AttentionVariantEncoderLayer  # noqa: F401
from .selective_attention import (  # noqa: F401
    SelectiveMultiheadAttention,
    binary_entropy_from_logits,
    sample_selection,
    selective_softmax,
)
