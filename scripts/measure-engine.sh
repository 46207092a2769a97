#!/usr/bin/env bash
# The measurements behind the matrix-engine targets of the README (issue
# #13), on whatever CPU this runs on: the CPU and its features, the kernels
# the start-up selection chooses, the paper-scale bank update, the
# Wan2.1-1.3B layer call at fp32 and bf16, and the AMX driver's loop
# order and depth chunk on the models' product shapes (on a CPU without AMX
# it times the selected kernel, which has neither). Each
# densitykv benchmark reports medians over its repeats; the whole set runs
# ROUNDS times (default 2), alternating, so that a noisy machine shows in
# the spread. Quote the CPU line beside every number.
#
# With PROFILE=DIR it also writes CPU profiles of one bank update run and
# one bf16 layer call there (bank.prof, wan.prof, with their test binaries
# for `go tool pprof`); with TORCH=1, and python3 with torch installed, it
# times the same layer in PyTorch on the same cores, and with AUTHORS_REPO=DIR
# (a checkout of the authors' repository, ZhaoWQQ/DensityKV) also the authors'
# bank, imported from that checkout, whose commit it prints
# (scripts/compare; minutes).
#
#	bash scripts/measure-engine.sh [ROUNDS]        # about 2 min per round on 2 idle Zen 5 cores
#	PROFILE=/tmp/prof TORCH=1 AUTHORS_REPO=/tmp/DensityKV taskset -c 0,1 bash scripts/measure-engine.sh 1
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/densitykv" ./cmd/densitykv
go test -c -o "$bin/gemm.test" ./gemm
echo "== CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'); $(nproc) CPUs;" \
	"$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512f|avx512_bf16|avx512_fp16|amx_bf16|amx_tile)$' | tr '\n' ' ')"
echo "== topology: $(lscpu 2>/dev/null | grep -E '^Thread\(s\) per core' | tr -s ' ')"
echo "== load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
	echo "== round $r: bank update, paper scale"
	"$bin/densitykv" bench --repeats 3 --quiet
	echo "== round $r: Wan2.1-1.3B layer call"
	"$bin/densitykv" bench wan --calls 2 --quiet
done
echo "== AMX loop order and depth chunk (gemm BenchmarkAMXLoops; chunk1048576 = off; one goroutine)"
"$bin/gemm.test" -test.run '^$' -test.bench 'AMXLoops' -test.benchtime 150ms
echo "== load: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "${PROFILE:-}" ]; then
	mkdir -p "$PROFILE"
	go test -c -o "$PROFILE/bank.test" ./bank
	go test -c -o "$PROFILE/bench.test" ./bench
	echo "== profiles in $PROFILE (go tool pprof -top $PROFILE/bank.test $PROFILE/bank.prof)"
	"$PROFILE/bank.test" -test.run '^$' -test.bench 'UpdatePaper$' -test.benchtime 6x -test.cpuprofile "$PROFILE/bank.prof"
	"$PROFILE/bench.test" -test.run '^$' -test.bench 'Wan13BOneLayer/bf16' -test.benchtime 1x -test.cpuprofile "$PROFILE/wan.prof"
fi
if [ "${TORCH:-}" = 1 ]; then
	echo "== PyTorch: the same layer"
	python3 scripts/compare/torch_wan_layer.py --threads "$(nproc)" --calls 2
	if [ -n "${AUTHORS_REPO:-}" ]; then
		echo "== PyTorch: the authors' bank, from $AUTHORS_REPO"
		python3 scripts/compare/torch_density_bank.py --authors-repo "$AUTHORS_REPO" --threads "$(nproc)" --updates 2
	else
		echo "== PyTorch: the authors' bank skipped: set AUTHORS_REPO to a checkout of ZhaoWQQ/DensityKV"
	fi
fi
