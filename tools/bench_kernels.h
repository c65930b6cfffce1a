// Reference memory operations the benchmark times beside the norms (the per-shape speed of
// light): a copy is cudaMemcpyAsync; these are the 2-read patterns.
#pragma once

#include <algorithm>
#include <cstddef>

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

}  // namespace normtune::bench
