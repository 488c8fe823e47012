"""Statistics of comparisons: paired sentence-level tests of one seed, the seed-level test of
seed groups, Holm's correction and Almost Stochastic Order (``significance``), and the pooled
tables of GROUP@SEED systems every evaluation command prints (``seed_groups``), and how often
each test rejects a true null (``calibration``), with the length and distance buckets of breakdowns (``buckets``).
numpy and scipy, and deepsig inside ``almost_stochastic_order`` only: no torch, no fairseq."""
