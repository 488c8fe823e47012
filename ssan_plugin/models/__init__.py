from . import ssan_transformer  # noqa: F401
