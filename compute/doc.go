// Package compute is what a model sees of the machine that runs it: a
// Backend of opaque float32 Tensors and the operations of the models'
// forwards (Linear, LayerNorm, RMSNorm, the DiT's modulation steps, the
// residual adds, GELU, SiLU, Attention at a precision; umT5's streamed
// bfloat16 Linears, gate product and attention with a relative-position
// bias; the VAE decoder's convolutions, channel RMS norm and transpose,
// VAEOps), in the spirit of ollama's ml package under its model/ packages.
// A model's forward is written once, against Backend; the backend
// decides where the values live and how each operation runs:
//
//   - CPU (NewCPU): tensors are host []float32 and every operation is
//     package nn's (or the reference loop here), so a model on the CPU
//     backend computes exactly the bits it computed before this package
//     existed.
//   - the GPU (package gpu's Backend): tensors are Vulkan buffers, each
//     operation is recorded into a command buffer (no host round trip per
//     operation) and computes the CPU's bits with package gpu's exact
//     kernels; Download and Flush run what was recorded.
//
// # Contract
//
// Every operation has one numerical definition, the CPU backend's, given
// in its doc comment; a backend computes those bits or does not offer the
// operation (ErrNoKernel, wrapped with the operation's name). A fused
// kernel is an optional interface (LayerNormModulater), found by type
// assertion, whose doc comment gives the unfused operations it must
// equal; LayerNormModulate calls it or the unfused sequence.
//
// Operations return no error: the first failure (a bad shape, an
// operation the backend lacks, a device error) is kept by the backend,
// every later operation is skipped, and the next Flush or Download
// returns it, as bufio.Writer does. A forward therefore reads like the
// paper and checks errors where it reads results back.
//
// Tensors are flat, row-major float32, shapes in the doc comments
// ([rows][d]). Operations may read and write the same tensor where their
// doc says so (y may be x); otherwise outputs must not overlap inputs.
// A tensor belongs to the backend that made it.
package compute
