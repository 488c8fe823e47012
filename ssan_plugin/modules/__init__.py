from .encoder_layer import AttentionVariantEncoderLayer  # noqa: F401
from .selection import (  # noqa: F401
    SelectionReporter,
    SelectionStats,
    binary_entropy_from_logits,
    gumbel_sigmoid_straight_through,
    logistic_noise_like,
)
from .selective_weights import sample_selection, selective_softmax  # noqa: F401
