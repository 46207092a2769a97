#!/usr/bin/env python3
"""Time one Wan2.1-T2V-1.3B transformer layer in PyTorch on the CPU or a CUDA GPU.

For timing comparisons only: it is not part of the Go build or tests, and
the project does not depend on Python. It runs, in PyTorch with random
weights, the forward call that `densitykv bench wan` and
bench BenchmarkWan13BOneLayer time (RunWan with LayersRun = 1, the
fixed-context run), so the two can be compared on the same CPU:

  - patch embedding of 3 latent frames of 60x104 (1x2x2 patches: 3 x 30 x 52
    = 4,680 tokens), time embedding and projection (e, e0), then one
    WanAttentionBlock (dim 1536, 12 heads of 128, ffn 8960):
      x += SelfAttn(LN(x)(1+m1)+m0) * m2   q, k RMS-normed, 3D RoPE on q and k;
                                           k, v written into the last 4,680 rows
                                           of a 12-frame context (18,720 keys)
                                           that the queries attend in full
      x += CrossAttn(LN_affine(x), text)   q RMS-normed; the 512 text rows' K/V
                                           are computed once per prompt, untimed
                                           (wan.EmbedText)
      x += FFN(LN(x)(1+m4)+m3) * m5        tanh-GELU
  - the head (LN, modulation by e, Linear 1536 -> 64) and unpatchify.

The Go bench's fixed-context policy does not apply RoPE (a negligible
cost); this script does unless --no-rope. FLOPs are counted as
wan.Config.FLOPs counts them (2*m*n*k per matrix product, QK^T and PV
included; element-wise steps not counted), at one layer: 945.07 GFLOP per
call at the full shape, of which QK^T and PV are 538.27 (4*T*S*dim), the FFN
257.64, the self- and cross-attention projections 132.50, the cross-attention
products 14.73 and the embeddings and head 1.94.

Precision: fp32 runs everything in float32. bf16 holds the weights, the
products' inputs and outputs, the attention and the K/V context in bfloat16
(as a bfloat16 PyTorch model does); the residual stream, norms, modulation
and RoPE stay float32 (as in Wan's reference code and our Go model, whose
bf16 mode rounds only the products' inputs).

Run (needs torch 1.13 or 2.x; uses scaled_dot_product_attention when present,
else chunked softmax(QK^T/sqrt(d))V):
  python3 scripts/compare/torch_wan_layer.py --threads 2 --dtype both --calls 3
  python3 scripts/compare/torch_wan_layer.py --json > wan_torch.json
  python3 scripts/compare/torch_wan_layer.py --tiny      # seconds-long smoke test
Options: --threads N (torch.set_num_threads, default 2), --dtype fp32|bf16|both,
--calls N (timed calls after one warm-up, default 3), --json, --no-rope,
--attn auto|sdpa|chunked. Compare with
  go test ./bench -run '^$' -bench Wan13BOneLayer   (or densitykv bench wan)
"""

import argparse
import json
import math
import statistics
import time

import torch
import torch.nn.functional as F

from machine import blas_info, cpu_model

FULL = dict(dim=1536, heads=12, ffn=8960, text_len=512, freq=256, in_dim=16, out_dim=16,
            height=60, width=104, frames=3, context_frames=12)
TINY = dict(dim=256, heads=2, ffn=512, text_len=16, freq=256, in_dim=16, out_dim=16,
            height=8, width=8, frames=3, context_frames=12)
EPS = 1e-6
ATT_CHUNK = 256  # queries per chunk of the fallback attention
USE_SDPA = hasattr(F, "scaled_dot_product_attention")


def flops(s):
    """wan.Config.FLOPs(tokens, keys, frames) with Layers = 1."""
    d, ffn, L = s["dim"], s["ffn"], s["text_len"]
    T, S, Fr = s["tokens"], s["keys"], s["frames"]
    patch_len, out_len = s["in_dim"] * 4, s["out_dim"] * 4
    per_layer = 8 * T * d * d + 4 * T * S * d + 4 * T * d * d + 4 * T * L * d + 4 * T * d * ffn
    return (2 * T * patch_len * d + 2 * Fr * (s["freq"] * d + d * d + 6 * d * d)
            + per_layer + 2 * T * d * out_len)


