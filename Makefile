# Public entry points: make install | make demo [DATA=DIR [SRC=en TGT=de]] [OUT=runs/NAME] | make test | make bench
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
TORCH := torch==2.13.0
BUILD_DEPS := numpy==2.4.6 cython==3.3.1 setuptools wheel
FAIRSEQ := fairseq-fixed==0.12.3.1
EFLOMAL := eflomal==2.0.0
DATA ?=
SRC ?= src
TGT ?= tgt
OUT ?= runs/demo

.PHONY: install demo test test-slow bench clean

install: $(STAMP)

# Order (docs/design.md, the stack's traps): CPU torch from the local build, build deps, fairseq without
# build isolation (otherwise pip pulls a CUDA torch into the build env), then the rest.
$(STAMP): requirements.txt setup.py Makefile
	command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON)"; exit 1; }
	[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q $(TORCH) $(BUILD_DEPS)
	$(PIP) install -q --no-deps --no-build-isolation $(FAIRSEQ)
	$(PIP) install -q -r requirements.txt
	@# eflomal (ssan-align's statistical peer): a C/Cython sdist, built against the numpy and cython above
	$(PIP) install -q --no-deps --no-build-isolation $(EFLOMAL)
	$(PIP) install -q --no-deps --no-build-isolation -e .
	@# pip check: only fairseq-fixed's torchaudio may be missing (README, "Packaging")
	@! $(PIP) check | grep -v -e "requires torchaudio" -e "No broken requirements"
	$(PY) -c "import torch, fairseq, ssan_plugin; assert torch.__version__.startswith('2.13.0'), torch.__version__; print('installed: torch', torch.__version__, 'fairseq', fairseq.__version__)"
	touch $(STAMP)

demo: install
	$(PY) scripts/demo.py --out $(OUT) $(if $(DATA),--data $(DATA) --src $(SRC) --tgt $(TGT),)

test: install
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n 2 --dist loadfile --durations=20 tests

# SSAN vs baseline (training words/s, generation sentences/s, peak memory; whole processes),
# the same as paired steps in one process (bench_steps.py, on the data-bins bench_ssan.py made),
# then one encoder layer of each kind vs length (examples/variants/), SAN and SSAN also in evaluation mode,
# and every selector of selective_transformer against SAN in one run, per layer and as whole trainings
# and scorings (examples/selectors/bench/), then SSAN and top-k at each decoder site and at
# every site (training, beam-5 incremental decoding, peak memory; examples/everywhere/bench/), and
# their training steps paired with the baseline's in one process (the training ratio to read),
# SSAN's with the torch kernel the plan pins and with the native kernel of the default.
# The JSON and CSV outputs are the committed archives of the cost tables in examples/*/RESULTS.md
# (scripts/make_results.py).
bench: install
	$(PY) benchmarks/bench_ssan.py --corpus builtin --ssan-system "torch=--ssan-kernel torch" --json examples/translation/bench/process.builtin.json
	$(PY) benchmarks/bench_ssan.py --corpus news --ssan-system "torch=--ssan-kernel torch" --json examples/translation/bench/process.news.json
	$(PY) benchmarks/bench_steps.py runs/bench/builtin/data-bin --system "torch=--ssan-kernel torch" --system "p32=--ssan-policy-dim 32" --json examples/translation/bench/steps.builtin.json
	$(PY) benchmarks/bench_steps.py runs/bench/news/data-bin --system "torch=--ssan-kernel torch" --system "p32=--ssan-policy-dim 32" --json examples/translation/bench/steps.news.json
	OMP_NUM_THREADS=1 $(PY) benchmarks/bench_encoder_layers.py --kinds san,ssan,ssan_native --batch 8 --width 512 --heads 8 --lengths 64,128,256,512 --min-time 1 --repeats 3 --out examples/translation/bench/layers_train
	OMP_NUM_THREADS=1 $(PY) benchmarks/bench_encoder_layers.py --mode eval --kinds san,ssan --batch 8 --width 512 --heads 8 --lengths 64,128,256,512 --min-time 1 --repeats 3 --out examples/translation/bench/layers_eval
	OMP_NUM_THREADS=1 $(PY) benchmarks/bench_encoder_layers.py --kinds san,selectors --batch 8 --width 512 --heads 8 --lengths 64,128,256,512 --min-time 1 --repeats 3 --out examples/selectors/bench/layers
	$(PY) benchmarks/bench_ssan.py --plan examples/selectors/experiments.json --corpus news --modes score_sps --json examples/selectors/bench/process.news.json
	$(PY) benchmarks/bench_ssan.py --plan examples/everywhere/bench_plan.json --corpus news --modes gen_sps,gen_sps_fixed_len --decode-repeats 3 --json examples/everywhere/bench/process.news.json
	$(PY) benchmarks/bench_steps.py runs/bench/news/data-bin --plan examples/everywhere/bench_plan.json --json examples/everywhere/bench/steps.news.json
	$(PY) benchmarks/bench_steps.py runs/bench/news/data-bin --plan examples/everywhere/bench_plan.json --study kernels --json examples/everywhere/bench/steps.native.news.json
	OMP_NUM_THREADS=1 $(PY) benchmarks/bench_encoder_layers.py --batch 8 --lengths 16,64,128,192,256,384 --min-time 0.5 --max-naive-gb 6

clean:
	rm -rf runs data-bin/demo*
