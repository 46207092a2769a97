// Package gpu holds the project's exact kernels for Vulkan compute (package
// vulkan): GLSL compute shaders (shaders/*.comp, shared code in
// shaders/*.glsl) compiled to SPIR-V by a generator and embedded, each
// computing one CPU definition bit for bit, with a Go function that
// records it into a vulkan.Batch, so that a model chains many operations
// without a host round trip:
//
//	Product, NT, NN   gemm's float32 and bfloat16 products (gemm/doc.go;
//	                  gemm/define.go's dotF32 and dotBF16 are the oracle)
//	                  on Matrix views of device buffers (shaders/gemm.glsl);
//	                  the float32 product also reads a bfloat16 B, widened
//	                  (umT5's weights at fp32 stay 2 bytes a weight)
//	RoundBF16         gemm.RoundBF16, or gemm.BF16OperandBits, of a matrix
//	Attention, RieszRowStats, …  attn's and riesz's definitions (see
//	                  their files), on exact.glsl's math library
//	LayerNorm, RMSNorm  nn.LayerNorm and nn.RMSNorm (nn/norm.go): one row
//	                  per workgroup, the float64 statistics summed in the
//	                  row's order by one invocation, 1/√ by exact64.glsl
//	                  (shaders/nn_norm.comp)
//	Modulate, GatedAdd, Add, AddBias  wan's modulate, gatedAdd, addInto
//	                  (wan/ops.go), nn.Linear's addBias and wan's mods =
//	                  modulation + e0 (shaders/nn_elementwise.comp)
//	GELUTanh, SiLU    nn.GELUTanh32 and nn.SiLU32 (nn/act.go), on
//	                  exact.glsl's exp_def (vmath.Exp32Clamped), fma32 and
//	                  div32 (shaders/nn_act.glsl)
//	Rope, RopeAt      rope's rotation (rope/rope.go's rotate) of frame
//	                  grids (Rotator.Frame) and of tokens at given positions
//	                  (Table.Apply, Rotator.Token), the float64 cosines and
//	                  sines computed on the CPU and uploaded once per layout
//	                  (RopeTables; shaders/nn_rope.comp)
//	NewBank, BankPasses  the DensityKV bank (package bank) with its update's
//	                  passes on the device (bank.Passes; bank.go,
//	                  bankpasses.go): its K/V and descriptors stay there
//	                  between updates, the Soft-Riesz passes above run
//	                  there (the admitted states' self densities reduced
//	                  on the host in riesz.SelfSums's order), the host
//	                  keeps the control flow and reads back the per-state
//	                  vectors it decides from; the update scratch is
//	                  shared by the banks of a device (bankscratch.go,
//	                  BankBytes); the CPU bank's decisions and snapshot
//	                  bytes (TestBankExact, TestBankSharedScratch);
//	                  WriteRows copies its states into an attention
//	                  context's rows (bank.Bank.Interleaved's values)
//	CopyRows          a strided copy of 32-bit words with zero rows after
//	                  (shaders/copy_rows.comp; no arithmetic)
//	SoftmaxBias, Mul  umT5's softmax with the relative-position bias and
//	                  the key mask (nn.SoftmaxBiasRow: vmath.Exp32Clamped,
//	                  the float64 row sum on exact64.glsl's conversions,
//	                  shaders/t5_softmax.glsl) and its gate product
//	                  (compute.Mul, shaders/t5_mul.comp); with NT and NN
//	                  per head they make Backend.BiasedAttention (t5.go)
//	Conv, RMSNormChannels, Transpose  the VAE decoder's operations
//	                  (compute.VAEOps, vae.go): a convolution is, per
//	                  input frame that is not a zero frame, an im2col in
//	                  nn.Conv's row order and bf16 padding
//	                  (shaders/vae_im2col.comp) and one Product continuing
//	                  the chain, then nn.AddBias and the residual
//	                  (shaders/vae_bias.comp); nn.RMSNormChannels with its
//	                  SiLU on div32, sqrt32 and exp_def (shaders/vae_norm.glsl)
//	CheckExact        the exactness probe of a device
//	NewFastBackend, PrepFast, FastProduct  fast mode (below; fast.go):
//	                  not exact, refused where FastSupport finds no
//	                  usable cooperative matrix
//
// Every function returns an error for bad shapes, naming the operand, and
// records nothing then. Package gpu compiles in every build; without the
// tag vulkan, opening a device fails (vulkan.ErrNotBuilt).
//
// # Exact mode
//
// A shader is exact-mode unless its name ends in _fast. The generator makes
// every exact-mode module declare the float controls (DenormPreserve,
// SignedZeroInfNanPreserve, RoundingModeRTE, for 32-bit floats and any
// other width the module uses) and puts NoContraction on every float add,
// subtract, multiply and negate, so that no driver may fuse a·b + c:
// fusion happens only where a shader calls fma. It refuses
// (internal/spirv.CheckExact) division and remainder, the vector and matrix
// products (their order of additions is open), the GLSL.std.450 functions
// that Vulkan does not round correctly (exp, log, pow, sqrt, inversesqrt,
// the trigonometric ones, …) or whose result it leaves open (round's ties;
// fmin, fmax and clamp on floats: signed zeros and NaN — use a comparison
// and a select). What they would compute comes from exact.glsl: division
// and square root in integer arithmetic, vmath.Exp32, fma32; exact64.glsl
// the float64 division and square root (integer arithmetic on 64-bit
// integers: the device's shaderInt64) and the float32 ↔ float64
// conversions, for the kernels whose CPU definition divides or takes a
// root in float64 (the norms) or converts (RoPE). Kernels with float64
// steps need shaderFloat64 (Vulkan rounds its add, subtract and multiply
// correctly) and refuse a device without it at record time.
//
// The declared modes are not a guarantee: a driver may lack them (lavapipe
// reports no DenormPreserve, yet preserves denormals), and Vulkan lets
// fma() be a multiply and an add (lavapipe's is). CheckExact runs a probe
// shader once per device — fused multiply-adds on cases a multiply and an
// add get wrong, denormal operands and results, signed zeros, Inf and NaN,
// ties to even, a·b + c left unfused — and compares with Go. Every kernel
// calls it first and refuses exact mode, naming the failed properties, on
// a device that fails any but the fused multiply-add; without a fused one
// (lavapipe) the float32 product takes exact.glsl's integer fma32
// (shaders/gemm_softfma.comp) instead of fma() (shaders/gemm.comp).
//
// The bfloat16 product needs neither: a·b of two bfloat16 values has 16
// significant bits, so its float32 product is exact and one add rounds
// the step once; a product that underflows or overflows, and the sum
// near 2^-126, are handled by exact scaled recomputation and bit tests
// (shaders/gemm_exact.glsl), so tininess after rounding at 24 bits (the
// window just below 2^-126 included) and the zero's sign come out as
// gemm's definition says on any device, denormals preserved or flushed.
//
// # Fast mode
//
// Fast mode (compute.Fast; --precision bf16-fast) is the one place where
// this package does not compute the CPU's bits: a Backend made by
// NewFastBackend runs its bfloat16 linears (LoadLinear and LoadLinearBF16
// at gemm.BF16) on tensor cores through VK_NV_cooperative_matrix, and
// every other operation (norms, attention, element-wise steps, the fp32
// products, the VAE's convolutions) with the exact kernels above. The
// products' operands are the bfloat16 definition's, carried exactly: the
// activations are rounded to bfloat16 operands and each row scaled by a
// power of two into float16 (PrepFast, shaders/gemm_prep_fast.comp;
// the weights on the host when uploaded, the same bits), since the NV
// extension's matrices take float16, not bfloat16; a product of two such
// values is exact, the tensor cores accumulate it in float32 (in an order
// they choose), and the result is scaled back (FastProduct,
// shaders/gemm_fast.glsl). Only the accumulation differs from gemm's
// bfloat16 definition: at most (k+2)·2^-23·Σ|a·b| for a depth k.
//
// Fast-mode modules end in _fast; the generator neither adds the float
// controls nor checks their instructions, and they are listed in
// fastModules (fast.go) with their role; newKernel refuses them
// (TestFastModules). gemm_coopmat_fast is the tensor-core module;
// gemm_emu_fast compiles the same GLSL with the cooperative-matrix multiply
// replaced by float32 loops over the same staged tiles, test-only, so
// that the tile loop, edges, depth tails and scaling are checked on
// lavapipe (TestFastProductEmulated, TestFastBackendLinear and wan's
// TestFastModeGoldenEmulated); no device here offers a cooperative matrix,
// so the tensor-core module itself is checked only by spirv-val until a
// GPU runs TestFastProductTensorCores and wan's TestFastModeGolden (which
// elsewhere require the refusal). FastSupport refuses, naming the device
// and what it lacks, a device without the NV extension's 16×16×16
// float16·float16+float32 shape, shaderFloat16, the Vulkan memory model or
// 32-wide subgroups; a device with only VK_KHR_cooperative_matrix too
// (Debian bookworm's glslc knows no GL_KHR_cooperative_matrix).
//
// # Building the shaders
//
// go generate ./gpu (gen.go) runs glslc (Debian's glslc) on each shader,
// edits the SPIR-V words in Go (internal/spirv), validates the result with
// spirv-val and writes spv/NAME.spv, spv/GLSLC_VERSION and modules.go
// (internal/spvgen's documentation gives the exact flags). Tests:
// TestSPIRVUpToDate (the checked-in files equal a fresh build; it needs
// the glslc recorded in spv/GLSLC_VERSION and fails naming both versions
// otherwise), TestExactModules (every exact-mode module passes CheckExact,
// and the same rules read off spirv-dis's text), TestExactCheckCatches
// (broken modules fail both checks).
//
// # Tests
//
// The kernels' tests (go test -tags vulkan ./gpu, on lavapipe in CI with
// DENSITYKV_TEST_DEVICE=vulkan, where a missing device fails them) compare
// every output bit with the CPU: the products with gemm's definition
// (ported literally in the test on vmath.Round32), gemm's selected kernel
// and its pure-Go kernel, on tiny and odd shapes, tile tails, offsets and
// leading dimensions, special values, and constructed cases for every
// corner of the bfloat16 steps; BenchmarkProducts times them. The norms,
// element-wise steps, activations and RoPE are compared with nn's, wan's
// (ported literally: unexported there) and rope's functions on rows of
// every kind (TestNorms, TestElementwise, TestActivations, TestRope) and
// chained as one DiT block in one batch (TestBlockChain); exact64.glsl
// with Go on a million inputs and constructed hard cases (TestExact64).
package gpu