def attention(q, k, v):
    """softmax(q k^T / sqrt(D)) v for q [1,H,T,D], k, v [1,H,S,D]."""
    if USE_SDPA:
        return F.scaled_dot_product_attention(q, k, v)
    scale = 1.0 / math.sqrt(q.shape[-1])
    out = torch.empty_like(q)
    kt = k.transpose(-1, -2)
    for i in range(0, q.shape[2], ATT_CHUNK):
        s = torch.matmul(q[:, :, i:i + ATT_CHUNK], kt).float().mul_(scale)
        p = torch.softmax(s, dim=-1).to(v.dtype)
        out[:, :, i:i + ATT_CHUNK] = torch.matmul(p, v)
    return out


def rms_norm(x, w):
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def rope_table(s):
    """Wan's 3D RoPE as one complex factor per token and pair: [T, 1, D/2]."""
    c = s["dim"] // s["heads"] // 2
    split = [c - 2 * (c // 3), c // 3, c // 3]  # frame, height, width
    gh, gw, Fr = s["height"] // 2, s["width"] // 2, s["frames"]
    pos = [torch.arange(Fr).repeat_interleave(gh * gw), torch.arange(gh).repeat_interleave(gw).repeat(Fr),
           torch.arange(gw).repeat(Fr * gh)]
    angles = []
    for n, p in zip(split, pos):
        inv = 1.0 / 10000 ** (torch.arange(n, dtype=torch.float64) * 2 / (2 * n))
        angles.append(p.double()[:, None] * inv[None, :])
    a = torch.cat(angles, 1)
    return torch.polar(torch.ones_like(a), a).to(torch.complex64)[:, None, :]


def rope(x, table):
    """x [T, H, D] float32 -> rotated (an element-wise complex multiply)."""
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * table).flatten(-2)


class Layer:
    """Random weights and state of the timed call (one layer + embeddings + head)."""

    def __init__(self, s, dt, seed=0):
        g = torch.Generator().manual_seed(seed)
        d, ffn = s["dim"], s["ffn"]
        self.s, self.dt = s, dt

        def lin(i, o):  # (weight [o][i], bias [o]), both at dt for F.linear
            w = (torch.randn(o, i, generator=g) / math.sqrt(i)).to(dt)
            return w, (0.01 * torch.randn(o, generator=g)).to(dt)

        def norm():
            return 1 + 0.1 * torch.randn(d, generator=g)

        self.patch = lin(s["in_dim"] * 4, d)
        self.t0, self.t2, self.tproj = lin(s["freq"], d), lin(d, d), lin(d, 6 * d)
        self.sq, self.sk, self.sv, self.so = (lin(d, d) for _ in range(4))
        self.cq, self.ck, self.cv, self.co = (lin(d, d) for _ in range(4))
        self.snq, self.snk, self.cnq, self.cnk = norm(), norm(), norm(), norm()
        self.n3w, self.n3b = norm(), 0.01 * torch.randn(d, generator=g)
        self.f0, self.f2 = lin(d, ffn), lin(ffn, d)
        self.mod = 0.1 * torch.randn(1, 6, d, generator=g)
        self.head, self.head_mod = lin(d, s["out_dim"] * 4), 0.1 * torch.randn(1, 2, d, generator=g)
        H, D, S = s["heads"], d // s["heads"], s["keys"]
        # The steady-state self-attention context (history + the block's own rows).
        self.kc = torch.randn(1, H, S, D, generator=g).to(dt)
        self.vc = torch.randn(1, H, S, D, generator=g).to(dt)
        # The prompt's cross-attention K/V, once per prompt (untimed, as wan.EmbedText).
        text = torch.randn(s["text_len"], d, generator=g)
        k = rms_norm(self.linear(text, self.ck), self.cnk).to(dt)
        v = self.linear(text, self.cv)
        self.tk = k.view(-1, H, D).transpose(0, 1)[None].contiguous()
        self.tv = v.view(-1, H, D).transpose(0, 1)[None].contiguous()
        self.rope = rope_table(s)
        self.latent = torch.randn(s["frames"], s["in_dim"], s["height"], s["width"], generator=g)

    def linear(self, x, wb):
        return F.linear(x.to(self.dt), wb[0], wb[1])

    def heads(self, x):  # [T, dim] -> [1, H, T, D]
        return x.view(x.shape[0], self.s["heads"], -1).transpose(0, 1)[None]

    def forward(self, t, use_rope=True):
        s, dt = self.s, self.dt
        d, H, Fr = s["dim"], s["heads"], s["frames"]
        gh, gw = s["height"] // 2, s["width"] // 2
        T, tpf = s["tokens"], gh * gw
        # Patch embedding: (f, c, h·2+q, w·2+r) -> token (f, h, w), vector (c, q, r).
        p = self.latent.view(Fr, s["in_dim"], gh, 2, gw, 2).permute(0, 2, 4, 1, 3, 5).reshape(T, -1)
        x = self.linear(p, self.patch).float()
        # Time embedding per frame: sinusoid -> Linear, SiLU, Linear -> e; SiLU, Linear -> e0.
        half = s["freq"] // 2
        dev = self.latent.device
        a = t[:, None].double() * torch.pow(10000, -torch.arange(half, dtype=torch.float64, device=dev) / half)
        sin = torch.cat([torch.cos(a), torch.sin(a)], 1).float()
        e = self.linear(F.silu(self.linear(sin, self.t0).float()), self.t2).float()
        e0 = self.linear(F.silu(e), self.tproj).float().view(Fr, 6, d)
        m = (self.mod + e0).unbind(1)  # m0..m5, each [F, dim]

        def frames(z, scale, shift=None):  # z·scale (+ shift), per frame's rows
            z = z.view(Fr, tpf, d) * scale[:, None]
            return (z if shift is None else z + shift[:, None]).view(T, d)

        # Self-attention over the context; the block's k, v land in its last T rows.
        y = frames(F.layer_norm(x, (d,), eps=EPS), 1 + m[1], m[0])
        q = rms_norm(self.linear(y, self.sq), self.snq).view(T, H, -1)
        k = rms_norm(self.linear(y, self.sk), self.snk).view(T, H, -1)
        v = self.linear(y, self.sv)
        if use_rope:
            q, k = rope(q, self.rope), rope(k, self.rope)
        S = s["keys"]
        self.kc[0, :, S - T:].copy_(k.transpose(0, 1))
        self.vc[0, :, S - T:].copy_(v.view(T, H, -1).transpose(0, 1))
        o = attention(q.to(dt).transpose(0, 1)[None], self.kc, self.vc)
        x = x + frames(self.linear(o[0].transpose(0, 1).reshape(T, d), self.so).float(), m[2])

        # Cross-attention to the text.
        y = F.layer_norm(x, (d,), self.n3w, self.n3b, eps=EPS)
        q = rms_norm(self.linear(y, self.cq), self.cnq).to(dt)
        o = attention(self.heads(q), self.tk, self.tv)
        x = x + self.linear(o[0].transpose(0, 1).reshape(T, d), self.co).float()

        # FFN.
        y = frames(F.layer_norm(x, (d,), eps=EPS), 1 + m[4], m[3])
        h = F.gelu(self.linear(y, self.f0), approximate="tanh")
        x = x + frames(self.linear(h, self.f2).float(), m[5])

        # Head: LN(x)(1+s1)+s0 with (s0, s1) = head.modulation + e; unpatchify.
        sh = (self.head_mod + e[:, None]).unbind(1)
        out = self.linear(frames(F.layer_norm(x, (d,), eps=EPS), 1 + sh[1], sh[0]), self.head).float()
        return out.view(Fr, gh, gw, 2, 2, s["out_dim"]).permute(0, 5, 1, 3, 2, 4).reshape(
            Fr, s["out_dim"], s["height"], s["width"])


def moved(x, dev):
    """x with every tensor in it (alone, or in a tuple) on dev."""
    if isinstance(x, torch.Tensor):
        return x.to(dev)
    if isinstance(x, tuple):
        return tuple(moved(y, dev) for y in x)
    return x


def run(s, dt, calls, use_rope, dev):
    layer = Layer(s, dt)
    for name, value in list(vars(layer).items()):
        setattr(layer, name, moved(value, dev))

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    steps = [1000.0, 750.0, 500.0, 250.0]  # the four-step schedule's timesteps
    times = []
    with torch.inference_mode():
        for c in range(calls + 1):  # call 0 is the untimed warm-up
            t = torch.full((s["frames"],), steps[c % 4], device=dev)
            sync()
            t0 = time.perf_counter()
            layer.forward(t, use_rope)
            sync()
            if c > 0:
                times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    fl = flops(s)
    return dict(dtype=str(dt).replace("torch.", ""), median_seconds=med, call_seconds=times,
                flops_per_call=fl, gflops=fl / med / 1e9)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", choices=["fp32", "bf16", "both"], default="both")
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--tiny", action="store_true", help="tiny shapes for a smoke test")
    ap.add_argument("--device", default="cpu", help="torch device: cpu (default) or cuda[:N] (timed calls end with "
                    "torch.cuda.synchronize())")
    ap.add_argument("--no-rope", action="store_true", help="skip RoPE, as the Go bench's fixed context does")
    ap.add_argument("--attn", choices=["auto", "sdpa", "chunked"], default="auto",
                    help="scaled_dot_product_attention when present (auto) or chunked softmax; before torch 2.2 "
                         "the CPU SDPA materialises the whole score matrix (several GiB here)")
    a = ap.parse_args()
    global USE_SDPA
    if a.attn == "chunked" or (a.attn == "sdpa" and not USE_SDPA):
        if a.attn == "sdpa":
            ap.error("this torch has no scaled_dot_product_attention")
        USE_SDPA = False
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        ap.error("--device %s: this torch sees no CUDA device" % a.device)
    s = dict(TINY if a.tiny else FULL)
    tpf = (s["height"] // 2) * (s["width"] // 2)
    s["tokens"], s["keys"] = s["frames"] * tpf, s["context_frames"] * tpf
    dts = {"fp32": [torch.float32], "bf16": [torch.bfloat16], "both": [torch.float32, torch.bfloat16]}[a.dtype]
    info = dict(torch=torch.__version__, blas=blas_info(), mkldnn=torch.backends.mkldnn.is_available(),
                cpu_capability=getattr(torch.backends.cpu, "get_cpu_capability", lambda: None)()
                if hasattr(torch.backends, "cpu") else None,
                sdpa=USE_SDPA, cpu=cpu_model(), threads=torch.get_num_threads(),
                shape=s, rope=not a.no_rope, device=str(dev),
                gpu=torch.cuda.get_device_name(dev) if dev.type == "cuda" else None)
    results = []
    for dt in dts:
        r = run(s, dt, a.calls, not a.no_rope, dev)
        results.append(r)
        if not a.json:
            print("%s: median %.4g s per call; calls %s s; %.4g GFLOP per call; %.1f GFLOP/s" % (
                r["dtype"], r["median_seconds"], ", ".join("%.4g" % x for x in r["call_seconds"]),
                r["flops_per_call"] / 1e9, r["gflops"]), flush=True)
    if a.json:
        print(json.dumps(dict(info, results=results), indent=1))
    else:
        print("torch %s, BLAS %s, mkldnn %s, cpu capability %s, sdpa %s, %d threads, rope %s" % (
            info["torch"], info["blas"], info["mkldnn"], info["cpu_capability"], info["sdpa"], info["threads"], info["rope"]))
        print("cpu: %s; device: %s" % (info["cpu"], info["gpu"] or info["device"]))
        print("shape: %d tokens x %d keys, dim %d, %d heads, ffn %d, text %d" % (
            s["tokens"], s["keys"], s["dim"], s["heads"], s["ffn"], s["text_len"]))


if __name__ == "__main__":
    main()
