#!/usr/bin/env bash
# Checks and measurements on a lent machine with AMX (the device tool's host:
# an Intel Xeon without a Go toolchain), in one run, so that its few minutes
# go to the work and not to set-up. Two steps:
#
#	bash scripts/device-amx.sh pack      # here: build binaries, pack them with the goldens into .dev/amx.tar.xz
#	bash scripts/device-amx.sh run       # there (device tool, carry [".dev"]): unpack, test, measure
#
# run: the CPU and its AMX flags; the test binaries of gemm, riesz, bank,
# attn and wan on AMX with the bank and Wan goldens (skipping the tests that
# need `go` or `objdump`); then ROUNDS (default 2) alternating rounds of the
# paper-scale bank update and the Wan2.1-1.3B layer call (bf16) on each AMX
# kernel (KERNELS, default "amx amx-i"; on a CPU without AMX name others,
# e.g. KERNELS=avx512bf16, to try the script), each printing the kernel
# selection and why, and the layer on the selected fp32 kernel; the AMX
# loop-order and depth-chunk sweep (gemm BenchmarkAMXLoops). Every process
# is pinned to two cores (taskset -c 0,1, GOMAXPROCS=2), as on the project's
# machines; those hosts are shared, so compare only within one run. With PROFILE=1 it also writes CPU profiles of
# a bank update and a bf16 layer call under $OUT (with the binaries, for
# `go tool pprof`); with TORCH=1, and python3 with torch there, it times the
# same layer in PyTorch, and the authors' bank when pack was given
# AUTHORS_REPO=DIR, a checkout of their repository (ZhaoWQQ/DensityKV): pack
# copies its kv_cache/ with the checkout's commit (the host has no network);
# the comparison prints that commit (scripts/compare; minutes).
# About 5 minutes with ROUNDS=2 on a quiet host.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
pack=.dev/amx
case "${1:-}" in
pack)
	rm -rf "$pack" && mkdir -p "$pack/bin"
	go build -ldflags='-s -w' -o "$pack/bin/densitykv" ./cmd/densitykv
	for p in gemm riesz bank attn wan bench; do
		go test -c -ldflags='-s -w' -o "$pack/bin/$(basename "$p").test" "./$p"
	done
	golden=${DENSITYKV_GOLDEN_ROOT:-../shared/golden}
	mkdir -p "$pack/golden"
	cp -r "$golden/densitykv" "$golden/wan" "$pack/golden/"
	if [ -n "${AUTHORS_REPO:-}" ]; then
		[ -f "$AUTHORS_REPO/kv_cache/density_bank.py" ] || { echo "AUTHORS_REPO=$AUTHORS_REPO: no kv_cache/density_bank.py there" >&2; exit 1; }
		mkdir -p "$pack/authors"
		cp -r "$AUTHORS_REPO/kv_cache" "$pack/authors/"
		commit=$(git -C "$AUTHORS_REPO" rev-parse HEAD 2>/dev/null || echo unknown)
		[ -z "$(git -C "$AUTHORS_REPO" status --porcelain --untracked-files=no 2>/dev/null)" ] || commit="$commit + local changes"
		echo "$commit" >"$pack/authors/.commit"
		echo "packed the authors' kv_cache/ at commit $commit"
	fi
	tar -C .dev -cJf .dev/amx.tar.xz amx
	rm -rf "$pack"
	size=$(stat -c %s .dev/amx.tar.xz)
	echo "packed .dev/amx.tar.xz: $((size >> 20)) MiB (the device tool carries 64 MiB)"
	[ "$size" -lt $((60 << 20)) ] || { echo "too large to carry" >&2; exit 1; }
	;;
