#!/usr/bin/python3
"""smoe's model written in PyTorch (eager, float32) for bench/vs_torch.sh:
the DeepSeek-style MoE decoder of src/model/ with the same shapes, the same
work per step (forward, backward, AdamW) and one thread.

  x      = embed[tokens]
  layer  : x += MLA(rmsnorm(x) * pre_norm); h2 = rmsnorm(x) * post_norm
           x += dense ? SwiGLU-MLP(h2) : shared(h2) + sum_k w_k expert_k(h2)
  MLA    : q = (rmsnorm(h @ wq_a) * q_norm) @ wq_b  (T, H, nope + rope)
           [c_kv | k_pe] = h @ wkv_a; kv = (rmsnorm(c_kv) * kv_norm) @ wkv_b
           k = [k_nope(head) | k_pe], RoPE (pairs (i, i + d/2), MaxText's
           timescales 1 .. 10000) on q's and k's rope dims, causal softmax
           attention per sequence and head (full (s, s) scores, as smoe),
           o @ out
  MoE    : softmax router over E experts, top-k (not renormalised, routed
           scale 1), dropless; the rows of each expert gathered, its SwiGLU
           MLP run on them, scattered back weighted; one shared expert
  head   : rmsnorm(x) * final_norm @ logits; mean cross-entropy
usage: torch_model.py tiny|wide|big STEPS [--device cpu|cuda] [--dtype fp32|bf16]
  -> one JSON line: params, median step ms and quartiles over STEPS steps
  after one warm-up step, the step-0 loss, the device and dtype.
On cuda the step is timed between two torch.cuda.synchronize(); bf16 runs
the forward under torch.autocast (bf16 matrix products with fp32
accumulation, fp32 master weights and AdamW), as smoe's bf16 mode.
"""
import argparse
import json
import math
import time

import torch
import torch.nn.functional as F

CFG = {
    # smoe train's default run: configs/models/tiny.yml, per_device_batch_size 4,
    # max_target_length 128
    "tiny": dict(emb=128, heads=4, q_lora=32, kv_lora=32, nope=16, rope=8, v=16, mlp=256,
                 moe_mlp=64, experts=8, topk=2, shared=1, vocab=256, n_dense=1, n_moe=3,
                 seq=128, batch=4),
    # the 512-wide configuration of bench/vs_torch.sh
    "wide": dict(emb=512, heads=8, q_lora=128, kv_lora=128, nope=64, rope=32, v=64, mlp=1024,
                 moe_mlp=256, experts=8, topk=2, shared=1, vocab=256, n_dense=1, n_moe=3,
                 seq=256, batch=4),
    # a compute-bound configuration for a GPU: 1.22e9 parameters (7 MoE layers
    # of 16 experts hold most of them), sequences of 2048
    "big": dict(emb=2048, heads=16, q_lora=512, kv_lora=512, nope=128, rope=64, v=128,
                mlp=8192, moe_mlp=1408, experts=16, topk=2, shared=1, vocab=32000, n_dense=1,
                n_moe=7, seq=2048, batch=1),
}


