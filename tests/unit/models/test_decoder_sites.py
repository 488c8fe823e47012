"""Selection in the decoder (models/selective_transformer.py, ``--decoder-selector`` and
``--cross-selector``): every registered selector at each decoder site trains a step with records
under its site's labels, decodes step by step exactly as a full forward of the same prefix
(fairseq's incremental state, beam search and reordering included), never lets a query use a
later target token, gives a defined result for a query that selects nothing, and with every pair
selected is fairseq's own attention; site options and refusals."""

import pytest
import torch
from fairseq import search
from fairseq.sequence_generator import SequenceGenerator
from helpers.fairseq_setup import build, first_batch
from helpers.selectors import tiny_flags

import ssan_plugin  # noqa: F401
from ssan_plugin.errors import OptionError
from ssan_plugin.modules.selectors import SELECTORS, SelectorMultiheadAttention

CRITERION = ["--criterion", "selective_label_smoothed_cross_entropy", "--label-smoothing", "0.1"]
SITES = ("decoder", "cross")


def site_model(data, site, name, *extra):
    """A tiny selective_transformer selecting with ``name`` at ``site`` alone."""
    return build(data, ["--arch", "selective_transformer", "--encoder-selector", "none",
                        f"--{site}-selector", name, *tiny_flags(name), *CRITERION, *extra])


def full_forward_log_probs(model, batch, prev):
    """(B, T, V) log-probabilities of a teacher-forced forward of ``prev``."""
    net = batch["net_input"]
    out = model(net["src_tokens"], net["src_lengths"], prev)
    return model.get_normalized_probs(out, log_probs=True)


def stepwise_log_probs(model, batch, prev):
    """The same, one target position at a time through fairseq's incremental state."""
    net = batch["net_input"]
    encoder_out = model.encoder(net["src_tokens"], src_lengths=net["src_lengths"])
    state = {}
    steps = []
    for t in range(prev.size(1)):
        out = model.decoder(prev[:, :t + 1], encoder_out=encoder_out, incremental_state=state)
        steps.append(model.get_normalized_probs(out, log_probs=True))
    return torch.cat(steps, dim=1)


@pytest.mark.parametrize("site", SITES)
@pytest.mark.parametrize("name", list(SELECTORS))
def test_every_selector_at_each_site_trains_and_decodes_step_by_step_exactly(tiny_bin, site, name):
    task, model, criterion = site_model(tiny_bin, site, name)
    attentions = [m for m in model.modules() if isinstance(m, SelectorMultiheadAttention)]
    assert attentions and {a.site for a in attentions} == {site}
    assert not any(isinstance(layer.self_attn, SelectorMultiheadAttention) for layer in model.encoder.layers)
    batch = first_batch(task)
    model.train()
    torch.manual_seed(0)
    loss, _, logs = criterion(model, batch)
    loss.backward()
    label = ("dec" if site == "decoder" else "cross") + "0"
    assert 0 < logs[f"sel_selected_{label}"] <= logs[f"sel_pairs_{label}"]
    assert torch.isfinite(loss)

    model.eval()
    prev = batch["net_input"]["prev_output_tokens"]
    with torch.no_grad():
        full = full_forward_log_probs(model, batch, prev)
        steps = stepwise_log_probs(model, batch, prev)
    real = prev.ne(task.target_dictionary.pad())  # positions a real prefix reaches
    torch.testing.assert_close(steps[real], full[real], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("site", SITES)
@pytest.mark.parametrize("name", ["gumbel", "topk", "entmax"])
def test_beam_search_scores_are_those_of_a_full_forward_of_each_hypothesis(tiny_bin, site, name):
    """fairseq's sequence generator (beam 3: incremental state, reordering, finished
    hypotheses dropped) gives each hypothesis the scores a full forward of it gives."""
    task, model, _ = site_model(tiny_bin, site, name)
    model.eval()
    batch = first_batch(task, max_sentences=4)
    tgt_dict = task.target_dictionary
    generator = SequenceGenerator([model], tgt_dict, beam_size=3, max_len_b=12,
                                  search_strategy=search.BeamSearch(tgt_dict))
    with torch.no_grad():
        hypotheses = generator.generate([model], batch)
    net = batch["net_input"]
    checked = 0
    for b, hyps in enumerate(hypotheses):
        for hyp in hyps:
            tokens = hyp["tokens"].unsqueeze(0)  # ends with EOS
            prev = torch.cat([tokens.new_tensor([[tgt_dict.eos()]]), tokens[:, :-1]], dim=1)
            with torch.no_grad():
                out = model(net["src_tokens"][b:b + 1], net["src_lengths"][b:b + 1], prev)
                lprobs = model.get_normalized_probs(out, log_probs=True)[0]
            scores = lprobs.gather(-1, tokens[0].unsqueeze(-1)).squeeze(-1)
            torch.testing.assert_close(hyp["positional_scores"], scores, rtol=1e-4, atol=1e-4)
            checked += 1
    assert checked == 3 * len(hypotheses)


def test_a_decoder_query_never_uses_a_later_token_and_is_counted_over_its_visible_keys(tiny_bin):
    """Changing target tokens after position t changes nothing at positions <= t, in training
    (same noise) and in evaluation; the record counts each real query's earlier keys only."""
    for name in ("gumbel", "topk", "fixed_mask"):
        task, model, _ = site_model(tiny_bin, "decoder", name)
        batch = first_batch(task)
        prev = batch["net_input"]["prev_output_tokens"]
        changed = prev.clone()
        changed[:, 3:] = torch.randint(4, len(task.target_dictionary), changed[:, 3:].shape)
        for train in (True, False):
            model.train(train)
            outs = []
            for tokens in (prev, changed):
                torch.manual_seed(1)
                with torch.no_grad():
                    outs.append(full_forward_log_probs(model, batch, tokens)[:, :3])
            torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=0)
        attention = model.decoder.layers[0].self_attn
        attention.keep_selection = True
        model.train()
        with torch.no_grad():
            out = model(batch["net_input"]["src_tokens"], batch["net_input"]["src_lengths"], prev)
        record = [r for r in out[1]["selection_stats"] if r.site == "decoder"][0]
        lengths = prev.ne(task.target_dictionary.pad()).sum(1)
        heads = attention.num_heads
        assert float(record.pairs_possible) == heads * float((lengths * (lengths + 1) / 2).sum())
        assert not record.selection.triu(diagonal=1).any()
        attention.keep_selection = False


