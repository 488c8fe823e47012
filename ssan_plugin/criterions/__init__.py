from . import selective_label_smoothed_cross_entropy  # noqa: F401