def rmsnorm(x, scale, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * scale


def swiglu_mlp(x, wi0, wi1, wo):
    return (F.silu(x @ wi0) * (x @ wi1)) @ wo


class Model(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        D, H = c["emb"], c["heads"]
        dq = c["nope"] + c["rope"]
        P = torch.nn.Parameter

        def w(*shape):
            return P(torch.randn(*shape) / math.sqrt(shape[-2]))

        self.layers = torch.nn.ModuleList()
        for layer in range(c["n_dense"] + c["n_moe"]):
            m = torch.nn.Module()
            m.pre_norm, m.post_norm = P(torch.ones(D)), P(torch.ones(D))
            m.wq_a, m.q_norm = w(D, c["q_lora"]), P(torch.ones(c["q_lora"]))
            m.wq_b = w(c["q_lora"], H * dq)
            m.wkv_a, m.kv_norm = w(D, c["kv_lora"] + c["rope"]), P(torch.ones(c["kv_lora"]))
            m.wkv_b = w(c["kv_lora"], H * (c["nope"] + c["v"]))
            m.out = w(H * c["v"], D)
            if layer < c["n_dense"]:
                m.wi0, m.wi1, m.wo = w(D, c["mlp"]), w(D, c["mlp"]), w(c["mlp"], D)
            else:
                sw, mm, e = c["shared"] * c["moe_mlp"], c["moe_mlp"], c["experts"]
                m.gate = w(D, e)
                m.sh_wi0, m.sh_wi1, m.sh_wo = w(D, sw), w(D, sw), w(sw, D)
                m.ex_wi0, m.ex_wi1, m.ex_wo = w(e, D, mm), w(e, D, mm), w(e, mm, D)
            self.layers.append(m)
        self.embed = P(torch.randn(c["vocab"], D))
        self.final_norm = P(torch.ones(D))
        self.logits = w(D, c["vocab"])
        half = c["rope"] // 2
        inv = 1.0 / (10000.0 ** (torch.arange(half, dtype=torch.float64) * 2 / c["rope"]))
        ang = torch.arange(c["seq"], dtype=torch.float64)[:, None] * inv[None, :]
        self.register_buffer("cos", ang.cos().float(), persistent=False)  # (seq, half)
        self.register_buffer("sin", ang.sin().float(), persistent=False)
        mscale = 1.8739  # MaxText's MLA softmax multiplier of smoe's bundled run
        self.scale = mscale / math.sqrt(dq)

    def rope(self, x):  # x (B, S, heads, rope): pairs (i, i + d/2)
        h = x.shape[-1] // 2
        a, b = x[..., :h], x[..., h:]
        cs, sn = self.cos[None, :, None, :], self.sin[None, :, None, :]
        return torch.cat([a * cs - b * sn, a * sn + b * cs], -1)

    def mla(self, m, x):
        c = self.c
        B, S, D = x.shape
        H, dn, dr, dv, R = c["heads"], c["nope"], c["rope"], c["v"], c["kv_lora"]
        h = rmsnorm(x, m.pre_norm)
        q = (rmsnorm(h @ m.wq_a, m.q_norm) @ m.wq_b).view(B, S, H, dn + dr)
        q = torch.cat([q[..., :dn], self.rope(q[..., dn:])], -1)
        kva = h @ m.wkv_a
        kpe = self.rope(kva[..., R:].view(B, S, 1, dr)).expand(B, S, H, dr)
        kv = (rmsnorm(kva[..., :R], m.kv_norm) @ m.wkv_b).view(B, S, H, dn + dv)
        k = torch.cat([kv[..., :dn], kpe], -1)
        v = kv[..., dn:]
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, S, d)
        s = (q @ k.transpose(-1, -2)) * self.scale
        mask = torch.ones(S, S, dtype=torch.bool, device=x.device).triu(1)
        p = s.masked_fill(mask, float("-inf")).softmax(-1)
        o = (p @ v).transpose(1, 2).reshape(B, S, H * dv)
        return x + o @ m.out

    def moe(self, m, h):
        c = self.c
        T = h.shape[0]
        y = swiglu_mlp(h, m.sh_wi0, m.sh_wi1, m.sh_wo)
        scores = (h @ m.gate).softmax(-1)
        wts, top = scores.topk(c["topk"], -1)  # (T, K)
        flat_e = top.reshape(-1)
        flat_t = torch.arange(T, device=h.device).repeat_interleave(c["topk"])
        flat_w = wts.reshape(-1)
        for e in range(c["experts"]):
            sel = (flat_e == e).nonzero().squeeze(1)
            if sel.numel() == 0:
                continue
            rows = flat_t[sel]
            ye = swiglu_mlp(h[rows], m.ex_wi0[e], m.ex_wi1[e], m.ex_wo[e])
            y = y.index_add(0, rows, (ye * flat_w[sel, None]).to(y.dtype))
        return y

    def forward(self, tokens, targets):
        c = self.c
        B, S = tokens.shape
        x = self.embed[tokens]
        for i, m in enumerate(self.layers):
            x = self.mla(m, x)
            h2 = rmsnorm(x, m.post_norm).reshape(B * S, -1)
            if i < c["n_dense"]:
                f = swiglu_mlp(h2, m.wi0, m.wi1, m.wo)
            else:
                f = self.moe(m, h2)
            x = x + f.view(B, S, -1)
        lg = rmsnorm(x, self.final_norm) @ self.logits
        return F.cross_entropy(lg.view(B * S, -1), targets.view(-1))


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config", choices=sorted(CFG))
    ap.add_argument("steps", type=int)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    a = ap.parse_args()
    dev = torch.device(a.device)
    if dev.type == "cpu":
        torch.set_num_threads(1)
    else:  # fp32 is the tight mode: no TF32 anywhere
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    c = CFG[a.config]
    model = Model(c).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.01)
    g = torch.Generator().manual_seed(1)
    tok = torch.randint(0, c["vocab"], (c["batch"], c["seq"] + 1), generator=g).to(dev)
    inp, tgt = tok[:, :-1].contiguous(), tok[:, 1:].contiguous()
    amp = a.dtype == "bf16"
    times, loss0 = [], None
    for step in range(a.steps + 1):  # STEPS = 0: the warm-up step only
        sync(dev)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=amp):
            loss = model(inp, tgt)
        loss.float().backward()
        opt.step()
        sync(dev)
        dt = time.perf_counter() - t0
        if step == 0:
            loss0 = loss.item()
        else:
            times.append(dt * 1e3)
    times.sort()
    n = len(times)
    if n == 0:
        times, n = [0.0], 1
    med = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
    print(json.dumps({"params": sum(p.numel() for p in model.parameters()), "median_step_ms": med,
                      "p25_step_ms": times[n // 4], "p75_step_ms": times[(3 * n) // 4],
                      "loss0": loss0, "torch": torch.__version__,
                      "threads": torch.get_num_threads(), "device": str(dev),
                      "dtype": a.dtype}))


if __name__ == "__main__":
    main()
