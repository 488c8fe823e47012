from . import selective_label_smoothed_cross_entropy  # noqa: F401
from . import resa_label_smoothed_cross_entropy  # noqa: F401
from . import srl_cross_entropy  # noqa: F401
from . import sentence_pair_loss  # noqa: F401
