"""DiSA, source2token, Bi-BloSA and ReSA against direct loop implementations of their equations.

The references below loop over sentences, queries and keys and apply the papers' equations
token by token (float64), sharing only the parameter tensors with the modules under test, so
values AND gradients (w.r.t. inputs and parameters) are compared.
"""

import math

import pytest
import torch
import torch.nn.functional as F

import ssan_plugin  # noqa: F401  (registrations)
from ssan_plugin.modules.biblosan import BiBloSANAttention, MaskedBlockSelfAttention, default_block_length
from ssan_plugin.modules.disan import DiSANAttention, DirectionalSelfAttention
from ssan_plugin.modules.multidim_attention import (
    Source2Token,
    multidim_attention,
    multidim_attention_naive,
)
from ssan_plugin.modules.resa import ReSAAttention

C_SCALE = 5.0
torch.set_num_threads(1)


def allowed(i, j, direction):
    return {"fw": j < i, "bw": j > i, "none": j != i}[direction]


def direct_attention(hk, hq, key_proj, query_w, query_b, valid_keys, direction, qpos=None, kpos=None):
    """s_i = sum_j softmax_j(c tanh((W1 h_j + W2 h_i + b) / c)) h_j over allowed keys; 0 if none."""
    qpos = list(range(len(hq))) if qpos is None else qpos
    kpos = list(range(len(hk))) if kpos is None else kpos
    rows = []
    for i, hi in enumerate(hq):
        keys = [j for j in range(len(hk)) if valid_keys[j] and allowed(qpos[i], kpos[j], direction)]
        if not keys:
            rows.append(torch.zeros_like(hi))
            continue
        f = torch.stack([C_SCALE * torch.tanh((key_proj @ hk[j] + query_w @ hi + query_b) / C_SCALE) for j in keys])
        p = torch.softmax(f, dim=0)  # per feature, over keys
        rows.append(sum(p[n] * hk[j] for n, j in enumerate(keys)))
    return torch.stack(rows)


def direct_disa(block: DirectionalSelfAttention, x, pad):
    """DiSA of DESIGN section 2, one sentence at a time."""
    out = []
    for b in range(x.size(0)):
        valid = [not bool(pad[b, t]) for t in range(x.size(1))]
        h = F.elu(x[b] @ block.fc_h.weight.T + block.fc_h.bias)
        s = direct_attention(h, h, block.key_proj.weight, block.query_proj.weight, block.query_proj.bias,
                             valid, block.direction)
        wf = block.gate.weight
        d = h.size(-1)
        gate = torch.sigmoid(s @ wf[:, :d].T + h @ wf[:, d:].T + block.gate.bias)
        u = gate * h + (1 - gate) * s
        out.append(u * torch.tensor(valid, dtype=u.dtype).unsqueeze(-1))
    return torch.stack(out)


def grads(fn, tensors):
    out = fn()
    g = torch.autograd.grad((out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)).sum(),
                            tensors, allow_unused=True)
    return out.detach(), g


def assert_same(fn_a, fn_b, tensors, atol=1e-10):
    out_a, g_a = grads(fn_a, tensors)
    out_b, g_b = grads(fn_b, tensors)
    torch.testing.assert_close(out_a, out_b, atol=atol, rtol=1e-8)
    for ga, gb in zip(g_a, g_b):
        if gb is None:
            assert ga is None or ga.abs().max() == 0
        else:
            torch.testing.assert_close(ga, gb, atol=atol, rtol=1e-7)


