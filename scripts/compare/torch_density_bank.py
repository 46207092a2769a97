#!/usr/bin/env python3
"""Time the DensityKV authors' PyTorch density-bank update on the CPU.

For timing comparisons only: it is not part of the Go build or tests, and
the project does not depend on Python. It times, at paper scale, the update
of the authors' public PyTorch implementation, to compare with our Go bank
(`densitykv bench bank`, internal/bench RunBank) on the same CPU.

What it transcribes (for timing, not as a dependency): repository
ZhaoWQQ/DensityKV, file kv_cache/density_bank.py (commit 56586b7), class
DensityLimitedKVBank, its PyTorch path (fast_impl "torch"; the Triton kernels
of kv_cache/triton_density_bank.py only run on CUDA tensors, so on a CPU
"auto" takes this path too):
  _density_contribution, _density_sum (torch branch), _squared_l2,
  _prepare_inputs, _gather_rows, _density_over_union,
  _candidate_order_and_prefix, update.
Same algorithmic steps and tensor ops, in the same order, on the same dtypes:
bfloat16 keys and values (compute_dtype "bfloat16"), float32 densities. Left
out: argument checks, the Triton branch, and the constant-filled trace fields
(trace_*, bootstrap_*) that update() attaches to its statistics; the
statistics tensors it computes (ordered densities, targets, …) are kept.
torch.argsort(..., stable=True) is written as torch.sort(..., stable=True)
(the same kernel; argsort's stable flag is not in every torch version).

Configuration: the paper's (configs/examples/paper_cases.yaml, method
densitykv): capacity M = 9360, density_scale 8, riesz_power 2, riesz_eps 1,
density_growth_limit 2, density_baseline_floor 1e-6, work_chunk_size 128,
compute_dtype bfloat16 — the same kernel and limits as our bank.DefaultConfig.
Shapes: H = 12 heads (groups), N = 4680 candidates per update, d = 128.

Driven like RunBank: one update of M candidates fills the empty bank, one
untimed warm-up update, then --updates timed steady-state updates of N
candidates each against the full bank. Keys are clustered Gaussians, fresh
clusters on every update (like a scene change), so that every candidate is
admitted and N old entries are evicted per update, as on our bench's
video-like stream; the script reports the accepted counts.

Run (torch 1.13 or 2.x):
  python3 scripts/compare/torch_density_bank.py --threads 2 --updates 3
  python3 scripts/compare/torch_density_bank.py --json > bank_torch.json
  python3 scripts/compare/torch_density_bank.py --tiny   # seconds-long smoke test
"""

import argparse
import json
import statistics
import sys
import time

import torch

from machine import blas_info, cpu_model

PAPER = dict(heads=12, candidates=4680, capacity=9360, dim=128)
TINY = dict(heads=2, candidates=300, capacity=600, dim=32)
CFG = dict(density_scale=8.0, riesz_power=2.0, riesz_eps=1.0, density_growth_limit=2.0,
           density_baseline_floor=1.0e-6, work_chunk_size=128)


