#!/usr/bin/env bash
# The project's test suite: formatting, vet, and the tests in both builds:
# the default one (generated assembly kernels, chosen at start-up by what the
# CPU has and a timing probe) and -tags noasm (the pure-Go definitions, which
# the assembly must equal bit for bit); then the GPU backend (-tags vulkan)
# on lavapipe, where DENSITYKV_TEST_DEVICE=vulkan makes a missing device a
# failure, not a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt needed: $unformatted"; exit 1; fi
go vet ./...
go vet -tags noasm ./...
go vet -tags vulkan ./...
# deploy/ is its own module, so that its test-only k8s.io/api stays out of
# the main go.mod; it has no assembly and needs no ffmpeg (bash only).
(cd deploy && go vet ./... && go test -count=1 ./...)
echo "== default build"
go test -count=1 -timeout 20m ./...
echo "== pure-Go build (-tags noasm)"
go test -count=1 -timeout 30m -tags noasm ./...
echo "== Vulkan (lavapipe)"
# purego needs no cgo: the Vulkan build still builds with CGO_ENABLED=0.
CGO_ENABLED=0 go build -tags vulkan -o /dev/null ./cmd/densitykv
# The GPU tests (the runtime, device selection and every exact kernel) run
# under Khronos' validation layer (with synchronization validation) when it
# is installed: its messages, on the tests' stdout, fail the suite.
if [ -e /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json ]; then
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
  VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation VK_LAYER_ENABLES=VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT \
    DENSITYKV_TEST_DEVICE=vulkan go test -v -count=1 -timeout 20m -tags vulkan ./vulkan/... ./device/... ./gpu/... >"$log" 2>&1 ||
    { grep -v '^=== RUN' "$log" | tail -100; exit 1; }
  if grep -q 'Validation Error\|Validation Warning\|VUID-\|SYNC-' "$log"; then
    echo "the Vulkan validation layer reported:"; grep -B1 -A4 'Validation Error\|Validation Warning\|VUID-\|SYNC-' "$log" | head -100; exit 1
  fi
  grep '^\(ok\|FAIL\|?\) ' "$log"
else
  echo "(no Vulkan validation layer: apt-get install vulkan-validationlayers checks the runtime's API use too)"
  DENSITYKV_TEST_DEVICE=vulkan go test -count=1 -timeout 20m -tags vulkan ./vulkan/... ./device/... ./gpu/...
fi
# Every other package in the Vulkan build with a device demanded: the
# models on the GPU backend (package compute), and the commands with
# --device vulkan (devices, the benchmarks, a tiny generate and one resumed
# on the CPU, the prompt-to-mp4 pipeline, decode, encode-text), each giving
# the CPU's bytes; the CPU tests run again in this build.
DENSITYKV_TEST_DEVICE=vulkan go test -count=1 -timeout 30m -tags vulkan $(go list ./... | grep -v '/densitykv/\(vulkan\|device\|gpu\)\(/\|$\)')
