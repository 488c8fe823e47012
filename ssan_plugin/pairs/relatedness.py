"""Relatedness scores in [1, 5] (SICK): the maths that ``--relatedness-loss`` chooses.

The option is declared once, by the ``sentence_pair`` task (``SentencePairConfig``), and the
task hands it to the model (``PairClassifierModel.relatedness_loss``: how ``predict`` reads the
relatedness head) and to the criterion (``SentencePairLossCriterion.relatedness_loss``: which
loss it computes). Both read the head with the functions here; they sit in ``pairs/``, below
``models/`` and ``criterions/``, so that the two never import each other.

- ``kl`` (the default): the head has ``RELATEDNESS_LEVELS`` = 5 outputs, a distribution over
  the scores 1..5, trained by KL from Tai et al.'s (2015) target distribution
  (:func:`relatedness_distribution`); the predicted score is its expectation;
- ``mse``: the head has one output, the score is ``1 + 4 sigmoid(output)``, trained by the
  squared error.

Nothing here imports torch at module level (``pairs.metrics`` re-exports the distribution).
"""

from ..errors import OptionError

RELATEDNESS_LEVELS = 5  # scores 1..5
RELATEDNESS_LOSSES = ("kl", "mse")


def check_relatedness_loss(loss) -> str:
    """``loss`` as a plain string if it is one of RELATEDNESS_LOSSES, else a ValueError."""
    loss = str(loss)  # fairseq hands choice options over as its StrEnum
    if loss not in RELATEDNESS_LOSSES:
        raise OptionError(f"--relatedness-loss must be one of {', '.join(RELATEDNESS_LOSSES)}, "
                         f"got {loss!r}")
    return loss


def relatedness_outputs(loss) -> int:
    """Outputs of the relatedness head under ``--relatedness-loss loss``: 5 (kl) or 1 (mse)."""
    return RELATEDNESS_LEVELS if check_relatedness_loss(loss) == "kl" else 1


def relatedness_distribution(scores, levels: int = RELATEDNESS_LEVELS):
    """Tai et al. (2015): y in [1, K] -> p with p_floor(y) = floor(y) - y + 1,
    p_floor(y)+1 = y - floor(y), 0 elsewhere (1-based levels), so that sum_j j p_j = y.
    Works on a torch tensor (B,) -> (B, K) or a numpy array."""
    import torch

    y = torch.as_tensor(scores, dtype=torch.float32).clamp(1, levels)
    low = y.floor().clamp(max=levels - 1)  # y = K goes to levels K-1 (weight 0) and K (1)
    upper_weight = y - low
    p = torch.zeros(*y.shape, levels, dtype=torch.float32, device=y.device)
    idx = (low - 1).long().unsqueeze(-1)
    p.scatter_(-1, idx, (1 - upper_weight).unsqueeze(-1))
    p.scatter_(-1, idx + 1, upper_weight.unsqueeze(-1))
    return p


def relatedness_scores(logits, loss):
    """Head output (B, K) -> predicted relatedness in [1, 5] (B,) under ``--relatedness-loss
    loss``: the expectation of the 5-level distribution (``kl``) or 1 + 4 sigmoid (``mse``,
    one output). A head whose size is not the option's is a ValueError."""
    import torch

    loss = check_relatedness_loss(loss)
    if logits.size(-1) != relatedness_outputs(loss):
        raise OptionError(f"--relatedness-loss {loss} reads a relatedness head of "
                         f"{relatedness_outputs(loss)} output(s), got {logits.size(-1)}")
    logits = logits.float()
    if loss == "mse":
        return 1 + 4 * torch.sigmoid(logits.squeeze(-1))
    levels = torch.arange(1, logits.size(-1) + 1, dtype=logits.dtype, device=logits.device)
    return torch.softmax(logits, dim=-1) @ levels
