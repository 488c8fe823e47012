"""ssan_plugin/models/selective_transformer.py through fairseq-train's start-up: every selector
builds a model, trains a step under the selective criterion (records, logged rates, the
regularisers where the selector has a gradient, a refusal by name where it has none);
``ssan_transformer`` is the family with ``gumbel`` (same parameters, names and outputs, its
checkpoints load); options are checked at start-up; the head-to-head plan's selectors are
registered, and its flags parse."""

import json
import re

import pytest
import torch
from helpers.fairseq_setup import build, first_batch
from helpers.srl_cli import tiny05  # noqa: F401  (fixture)

import ssan_plugin  # noqa: F401
from conftest import PLUGIN_DIR, ROOT, TINY_MODEL
from ssan_plugin.errors import OptionError
from ssan_plugin.experiments.plan import Plan
from ssan_plugin.modules.selectors import SELECTORS, SelectorMultiheadAttention

CRITERION = ["--criterion", "selective_label_smoothed_cross_entropy", "--label-smoothing", "0.1"]
PLAN = ROOT / "examples" / "selectors" / "experiments.json"


def selector_model(data, name, *extra, arch="selective_transformer"):
    return build(data, ["--arch", arch, "--encoder-selector", name, *CRITERION, *extra])


def train_step(task, model, criterion, seed=0):
    batch = first_batch(task)
    model.train()
    model.zero_grad()
    torch.manual_seed(seed)
    loss, sample_size, logs = criterion(model, batch)
    loss.backward()
    return loss, logs


@pytest.mark.parametrize("name", list(SELECTORS))
def test_every_selector_trains_a_step_with_records(tiny_bin, name):
    task, model, criterion = selector_model(tiny_bin, name, "--selector-layers", "1")
    layers = model.encoder.layers
    assert type(layers[0].self_attn).__name__ == "MultiheadAttention"  # fairseq's own
    assert type(layers[1].self_attn).__name__ != "MultiheadAttention"
    loss, logs = train_step(task, model, criterion)
    assert torch.isfinite(loss)
    assert 0 < logs["sel_selected_1"] <= logs["sel_pairs_1"] and "sel_pairs_0" not in logs
    own = [p for n, p in model.named_parameters() if n.startswith("encoder.layers.1.self_attn.")]
    assert own and all(p.grad is not None for p in own)


@pytest.mark.parametrize("name", ["gumbel", "soft", "gate", "fixed_mask"])
def test_regularisers_reach_the_selector(tiny_bin, name):
    task, model, plain = selector_model(tiny_bin, name)
    _, _, weighted = selector_model(tiny_bin, name, "--select-scale", "0.5", "--nce-scale", "0.2")
    model_state = {k: v.clone() for k, v in model.state_dict().items()}
    _, logs = train_step(task, model, weighted)
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    assert logs["ssan_reg"] != 0
    model.load_state_dict(model_state)
    train_step(task, model, plain)
    selector = [n for n in grads if re.search(r"self_attn\.(policy_proj|selector)\.", n)]
    assert selector and any(not torch.allclose(grads[n], dict(model.named_parameters())[n].grad)
                            for n in selector)


@pytest.mark.parametrize("name,flag", [("topk", "--select-scale"), ("entmax", "--select-scale"),
                                       ("topk", "--nce-scale"), ("entmax", "--nce-scale")])
def test_terms_without_gradient_are_refused_by_name(tiny_bin, name, flag):
    task, model, criterion = selector_model(tiny_bin, name, flag, "0.1")
    with pytest.raises(OptionError, match=f"{flag} .*{name} selector"):
        train_step(task, model, criterion)


def test_ssan_transformer_is_the_family_with_gumbel(tiny_bin, tmp_path):
    torch.manual_seed(0)
    task, ssan, _ = build(tiny_bin, ["--arch", "ssan_transformer", *CRITERION])
    torch.manual_seed(0)
    _, ours, _ = selector_model(tiny_bin, "gumbel")
    theirs_state, our_state = ssan.state_dict(), ours.state_dict()
    assert list(theirs_state) == list(our_state)
    assert all(torch.equal(theirs_state[k], our_state[k]) for k in our_state)
    batch = first_batch(task)
    for mode in ("train", "eval"):
        getattr(ssan, mode)(), getattr(ours, mode)()
        torch.manual_seed(3)
        a = ssan(**batch["net_input"])[0]
        torch.manual_seed(3)
        b = ours(**batch["net_input"])[0]
        assert torch.equal(a, b), mode
    # an ssan_transformer checkpoint's weights load into the family, strictly
    torch.save(theirs_state, tmp_path / "ssan.pt")
    ours.load_state_dict(torch.load(tmp_path / "ssan.pt", weights_only=True), strict=True)


@pytest.mark.parametrize("flags", [["--encoder-selector", "topk", "--topk", "2"],
                                   ["--encoder-selector", "entmax", "--entmax-fixed-alpha"]])
def test_a_selector_without_parameters_starts_from_the_baselines_weights(tiny_bin, flags):
    """Same seed, same initial weights as fairseq's transformer: a seed's baseline and selector
    runs start alike (examples/selectors/RESULTS.md's En-Ro reading relies on it)."""
    torch.manual_seed(0)
    _, baseline, _ = build(tiny_bin, ["--arch", "transformer"])
    torch.manual_seed(0)
    _, ours, _ = build(tiny_bin, ["--arch", "selective_transformer", *flags, *CRITERION])
    theirs_state = baseline.state_dict()
    our_state = {k: v for k, v in ours.state_dict().items() if not k.endswith(".selector_name")}
    assert list(theirs_state) == list(our_state)
    assert all(torch.equal(theirs_state[k], our_state[k]) for k in our_state)