class Bank:
    """DensityLimitedKVBank's state and torch-path update, transcribed."""

    def __init__(self, groups, dim, capacity, chunk, dtype=torch.bfloat16):
        self.groups, self.capacity = groups, capacity
        self.scale, self.power, self.eps = CFG["density_scale"], CFG["riesz_power"], CFG["riesz_eps"]
        self.limit, self.floor, self.chunk = CFG["density_growth_limit"], CFG["density_baseline_floor"], chunk
        shape = (groups, capacity)
        self.keys = torch.zeros(*shape, dim, dtype=dtype)
        self.values = torch.zeros(*shape, dim, dtype=dtype)
        self.density = torch.zeros(shape)
        self.density_baseline = torch.zeros(shape)
        self.counts = torch.zeros(groups, dtype=torch.int32)
        self.source_index = torch.full(shape, -1, dtype=torch.int64)
        self.insert_query_frame = torch.full(shape, -1, dtype=torch.int32)

    def contribution(self, sq):  # _density_contribution
        return 1.0 / (self.eps + sq.float() / (self.scale ** 2)).pow(self.power)

    def density_sum(self, sq):  # _density_sum, torch branch, no diagonal exclusion
        return self.contribution(sq).sum(dim=-1)

    @staticmethod
    def squared_l2(q, k):  # _squared_l2
        dot = torch.bmm(q, k.transpose(1, 2))
        qn = q.float().square().sum(dim=-1, keepdim=True)
        kn = k.float().square().sum(dim=-1).unsqueeze(1)
        return (qn + kn - 2.0 * dot.float()).clamp_min_(0.0)

    @staticmethod
    def gather_rows(x, idx):  # _gather_rows
        return torch.gather(x, 1, idx.unsqueeze(-1).expand(-1, -1, x.shape[-1]))

    def density_over_union(self, keys):  # _density_over_union
        length = keys.shape[1]
        result = torch.empty(self.groups, length)
        cs = min(self.chunk, length)
        for start in range(0, length, cs):
            end = min(start + cs, length)
            dist = self.squared_l2(keys[:, start:end], keys)
            dens = self.density_sum(dist)
            rows = torch.arange(end - start)
            result[:, start:end] = dens - self.contribution(dist[:, rows, rows + start])
        return result.clamp_min_(0.0)

    def order_and_prefix(self, cand, active):  # _candidate_order_and_prefix
        G, N, _ = cand.shape
        order = torch.arange(N).unsqueeze(0).expand(G, -1)
        external = torch.zeros(G, N)
        score = torch.zeros_like(external)
        old_inc = torch.zeros(G, active)
        max_acc = min(N, self.capacity)
        if active == 0 or max_acc == 0:
            return order, external, score, max_acc, old_inc
        old_keys = self.keys[:, :active]
        old_density = self.density[:, :active]
        old_base = self.density_baseline[:, :active].clamp_min(self.floor)
        cs = self.chunk
        for start in range(0, N, cs):
            end = min(start + cs, N)
            c = self.contribution(self.squared_l2(cand[:, start:end], old_keys))
            external[:, start:end] = c.sum(dim=-1)
            score[:, start:end] = (c / old_base.unsqueeze(1)).amax(dim=-1)
        order = torch.sort(score, dim=1, descending=False, stable=True)[1]
        ordered = self.gather_rows(cand, order[:, :max_acc]).contiguous()
        accepted, best_inc, done = 0, old_inc, 0
        while done < max_acc:
            end = min(done + cs, max_acc)
            c = self.contribution(self.squared_l2(ordered[:, done:end], old_keys))
            cum = old_inc.unsqueeze(1) + c.cumsum(dim=1)
            violating = ((old_density.unsqueeze(1) + cum) / old_base.unsqueeze(1) >= self.limit).sum(dim=-1)
            budget = (active + torch.arange(done + 1, end + 1) - self.capacity).clamp_min(0)
            feasible = (violating <= budget.unsqueeze(0)).all(dim=0).nonzero(as_tuple=False)
            if feasible.numel() > 0:
                best = int(feasible[-1, 0].item())
                accepted = done + best + 1
                best_inc = cum[:, best].clone()
            old_inc = cum[:, -1].clone()
            done = end
        return order, external, score, accepted, best_inc

    @torch.no_grad()
    def update(self, keys, values):  # update; keys, values [N, G, D]
        keys = keys.detach().to(self.keys.dtype).contiguous()  # _prepare_inputs
        values = values.detach().to(self.values.dtype).contiguous()
        if not torch.equal(self.counts, self.counts[:1].expand_as(self.counts)):
            raise RuntimeError("DensityKV requires synchronized head-group counts")
        active = int(self.counts[0].item())
        cap, floor, limit = self.capacity, self.floor, self.limit
        keys_gnd = keys.permute(1, 0, 2).contiguous()
        values_gnd = values.permute(1, 0, 2).contiguous()
        G, N, _ = keys_gnd.shape
        order, external, score, n_acc, old_inc = self.order_and_prefix(keys_gnd, active)

        sel = order[:, :n_acc]
        sel_keys = self.gather_rows(keys_gnd, sel).contiguous()
        sel_values = self.gather_rows(values_gnd, sel).contiguous()
        sel_external = torch.gather(external, 1, sel)
        sel_internal = self.density_over_union(sel_keys) if n_acc > 0 else torch.zeros(G, 0)
        sel_density = sel_external + sel_internal
        old_prop = self.density[:, :active] + old_inc
        prop_keys = torch.cat((self.keys[:, :active], sel_keys), dim=1)
        prop_values = torch.cat((self.values[:, :active], sel_values), dim=1)
        prop_density = torch.cat((old_prop, sel_density), dim=1)

        evict = max(n_acc - max(cap - active, 0), 0)
        added = n_acc - evict
        prop_count = active + n_acc
        final = prop_count - evict
        keep = torch.ones(G, prop_count, dtype=torch.bool)
        evicted_density = torch.zeros(G, evict)
        evicted_old = torch.zeros(G, evict, dtype=torch.long)
        if evict > 0:
            old_base = self.density_baseline[:, :active].clamp_min(floor)
            must = old_prop / old_base >= limit
            if bool((must.sum(dim=1) > evict).any()):
                raise RuntimeError("selected prefix cannot evict all density-growth violations")
            victim = torch.where(must, torch.full_like(old_prop, float("inf")), old_prop)
            _, evicted_old = torch.topk(victim, k=evict, dim=1, largest=True, sorted=False)
            evicted_density = torch.gather(old_prop, 1, evicted_old)
            keep[:, :active].scatter_(1, evicted_old, False)

        all_idx = torch.arange(prop_count).unsqueeze(0).expand(G, -1)
        keep_idx = all_idx.masked_fill(~keep, prop_count).sort(dim=1).values[:, :final]
        kept_keys = self.gather_rows(prop_keys, keep_idx).contiguous()
        kept_values = self.gather_rows(prop_values, keep_idx).contiguous()
        final_density = torch.gather(prop_density, 1, keep_idx)
        if evict > 0:
            ev_keys = self.gather_rows(self.keys[:, :active], evicted_old).contiguous()
            for start in range(0, final, self.chunk):
                end = min(start + self.chunk, final)
                final_density[:, start:end].sub_(self.density_sum(self.squared_l2(kept_keys[:, start:end], ev_keys)))
        final_density.clamp_min_(0.0)

        prop_base = torch.cat((self.density_baseline[:, :active], torch.zeros(G, n_acc)), dim=1)
        kept_base = torch.gather(prop_base, 1, keep_idx)
        kept_cand = keep_idx >= active
        kept_base = torch.where(kept_cand, final_density.clamp_min(floor), kept_base.clamp_min(floor))
        old_kept = ~kept_cand
        if old_kept.any():
            growth = final_density[old_kept] / kept_base[old_kept]
            if bool((growth >= limit + 2.0e-4 * max(limit, 1.0)).any()):
                raise RuntimeError("retained state exceeded its density-growth limit")

        meta = torch.full((G, n_acc), -1, dtype=self.source_index.dtype)
        prop_source = torch.cat((self.source_index[:, :active], meta), dim=1)
        prop_insert = torch.cat((self.insert_query_frame[:, :active], meta.to(self.insert_query_frame.dtype)), dim=1)
        kept_source = torch.gather(prop_source, 1, keep_idx)
        kept_insert = torch.gather(prop_insert, 1, keep_idx)

        target = torch.full((G, N), -1, dtype=torch.long)
        if n_acc > 0:
            slots = torch.arange(final).unsqueeze(0).expand(G, -1)
            pos = (keep_idx - active).clamp_min(0)
            orig = torch.gather(sel, 1, pos.clamp_max(n_acc - 1))
            gi = torch.arange(G).unsqueeze(1).expand_as(keep_idx)
            target[gi[kept_cand], orig[kept_cand]] = slots[kept_cand]

        self.keys.zero_()
        self.values.zero_()
        self.density.zero_()
        self.density_baseline.zero_()
        self.source_index.fill_(-1)
        self.insert_query_frame.fill_(-1)
        self.keys[:, :final].copy_(kept_keys)
        self.values[:, :final].copy_(kept_values)
        self.density[:, :final].copy_(final_density)
        self.density_baseline[:, :final].copy_(kept_base)
        self.source_index[:, :final].copy_(kept_source)
        self.insert_query_frame[:, :final].copy_(kept_insert)
        self.counts.fill_(final)

        # The statistics update() returns (DensityKVBankStats).
        o_density = torch.gather(external, 1, order)
        o_score = torch.gather(score, 1, order)
        o_target = torch.gather(target, 1, order)
        acc_entries = o_target >= 0
        o_repl = torch.where(acc_entries, torch.gather(final_density, 1, o_target.clamp_min(0)),
                             torch.zeros_like(o_density))
        o_evicted = torch.zeros_like(o_density)
        if evict > 0:
            o_evicted[:, added:added + evict] = evicted_density
        return dict(accepted=n_acc, evicted=evict, energy_delta=o_score - limit, replacement=o_repl,
                    evicted_density=o_evicted, added_energy=o_repl.sum(dim=1, keepdim=True))


