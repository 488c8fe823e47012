"""Every selector of ``--encoder-selector`` wherever SSAN works, on a tiny corpus prepared by
prepare_translation.py (sentencepiece and a manifest, so that the hub loads it); the anchors'
selectors (gumbel, topk, entmax) also at every site, ``NAME@everywhere``: the same selector as
``--decoder-selector`` and ``--cross-selector`` too. The SRL and sentence-pair encoders:
tests/e2e/test_selectors_encoders.py.

Per selector, one fairseq-train run shared by the module (``reference``): 4 updates of two
batches each (``--update-freq 2``), interval checkpoints every 2 updates. Against it:

- resume: fairseq-train restarted from the checkpoint of update 2 (what checkpoint_last.pt
  holds after a run stopped there) ends with exactly the reference's parameters and Adam
  state, and logs exactly its losses and rates. The sampling selectors' noise (gumbel through
  the torch Function, fixed_mask through the native kernel where it builds) is drawn from
  torch's default generator, which fairseq reseeds at every update (seed + update number), so
  it repeats;
- distributed training: two CPU processes (scripts/train_distributed.sh, one thread each) of
  one batch each per update: the ranks hold identical parameters after every update, and the
  losses and selection rates are the reference's, which saw the same two batches per update
  (to the printed precision; for the sampling selectors within the spread of the noise, which
  each rank draws from its own reseeded generator instead of one stream);
- decoding: fairseq-generate with ``--nbest``, ``--sampling``, ``--score-reference``, other
  batch sizes (other padding) and seeds; fairseq-interactive; ``ssan_plugin.hub`` - all of
  them give the translations fairseq-generate gives.

In-process, on the same data: ``--checkpoint-activations`` gives the gradients and statistics
of the plain model exactly (the sample and dropout repeat in the recomputation), and refuses
the regularisers it would cut off; ``--encoder-layerdrop``: the records and logged rates are
those of the selective layers that ran.
"""

import importlib.util
import math
import re
import shutil
from pathlib import Path

import pytest
import torch

from conftest import PLUGIN_DIR, SELECTOR_PLUGIN_DIR, TINY_MODEL, run_cli
from helpers.fairseq_setup import build, first_batch
from helpers.selectors import own_state_names, tiny_flags
from helpers.translation_testlib import PREPARE, load_script
from ssan_plugin.modules.selection import SelectionReporter, selection_statistics
from ssan_plugin.modules.selectors import SELECTORS

DISTRIBUTED = Path(__file__).with_name("test_distributed.py")
_spec = importlib.util.spec_from_file_location("selectors_distributed_helpers", DISTRIBUTED)
distributed = importlib.util.module_from_spec(_spec)  # its launcher, rank-dumping wrapper, checks
_spec.loader.exec_module(distributed)

CRITERION = ["--criterion", "selective_label_smoothed_cross_entropy", "--label-smoothing", "0.1"]
N_TEST = 13  # not a multiple of 8
UPDATES, HALF = 4, 2
GEN = ["--beam", "2", "--max-len-a", "0", "--max-len-b", "8", "--batch-size", "8",
       "--required-batch-size-multiple", "1", "--post-process", "sentencepiece", "--cpu",
       "--num-workers", "0"]  # in-process: no loader worker (a finished one is joined after 5 s)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """(raw corpus, prepared data-bin): short one-clause sentences (at most 40 pieces)."""
    root = tmp_path_factory.mktemp("selectors_everywhere")
    load_script("make_synthetic_corpus").write_corpus(
        str(root / "raw"), {"train": 200, "valid": 10, "test": N_TEST}, seed=1,
        filler_rate=0.2, two_clause_rate=0.0)
    raw = root / "raw"
    assert PREPARE.main(["--src", "src", "--tgt", "tgt", "--train", str(raw / "train"),
                         "--valid", str(raw / "valid"), "--test", str(raw / "test"),
                         "--dest", str(root / "bin"), "--vocab-size", "300"]) == 0
    return raw, root / "bin"


