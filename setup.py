"""ssan_plugin: a fairseq --user-dir plugin.

Dependencies are declared as compatible ranges, for installing the plugin into an existing
fairseq environment; the exact versions of the tested environment are the lock in
requirements.txt, which `make install` uses.

fairseq itself is NOT declared: two distributions provide the same `fairseq` package, upstream
`fairseq` (0.12.2, which does not run on Python 3.11) and `fairseq-fixed` (0.12.3.1, the same
code with the 3.11 fix). pip cannot express "either", and naming one would make pip install it
over the other, replacing the user's fairseq. Install one of them first (README, "Packaging");
without it, training and every command that loads a model fail with "No module named 'fairseq'"
(`import ssan_plugin` alone does not import fairseq). Declaring
`fairseq-fixed` would also be unsafe for another reason: it is a source release whose isolated
build pulls a CUDA torch unless installed with --no-build-isolation.

torch is declared with a floor only (the weights_only allow-list API); an environment that has
fairseq already has torch, and pip leaves it alone.
"""

from setuptools import find_packages, setup

setup(
    name="ssan_plugin",
    version="0.1.0",
    description="fairseq plugin: selective (SSAN) and directional self-attention encoders",
    license="MIT",
    python_requires=">=3.11,<3.12",
    packages=find_packages(include=["ssan_plugin", "ssan_plugin.*"]),
    package_data={"ssan_plugin.modules": ["csrc/*.c", "csrc/*.h"]},  # --ssan-kernel native, built on first use
    install_requires=[
        "torch>=2.6",  # weights_only loading by default, torch.serialization.add_safe_globals
        "numpy>=1.21.3",
        "scipy>=1.10",  # Student t of the seed-level test (ssan_plugin.stats.significance)
        "omegaconf>=2.1,<2.4",
        "tqdm>=4.27",
        "sacrebleu>=2.2,<3",  # sacrebleu.significance.PairedTest, signatures of 2.x
        "sentencepiece>=0.1.99,<0.3",
        "sacremoses>=0.0.53,<0.3",
        # Japanese BLEU is always sacrebleu's ja-mecab (= sacrebleu[ja])
        "mecab-python3>=1.0.9,<2",
        "ipadic>=1.0,<2",
        # --encoder-selector entmax; pure Python, requires torch>=1.3 only (met by the above)
        "entmax>=1.3,<2",
    ],
    # the project's commands (ssan_plugin/commands/, one module each): ssan-evaluate-bleu, ...
    entry_points={
        "console_scripts": [
            "ssan-align = ssan_plugin.commands.align:main",
            "ssan-analysis-report = ssan_plugin.commands.analysis_report:main",
            "ssan-average-checkpoints = ssan_plugin.commands.average_checkpoints:main",
            "ssan-evaluate-bleu = ssan_plugin.commands.evaluate_bleu:main",
            "ssan-evaluate-pairs = ssan_plugin.commands.evaluate_pairs:main",
            "ssan-evaluate-srl = ssan_plugin.commands.evaluate_srl:main",
            "ssan-induce-trees = ssan_plugin.commands.induce_trees:main",
            "ssan-make-probing-data = ssan_plugin.commands.make_probing_data:main",
            "ssan-prepare-pairs = ssan_plugin.commands.prepare_pairs:main",
            "ssan-prepare-srl = ssan_plugin.commands.prepare_srl:main",
            "ssan-prepare-translation = ssan_plugin.commands.prepare_translation:main",
            "ssan-probe = ssan_plugin.commands.probe:main",
            "ssan-run-experiments = ssan_plugin.commands.run_experiments:main",
            "ssan-selection-stats = ssan_plugin.commands.selection_stats:main",
            "ssan-show-selection = ssan_plugin.commands.show_selection:main",
            "ssan-translate = ssan_plugin.commands.translate:main",
            "ssan-warm-start = ssan_plugin.commands.warm_start:main",
        ],
    },
    extras_require={
        "tensorboard": ["tensorboard>=2.14,<3"],  # fairseq-train --tensorboard-logdir
        "bench": ["matplotlib>=3.7"],  # benchmarks/bench_encoder_layers.py plots
        "aso": ["deepsig>=1.2.8,<2"],  # evaluate_bleu.py --aso: Almost Stochastic Order over seeds
        "align": ["eflomal>=2.0,<3"],  # ssan-align --eflomal-train: the statistical peer
        "test": ["pytest>=8", "pytest-xdist>=3.5", "tensorboard>=2.14,<3"],
    },
)
