"""Analysis of trained models: what the selective encoders select (``selection``)."""