def make_input(bsz=3, length=7, dim=6, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(bsz, length, dim, generator=gen, dtype=torch.float64, requires_grad=True)
    pad = torch.zeros(bsz, length, dtype=torch.bool)
    pad[1, length - 3:] = True  # right padding
    pad[2, 1:] = True  # a single token: no key in any direction
    return x, pad


@pytest.mark.parametrize("direction", ["fw", "bw", "none"])
@pytest.mark.parametrize("implementation", ["blocked", "naive"])
def test_disa_matches_direct_equations(direction, implementation):
    torch.manual_seed(0)
    block = DirectionalSelfAttention(6, 4, direction, implementation=implementation, query_block=3).double()
    x, pad = make_input()
    params = [x] + list(block.parameters())
    assert_same(lambda: block(x, pad), lambda: direct_disa(block, x, pad), params)


def test_blocked_equals_naive_values_and_grads_with_weights():
    """Random positive key weights, query mask, uneven last block, positions as (N, T)."""
    gen = torch.Generator().manual_seed(1)
    n, t, s, d = 2, 7, 5, 3
    a = torch.randn(n, s, d, generator=gen, dtype=torch.float64, requires_grad=True)
    q = torch.randn(n, t, d, generator=gen, dtype=torch.float64, requires_grad=True)
    v = torch.randn(n, s, d, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.tensor([[1, 0, 1, 1, 0], [0, 0, 0, 0, 1]], dtype=torch.float64, requires_grad=True)
    q_ok = torch.rand(n, t, generator=gen) > 0.3
    q_pos = torch.tensor([[0, 2, 3, 5, 6, 8, 9], [1, 2, 3, 4, 5, 6, 7]])
    k_pos = torch.tensor([[1, 2, 4, 6, 7], [0, 3, 5, 6, 8]])
    for direction in ("fw", "bw", "none"):
        kw = dict(q_pos=q_pos, k_pos=k_pos, query_ok=q_ok)
        assert_same(lambda: multidim_attention(a, q, v, w, direction, query_block=3, **kw),
                    lambda: multidim_attention_naive(a, q, v, w, direction, **kw), [a, q, v, w])
    # finite differences where the weights are positive (a 0 weight is a kink of the convention)
    wpos = (torch.rand(n, s, generator=gen, dtype=torch.float64) + 0.2).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda a, q, v, w: multidim_attention(a, q, v, w, "fw", query_block=2, q_pos=q_pos, k_pos=k_pos),
        (a, q, v, wpos))


def test_rows_without_key_are_zero_and_first_last_tokens():
    x, pad = make_input()
    for direction, empty_index in (("fw", 0), ("bw", -1)):
        block = DirectionalSelfAttention(6, 4, direction).double()
        h = block.features(x)
        s = block.context(h, (~pad).double())
        assert s[0, empty_index].abs().max() == 0  # first (fw) / last (bw) token: no key
        assert s[2, 0].abs().max() == 0  # one-token sentence: its token has no key at all
        assert s[0, 3].abs().max() > 0
        u = block(x, pad)
        assert torch.isfinite(u).all() and u[1, -3:].abs().max() == 0  # zero at pads
    # with only pads as candidate keys nothing leaks from pads
    a = torch.randn(1, 3, 2, dtype=torch.float64)
    v = torch.full((1, 3, 2), 1e6, dtype=torch.float64)
    out = multidim_attention(a, torch.randn(1, 3, 2, dtype=torch.float64), v,
                             torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64), "fw")
    assert out[0, 0].abs().max() == 0 and torch.allclose(out[0, 1:], v[0, :1].expand(2, 2))


def test_blocked_never_holds_the_full_pair_tensor(monkeypatch):
    """Every tensor the blocked form materialises has at most block x S x D x N elements."""
    seen = []
    real_exp = torch.exp

    def spy(t, *args, **kwargs):
        seen.append(t.numel())
        return real_exp(t, *args, **kwargs)

    monkeypatch.setattr(torch, "exp", spy)
    n, t, d, block = 2, 24, 4, 3
    a, q, v = (torch.randn(n, t, d, requires_grad=True) for _ in range(3))
    out = multidim_attention(a, q, v, torch.ones(n, t), "fw", query_block=block)
    out.sum().backward()
    assert seen and max(seen) == n * block * t * d < n * t * t * d


def direct_source2token(s2t: Source2Token, x, pad):
    out = []
    for b in range(x.size(0)):
        tokens = [t for t in range(x.size(1)) if not pad[b, t]]
        if not tokens:
            out.append(torch.zeros_like(x[b, 0]))
            continue
        rows = []
        for t in tokens:
            h = F.elu(s2t.hidden.weight @ x[b, t] + s2t.hidden.bias) if s2t.hidden is not None else x[b, t]
            rows.append(s2t.score.weight @ h + s2t.score.bias)
        p = torch.softmax(torch.stack(rows), dim=0)
        out.append(sum(p[n] * x[b, t] for n, t in enumerate(tokens)))
    return torch.stack(out)


@pytest.mark.parametrize("hidden", [0, 5])
def test_source2token_matches_direct(hidden):
    torch.manual_seed(0)
    s2t = Source2Token(6, hidden).double()
    x, pad = make_input()
    pad = torch.cat([pad, torch.ones(1, pad.size(1), dtype=torch.bool)])  # an all-pad row
    x = torch.cat([x, torch.randn(1, *x.shape[1:], dtype=x.dtype)]).detach().requires_grad_()
    assert_same(lambda: s2t(x, pad), lambda: direct_source2token(s2t, x, pad), [x] + list(s2t.parameters()))
    assert s2t(x, pad)[-1].abs().max() == 0


