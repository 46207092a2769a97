#!/usr/bin/env python3
"""Time the DensityKV authors' PyTorch density-bank update on the CPU or a CUDA GPU.

For timing comparisons only: it is not part of the Go build or tests, and
the project does not depend on Python. It times, at paper scale, the update
of the authors' public PyTorch implementation, to compare with our Go bank
(`densitykv bench bank`, package bench RunBank) on the same CPU.

The authors' code is not in this repository: the script imports it from a
checkout of their repository (ZhaoWQQ/DensityKV) whose folder you give with
--authors-repo DIR (or the AUTHORS_REPO environment variable), namely
kv_cache/density_bank.py's DensityLimitedKVBank and DensityKVBankConfig, and
prints the checkout's commit (`git -C DIR rev-parse HEAD`, "+ local changes"
when its tracked files differ from that commit, "unknown" when DIR is not a
git checkout) beside every result: quote it with the figures. With a clone
of ZhaoWQQ/DensityKV (GitHub) in /tmp/DensityKV:
  python3 scripts/compare/torch_density_bank.py --authors-repo /tmp/DensityKV

The bank runs its PyTorch path (fast_impl "torch" by default; the Triton
kernels of kv_cache/triton_density_bank.py only run on CUDA tensors) with the
paper's configuration (configs/examples/paper_cases.yaml, method densitykv):
capacity M = 9360, density_scale 8, riesz_power 2, riesz_eps 1,
density_growth_limit 2, density_baseline_floor 1e-6, work_chunk_size 128,
compute_dtype bfloat16 -- the same kernel and limits as our
bank.DefaultConfig. Shapes: H = 12 heads (groups), N = 4680 candidates per
update, d = 128.

Driven like RunBank: one update of M candidates fills the empty bank, one
untimed warm-up update, then --updates timed steady-state updates of N
candidates each against the full bank. Keys are clustered Gaussians, fresh
clusters on every update (like a scene change), so that every candidate is
admitted and N old entries are evicted per update, as on our bench's
video-like stream; the script reports the accepted counts.

Run (torch 1.13 or 2.x):
  python3 scripts/compare/torch_density_bank.py --authors-repo DIR --threads 2 --updates 3
  python3 scripts/compare/torch_density_bank.py --authors-repo DIR --json > bank_torch.json
  python3 scripts/compare/torch_density_bank.py --authors-repo DIR --tiny   # seconds-long smoke test
  python3 scripts/compare/torch_density_bank.py --authors-repo DIR --device cuda --fast-impl auto
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PAPER = dict(heads=12, candidates=4680, capacity=9360, dim=128)
TINY = dict(heads=2, candidates=300, capacity=600, dim=32)
CFG = dict(density_scale=8.0, riesz_power=2.0, riesz_eps=1.0, density_growth_limit=2.0,
           density_baseline_floor=1.0e-6, work_chunk_size=128, compute_dtype="bfloat16")
MODULE = os.path.join("kv_cache", "density_bank.py")


def checkout_commit(repo):
    """The commit of the checkout at repo, with " + local changes" when its
    tracked files differ; for a copy that scripts/device-amx.sh packed, the
    commit it recorded then (file .commit); else "unknown"."""
    try:
        top, head = subprocess.run(["git", "-C", repo, "rev-parse", "--show-toplevel", "HEAD"],
                                   capture_output=True, text=True, check=True).stdout.split()
        if os.path.realpath(top) != os.path.realpath(repo):
            raise ValueError("a folder inside another repository's checkout")
    except (OSError, ValueError, subprocess.CalledProcessError):
        try:
            with open(os.path.join(repo, ".commit")) as f:
                return f.read().strip() + " (recorded when the copy was packed)"
        except OSError:
            return "unknown"
    try:
        dirty = subprocess.run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        dirty = ""
    return head + (" + local changes" if dirty else "")


def authors_bank(repo):
    """DensityKVBankConfig and DensityLimitedKVBank from the checkout."""
    sys.path.insert(0, repo)
    from kv_cache.density_bank import DensityKVBankConfig, DensityLimitedKVBank
    return DensityKVBankConfig, DensityLimitedKVBank


def clustered(torch, gen, n, heads, dim, device="cpu", per_cluster=78):
    """Keys [n, heads, dim]: fresh cluster centres (std 4 per coordinate,
    far apart at density scale 8) and points around them (std 0.5), runs of
    per_cluster consecutive candidates per cluster; values N(0, 1)."""
    c = max(1, n // per_cluster)
    centres = 4.0 * torch.randn(c, heads, dim, generator=gen)
    which = torch.arange(n) * c // n
    keys = centres[which] + 0.5 * torch.randn(n, heads, dim, generator=gen)
    return keys.to(device), torch.randn(n, heads, dim, generator=gen).to(device)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--authors-repo", metavar="DIR", default=os.environ.get("AUTHORS_REPO"),
                    help="a checkout of ZhaoWQQ/DensityKV (default $AUTHORS_REPO)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--updates", type=int, default=3, help="timed steady-state updates")
    ap.add_argument("--chunk", type=int, default=CFG["work_chunk_size"], help="work_chunk_size (paper 128)")
    ap.add_argument("--fast-impl", default="torch", choices=["torch", "auto", "triton"],
                    help="the bank's fast_impl (torch: its PyTorch path, what runs on a CPU)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--tiny", action="store_true", help="tiny shapes for a smoke test")
    ap.add_argument("--device", default="cpu",
                    help="torch device of the bank's tensors: cpu (default) or cuda[:N]; on cuda every timed "
                         "update ends with torch.cuda.synchronize(), and --fast-impl auto or triton may pick the "
                         "authors' Triton kernels")
    a = ap.parse_args()
    if not a.authors_repo:
        ap.error("--authors-repo DIR is required: a checkout of the authors' repository (ZhaoWQQ/DensityKV)")
    repo = os.path.abspath(a.authors_repo)
    if not os.path.isfile(os.path.join(repo, MODULE)):
        ap.error("--authors-repo %s: no %s there (want a checkout of ZhaoWQQ/DensityKV)" % (a.authors_repo, MODULE))
    commit = checkout_commit(repo)

    import torch

    from machine import blas_info, cpu_model

    Config, Bank = authors_bank(repo)
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        ap.error("--device %s: this torch sees no CUDA device" % a.device)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    s = TINY if a.tiny else PAPER
    H, N, M, d = s["heads"], s["candidates"], s["capacity"], s["dim"]
    cfg = dict(CFG, work_chunk_size=a.chunk)
    bank = Bank(H, d, d, Config(max_entries=M, fast_impl=a.fast_impl, **cfg))
    if hasattr(bank, "to"):
        bank = bank.to(dev)
    gen = torch.Generator().manual_seed(0)
    t0 = time.perf_counter()
    fill = bank.update(*clustered(torch, gen, M, H, d, dev))  # fills the empty bank
    sync()
    fill_s = time.perf_counter() - t0
    bank.update(*clustered(torch, gen, N, H, d, dev))  # warm-up, untimed
    sync()
    times, accepted = [], []
    for _ in range(a.updates):
        k, v = clustered(torch, gen, N, H, d, dev)
        sync()
        t0 = time.perf_counter()
        st = bank.update(k, v)
        sync()
        times.append(time.perf_counter() - t0)
        accepted.append(int(st.accepted_count[0].item()))
    res = dict(heads=H, candidates=N, capacity=M, dim=d, chunk=a.chunk, threads=torch.get_num_threads(),
               fast_impl=a.fast_impl, device=str(dev),
               gpu=torch.cuda.get_device_name(dev) if dev.type == "cuda" else None, fill_accepted=int(fill.accepted_count[0].item()), fill_seconds=fill_s,
               update_seconds=times, update_seconds_median=statistics.median(times), accepted=accepted,
               authors_repo=repo, authors_commit=commit,
               torch=torch.__version__, blas=blas_info(),
               mkldnn=torch.backends.mkldnn.is_available(), cpu=cpu_model())
    if a.json:
        print(json.dumps(res, indent=1))
    else:
        print("density bank update (H %d, N %d, M %d, d %d, chunk %d, %d threads, fast_impl %s, device %s): median %.4g s; updates %s s; accepted %s of %d" % (
            H, N, M, d, a.chunk, res["threads"], a.fast_impl, res["gpu"] or res["device"], res["update_seconds_median"],
            ", ".join("%.4g" % t for t in times), accepted, N))
        print("fill: %d entries in %.3g s" % (res["fill_accepted"], fill_s))
        print("authors' code: %s at commit %s" % (repo, commit))
        print("torch %s, BLAS %s, mkldnn %s; cpu: %s" % (res["torch"], res["blas"], res["mkldnn"], res["cpu"]))
    if any(x != N for x in accepted):
        print("warning: not every candidate was admitted; the update's cost depends on the admitted count",
              file=sys.stderr)


if __name__ == "__main__":
    main()