def clustered(gen, n, heads, dim, per_cluster=78):
    """Keys [n, heads, dim]: fresh cluster centres (std 4 per coordinate,
    far apart at density scale 8) and points around them (std 0.5), runs of
    per_cluster consecutive candidates per cluster; values N(0, 1)."""
    c = max(1, n // per_cluster)
    centres = 4.0 * torch.randn(c, heads, dim, generator=gen)
    which = torch.arange(n) * c // n
    keys = centres[which] + 0.5 * torch.randn(n, heads, dim, generator=gen)
    return keys, torch.randn(n, heads, dim, generator=gen)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--updates", type=int, default=3, help="timed steady-state updates")
    ap.add_argument("--chunk", type=int, default=CFG["work_chunk_size"], help="work_chunk_size (paper 128)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--tiny", action="store_true", help="tiny shapes for a smoke test")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    s = TINY if a.tiny else PAPER
    H, N, M, d = s["heads"], s["candidates"], s["capacity"], s["dim"]
    gen = torch.Generator().manual_seed(0)
    bank = Bank(H, d, M, a.chunk)
    t0 = time.perf_counter()
    fill = bank.update(*clustered(gen, M, H, d))  # fills the empty bank
    fill_s = time.perf_counter() - t0
    bank.update(*clustered(gen, N, H, d))  # warm-up, untimed
    times, accepted = [], []
    for _ in range(a.updates):
        k, v = clustered(gen, N, H, d)
        t0 = time.perf_counter()
        st = bank.update(k, v)
        times.append(time.perf_counter() - t0)
        accepted.append(st["accepted"])
    res = dict(heads=H, candidates=N, capacity=M, dim=d, chunk=a.chunk, threads=torch.get_num_threads(),
               fill_accepted=fill["accepted"], fill_seconds=fill_s, update_seconds=times,
               update_seconds_median=statistics.median(times), accepted=accepted,
               torch=torch.__version__, blas=blas_info(),
               mkldnn=torch.backends.mkldnn.is_available(), cpu=cpu_model())
    if a.json:
        print(json.dumps(res, indent=1))
    else:
        print("density bank update (H %d, N %d, M %d, d %d, chunk %d, %d threads): median %.4g s; updates %s s; accepted %s of %d" % (
            H, N, M, d, a.chunk, res["threads"], res["update_seconds_median"],
            ", ".join("%.4g" % t for t in times), accepted, N))
        print("fill: %d entries in %.3g s" % (fill["accepted"], fill_s))
        print("torch %s, BLAS %s, mkldnn %s; cpu: %s" % (res["torch"], res["blas"], res["mkldnn"], res["cpu"]))
    if any(x != N for x in accepted):
        print("warning: not every candidate was admitted; the update's cost depends on the admitted count",
              file=sys.stderr)


if __name__ == "__main__":
    main()