run)
	[ -f .dev/amx.tar.xz ] || { echo "no .dev/amx.tar.xz: run 'bash scripts/device-amx.sh pack' here first and carry .dev" >&2; exit 1; }
	tar -C .dev -xJf .dev/amx.tar.xz
	bin=$root/$pack/bin
	export DENSITYKV_GOLDEN=$root/$pack/golden/densitykv DENSITYKV_GOLDEN_WAN=$root/$pack/golden/wan GOMAXPROCS=2
	pin="taskset -c 0,1"
	out=${OUT:-/tmp}
	t0=$(date +%s)
	elapsed() { echo "== t=$(($(date +%s) - t0)) s"; }
	echo "== CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'); $(nproc) CPUs;" \
		"$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512f|avx512_bf16|avx512_fp16|amx_bf16|amx_tile)$' | tr '\n' ' ')"
	echo "== load: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "== tests (test binaries built elsewhere: the tests that need go or objdump are skipped)"
	for p in gemm riesz bank attn wan; do
		(cd "$root/$p" && $pin "$bin/$p.test" -test.count=1 -test.skip 'Mutations|Objdump|GeneratedAssembly|GELUGenerated' 2>&1 | tail -3 | sed "s/^/$p: /")
	done
	(cd "$root/gemm" && $pin "$bin/gemm.test" -test.run 'TestAMXKernelSelected|TestKernelsExact|TestAMXChunk' -test.v 2>&1 | grep -E '^(--- |ok|FAIL)')
	elapsed
	for r in $(seq "${ROUNDS:-2}"); do
		for k in ${KERNELS:-amx amx-i}; do
			echo "== round $r, bf16 kernel $k: bank update"
			$pin "$bin/densitykv" bench --kernel "bf16:$k" --repeats 3 --quiet 2>&1 | grep -E '^kernel bf16|^update|process CPU|steps|interaction pass'
			echo "== round $r, bf16 kernel $k: layer call"
			$pin "$bin/densitykv" bench wan --kernel "bf16:$k" --precision bf16 --calls 2 --quiet 2>&1 | grep -i '1.3b'
		done
		echo "== round $r: layer call, fp32"
		$pin "$bin/densitykv" bench wan --precision fp32 --calls 2 --quiet 2>&1 | grep -E '^kernel fp32|1.3b' 
		elapsed
	done
	echo "== AMX loop order and depth chunk (gemm BenchmarkAMXLoops; chunk1048576 = off; one goroutine)"
	(cd "$root/gemm" && $pin "$bin/gemm.test" -test.run '^$' -test.bench 'AMXLoops' -test.benchtime 150ms 2>&1 | grep Benchmark)
	elapsed
	if [ "${PROFILE:-}" = 1 ]; then
		cp "$bin/bank.test" "$bin/bench.test" "$out/"
		(cd "$root/bank" && $pin "$bin/bank.test" -test.run '^$' -test.bench 'UpdatePaper$' -test.benchtime 3x -test.cpuprofile "$out/bank.prof" 2>&1 | grep Benchmark)
		(cd "$root/bench" && $pin "$bin/bench.test" -test.run '^$' -test.bench 'Wan13BOneLayer/bf16' -test.benchtime 1x -test.cpuprofile "$out/wan.prof" 2>&1 | grep -o 'median call.*CPU s)')
		echo "== profiles in \$OUT: bank.prof, wan.prof (go tool pprof -top bank.test bank.prof)"
		elapsed
	fi
	if [ "${TORCH:-}" = 1 ]; then
		echo "== PyTorch: the same layer"
		timeout 240 $pin python3 scripts/compare/torch_wan_layer.py --threads 2 --calls 2 2>&1 | tail -8 || true
		if [ -d "$root/$pack/authors" ]; then
			echo "== PyTorch: the authors' bank"
			timeout 240 $pin python3 scripts/compare/torch_density_bank.py --authors-repo "$root/$pack/authors" --threads 2 --updates 2 2>&1 | tail -8 || true
		else
			echo "== PyTorch: the authors' bank skipped (pack without AUTHORS_REPO)"
		fi
		elapsed
	fi
	echo "== load: $(cut -d' ' -f1-3 /proc/loadavg)"
	;;
*)
	echo "usage: bash scripts/device-amx.sh pack|run" >&2
	exit 2
	;;
esac