def direct_mblosa(m: MaskedBlockSelfAttention, x, pad, r):
    """mBloSA of DESIGN section 3 with explicit blocks (the last one simply shorter)."""
    direction = m.intra.direction
    out = []
    for b in range(x.size(0)):
        length = x.size(1)
        valid = [not bool(pad[b, t]) for t in range(length)]
        xd = F.elu(x[b] @ m.fc.weight.T + m.fc.bias)
        blocks = [list(range(start, min(start + r, length))) for start in range(0, length, r)]
        h_rows, v_rows, block_valid = [None] * length, [], []
        for blk in blocks:
            hb = xd[blk]
            s = direct_attention(hb, hb, m.intra.key_proj.weight, m.intra.query_proj.weight,
                                 m.intra.query_proj.bias, [valid[t] for t in blk], direction)
            for n, t in enumerate(blk):
                h_rows[t] = s[n] if valid[t] else torch.zeros_like(s[n])
            hb_valid = torch.stack([h_rows[t] for t in blk])
            bpad = torch.tensor([[not valid[t] for t in blk]])
            v_rows.append(direct_source2token(m.source2token, hb_valid.unsqueeze(0), bpad)[0])
            block_valid.append(any(valid[t] for t in blk))
        h = torch.stack(h_rows)
        v = torch.stack(v_rows)
        o = direct_attention(v, v, m.inter.key_proj.weight, m.inter.query_proj.weight, m.inter.query_proj.bias,
                             block_valid, direction)
        d = v.size(-1)
        wg = m.block_gate.weight
        g = torch.sigmoid(o @ wg[:, :d].T + v @ wg[:, d:].T + m.block_gate.bias)
        e = g * o + (1 - g) * v
        big_e = torch.stack([e[t // r] for t in range(length)])
        cat = torch.cat([xd, h, big_e], dim=-1)
        fused = F.elu(cat @ m.fusion.weight.T + m.fusion.bias)
        gate = torch.sigmoid(cat @ m.fusion_gate.weight.T + m.fusion_gate.bias)
        u = gate * fused + (1 - gate) * xd
        out.append(u * torch.tensor(valid, dtype=u.dtype).unsqueeze(-1))
    return torch.stack(out)


@pytest.mark.parametrize("direction", ["fw", "bw"])
@pytest.mark.parametrize("block_length", [0, 3, 1, 10])
def test_mblosa_matches_direct(direction, block_length):
    torch.manual_seed(0)
    m = MaskedBlockSelfAttention(6, 4, direction, block_length=block_length).double()
    x, pad = make_input(length=8)  # 8 is not a multiple of 3 nor of the default r = 3
    r = block_length or default_block_length(8)
    assert_same(lambda: m(x, pad), lambda: direct_mblosa(m, x, pad, r), [x] + list(m.parameters()))


def test_default_block_length():
    assert [default_block_length(n) for n in (1, 4, 13, 32, 108, 256, 384)] == [
        math.ceil((2 * n) ** (1 / 3) - 1e-9) for n in (1, 4, 13, 32, 108, 256, 384)]
    assert default_block_length(4) == 2 and default_block_length(32) == 4 and default_block_length(108) == 6


def direct_resa_direction(block, x, pad, z_head, z_dep):
    """One ReSA direction: selected head i attends selected dependents j != i (direction);
    an unselected head gets the mean of h over the other valid tokens of its direction."""
    out = []
    for b in range(x.size(0)):
        length = x.size(1)
        valid = [not bool(pad[b, t]) for t in range(length)]
        h = F.elu(x[b] @ block.fc_h.weight.T + block.fc_h.bias)
        keys_ok = [valid[j] and bool(z_dep[b, j]) for j in range(length)]
        att = direct_attention(h, h, block.key_proj.weight, block.query_proj.weight, block.query_proj.bias,
                               keys_ok, block.direction)
        rows = []
        for i in range(length):
            if valid[i] and z_head[b, i]:
                rows.append(att[i])
            else:
                others = [h[j] for j in range(length) if valid[j] and allowed(i, j, block.direction)]
                rows.append(sum(others) / len(others) if others else torch.zeros_like(h[i]))
        s = torch.stack(rows)
        d = h.size(-1)
        wf = block.gate.weight
        gate = torch.sigmoid(s @ wf[:, :d].T + h @ wf[:, d:].T + block.gate.bias)
        u = gate * h + (1 - gate) * s
        out.append(u * torch.tensor(valid, dtype=u.dtype).unsqueeze(-1))
    return torch.stack(out)


def fixed_selection(z_head, z_dep, straight_through=False):
    calls = iter([z_head, z_dep])

    def select(logits, valid):
        z = next(calls).to(logits.dtype) * valid
        if straight_through:  # value z, gradient path through the logits (as the Gumbel mode)
            y = torch.sigmoid(logits)
            z = z + (y - y.detach()) * valid
        return z, None

    return select


@pytest.mark.parametrize("direction", ["none", "bi"])
@pytest.mark.parametrize("straight_through", [False, True])
def test_resa_with_given_selection_matches_direct(direction, straight_through):
    torch.manual_seed(0)
    m = ReSAAttention(6, direction=direction, rss_hidden=4).double()
    x, pad = make_input(length=6)
    z_head = torch.tensor([[1, 0, 1, 1, 0, 1], [0, 1, 1, 0, 1, 1], [1, 1, 1, 1, 1, 1]])
    z_dep = torch.tensor([[1, 1, 0, 1, 1, 0], [1, 0, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])

    def module():
        m.select = fixed_selection(z_head, z_dep, straight_through)
        return m.encode(x, pad)

    def direct():
        return torch.cat([direct_resa_direction(blk, x, pad, z_head, z_dep) for blk in m.blocks], dim=-1)

    params = [p for n, p in m.named_parameters() if "rss" not in n]
    # with straight-through selections x also reaches the output through the RSS logits
    assert_same(module, direct, params if straight_through else [x] + params)
    if straight_through:
        module().sum().backward()
        assert m.dep_rss.out.weight.grad.abs().sum() > 0 and m.head_rss.out.weight.grad.abs().sum() > 0
    stats = m.selection_stats
    valid = (~pad).long()
    assert stats["head_selected"] == (z_head * valid).sum() and stats["dep_selected"] == (z_dep * valid).sum()
    pairs = sum(int((z_head[b] * valid[b]).sum() * (z_dep[b] * valid[b]).sum()
                    - (z_head[b] * z_dep[b] * valid[b]).sum()) for b in range(3))
    assert stats["pair_selected"] == pairs


def test_resa_everything_selected_equals_masked_attention():
    """Warm-up selects every token: ReSA equals DiSA with the diag-disabled mask ('none'), and
    ReSA 'bi' equals DiSAN (forward + backward) with the same weights."""
    torch.manual_seed(0)
    x, pad = make_input(length=6)
    resa = ReSAAttention(6, warmup_updates=5, direction="none").double()
    assert_same(lambda: resa.encode(x, pad), lambda: resa.blocks[0](x, pad),
                [x] + list(resa.blocks[0].parameters()))
    assert resa.selection_stats["selected"] == resa.selection_stats["pairs"]

    resa_bi = ReSAAttention(6, warmup_updates=5, direction="bi").double()
    disan = DiSANAttention(6).double()
    disan.fw.load_state_dict(resa_bi.blocks[0].state_dict())
    disan.bw.load_state_dict(resa_bi.blocks[1].state_dict())
    disan.out_proj.load_state_dict(resa_bi.out_proj.state_dict())
    xt = x.transpose(0, 1)
    torch.testing.assert_close(resa_bi(xt, xt, xt, key_padding_mask=pad)[0], disan(xt, xt, xt, key_padding_mask=pad)[0])


def test_fairseq_call_signature_and_pads():
    torch.manual_seed(0)
    x, pad = make_input(length=5)
    xt = x.detach().float().transpose(0, 1).contiguous()
    for attn in (DiSANAttention(6), DiSANAttention(6, implementation="naive"), BiBloSANAttention(6),
                 ReSAAttention(6), ReSAAttention(6, estimator="gumbel", direction="bi")):
        out, weights = attn(query=xt, key=xt, value=xt, key_padding_mask=pad, need_weights=False, attn_mask=None)
        assert weights is None and out.shape == xt.shape and torch.isfinite(out).all()
        assert out.transpose(0, 1)[pad].abs().max() == 0
        short = xt[:2, :1]
        out_nopad, _ = attn(query=short, key=short, value=short, key_padding_mask=None)
        assert out_nopad.shape == (2, 1, 6)
        with pytest.raises(ValueError, match="attn_mask"):
            attn(query=xt, key=xt, value=xt, attn_mask=torch.zeros(5, 5))
        assert (attn.selection_stats is None) == (not isinstance(attn, ReSAAttention))


@pytest.mark.parametrize("make", [
    lambda: DiSANAttention(8), lambda: DiSANAttention(8, implementation="naive"), lambda: BiBloSANAttention(8),
    lambda: ReSAAttention(8), lambda: ReSAAttention(8, estimator="gumbel", direction="bi"),
])
@pytest.mark.parametrize("length", [1, 9])
def test_finite_in_bf16_autocast_and_with_1e4_inputs(make, length):
    torch.manual_seed(0)
    attn = make()
    pad = torch.zeros(2, length, dtype=torch.bool)
    pad[1, length // 2 + 1:] = True
    x = torch.randn(length, 2, 8) * 1e4
    x[0, 0] = 1e4
    x[-1, 0] = -1e4
    x.requires_grad_()
    for autocast in (False, True):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out, _ = attn(x, x, x, key_padding_mask=pad)
        out.float().pow(2).mean().backward()
        assert torch.isfinite(out).all(), autocast
        assert torch.isfinite(x.grad).all() and all(
            p.grad is None or torch.isfinite(p.grad).all() for p in attn.parameters())
        x.grad = None
        attn.zero_grad()
