from . import ssan_transformer  # noqa: F401
from . import disan_transformer  # noqa: F401
from . import biblosan_transformer  # noqa: F401
from . import resa_transformer  # noqa: F401
from . import srl_tagger  # noqa: F401
