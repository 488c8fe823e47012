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


def decode_hypotheses(model, batch, tokens, expand, orders, beam_size):
    """Log-probabilities of each step of ``tokens`` (hypotheses of the sentences ``expand``
    names, fairseq's layout) decoded step by step with ``set_beam_size(beam_size)``, reordering
    after step t with ``orders[t]`` as beam search does, each with the last layer's cross
    attention weights (fairseq's alignment layer); and the rows of the first cross attention's
    keys at each step."""
    model.set_beam_size(beam_size)
    net = batch["net_input"]
    encoder_out = model.encoder(net["src_tokens"], src_lengths=net["src_lengths"])
    encoder_out = model.encoder.reorder_encoder_out(encoder_out, expand)
    attention = model.decoder.layers[0].encoder_attn
    state, steps, rows = {}, [], []
    for t in range(tokens.size(1)):
        out = model.decoder(tokens[:, :t + 1], encoder_out=encoder_out, incremental_state=state)
        steps.append((model.get_normalized_probs(out, log_probs=True), out[1]["attn"][0]))
        rows.append(attention._get_input_buffer(state)["prev_key"].size(0))
        if t < len(orders):
            model.decoder.reorder_incremental_state_scripting(state, orders[t])
            encoder_out = model.encoder.reorder_encoder_out(encoder_out, orders[t])
            tokens = tokens[orders[t]]
    return steps, rows


@pytest.mark.parametrize("name", ["gumbel", "topk", "fixed_mask"])
def test_beam_decoding_keeps_the_encoders_keys_once_per_sentence_and_is_exact(tiny_bin, name):
    """Given the generator's beam (set_beam_size), the cross site keeps one row of keys per
    sentence, its hypotheses' queries folded together: every step's log-probabilities equal
    those of one row per hypothesis (beam 1), through a reorder within beams, one that drops a
    sentence and one that mixes two sentences in a beam (the state unfolds to one row per
    hypothesis). A stale beam over hypotheses of different sentences folds nothing."""
    task, model, _ = site_model(tiny_bin, "cross", name)
    model.eval()
    batch = first_batch(task, max_sentences=4)
    sentences, beam = batch["net_input"]["src_tokens"].size(0), 3
    assert sentences == 4
    torch.manual_seed(0)
    tokens = torch.randint(4, len(task.target_dictionary), (sentences * beam, 6))
    tokens[:, 0] = task.target_dictionary.eos()
    within = torch.arange(sentences * beam).view(sentences, beam).flip(1).reshape(-1)
    drop = torch.arange(sentences * beam).view(sentences, beam)[[0, 2, 3]].reshape(-1)
    mix = torch.arange((sentences - 1) * beam)
    mix[[2, 3]] = mix[[3, 2]]  # sentence 0's beam takes a hypothesis of sentence 1
    expand = torch.arange(sentences).repeat_interleave(beam)
    with torch.no_grad():
        folded, rows = decode_hypotheses(model, batch, tokens, expand, [within, drop, mix], beam)
        plain, plain_rows = decode_hypotheses(model, batch, tokens, expand, [within, drop, mix], 1)
        assert rows == [4, 4, 3, 9, 9, 9] and plain_rows == [12, 12, 9, 9, 9, 9]
        for (ours, weights), (theirs, their_weights) in zip(folded, plain):
            torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
            assert weights is not None and weights.shape == (theirs.size(0), 1, batch["net_input"]["src_tokens"].size(1))
            torch.testing.assert_close(weights, their_weights, rtol=1e-5, atol=1e-6)
        one_each = torch.arange(sentences)
        stale, rows = decode_hypotheses(model, batch, tokens[:sentences], one_each, [], 2)
        plain, _ = decode_hypotheses(model, batch, tokens[:sentences], one_each, [], 1)
        assert rows == [4] * 6
        for (ours, _), (theirs, _) in zip(stale, plain):
            torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("site", SITES)
def test_evaluation_weights_asked_for_are_the_reference_selectors(tiny_bin, site, monkeypatch):
    """In evaluation, weights asked for (fairseq's alignment layer asks at every decoding step)
    come from the selector's evaluation mask: output and weights equal the reference path's,
    full forward and step by step."""
    _, model, _ = site_model(tiny_bin, site, "gumbel", "--ssan-policy-init-bias", "0.3")
    model.eval()
    layer = model.decoder.layers[0]
    attention = layer.self_attn if site == "decoder" else layer.encoder_attn
    torch.manual_seed(0)
    x, source = torch.randn(5, 3, attention.embed_dim), torch.randn(7, 3, attention.embed_dim)
    pads = torch.zeros(3, 7, dtype=torch.bool)
    pads[1, :2] = True

    def run():
        outputs = []
        with torch.no_grad():
            if site == "decoder":
                future = torch.triu(torch.full((5, 5), float("-inf")), 1)
                outputs.append(attention(x, x, x, attn_mask=future, need_weights=True))
            else:
                outputs.append(attention(x, source, source, key_padding_mask=pads, need_weights=True))
            state = {}
            for t in range(5):
                step = x[t:t + 1]
                keys = step if site == "decoder" else source
                outputs.append(attention(step, keys, keys, key_padding_mask=None if site == "decoder" else pads,
                                         incremental_state=state, need_weights=True,
                                         static_kv=site == "cross"))
        return outputs

    ours = run()
    monkeypatch.setattr(attention.selector, "evaluation_mask", lambda *args, **kwargs: None)
    reference = run()
    selected = ours[0][1] > 0
    assert selected.any() and not selected.all()  # a selection, neither empty nor every pair
    for (out, weights), (ref_out, ref_weights) in zip(ours, reference):
        torch.testing.assert_close(out, ref_out, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(weights, ref_weights, rtol=1e-5, atol=1e-6)


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
    entmax's, or as fairseq's attention, stops in one line naming both and the site's option
    (the decoder site's too)."""
    _, trained, _ = site_model(tiny_bin, "cross", "topk")
    _, other, _ = site_model(tiny_bin, "cross", "entmax")
    state = trained.state_dict()
    with pytest.raises(OptionError, match=r"decoder.layers.0.encoder_attn.selector_name: the checkpoint's "
                                          r"layer was trained with the topk selector, this model has "
                                          r"entmax.*leave --cross-selector"):
        other.upgrade_state_dict_named(state, "")
    _, plain, _ = build(tiny_bin, ["--arch", "selective_transformer", *CRITERION])  # fairseq's there
    with pytest.raises(OptionError, match=r"decoder.layers.0.encoder_attn: the checkpoint's layer was "
                                          r"trained with the topk selector, this model has "
                                          r"MultiheadAttention there.*leave --cross-selector"):
        plain.upgrade_state_dict_named(trained.state_dict(), "")
    _, decoder_site, _ = site_model(tiny_bin, "decoder", "gumbel")
    with pytest.raises(OptionError, match=r"decoder.layers.0.self_attn: .* gumbel selector.*--decoder-selector"):
        plain.upgrade_state_dict_named(decoder_site.state_dict(), "")