#: every selector in the encoder; the anchors' selectors at every site too
CASES = [*SELECTORS, *(f"{name}@everywhere" for name in ("gumbel", "topk", "entmax"))]


def selector_flags(case):
    """The flags of a case: ``NAME`` selects in the encoder, ``NAME@everywhere`` at every site."""
    name, _, where = case.partition("@")
    sites = ["--decoder-selector", name, "--cross-selector", name] if where == "everywhere" else []
    return ["--encoder-selector", name, *sites, *tiny_flags(name)]


def selector_of(case):
    return SELECTORS[case.partition("@")[0]]


def train_args(data_bin, name, save_dir, *extra):
    return [data_bin, "--user-dir", SELECTOR_PLUGIN_DIR, "--arch", "selective_transformer", *TINY_MODEL,
            *selector_flags(name), *CRITERION, "--optimizer", "adam",
            "--lr", "1e-3", "--max-tokens", "300", "--max-update", UPDATES,
            "--save-dir", save_dir, "--seed", "1", "--cpu", "--disable-validation",
            "--no-epoch-checkpoints", "--log-format", "simple", "--log-interval", "1",
            "--no-progress-bar", *extra]


TIMING = {"wps", "ups", "wall", "train_wall"}


def inner(log):
    """{update: {metric: printed value}} of the train_inner lines, timings left out."""
    out = {}
    for line in log.splitlines():
        if "train_inner" in line:
            metrics = dict(m.groups() for m in re.finditer(r"(\w+)=([^,\s]+)", line.split(" | ", 3)[-1]))
            out[int(metrics["num_updates"])] = {k: v for k, v in metrics.items() if k not in TIMING}
    return out


class Reference:
    """The selectors' reference runs, trained on first use (module-scoped: shared by tests)."""

    def __init__(self, data_bin, root):
        self.data_bin, self.root, self.runs = data_bin, root, {}

    def __call__(self, name):
        if name not in self.runs:
            save = self.root / name
            proc = run_cli("fairseq-train", *train_args(self.data_bin, name, save, "--update-freq", "2",
                                                         "--save-interval-updates", HALF))
            log = inner(proc.stdout + proc.stderr)
            assert sorted(log) == list(range(1, UPDATES + 1)), proc.stderr[-3000:]
            self.runs[name] = save, log
        return self.runs[name]


@pytest.fixture(scope="module")
def reference(data, tmp_path_factory):
    return Reference(data[1], tmp_path_factory.mktemp("reference"))


def load(path):
    return torch.load(path, map_location="cpu", weights_only=True)


