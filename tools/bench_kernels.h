// Reference memory operations the benchmark times beside the norms (the per-shape speed of
// light): a copy is cudaMemcpyAsync; these are the 2-read patterns.
#pragma once

#include <algorithm>
#include <cstddef>

#include <normtune/common/dtype.h>
#include <normtune/common/platform.h>
#include <normtune/registry/norm_key.h>

namespace normtune::bench {

// c = f(a, b), and d = g(a, b) when d is not null: reads 2 x bytes, writes 1 or 2 x bytes.
// bytes must be a multiple of 16 and the pointers 16-byte aligned.
void launch_two_reads(const void* a, const void* b, void* c, void* d, size_t bytes,
                      cudaStream_t stream);

// d = f(a, b, c): reads 3 x bytes, writes 1 x bytes (the pattern of a backward with an added
// gradient). Same requirements.
void launch_three_reads(const void* a, const void* b, const void* c, void* d, size_t bytes,
                        cudaStream_t stream);

// d = fp8 e4m3(a (+ b)) (one byte per element), and c = a + b in t when b is not null: the
// baseline of a norm with an FP8 output (a cast: reads elements of t, writes one byte each)
// and of a fused add with one. elements of t must fill whole 16-byte vectors.
void launch_cast_fp8(const void* a, const void* b, DType t, void* c, void* d, size_t elements,
                     cudaStream_t stream);

// d = e = fp8 e4m3(a): x read once, two codes per element written. The baseline of a norm
// with a row-wise and a column-wise MXFP8 output.
void launch_cast_fp8_twice(const void* a, DType t, void* d, void* e, size_t elements,
                           cudaStream_t stream);

// d = half a byte per element of a (+ b, with c = a + b), copied without an e2m1 conversion:
// the bytes of a norm (or fused add) with a 4-bit z, its scales aside.
void launch_cast_fp4(const void* a, const void* b, DType t, void* c, void* d, size_t elements,
                     cudaStream_t stream);
// d = e = half a byte per element of a, the same copy: a norm with both NVFP4 outputs
// (row-wise and the column-wise transpose), its scales aside, as a read and two half-byte
// writes.
void launch_cast_fp4_twice(const void* a, DType t, void* d, void* e, size_t elements,
                           cudaStream_t stream);

// An empty kernel, one CTA of 128 threads: what a launch alone costs the host, the floor under a
// norm call's host time. `extended`: through cudaLaunchKernelEx with the programmatic-
// dependent-launch attribute, as the norm kernels are launched (platform::launch); otherwise
// <<<>>>. Errors are left for the caller's next check.
void launch_empty(bool extended, cudaStream_t stream);

// A separate row-wise block quantization of x [rows, hidden] (hidden a multiple of the
// block; e4m3 codes for the FP8 modes): codes into z, scales into scales (compact layout;
// NVFP4 with the global amax at global_amax). What an unfused norm + quantization runs after
// the norm.
void launch_block_quantize(ScalingMode mode, const void* x, DType t, void* z, void* scales,
                           const float* global_amax, size_t rows, size_t hidden,
                           cudaStream_t stream);

}  // namespace normtune::bench
