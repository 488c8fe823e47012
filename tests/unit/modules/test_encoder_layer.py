"""ssan_plugin/modules/encoder_layer.py: AttentionVariantEncoderLayer with every pair selected
reproduces fairseq's TransformerEncoderLayerBase (values and gradients, train and eval)."""

import pytest
import torch
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase
from helpers.ssan_layer import config, force_select_all, inputs, ssan_layer


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("normalize_before", [False, True])
def test_select_all_reproduces_fairseq_layer(train, normalize_before):
    torch.manual_seed(0)
    cfg = config()
    cfg.encoder.normalize_before = normalize_before
    ours, theirs = ssan_layer(cfg), TransformerEncoderLayerBase(cfg)
    missing, unexpected = ours.load_state_dict(theirs.state_dict(), strict=False)
    assert sorted(missing) == ["self_attn.selector.policy_proj.bias", "self_attn.selector.policy_proj.weight",
                               "self_attn.selector_name"]
    assert not unexpected
    force_select_all(ours)
    ours.train(train), theirs.train(train)
    ours.self_attn.report_statistics = True  # evaluation forwards report only when asked
    x, pad = inputs()
    for mask in (pad, None):
        x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
        y1, y2 = ours(x1, mask), theirs(x2, mask)
        torch.testing.assert_close(y1, y2, rtol=1e-5, atol=1e-5)
        g = torch.randn_like(y1)
        (y1 * g).sum().backward(), (y2 * g).sum().backward()
        torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-4, atol=1e-5)
    stats = ours.self_attn.pop_selection()
    assert stats.pairs_selected == stats.pairs_possible
