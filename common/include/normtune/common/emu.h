// The device side of normtune's CPU emulator (a build with NORMTUNE_USE_EMU; platform.h
// includes this file and nothing else does).
//
// Why: the machines that build and test normtune (CI included) have no GPU, so without this
// no kernel ever runs there. The emulator runs the library's kernels, unchanged, on the CPU,
// so the GPU test suites (tests/gpu) check them against the fp64 reference in CI. It proves
// what a kernel computes (indexing, reductions, the cluster exchange, quantization, the
// workspace protocol), never how fast: timings of an emulated build mean nothing.
//
// How: the kernels are compiled by the host compiler as plain C++ (this header gives CUDA's
// keywords host meanings). The runtime (common/emu/emu_runtime.cpp) stands in for libcudart:
// device memory is host memory, launches run at once on the calling thread, a CTA is run as
// one fiber per thread on one OS thread (switched at barriers, shuffles and waits), and the
// CTAs of a thread-block cluster run at the same time, one OS thread each, so that their
// barriers and exchanges really interleave.
// - __shared__ is thread_local: every fiber of a CTA sees the same variable, and a block-scope
//   thread_local is static, as a __shared__ variable is. Dynamic shared memory
//   (extern __shared__ T name[]) is a thread_local array the runtime defines, one per name the
//   kernels use (the top of emu_runtime.cpp), poisoned at each CTA's start. Distributed shared
//   memory is the same variable in the other CTA's OS thread, at the same offset from that
//   thread's thread pointer.
// - Warp shuffles and __syncwarp meet at a rendezvous of the warp's live lanes; __syncthreads
//   and named barriers count the CTA's live threads (or the count given); cluster barriers,
//   transaction barriers (mbarrier with st.async) and cp.async follow PTX's rules (cp.async
//   completes at once).
// - A wait that can never end (every fiber of a CTA waiting, no other CTA running) stops the
//   process with a message naming the wait: a hang on the GPU is an abort here.
// Limits: the device is one "sm_90" with few SMs; atomics are real (clusters run in
// parallel); no programmatic dependent launch (launches are serial); a library loaded with
// dlopen cannot run cluster kernels (its thread_local variables are not at a fixed offset
// from the thread pointer).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <tuple>
#include <type_traits>

// ---- CUDA's keywords for a host compiler ------------------------------------------------
// (The toolkit's host_defines.h, included above, maps some of them to GNU attributes; none
// of those meanings is wanted here.)
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __shared__
#undef __launch_bounds__
#undef __grid_constant__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ thread_local
#define __launch_bounds__(...)
#define __grid_constant__

namespace normtune::emu {

// A kernel launch: `body` runs once per thread of every CTA (the kernel with its arguments
// bound). `cluster` CTAs along x form a cluster. Runs at once, or is recorded while `stream`
// is being captured into a graph. Returns the launch error (also kept for cudaGetLastError).
cudaError_t launch(dim3 grid, dim3 block, size_t smem, int cluster, cudaStream_t stream,
                   std::function<void()> body);

// __syncthreads (id 0, threads 0: every live thread of the CTA) and named barriers (`threads`
// threads, whole warps, on barrier `id`).
void barrier(int id, int threads);
// The lanes of this warp meet (__syncwarp, and under every shuffle).
void sync_warp();
// __shfl_xor_sync over the whole warp.
float shfl_xor(float v, int lane_mask);
unsigned shfl_xor(unsigned v, int lane_mask);

// Thread-block clusters.
int cluster_rank();
void cluster_arrive();
void cluster_wait();
void* cluster_map_shared(const void* p, int rank);

// Transaction barriers (a 64-bit word of shared memory, as on the GPU).
void mbarrier_init(uint64_t* bar, unsigned arrivals);
void mbarrier_arrive_expect_tx(uint64_t* bar, unsigned bytes);
void mbarrier_wait_parity(uint64_t* bar, unsigned parity);
// st.async: stores v at `slot` of CTA `rank` and counts 4 bytes on that CTA's `bar`.
void st_async_cluster(float* slot, float v, uint64_t* bar, int rank);

}  // namespace normtune::emu

// The running thread's coordinates, as CUDA declares them: the scheduler sets them before it
// switches to a fiber (all fibers of a CTA share one OS thread).
extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;

// The runtime API's C++ overloads that take a kernel itself (cuda_runtime.h declares them for
// nvcc only): a kernel here is a host function.
template <typename... A>
cudaError_t cudaFuncSetAttribute(void (*kernel)(A...), cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}
template <typename... A>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, void (*kernel)(A...)) {
  return cudaFuncGetAttributes(attr, reinterpret_cast<const void*>(kernel));
}
template <typename... A>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, void (*kernel)(A...), int threads, size_t smem) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(n, reinterpret_cast<const void*>(kernel), threads, smem);
}
template <typename... A>
cudaError_t cudaOccupancyMaxActiveClusters(int* n, void (*kernel)(A...), const cudaLaunchConfig_t* config) {
  return cudaOccupancyMaxActiveClusters(n, reinterpret_cast<const void*>(kernel), config);
}

// ---- device intrinsics the kernels use ---------------------------------------------------
// CUDA's min and max over mixed integer and float arguments.
template <typename A, typename B>
constexpr std::common_type_t<A, B> min(A a, B b) {
  return b < a ? b : a;
}
template <typename A, typename B>
constexpr std::common_type_t<A, B> max(A a, B b) {
  return a < b ? b : a;
}
inline void __syncthreads() { normtune::emu::barrier(0, 0); }
inline void __syncwarp(unsigned = 0xffffffffu) { normtune::emu::sync_warp(); }
// The GPU's are approximate (2 ulp): exact here, within what the tests allow.
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
inline int __float_as_int(float f) { return std::bit_cast<int>(f); }
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
inline float __int_as_float(int i) { return std::bit_cast<float>(i); }
// Atomics on global memory are real: the CTAs of a cluster run in parallel.
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
inline int atomicMax(int* p, int v) {
  int old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return old;
}
inline unsigned atomicMax(unsigned* p, unsigned v) {
  unsigned old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return old;
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
