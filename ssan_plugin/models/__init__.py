from . import architectures  # noqa: F401  (transformer_small, the shared shape table)
from . import variants  # noqa: F401  (ssan, disan, biblosan, resa and selective transformers)
from . import srl_tagger  # noqa: F401
from . import pair_classifier  # noqa: F401
