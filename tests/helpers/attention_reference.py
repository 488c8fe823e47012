"""Direct loop implementations of the DiSA, source2token, mBloSA and ReSA equations, and the
value-and-gradient comparison used against them (tests/unit/modules/test_disan.py,
test_multidim_attention.py, test_biblosan.py, test_resa.py, test_variant_self_attention.py).

The references loop over sentences, queries and keys and apply the papers' equations token by
token (float64), sharing only the parameter tensors with the modules under test, so values AND
gradients (w.r.t. inputs and parameters) are compared.
"""

import torch
import torch.nn.functional as F

from ssan_plugin.modules.biblosan import MaskedBlockSelfAttention
from ssan_plugin.modules.disan import DirectionalSelfAttention
from ssan_plugin.modules.multidim_attention import Source2Token


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


def direct_attention_weights(hk, hq, key_proj, query_w, query_b, valid_keys, direction):
    """P, (len(hq), len(hk), D): per query and feature, softmax over the allowed keys of
    c tanh((W1 h_j + W2 h_i + b) / c); 0 at keys not allowed and in rows without a key."""
    p = torch.zeros(len(hq), len(hk), hk.size(-1), dtype=hk.dtype)
    for i, hi in enumerate(hq):
        keys = [j for j in range(len(hk)) if valid_keys[j] and allowed(i, j, direction)]
        if keys:
            f = torch.stack([C_SCALE * torch.tanh((key_proj @ hk[j] + query_w @ hi + query_b) / C_SCALE)
                             for j in keys])
            p[i, keys] = torch.softmax(f, dim=0)
    return p


def direct_disa_weights(block: DirectionalSelfAttention, x, pad):
    """(B, T, T): DiSA's P averaged over features, one sentence at a time."""
    out = []
    for b in range(x.size(0)):
        valid = [not bool(pad[b, t]) for t in range(x.size(1))]
        h = F.elu(x[b] @ block.fc_h.weight.T + block.fc_h.bias)
        out.append(direct_attention_weights(h, h, block.key_proj.weight, block.query_proj.weight,
                                            block.query_proj.bias, valid, block.direction).mean(-1))
    return torch.stack(out)


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


def direct_mblosa_weights(m: MaskedBlockSelfAttention, x, pad, r):
    """(B, 2, T, T) with explicit blocks: [intra-block P averaged over features; for query i
    and token j, mean_d P_inter(block(i), block(j), d) * P_s2t(j, d)]."""
    direction = m.intra.direction
    out = []
    for b in range(x.size(0)):
        length = x.size(1)
        valid = [not bool(pad[b, t]) for t in range(length)]
        xd = F.elu(x[b] @ m.fc.weight.T + m.fc.bias)
        blocks = [list(range(start, min(start + r, length))) for start in range(0, length, r)]
        intra = torch.zeros(length, length, dtype=x.dtype)
        s2t, v_rows, block_valid = torch.zeros(length, xd.size(-1), dtype=x.dtype), [], []
        for blk in blocks:
            hb = xd[blk]
            bvalid = [valid[t] for t in blk]
            w = direct_attention_weights(hb, hb, m.intra.key_proj.weight, m.intra.query_proj.weight,
                                         m.intra.query_proj.bias, bvalid, direction)
            intra[blk[0]:blk[-1] + 1, blk[0]:blk[-1] + 1] = w.mean(-1)
            s = direct_attention(hb, hb, m.intra.key_proj.weight, m.intra.query_proj.weight,
                                 m.intra.query_proj.bias, bvalid, direction)
            h = s * torch.tensor(bvalid, dtype=s.dtype).unsqueeze(-1)
            tokens = [n for n, ok in enumerate(bvalid) if ok]
            if tokens:
                scores = torch.stack([m.source2token.score.weight @ h[n] + m.source2token.score.bias
                                      for n in tokens])
                s2t[[blk[n] for n in tokens]] = torch.softmax(scores, dim=0)
            v_rows.append(direct_source2token(m.source2token, h.unsqueeze(0),
                                              torch.tensor([[not ok for ok in bvalid]]))[0])
            block_valid.append(any(bvalid))
        v = torch.stack(v_rows)
        p_inter = direct_attention_weights(v, v, m.inter.key_proj.weight, m.inter.query_proj.weight,
                                           m.inter.query_proj.bias, block_valid, direction)
        inter = torch.stack([torch.stack([(p_inter[i // r, j // r] * s2t[j]).mean()
                                          for j in range(length)]) for i in range(length)])
        out.append(torch.stack([intra, inter]))
    return torch.stack(out)


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
