// Package gemm is the project's matrix engine: C = A·Bᵀ (NT) and C = A·B
// (NN), row-major with leading dimensions, a fused tile API (NTFunc,
// PackedB.TileFunc) that hands C to a caller's epilogue tile by tile without
// materialising it, and operands packed once and reused (PackedA, PackedB,
// MulPacked) — in two precisions, float32 and bfloat16, each with one
// numerical definition that every kernel on every CPU computes bit for bit.
//
// # Precision
//
// An operand's precision is explicit: it is chosen when the operand is
// packed, never detected from its values. PackA, PackAT, PackNT, PackNN
// (and NT, NN, NTFunc) take float32 operands; the ...As variants take a
// Precision and round float32 to bfloat16 (nearest even) for BF16; the
// ...BF16 variants read bfloat16 storage ([]uint16, e.g. weights kept in
// bfloat16) as BF16 operands or widened exactly to F32. A product needs
// two operands of the same precision; PackedB.Product, TileFunc and
// ProductSub pack their float32 A at B's precision. Precision is spelled
// "fp32" and "bf16" (MarshalText, UnmarshalText): it is also the precision
// mode of the models built on the engine (wan, vae, t5).
//
// Operands can also be packed from float32 panels (PackPanelsAs: a result
// written panel by panel, such as attention probabilities or a
// convolution's shifted inputs, becomes a bfloat16 operand without a
// row-major copy), read back (Unpack), and re-packed for the kernel
// selected now (Repack, after Force changed the bfloat16 layout). Rounding
// float32 to bfloat16 operands (nearest even, NaN kept quiet, a denormal
// result read as zero) has one definition in Go; on amd64 with AVX-512
// generated assembly loops compute it for the packing paths
// (bf16PanelsQuad, bf16PanelsAMX, bf16Floats, bf16Row), equal bit for bit
// (TestRoundKernelsExact).
//
// # The float32 product
//
// For each element of C, starting from C (accumulating) or +0:
//
//	c = fma(a[q], b[q], c)  for q = 0, 1, …, k-1 (in depth order)
//
// with fma the IEEE 754 fusedMultiplyAdd in binary32: the exact a·b + c
// rounded once to nearest even, gradual underflow. The kernels store and
// reload C between depth chunks (KC), which changes nothing: it is one
// chain. The pure-Go definition (define.go: fma32, from the exact float64
// product and a TwoSum correction of the float64 sum) is the oracle.
//
// # The bfloat16 product
//
// This is the scheme of Intel AMX's TDPBF16PS (probed on hardware, see issue
// #13), made the definition on every CPU:
//
//   - Operands are bfloat16 values; a denormal bfloat16 reads as a zero of
//     its sign. An accumulated C that is denormal reads as a zero of its
//     sign.
//   - The depth range of the call is cut into blocks of BF16Block = 32,
//     starting at its first depth (MulPacked's ak0/bk0 and ProductSub's k0
//     must be multiples of 32, so blocks sit at the same place in every
//     operand); the last block is padded with +0 operands.
//   - In each block, an even chain over the block's depths 0, 2, …, 30 and
//     an odd chain over 1, 3, …, 31, both from +0, each step
//     x = ftz(a·b + x) with the exact product and one rounding to nearest
//     even; then c = ftz(c + ftz(even + odd)).
//   - ftz flushes a result that is tiny after rounding (its magnitude,
//     rounded to 24 bits with an unbounded exponent, is below 2^-126) to a
//     zero with the sign of the exact result: the x86 flush-to-zero rule,
//     which AVX512_BF16 applies too. Flushing applies to every chain step
//     and both closing additions, so no intermediate or final value is
//     denormal; overflow gives ±Inf; NaN and Inf propagate (a NaN's sign and
//     payload are not specified: compare NaN-aware).
//
// A product split into calls at multiples of 32 and continued from C gives
// the same bits as one call. With k = 0, C is left as it is (or +0). The
// definition is not a sequential chain: it differs from one in about two
// thirds of elements, typically by an ulp. define.go (dotBF16, fmaBF16) is
// the oracle.
//
// # Kernels
//
// Kernels are Go assembly generated from Go (internal/asmgen; go generate
// writes kernels_amd64.s, with VDPBF16PS and the AMX instructions encoded as
// bytes), so a plain go build gets them; -tags noasm (and every non-amd64
// build) keeps only the pure-Go kernels:
//
//	precision  kernel      instructions                            layout of BF16 operands
//	f32        avx512      VFMADD231PS zmm, 4×32 register block     -
//	f32        avx2        VFMADD231PS ymm, 4×32 in two halves      -
//	f32        go          the definition, register-blocked        -
//	bf16       amx         TDPBF16PS, 32×32 tiles (2×2)            A row-major pairs, B VNNI panels
//	bf16       amx-i       amx with each block's tile loads        as amx
//	                       interleaved with its TDPBF16PS
//	bf16       avx512bf16  VDPBF16PS on re-paired depths           quad pairs
//	bf16       avx512      VFMADD231PS, two chains per output       float32 panels
//	bf16       avx2        VFMADD231PS ymm, two chains              float32 panels
//	bf16       go          the definition                          float32 panels
//
// avx512bf16 is exact because of what VDPBF16PS was measured to do on AMD
// Zen 4 (TestVDPBF16PSSemantics checks it on every CPU with AVX512_BF16,
// and the self-test checks the kernel): per dword,
// ftz(x + hi·hi) then ftz(· + lo·lo), each a fused multiply-add rounded to
// nearest even, denormal inputs and accumulators read as zero, tininess
// after rounding, MXCSR ignored. Packing depths 4g and 4g+2 into one dword
// and 4g+1 and 4g+3 into the next makes each instruction two consecutive
// steps of one chain. (Pairing 2i with 2i+1, as a plain dot product would,
// is a sequential chain: faster to set up, but not this definition.)
//
// The FMA kernels set MXCSR's flush-to-zero and denormals-are-zero bits for
// the bfloat16 product inside the assembly function and restore the saved
// MXCSR before returning; the VDPBF16PS kernel does the same for its closing
// additions. Go's ABI fixes MXCSR's control bits at every call, so no Go
// code may run in between, and none does: the functions call nothing, an
// assembly function is not an asynchronous preemption point (the runtime
// only injects preemption at safe points of Go code), so the goroutine
// stays on its thread for the whole call, and a signal delivered meanwhile
// runs its handler with the default floating-point state that Linux sets up,
// then returns to the saved one. The float32 kernels leave MXCSR alone.
//
// AMX: the process asks Linux once for the tile data permission
// (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), at kernel
// selection. Tile state is per thread; every call of either AMX kernel
// loads the tile configuration (LDTILECFG), computes many tiles and
// releases them (TILERELEASE), so no tile state lives across a Go call
// boundary and the scheduler (which only switches goroutines at safe points
// of Go code) cannot interleave anything with it. The AMX kernels ran on
// hardware (an Intel Xeon with amx_bf16, through the test binaries, in two
// sessions): the kernel tests (amx and amx-i), the DiT's pinned bits and
// goldens, the bank's, attention's and the Soft-Riesz tests passed there,
// and a mutated AMX kernel (asmgen's bf16-amx-tile) was rejected by the
// self-test and failed the kernel tests. On every machine, AMX or not, the
// encodings are checked with objdump (TestEncodingsObjdump), the layout and
// driver through the Go emulation emu-amx, and the kernels' code itself
// through an interpreter of the generated text (internal/amxsim, wired up
// in amxsim_test.go): it decodes the AMX instructions from their bytes,
// executes the file's instructions on the tests' slices with every access
// bounds-checked, faults where the hardware would (no or a bad tile
// configuration, mismatched tile shapes, tiles not released before RET),
// computes TDPBF16PS with the definition (amxDot, which emu-amx uses too),
// and runs as kernels sim-amx and sim-amx-i in every kernel test, so that
// a change to the AMX generator is tested, and its mutations caught,
// without AMX. On an AMX machine a
// kernel is used only after passing the self-test.
//
// # Selection
//
// On first use the package selects one kernel per precision: those the CPU
// and OS support, that pass a bit-exactness self-test against the
// definition (values whose sums depend on every rounding, tininess at both
// sides of 2^-126, products beyond float32's range that cancel, denormal
// operands and C, ±Inf, NaN, partial tiles and blocks), and where several
// pass, the fastest in a timing probe of about a millisecond each (the
// results do not depend on the choice). KernelInfo and KernelSummary report
// what runs and why; Force switches kernels (tests, benchmarks, a
// --kernel flag), and SetBF16/HardwareBF16/BF16Calls keep the switch between
// the bfloat16-instruction kernel and the float32 FMA kernel that earlier
// versions had.
//
// # Threads and memory
//
// Every output element is computed by exactly one goroutine with the
// arithmetic of the definition, so results are bit-identical for every
// thread count (SetThreads) and every tiling. Packing buffers come from a
// sync.Pool, so calls on one goroutine do not allocate in steady state; a
// call that fans out to several goroutines allocates a few small closures.
//
// Aliasing: C must not overlap A or B.
package gemm