def assert_identical(a, b, where="state"):
    """Nested dicts / lists of tensors and plain values, equal exactly."""
    if torch.is_tensor(a):
        assert torch.is_tensor(b) and a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            assert_identical(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_identical(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


# ------------------------------------------------------------------ resume

@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_resume_continues_exactly(data, reference, tmp_path, name):
    ref_save, ref_log = reference(name)
    save = tmp_path / "resumed"
    save.mkdir()
    shutil.copyfile(ref_save / f"checkpoint_1_{HALF}.pt", save / "checkpoint_last.pt")
    proc = run_cli("fairseq-train", *train_args(data[1], name, save, "--update-freq", "2"))
    text = proc.stdout + proc.stderr
    assert re.search(rf"Loaded checkpoint \S+checkpoint_last\.pt \(epoch 1 @ {HALF} updates\)", text), text[-3000:]
    log = inner(text)
    assert sorted(log) == list(range(HALF + 1, UPDATES + 1))
    assert log == {u: ref_log[u] for u in log}  # losses, rates, lr, gnorm: as printed, exactly
    assert all(0 <= float(ref_log[u][f"sel_{layer}"]) <= 1 for u in ref_log for layer in (0, 1))

    resumed, uninterrupted = load(save / "checkpoint_last.pt"), load(ref_save / "checkpoint_last.pt")
    assert resumed["optimizer_history"][-1]["num_updates"] == UPDATES
    assert_identical(resumed["model"], uninterrupted["model"], "model")
    assert_identical(resumed["last_optimizer_state"], uninterrupted["last_optimizer_state"], "adam")
    halfway = load(ref_save / f"checkpoint_1_{HALF}.pt")["model"]
    own = [k for k in halfway if ".selector." in k]
    assert bool(own) == bool(own_state_names(name.partition("@")[0]))  # none without parameters
    if name.endswith("@everywhere"):
        assert all(f"sel_{label}" in ref_log[UPDATES] for label in ("dec0", "cross0"))
    for key in own + ["encoder.layers.0.self_attn.q_proj.weight"]:  # the updates after the restart moved them
        assert not torch.equal(halfway[key], resumed["model"][key]), key


# ------------------------------------------------------------------ distributed training

@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_two_cpu_processes(data, reference, tmp_path, name):
    ref_save, ref_log = reference(name)
    dump = tmp_path / "dump"
    dump.mkdir()
    save = tmp_path / "dist"
    proc = distributed.launch(2, train_args(data[1], name, save, "--save-interval-updates", "1"),
                       env={"FAIRSEQ_TRAIN": distributed.WRAPPER, "RELIABILITY_DUMP_DIR": str(dump)})
    logs = distributed.rank_logs(save)
    assert proc.returncode == 0, logs[0][-3000:] + logs[1][-3000:]
    assert "distributed init (rank 1)" in logs[1]
    states = {(r, u): load(dump / f"rank{r}_upd{u}.pt") for r in (0, 1) for u in range(1, UPDATES + 1)}
    for upd in range(1, UPDATES + 1):
        distributed.assert_same_state(states[0, upd], states[1, upd], f"{name} after update {upd}")
    saved = load(save / "checkpoint_last.pt")["model"]
    distributed.assert_same_state(saved, states[1, UPDATES], "checkpoint vs rank 1")
    own = [k for k in states[0, 1] if ".selector." in k]
    assert all(not torch.equal(states[0, 1][k], states[0, UPDATES][k]) for k in own)

    log = inner(logs[0])
    assert sorted(log) == list(range(1, UPDATES + 1))
    # 3 printed decimals; a sampling selector's ranks draw their own noise, at three sites wider
    tolerance = (0.06 if "@" in name else 0.02) if selector_of(name).samples else 0.0011
    sites = ["sel_dec0", "sel_cross0"] if name.endswith("@everywhere") else []
    for upd in log:
        for metric in ("loss", "nll_loss", "sel_0", "sel_1", "sel", *sites):
            got, expected = float(log[upd][metric]), float(ref_log[upd][metric])
            assert abs(got - expected) <= tolerance, (upd, metric, got, expected)


@pytest.mark.slow
def test_two_cpu_processes_with_layerdrop(data, tmp_path):
    """Layer drop skips different layers on the two ranks (their dropout draws differ); the
    ranks' logging outputs still have the same keys, so fairseq's all-reduce of them works and
    the ranks stay identical (it stopped with gloo's "Received data size doesn't match")."""
    save = tmp_path / "dist"
    args = train_args(data[1], "gumbel", save, *LAYERDROP, "--dropout", "0.3")
    args[args.index("--max-update") + 1] = "12"
    proc = distributed.launch(2, args)
    logs = distributed.rank_logs(save)
    assert proc.returncode == 0, logs[0][-3000:] + logs[1][-3000:]
    assert sorted(inner(logs[0])) == list(range(1, 13))


# ------------------------------------------------------------------ decoding

def generate(data_bin, checkpoint, out_dir, *extra):
    """fairseq-generate's main in-process -> {sentence id: [(score, hypothesis), ...]}, the
    references {id: text}."""
    from fairseq import options
    from fairseq_cli.generate import main

    parser = options.get_generation_parser()
    args = options.parse_args_and_arch(parser, [str(data_bin), "--user-dir", str(PLUGIN_DIR), "--path",
                                                str(checkpoint), "--gen-subset", "test", *GEN,
                                                "--results-path", str(out_dir), *map(str, extra)])
    main(args)
    return hypotheses((Path(out_dir) / "generate-test.txt").read_text("utf-8"))


def hypotheses(text):
    hyps, refs = {}, {}
    for line in text.splitlines():
        if line.startswith("H-"):
            head, score, hyp = line.split("\t")
            hyps.setdefault(int(head[2:]), []).append((float(score), hyp))
        elif line.startswith("T-"):
            head, ref = line.split("\t")
            refs[int(head[2:])] = ref
    return hyps, refs


def same_translations(a, b):
    """The same 1-best hypothesis per sentence, the same score up to rounding."""
    assert sorted(a) == sorted(b)
    for i in a:
        (score_a, hyp_a), (score_b, hyp_b) = a[i][0], b[i][0]
        assert hyp_a == hyp_b and score_a == pytest.approx(score_b, abs=1e-4), (i, a[i][0], b[i][0])


@pytest.mark.parametrize("name", CASES)
def test_decoding_options(data, reference, tmp_path, name):
    checkpoint = reference(name)[0] / "checkpoint_last.pt"

    def gen(tag, *extra):
        return generate(data[1], checkpoint, tmp_path / tag, *extra)

    beam, refs = gen("beam")
    assert sorted(beam) == list(range(N_TEST)) and all(len(h) == 1 for h in beam.values())
    # an ensemble of the model with itself (fairseq's EnsembleModel, one incremental state a
    # model): the same translations and scores
    same_translations(generate(data[1], f"{checkpoint}:{checkpoint}", tmp_path / "ensemble")[0], beam)
    # evaluation draws no noise: another seed, the same output
    assert gen("seed", "--seed", "2")[0] == beam

    nbest, _ = gen("nbest", "--nbest", "2")
    assert sorted(nbest) == list(range(N_TEST))
    for i, hyps in nbest.items():
        assert len(hyps) == 2 and hyps[0][0] >= hyps[1][0], hyps
        assert hyps[0] == beam[i][0]

    sampled, _ = gen("sampling", "--sampling", "--sampling-topk", "5", "--nbest", "2", "--seed", "3")
    assert sorted(sampled) == list(range(N_TEST)) and all(len(h) == 2 for h in sampled.values())
    assert gen("sampling_again", "--sampling", "--sampling-topk", "5", "--nbest", "2", "--seed", "3")[0] == sampled
    assert gen("sampling_other", "--sampling", "--sampling-topk", "5", "--nbest", "2", "--seed", "4")[0] != sampled

    # teacher-forced scores of the references, in batches of 8 (left padding) and alone
    scored, _ = gen("score_reference", "--score-reference")
    alone, _ = gen("score_reference_1", "--score-reference", "--batch-size", "1")
    assert {i: h[0][1] for i, h in scored.items()} == refs  # the hypothesis is the reference
    assert all(math.isfinite(h[0][0]) and h[0][0] < 0 for h in scored.values())
    same_translations(scored, alone)  # a sentence's encoding does not depend on its batch


@pytest.mark.parametrize("name", CASES)
def test_interactive_and_hub_translate_as_generate(data, reference, tmp_path, capsys, name):
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq_cli.interactive import main

    import ssan_plugin.hub

    raw, data_bin = data
    checkpoint = reference(name)[0] / "checkpoint_last.pt"
    expected, _ = generate(data_bin, checkpoint, tmp_path / "gen")

    # fairseq-interactive on the sentencepiece text of the test set, 4 sentences at a time
    parser = options.get_interactive_generation_parser()
    args = options.parse_args_and_arch(parser, [
        str(data_bin), "--user-dir", str(PLUGIN_DIR), "--path", str(checkpoint), "--source-lang", "src",
        "--target-lang", "tgt", *GEN, "--batch-size", "4", "--buffer-size", "4",
        "--input", str(data_bin / "text" / "test.spm.src")])
    capsys.readouterr()
    main(convert_namespace_to_omegaconf(args))
    interactive, _ = hypotheses(capsys.readouterr().out)
    same_translations(interactive, expected)

    # the hub: raw text in, detokenised text out (the synthetic words need no detokenising)
    translator = ssan_plugin.hub.load(checkpoint, data_bin, beam=2, max_len_a=0, max_len_b=8, batch_size=8)
    sources = (raw / "test.src").read_text("utf-8").splitlines()
    assert translator.translate(sources) == [expected[i][0][1] for i in range(N_TEST)]
    order = [7, 0, 12, 3]
    assert translator.translate([sources[i] for i in order]) == [expected[i][0][1] for i in order]


# ------------------------------------------------------------------ in-process: checkpointing, layerdrop

def selector_model(data_bin, name, *extra):
    torch.manual_seed(0)
    return build(data_bin, ["--arch", "selective_transformer", *selector_flags(name), *CRITERION, *extra])


def train_steps(task, model, criterion, steps=2):
    """``steps`` seeded training steps (SGD): [(gradients, logging output)] of each."""
    sample = first_batch(task)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model.train()
    out = []
    for step in range(steps):
        torch.manual_seed(10 + step)
        optimizer.zero_grad()
        loss, _, logging_output = criterion(model, sample)
        loss.backward()
        out.append(({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None},
                    logging_output))
        optimizer.step()
    return out


@pytest.mark.parametrize("name", CASES)
def test_checkpoint_activations_train_exactly_as_without(data, name):
    dropout = ["--dropout", "0.1", "--attention-dropout", "0.1"]  # the recomputation must repeat them
    plain = train_steps(*selector_model(data[1], name, *dropout))
    task, model, criterion = selector_model(data[1], name, *dropout, "--checkpoint-activations")
    assert all(hasattr(layer, "precheckpoint_forward") for layer in model.encoder.layers)
    assert all(hasattr(layer, "precheckpoint_forward") for layer in model.decoder.layers)
    checkpointed = train_steps(task, model, criterion)
    sites = ["sel_selected_dec0", "sel_selected_cross0"] if name.endswith("@everywhere") else []
    for (grads, logs), (ckpt_grads, ckpt_logs) in zip(plain, checkpointed):
        assert_identical(ckpt_grads, grads, "gradients")
        assert ckpt_logs == logs and {"sel_selected_0", *sites} <= logs.keys()
    base = name.partition("@")[0]
    assert any(".selector." in k for k in grads) == bool(own_state_names(base))

    # a regulariser would get no gradient through the recomputed layers: refused, by name
    for option, trainable, refusal in (("--select-scale", "rate_has_gradient", f"the {base} selector's rate"),
                                       ("--nce-scale", "entropy_has_gradient", f"the {base} selector makes no")):
        task, model, criterion = selector_model(data[1], name, "--checkpoint-activations", option, "0.1")
        model.train()
        message = "--checkpoint-activations" if getattr(selector_of(name), trainable) else refusal
        with pytest.raises(Exception, match=message):
            criterion(model, first_batch(task))


LAYERDROP = ["--encoder-layers", "3", "--selector-layers", "1,2", "--encoder-layerdrop", "0.5"]


def layers_run(model):
    """A list that collects the indices of the encoder layers each forward runs."""
    ran = []
    for index in range(len(model.encoder.layers)):
        model.encoder.layers[index].register_forward_pre_hook(lambda *_, index=index: ran.append(index))
    return ran


def logged_layers(logging_output):
    """The selective layers whose logged counts are not zero (every selective layer logs its
    keys in every forward: zeros when layer drop skipped it)."""
    assert sorted(k for k in logging_output if k.startswith("sel_pairs_")) == ["sel_pairs_1", "sel_pairs_2"]
    return sorted(int(k.rsplit("_", 1)[1]) for k, v in logging_output.items()
                  if k.startswith("sel_pairs_") and v > 0)


@pytest.mark.parametrize("name", list(SELECTORS))
def test_layerdrop_reports_the_selective_layers_that_ran(data, name):
    scale = ["--select-scale", "0.01"] if SELECTORS[name].rate_has_gradient else []
    task, model, criterion = selector_model(data[1], name, *LAYERDROP, *scale)
    assert [isinstance(model.encoder.layers[i].self_attn, SelectionReporter) for i in range(3)] == [False, True, True]
    sample = first_batch(task)
    ran = layers_run(model)
    model.train()
    patterns = set()
    for seed in range(12):
        ran.clear()
        torch.manual_seed(seed)
        net_output = model(**sample["net_input"])
        selective = [i for i in ran if i in (1, 2)]
        assert [r.layer for r in net_output[1]["selection_stats"]] == selective
        ran.clear()
        torch.manual_seed(seed)
        loss, _, logging_output = criterion(model, sample)
        loss.backward()  # also when no selective layer ran (no record, no regulariser)
        assert logged_layers(logging_output) == [i for i in ran if i in (1, 2)]
        patterns.add(tuple(i for i in ran if i in (1, 2)))
    assert {(), (1, 2)} <= patterns and len(patterns) > 2  # layerdrop dropped each way
    model.eval()
    with selection_statistics(model):
        net_output = model(**sample["net_input"])
    assert [r.layer for r in net_output[1]["selection_stats"]] == [1, 2]  # no layerdrop at evaluation


@pytest.mark.parametrize("name", ["gumbel", "gate"])
def test_layerdrop_with_checkpoint_activations_reports_only_layers_that_ran(data, name):
    task, model, criterion = selector_model(data[1], name, *LAYERDROP, "--checkpoint-activations")
    sample = first_batch(task)
    ran = layers_run(model)
    model.train()
    for seed in range(12):
        ran.clear()
        torch.manual_seed(seed)
        loss, _, logging_output = criterion(model, sample)
        loss.backward()
        assert logged_layers(logging_output) == sorted({i for i in ran if i in (1, 2)}), seed


def test_logging_keys_do_not_depend_on_layerdrop(data):
    task, model, criterion = selector_model(data[1], "gate", *LAYERDROP)
    sample = first_batch(task)
    model.train()
    keys = set()
    for seed in range(12):
        torch.manual_seed(seed)
        keys.add(tuple(sorted(criterion(model, sample)[2])))
    assert len(keys) == 1


@pytest.mark.parametrize("name", ["gumbel", "topk"])
def test_decoder_layerdrop_reports_the_decoder_sites_that_ran(data, name):
    """``--decoder-layerdrop``: the records are those of the decoder layers that ran (both
    sites of each), the logging keys the same in every forward."""
    task, model, criterion = selector_model(data[1], f"{name}@everywhere", "--decoder-layers", "3",
                                            "--decoder-layerdrop", "0.5")
    sample = first_batch(task)
    ran = []
    for index in range(len(model.decoder.layers)):
        model.decoder.layers[index].register_forward_pre_hook(lambda *_, index=index: ran.append(index))
    model.train()
    patterns, keys = set(), set()
    for seed in range(12):
        ran.clear()
        torch.manual_seed(seed)
        loss, _, logging_output = criterion(model, sample)
        loss.backward()
        expected = sorted([f"dec{i}" for i in ran] + [f"cross{i}" for i in ran])
        assert sorted(k[len("sel_pairs_"):] for k, v in logging_output.items()
                      if k.startswith("sel_pairs_") and not k[len("sel_pairs_"):].isdigit() and v > 0) == expected
        keys.add(tuple(sorted(logging_output)))
        patterns.add(tuple(ran))
    assert len(patterns) > 1 and len(keys) == 1
