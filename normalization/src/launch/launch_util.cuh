// Host helpers shared by the kernel launchers.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include <normtune/common/error.h>
#include <normtune/common/platform.h>

#include "kernels/reduce.cuh"

namespace normtune {

// Null (absent) or aligned to `align` bytes.
inline bool aligned_to(const void* ptr, size_t align) {
  return ptr == nullptr || reinterpret_cast<uintptr_t>(ptr) % align == 0;
}

// Resident CTAs per SM of kKernel at a block size, asked once per (kernel, block size): the
// cache is per kernel (a template on the kernel's address), so one kernel's occupancy never
// sizes another's grid (the grid fixes the backward's reduction order). The dynamic shared
// memory must be a function of the block size for a given kernel, and any attribute it
// needs must be set before the first query.
template <auto kKernel>
int resident_ctas_per_sm(int threads, size_t smem = 0) {
  static std::array<std::atomic<int>, kMaxCtaThreads / kWarp + 1> cache{};
  std::atomic<int>& slot = cache[threads / kWarp];
  int n = slot.load(std::memory_order_relaxed);
  if (n == 0) {
    NORMTUNE_CUDA_CHECK(platform::max_active_blocks_per_sm(&n, kKernel, threads, smem));
    n = n > 1 ? n : 1;
    slot.store(n, std::memory_order_relaxed);
  }
  return n;
}

}  // namespace normtune
