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

// A few lock-free slots per device holding key -> count (1..65535), for occupancy answers
// that must not be asked again on every launch. A key's low 16 bits are zero. The cache is per
// template instance: instantiate it per kernel (and per question), so one kernel's or one
// GPU's answer never sizes another's grid (the grid fixes the backward's reduction order).
template <auto kKernel, int kQuestion>
int cached_count(uint64_t key, int (*ask)(uint64_t key)) {
  constexpr int kSlots = 8;
  static std::array<std::array<std::atomic<uint64_t>, kSlots>, kMaxDevices> cache{};
  const int device = current_device();
  NORMTUNE_CHECK(device < kMaxDevices, "device ", device, ": normtune supports devices 0..", kMaxDevices - 1);
  for (std::atomic<uint64_t>& slot : cache[device]) {
    const uint64_t v = slot.load(std::memory_order_acquire);
    if (v != 0 && (v & ~uint64_t{0xFFFF}) == key) return static_cast<int>(v & 0xFFFF);
  }
  int n = ask(key);
  n = n < 1 ? 1 : n > 0xFFFF ? 0xFFFF : n;
  for (std::atomic<uint64_t>& slot : cache[device]) {
    uint64_t empty = 0;
    if (slot.compare_exchange_strong(empty, key | uint64_t(n), std::memory_order_acq_rel)) break;
    if ((empty & ~uint64_t{0xFFFF}) == key) break;  // another thread cached the same answer
  }
  return n;  // when every slot is taken, the answer is simply not cached
}

// threads <= 1024 (11 bits, from bit 48), cluster <= 255 (bits 40..47), smem < 2^24 (bits 16..39).
inline uint64_t launch_key(int threads, size_t smem, int cluster = 1) {
  return (uint64_t(threads) << 48) | (uint64_t(cluster & 0xFF) << 40) | (uint64_t(smem & 0xFFFFFFu) << 16);
}
inline int key_threads(uint64_t key) { return static_cast<int>(key >> 48); }
inline int key_cluster(uint64_t key) { return static_cast<int>((key >> 40) & 0xFF); }
inline size_t key_smem(uint64_t key) { return static_cast<size_t>((key >> 16) & 0xFFFFFFu); }

// Resident CTAs per SM of kKernel with `threads` per CTA and `smem` bytes of dynamic shared
// memory. Any attribute the kernel needs must be set first.
template <auto kKernel>
int resident_ctas_per_sm(int threads, size_t smem = 0) {
  return cached_count<kKernel, 0>(launch_key(threads, smem), [](uint64_t key) {
    int n = 0;
    NORMTUNE_CUDA_CHECK(platform::max_active_blocks_per_sm(&n, kKernel, key_threads(key), key_smem(key)));
    return n;
  });
}

// Clusters of `cluster` CTAs of kKernel (threads, smem each) that can be resident on the
// device at once (0: not even one). Any attribute the kernel needs must be set first.
template <auto kKernel>
int resident_clusters(int threads, size_t smem, int cluster) {
  // cached_count stores at least 1, so the answer is stored as (clusters + 1).
  return cached_count<kKernel, 1>(launch_key(threads, smem, cluster), [](uint64_t key) {
           int n = 0;
           const cudaError_t e = platform::max_active_clusters(
               &n, kKernel, static_cast<unsigned>(key_threads(key)),
               platform::LaunchOptions{.cluster = key_cluster(key), .smem = key_smem(key)});
           if (e != cudaSuccess) {
             (void)cudaGetLastError();  // a configuration the device refuses: does not fit
             n = 0;
           }
           return n + 1;
         }) - 1;
}

// Whether one cluster of `cluster` CTAs of kKernel (threads, smem each) can be resident on
// the device at all.
template <auto kKernel>
bool cluster_fits(int threads, size_t smem, int cluster) {
  return cluster <= 1 || resident_clusters<kKernel>(threads, smem, cluster) > 0;
}

// The most dynamic shared memory a CTA of kKernel may have on the current device (the opt-in
// limit less the kernel's static shared memory), set as the kernel's limit, and non-portable
// cluster sizes allowed where the device has clusters: once per device.
template <auto kKernel>
size_t prepare_cluster_smem_kernel() {
  static std::array<std::once_flag, kMaxDevices> attributes;
  static std::array<size_t, kMaxDevices> max_smem{};
  const int device = current_device();
  once_per_device(attributes, [&] {
    size_t static_bytes = 0;
    NORMTUNE_CUDA_CHECK(platform::static_smem_bytes(kKernel, &static_bytes));
    const size_t optin = device_info(device).shared_memory_per_block_optin;
    const size_t limit = optin > static_bytes ? optin - static_bytes : 0;
    NORMTUNE_CUDA_CHECK(platform::allow_dynamic_smem(kKernel, limit));
    if (device_info(device).supports_clusters) NORMTUNE_CUDA_CHECK(platform::allow_non_portable_cluster(kKernel));
    max_smem[device] = limit;
  });
  return max_smem[device];
}

}  // namespace normtune
