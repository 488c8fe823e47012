"""The tables of README.md and ``examples/*/RESULTS.md``, regenerated from the committed run
archives by ``scripts/make_results.py`` (``--check``: fail when a committed block differs; a test
runs it). One module per concern: ``blocks`` (the markers), ``archives`` (checked reading),
``verdicts`` (seed-level comparisons, Holm, power), and one module per kind of archive.

Evidence, as everywhere in the project: the seed is the unit. Each comparison is the seed-level
test of ``stats.significance.seed_level_test`` (per-seed deltas, the 95 % interval, p), with
Holm's correction over every comparison of the table the row is in; the pooled sentence-level
bootstrap, where shown, is labelled as describing the seeds at hand.
"""