def test_soft_is_ssan_selection_soft(tiny_bin):
    torch.manual_seed(0)
    task, ssan, _ = build(tiny_bin, ["--arch", "ssan_transformer", "--ssan-selection", "soft", *CRITERION])
    torch.manual_seed(0)
    _, ours, _ = selector_model(tiny_bin, "soft")
    batch = first_batch(task)
    ssan.eval(), ours.eval()
    assert torch.equal(ssan(**batch["net_input"])[0], ours(**batch["net_input"])[0])


def test_small_preset_has_ssan_transformer_smalls_sizes(tiny_bin):
    from fairseq import options

    def parsed(arch):
        parser = options.get_training_parser()
        return options.parse_args_and_arch(parser, [str(tiny_bin), "--user-dir", str(PLUGIN_DIR), "--arch", arch])

    ours, theirs = parsed("selective_transformer_small"), parsed("ssan_transformer_small")
    sizes = ("encoder_embed_dim", "encoder_ffn_embed_dim", "encoder_attention_heads", "encoder_layers",
             "decoder_embed_dim", "decoder_ffn_embed_dim", "decoder_attention_heads", "decoder_layers")
    assert [getattr(ours, s) for s in sizes] == [getattr(theirs, s) for s in sizes] == [128, 512, 4, 3] * 2
    assert ours.encoder_selector == "gumbel"


@pytest.mark.parametrize("flags,message", [
    (["--encoder-selector", "nope"], r"--encoder-selector: invalid choice: 'nope'"),
    (["--encoder-selector", "topk", "--topk", "2.5"], r"--topk must be an integer >= 1 or a fraction"),
    (["--encoder-selector", "entmax", "--entmax-alpha", "3"], r"--entmax-alpha"),
    (["--encoder-selector", "gate", "--gate-init-bias", "inf"], r"--gate-init-bias must be finite"),
    (["--encoder-selector", "fixed_mask", "--fixed-mask-tau", "0"], r"--fixed-mask-tau must be finite and > 0"),
    (["--encoder-selector", "gumbel", "--ssan-tau", "0"], r"--ssan-tau must be finite and > 0"),
    (["--selector-layers", "5"], r"--selector-layers '5': indices must lie in \[0, 1\]"),
])
def test_options_checked_at_start_up(tiny_bin, capsys, flags, message):
    try:
        build(tiny_bin, ["--arch", "selective_transformer", *CRITERION, *flags])
    except SystemExit:
        error = capsys.readouterr().err
    except ValueError as err:
        error = str(err)
    else:
        error = None
    assert error is not None and re.search(message, error), error


def test_checkpoint_activations_and_layerdrop(tiny_bin):
    task, model, criterion = selector_model(tiny_bin, "gate", "--checkpoint-activations")
    for layer in model.encoder.layers:
        assert hasattr(layer, "precheckpoint_forward")
        assert isinstance(layer.self_attn, SelectorMultiheadAttention)
    task, model, criterion = selector_model(tiny_bin, "topk", "--encoder-layerdrop", "0.5",
                                            "--encoder-layers", "3")
    train_step(task, model, criterion)


def test_plan_runs_registered_selectors_and_the_baseline(tiny_bin):
    plan = Plan.load(PLAN)
    study = plan.study("prenorm")  # En-De, the plan's selectors (postnorm: En-Ro, the chosen ones)
    assert study.systems[0] == "baseline" and plan.seeds == [1, 2, 3, 4, 5]
    chosen = set()
    for name in study.systems[1:]:
        system = plan.systems[name]
        if name == "gumbel":  # borrowed from the translation plan's ssan_cap0: the same runs
            assert (system.arch, system.flags) == (
                "ssan_transformer_small", ["--ssan-kernel", "torch", "--ssan-straight-through-cap", "0"])
            chosen.add("gumbel")  # ssan_transformer_small is the gumbel selector
        else:
            assert system.arch == "selective_transformer_small"
            chosen.add(system.flags[system.flags.index("--encoder-selector") + 1])
        # the flags parse, and the model builds
        build(tiny_bin, ["--arch", system.arch, "--criterion", system.criterion, *plan.train,
                         *study.flags, *system.flags, *TINY_MODEL])
    assert chosen <= set(SELECTORS)  # the plan names its own selectors
    translation = json.loads((ROOT / "examples" / "translation" / "experiments.json").read_text())
    prenorm = next(s for s in translation["studies"] if s["name"] == "prenorm")
    assert plan.train == translation["train"]  # the same budget and flags as the prenorm study
    assert (plan.base_updates, plan.more_updates) == (translation["updates"]["base"], translation["updates"]["more"])
    assert study.flags == prenorm["flags"]


@pytest.mark.parametrize("name", ["topk", "fixed_mask"])
def test_the_srl_tagger_offers_the_family(tiny05, name):
    """Encoder-only models offer every variant of models.variants: ``--srl-encoder selective``."""
    from fairseq import options, tasks

    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(tiny05), "--task", "srl", "--arch", "srl_tagger", "--encoder-embed-dim", "16",
        "--encoder-ffn-embed-dim", "32", "--encoder-layers", "1", "--encoder-attention-heads", "2",
        "--cpu", "--srl-encoder", "selective", "--encoder-selector", name, "--topk", "2"])
    task = tasks.setup_task(args)
    model = task.build_model(args)
    assert isinstance(model.encoder.layers[0].self_attn, SelectorMultiheadAttention)
    assert model.encoder.layers[0].self_attn.selector.name == name
    task.load_dataset("valid")
    batch = task.dataset("valid").collater([task.dataset("valid")[i] for i in range(3)])
    model.train()
    logits, _ = model(**batch["net_input"])
    logits.sum().backward()
    assert torch.isfinite(logits).all()
