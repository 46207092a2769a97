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
DENSITYKV_TEST_DEVICE=vulkan go test -count=1 -timeout 20m -tags vulkan ./vulkan/... ./device/... ./gpu/...
DENSITYKV_TEST_DEVICE=vulkan go test -count=1 -tags vulkan ./cmd/densitykv -run 'Devices'