@pytest.mark.parametrize("site", SITES)
def test_every_pair_selected_is_fairseqs_attention_step_by_step_too(tiny_bin, site):
    """top-k with a k beyond every sentence keeps every visible key: the model computes what
    fairseq's Transformer with the same weights computes, full forward and step by step."""
    task, model, _ = site_model(tiny_bin, site, "topk", "--topk", "1000")
    _, plain, _ = build(tiny_bin, ["--arch", "transformer"])
    state = {k: v for k, v in model.state_dict().items() if not k.endswith("selector_name")}
    plain.load_state_dict(state, strict=True)
    model.eval(), plain.eval()
    batch = first_batch(task)
    prev = batch["net_input"]["prev_output_tokens"]
    with torch.no_grad():
        ours, theirs = full_forward_log_probs(model, batch, prev), full_forward_log_probs(plain, batch, prev)
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(stepwise_log_probs(model, batch, prev)[:, :4],
                                   stepwise_log_probs(plain, batch, prev)[:, :4], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("site", SITES)
def test_a_query_that_selects_nothing_gets_a_zero_row_never_nan(tiny_bin, site):
    """SSAN's policy pushed far below 0: no query selects a key (the first decoder step's one
    key included); each attention gives zero weights, so the sublayer's output is out_proj's
    bias, and the model's output stays finite."""
    task, model, _ = site_model(tiny_bin, site, "gumbel", "--ssan-policy-init-bias", "-1000")
    model.eval()
    batch = first_batch(task)
    prev = batch["net_input"]["prev_output_tokens"]
    attention = model.decoder.layers[0].self_attn if site == "decoder" else model.decoder.layers[0].encoder_attn
    seen = {}
    attention.register_forward_hook(lambda module, args, output: seen.update(out=output[0]))
    with torch.no_grad():
        full = full_forward_log_probs(model, batch, prev)
        steps = stepwise_log_probs(model, batch, prev)
    assert torch.isfinite(full).all() and torch.isfinite(steps).all()
    expected = attention.out_proj.bias.expand_as(seen["out"])
    torch.testing.assert_close(seen["out"], expected)
    torch.testing.assert_close(steps[:, :3], full[:, :3], rtol=1e-5, atol=1e-5)


def test_site_options_override_one_site_and_bad_ones_are_refused(tiny_bin):
    _, model, _ = build(tiny_bin, ["--arch", "selective_transformer", "--encoder-selector", "topk",
                                   "--decoder-selector", "topk", "--cross-selector", "topk",
                                   "--topk", "5", "--cross-selector-args", "topk=2"])
    assert model.encoder.layers[0].self_attn.selector.k == 5
    assert model.decoder.layers[0].self_attn.selector.k == 5
    assert model.decoder.layers[0].encoder_attn.selector.k == 2
    _, model, _ = build(tiny_bin, ["--arch", "selective_transformer", "--encoder-selector", "none",
                                   "--cross-selector", "fixed_mask", "--max-source-positions", "40",
                                   "--max-target-positions", "30"])
    assert tuple(model.decoder.layers[0].encoder_attn.selector.mask_logits.shape) == (4, 30, 40)
    assert type(model.encoder.layers[0].self_attn).__name__ == "MultiheadAttention"
    assert type(model.decoder.layers[0].self_attn).__name__ == "MultiheadAttention"
    with pytest.raises(OptionError, match=r"--cross-selector-args 'k=2': the topk selector's options are topk"):
        build(tiny_bin, ["--arch", "selective_transformer", "--cross-selector", "topk",
                         "--cross-selector-args", "k=2"])
    with pytest.raises(OptionError, match=r"--decoder-selector-args entmax_alpha: expected a number"):
        build(tiny_bin, ["--arch", "selective_transformer", "--decoder-selector", "entmax",
                         "--decoder-selector-args", "entmax-alpha=high"])
    with pytest.raises(OptionError, match="--topk must be an integer"):
        build(tiny_bin, ["--arch", "selective_transformer", "--decoder-selector", "topk",
                         "--decoder-selector-args", "topk=2.5"])


def test_a_decoder_sites_checkpoint_loads_only_as_the_selector_it_trained(tiny_bin):
    """The cross site's selector travels with the checkpoint: loading top-k's cross attention as
    entmax's stops in one line naming both and the cross site's option."""
    _, trained, _ = site_model(tiny_bin, "cross", "topk")
    _, other, _ = site_model(tiny_bin, "cross", "entmax")
    state = trained.state_dict()
    with pytest.raises(OptionError, match=r"decoder.layers.0.encoder_attn.selector_name: the checkpoint's "
                                          r"layer was trained with the topk selector, this model has "
                                          r"entmax.*leave --cross-selector"):
        other.upgrade_state_dict_named(state, "")
