"""Hand-made proposition columns for SRL tests."""


def column(n, spans):
    """Bracket tags of n words with the (start, end, type) phrases (not nested)."""
    tags = ["*"] * n
    for start, end, kind in spans:
        tags[start] = f"({kind}" + tags[start]
        tags[end] += ")"
    return tags
