// Host helpers shared by the kernel launchers.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>

#include <normtune/common/device_info.h>
#include <normtune/common/error.h>
#include <normtune/common/platform.h>

#include "kernels/reduce.cuh"

namespace normtune {

// Null (absent) or aligned to `align` bytes.
inline bool aligned_to(const void* ptr, size_t align) {
  return ptr == nullptr || reinterpret_cast<uintptr_t>(ptr) % align == 0;
}

// Runs fn() once per device: CUDA function attributes (dynamic shared memory, non-portable
// cluster sizes) are set per device. A call that throws is tried again the next time.
template <typename Fn>
void once_per_device(std::array<std::once_flag, kMaxDevices>& flags, Fn&& fn) {
  const int device = current_device();
  NORMTUNE_CHECK(device < kMaxDevices, "device ", device, ": normtune supports devices 0..", kMaxDevices - 1);
  std::call_once(flags[device], std::forward<Fn>(fn));
}

// Resident CTAs per SM of kKernel with `threads` per CTA and `smem` bytes of dynamic shared
// memory, asked once per (device, kernel, threads, smem): the cache is per kernel (a template
// on the kernel's address) and per device, so one kernel's or one GPU's occupancy never sizes
// another's grid (the grid fixes the backward's reduction order). A few lock-free slots per
// device hold (threads, smem) -> count. Any attribute the kernel needs must be set first.
template <auto kKernel>
int resident_ctas_per_sm(int threads, size_t smem = 0) {
  constexpr int kSlots = 8;
  static std::array<std::array<std::atomic<uint64_t>, kSlots>, kMaxDevices> cache{};
  const int device = current_device();
  NORMTUNE_CHECK(device < kMaxDevices, "device ", device, ": normtune supports devices 0..", kMaxDevices - 1);
  // threads <= 1024 (11 bits), smem < 2^32, count in the low 8 bits (>= 1, so never 0).
  const uint64_t key = (uint64_t(threads) << 40) | (uint64_t(smem & 0xFFFFFFFFu) << 8);
  for (std::atomic<uint64_t>& slot : cache[device]) {
    const uint64_t v = slot.load(std::memory_order_acquire);
    if (v != 0 && (v & ~uint64_t{0xFF}) == key) return static_cast<int>(v & 0xFF);
  }
  int n = 0;
  NORMTUNE_CUDA_CHECK(platform::max_active_blocks_per_sm(&n, kKernel, threads, smem));
  n = n < 1 ? 1 : n > 255 ? 255 : n;
  for (std::atomic<uint64_t>& slot : cache[device]) {
    uint64_t empty = 0;
    if (slot.compare_exchange_strong(empty, key | uint64_t(n), std::memory_order_acq_rel)) break;
    if ((empty & ~uint64_t{0xFF}) == key) break;  // another thread cached the same answer
  }
  return n;  // when every slot is taken, the answer is simply not cached
}

}  // namespace normtune
