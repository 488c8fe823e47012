"""Semantic role labelling data and evaluation (no fairseq dependency).

- ``brackets``: the CoNLL bracket (Start-End) notation, BIO tags, conversions.
- ``corpus``: Sentence / Proposition records, CoNLLFormatError (``path:line: message``).
- ``conll2012``, ``conll2005``: readers of the two corpus layouts.
- ``props``: CoNLL-2005 props files (what srl-eval.pl reads).
- ``scorer``: span precision / recall / F1 exactly as srl-eval.pl computes them.
- ``viterbi``: BIO-constrained decoding.

The fairseq side lives in ``ssan_plugin.tasks.srl`` (task), ``ssan_plugin.models.srl_tagger``
(model) and ``ssan_plugin.criterions.srl_cross_entropy`` (criterion).
"""
