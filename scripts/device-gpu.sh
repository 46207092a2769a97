#!/usr/bin/env bash
# Checks and measurements on a lent machine with an NVIDIA GPU (the device
# tool's nvidia-h200: no Go toolchain, no network, PyTorch with CUDA in its
# python3), in one run, so that its few minutes go to the work and not to
# set-up. Two steps:
#
#	bash scripts/device-gpu.sh pack   # here: build the Vulkan binaries, pack them with the goldens and the Vulkan loader
#	bash scripts/device-gpu.sh run    # there (device tool, carry [".dev", ".gl"]): unpack, test, measure
#
# pack builds `densitykv` and the test binaries of the GPU packages with
# -tags vulkan (CGO_ENABLED=0: purego opens the loader at run time), copies
# the small goldens the tests read, and downloads Debian's libvulkan1 into
# .gl/ (the host has NVIDIA's Vulkan driver but may lack the loader). With
# AUTHORS_REPO=DIR (a checkout of ZhaoWQQ/DensityKV) it also packs that
# checkout's kv_cache/ with its commit, for the authors' bank on CUDA.
#
# run, in order, each step bounded by `timeout` so that the whole stays
# inside one device call (about 8 minutes; give the call timeout_s 540):
#   1. the GPU: nvidia-smi, the Vulkan loader and ICD, `densitykv devices`;
#   2. the GPU tests on the real driver with DENSITYKV_TEST_DEVICE=vulkan
#      (vulkan, device, gpu, and the backends of the models where built):
#      every kernel byte for byte against the CPU definitions, the
#      exactness probe (which fma path the device takes);
#      2b. fast mode (--precision bf16-fast): the tensor-core kernel
#      against float64 (gpu's TestFastProductTensorCores) and the golden
#      tiny DiT and umT5 in fast mode (TestFastModeGolden), verbose; on a
#      device without VK_NV_cooperative_matrix they check the refusal;
#   3. the GPU benchmarks at the real sizes (gpu's BenchmarkProducts,
#      BenchmarkAttention*, BenchmarkRiesz*: device time per call, GFLOP/s),
#      and `densitykv bench wan --device vulkan` when the binary has it,
#      at bf16 and at bf16-fast (BenchmarkFastProducts: the tensor cores);
#      3b. one real-size block (`bench pipeline --device vulkan`);
#   4. the same shapes in the PyTorch there (scripts/compare, --device
#      cuda): the Wan2.1 layer (bf16, SDPA) and, when packed, the authors'
#      bank on CUDA — for side-by-side ratios;
#   5. a 30 s video's rollout at real shapes with random weights (40
#      blocks, `bench pipeline --blocks 40 --warm-steps 4`) in what is left
#      of DEADLINE (470 s from the start).
# Everything it prints is also written to $OUT/gpu.log, with the device
# list as $OUT/devices.json and the benchmarks' whole output as
# $OUT/bench.txt. BENCH (a -test.bench pattern, default all) and BENCHTIME
# (default 3x) narrow step 3; PIPELINE=0 leaves out the real-size runs.
# The same run works on any Vulkan device, e.g. here on lavapipe with
# BENCH=NONE PIPELINE=0 to check the script.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
pack=.dev/gpu
pkgs="vulkan device gpu"
case "${1:-}" in
pack)
	rm -rf "$pack" && mkdir -p "$pack/bin"
	export CGO_ENABLED=0
	go build -tags vulkan -ldflags='-s -w' -o "$pack/bin/densitykv" ./cmd/densitykv
	for p in $pkgs; do
		go test -c -tags vulkan -ldflags='-s -w' -o "$pack/bin/$p.test" "./$p"
	done
	# The models' GPU backends, where a package has tests that use one.
	for p in wan compute t5; do
		if [ -d "$p" ] && grep -lq 'vulkantest' "$p"/*_test.go 2>/dev/null; then
			go test -c -tags vulkan -ldflags='-s -w' -o "$pack/bin/$p.test" "./$p"
		fi
	done
	golden=${DENSITYKV_GOLDEN_ROOT:-../shared/golden}
	mkdir -p "$pack/golden"
	cp -r "$golden/wan" "$pack/golden/"
	[ ! -d "$golden/t5" ] || cp -r "$golden/t5" "$pack/golden/" # t5's TestFastModeGolden
	if [ -n "${AUTHORS_REPO:-}" ]; then
		[ -f "$AUTHORS_REPO/kv_cache/density_bank.py" ] || { echo "AUTHORS_REPO=$AUTHORS_REPO: no kv_cache/density_bank.py there" >&2; exit 1; }
		mkdir -p "$pack/authors"
		cp -r "$AUTHORS_REPO/kv_cache" "$pack/authors/"
		commit=$(git -C "$AUTHORS_REPO" rev-parse HEAD 2>/dev/null || echo unknown)
		[ -z "$(git -C "$AUTHORS_REPO" status --porcelain --untracked-files=no 2>/dev/null)" ] || commit="$commit + local changes"
		echo "$commit" >"$pack/authors/.commit"
		echo "packed the authors' kv_cache/ at commit $commit"
	fi
	tar -C .dev -cJf .dev/gpu.tar.xz gpu
	rm -rf "$pack"
	if ! ls .gl/libvulkan1_*.deb >/dev/null 2>&1; then
		mkdir -p .gl /tmp/amd64/partial
		o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
		# shellcheck disable=SC2086
		apt-get $o update -qq && (cd .gl && apt-get $o download libvulkan1)
	fi
	size=$(($(stat -c %s .dev/gpu.tar.xz) + $(du -cb .gl/*.deb | tail -1 | cut -f1)))
	echo "packed .dev/gpu.tar.xz and .gl/: $((size >> 20)) MiB (the device tool carries 64 MiB)"
	[ "$size" -lt $((60 << 20)) ] || { echo "too large to carry" >&2; exit 1; }
	;;
run)
	[ -f .dev/gpu.tar.xz ] || { echo "no .dev/gpu.tar.xz: run 'bash scripts/device-gpu.sh pack' here first and carry .dev and .gl" >&2; exit 1; }
	out=${OUT:-/tmp}
	exec > >(tee "$out/gpu.log") 2>&1
	tar -C .dev -xJf .dev/gpu.tar.xz
	bin=$root/$pack/bin
	export DENSITYKV_GOLDEN_WAN=$root/$pack/golden/wan DENSITYKV_GOLDEN_T5=$root/$pack/golden/t5 DENSITYKV_TEST_DEVICE=vulkan
	t0=$(date +%s)
	elapsed() { echo "== t=$(($(date +%s) - t0)) s"; }
	echo "== 1. the GPU"
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || echo "(no nvidia-smi)"
	if ! ldconfig -p | grep -q libvulkan.so.1; then
		for f in .gl/*.deb; do dpkg -x "$f" /; done
		ldconfig
		echo "Vulkan loader unpacked from .gl"
	fi
	if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] &&
		! ls /usr/share/vulkan/icd.d/nvidia_icd*.json /etc/vulkan/icd.d/nvidia_icd*.json >/dev/null 2>&1; then
		export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
		echo "VK_DRIVER_FILES=$VK_DRIVER_FILES"
	fi
	"$bin/densitykv" devices || true
	"$bin/densitykv" devices --json >"$out/devices.json" 2>/dev/null || true
	elapsed
	echo "== 2. GPU tests on the real driver (DENSITYKV_TEST_DEVICE=vulkan)"
	for t in "$bin"/*.test; do
		p=$(basename "$t" .test)
		# Skipped: the tests that run go or glslc (the host has neither).
		(cd "$root/$p" && timeout 150 "$t" -test.count=1 -test.skip 'InSync|UpToDate|GeneratorRefuses' \
			2>&1 | tail -25 | sed "s/^/$p: /") || echo "$p: tests failed or timed out"
	done
	(cd "$root/gpu" && timeout 60 "$bin/gpu.test" -test.count=1 -test.run 'CheckExact|HardwareFMA' -test.v 2>&1 | grep -E '^(=== RUN|--- |    |ok|FAIL)' | head -30) || true
	elapsed
	echo "== 2b. fast mode (bf16-fast: tensor cores through VK_NV_cooperative_matrix; the refusal where the device lacks it)"
	(cd "$root/gpu" && timeout 60 "$bin/gpu.test" -test.count=1 -test.run 'Fast' -test.v 2>&1 | grep -E '^(--- |    |ok|FAIL|panic)' | head -40) || echo "gpu: fast-mode tests failed or timed out"
	for p in wan t5; do
		[ -x "$bin/$p.test" ] || continue
		(cd "$root/$p" && timeout 90 "$bin/$p.test" -test.count=1 -test.run 'FastMode|FastOperandRange' -test.v 2>&1 | grep -E '^(--- |    |ok|FAIL|panic)' | head -30 | sed "s/^/$p: /") || echo "$p: fast-mode tests failed or timed out"
	done
	elapsed
	echo "== 3. GPU benchmarks (device time per call)"
	(cd "$root/gpu" && timeout 200 "$bin/gpu.test" -test.run '^$' -test.bench "${BENCH:-.}" -test.benchtime "${BENCHTIME:-3x}" >"$out/bench.txt" 2>&1) ||
		echo "gpu benchmarks failed or timed out"
	grep -E 'Benchmark|^ok|FAIL|panic' "$out/bench.txt" || echo "(no benchmark matched BENCH=${BENCH:-.})"
	if "$bin/densitykv" bench wan --help 2>&1 | grep -- '--device' >/dev/null; then # not grep -q: its early exit fails the pipe (pipefail)
		timeout 120 "$bin/densitykv" bench wan --device vulkan --precision bf16 --calls 2 --quiet 2>&1 | tail -6 || echo "bench wan --device vulkan failed or timed out"
		timeout 120 "$bin/densitykv" bench wan --device vulkan --precision bf16-fast --calls 2 --quiet 2>&1 | tail -6 || echo "bench wan --device vulkan --precision bf16-fast refused, failed or timed out"
	fi
	elapsed
	if [ "${PIPELINE:-1}" = 0 ]; then
		echo "== 3b: skipped (PIPELINE=0)"
	else
		echo "== 3b. one real-size block on the GPU (random weights: 5 DiT calls x 30 layers with the history on the device, the bank update, the VAE)"
		timeout 150 "$bin/densitykv" bench pipeline --device vulkan --skip-text --quiet 2>&1 | tail -20 || echo "bench pipeline --device vulkan failed or timed out"
	fi
	elapsed
	echo "== 4. PyTorch on CUDA, the same shapes"
	if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
		timeout 120 python3 scripts/compare/torch_wan_layer.py --device cuda --dtype both --calls 5 2>&1 | tail -6 || echo "torch layer failed or timed out"
		if [ -d "$root/$pack/authors" ]; then
			timeout 120 python3 scripts/compare/torch_density_bank.py --authors-repo "$root/$pack/authors" --device cuda --fast-impl auto --updates 5 2>&1 | tail -6 || echo "authors' bank failed or timed out"
		else
			echo "the authors' bank skipped (pack without AUTHORS_REPO)"
		fi
	else
		echo "no CUDA PyTorch here"
	fi
	elapsed
	if [ "${PIPELINE:-1}" != 0 ]; then
		# The 30 s run at real shapes with random weights: 40 blocks of 4
		# denoising steps and the clean pass, DensityKV's banks filling and
		# evicting; its last block is measured in full (VAE included). Bounded
		# by what is left of the ~8 minutes (DEADLINE seconds from the start).
		left=$((${DEADLINE:-470} - ($(date +%s) - t0)))
		if [ "$left" -ge 60 ]; then
			echo "== 5. a 30 s video's rollout at real shapes on the GPU (40 blocks; at most $left s)"
			s0=$(date +%s)
			if timeout "$left" "$bin/densitykv" bench pipeline --device vulkan --skip-text --blocks 40 --warm-steps 4 --quiet 2>&1 | tail -20; then
				echo "the 40-block rollout took $(($(date +%s) - s0)) s (wall, the last block's VAE included, the other blocks' VAE not run)"
			else
				echo "the 40-block rollout did not finish in $left s"
			fi
		else
			echo "== 5. skipped: $left s left of the budget (DEADLINE=${DEADLINE:-470})"
		fi
	fi
	elapsed
	;;
*)
	echo "usage: bash scripts/device-gpu.sh pack|run" >&2
	exit 2
	;;
esac
