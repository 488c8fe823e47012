from .selective_attention import (  # noqa: F401
    SelectiveMultiheadAttention,
    binary_entropy_from_logits,
    sample_selection,
    selective_softmax,
)
from .selective_encoder_layer import SelectiveTransformerEncoderLayer  # noqa: F401
