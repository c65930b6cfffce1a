// Reference memory operations the benchmark times beside the norms (the per-shape speed of
// light): a copy is cudaMemcpyAsync; these are the 2-read patterns.
#pragma once

#include <algorithm>
#include <cstddef>

#include <normtune/common/dtype.h>
#include <normtune/common/platform.h>

namespace normtune::bench {

// c = f(a, b), and d = g(a, b) when d is not null: reads 2 x bytes, writes 1 or 2 x bytes.
// bytes must be a multiple of 16 and the pointers 16-byte aligned.
void launch_two_reads(const void* a, const void* b, void* c, void* d, size_t bytes, int sm_count,
                      cudaStream_t stream);

// d = f(a, b, c): reads 3 x bytes, writes 1 x bytes (the pattern of a backward with an added
// gradient). Same requirements.
void launch_three_reads(const void* a, const void* b, const void* c, void* d, size_t bytes,
                        int sm_count, cudaStream_t stream);

// d = fp8 e4m3(a (+ b)) (one byte per element), and c = a + b in t when b is not null: the
// baseline of a norm with an FP8 output (a cast: reads elements of t, writes one byte each)
// and of a fused add with one. elements of t must fill whole 16-byte vectors.
void launch_cast_fp8(const void* a, const void* b, DType t, void* c, void* d, size_t elements, int sm_count,
                     cudaStream_t stream);

// d = e = fp8 e4m3(a): x read once, two codes per element written. The baseline of a norm
// with a row-wise and a column-wise MXFP8 output.
void launch_cast_fp8_twice(const void* a, DType t, void* d, void* e, size_t elements, int sm_count,
                           cudaStream_t stream);

// A separate row-wise MXFP8 e4m3 quantization of x [rows, hidden] (hidden % 32 == 0): codes
// into z, E8M0 scales into scales (compact, scale_cols per row). What an unfused norm + MXFP8
// would run after the norm.
void launch_mxfp8_quantize(const void* x, DType t, void* z, void* scales, size_t rows, size_t hidden,
                           size_t scale_cols, int sm_count, cudaStream_t stream);

}  // namespace normtune::bench
