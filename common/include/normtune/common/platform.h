// The one place that knows whether we build for CUDA, HIP or the CPU emulator.
//
// Library code is written against CUDA runtime names; under HIP this header maps them to
// their HIP equivalents (the approach of ggml's vendors/hip.h). No other file may test
// for HIP vs CUDA. The warp (wavefront) size is a property exposed here: never write 32.
// NORMTUNE_USE_EMU (the CPU emulator, emu.h) is the CUDA platform compiled by a host
// compiler: the same runtime names (common/emu stands in for libcudart) and the same host
// code; the device primitives below are the emulator's.
//
// The C API header (normtune/transformer_engine.h) includes this file from C as well, for
// cudaStream_t: everything that is C++ only sits under #ifdef __cplusplus.
#pragma once

#ifdef __cplusplus
#include <cstdint>
#include <string>
#endif

// Functions usable from host and device code. Plain C++ compilers (g++ building host-only
// sources) see them as ordinary inline functions.
#if defined(__CUDACC__) || defined(__HIPCC__)
#define NORMTUNE_HOST_DEVICE __host__ __device__
#define NORMTUNE_DEVICE_CODE 1
#elif defined(NORMTUNE_USE_EMU)
#define NORMTUNE_HOST_DEVICE
#define NORMTUNE_DEVICE_CODE 1
#else
#define NORMTUNE_HOST_DEVICE
#define NORMTUNE_DEVICE_CODE 0
#endif

#define NORMTUNE_HD_INLINE NORMTUNE_HOST_DEVICE inline

#if defined(NORMTUNE_USE_HIP)
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#ifdef __cplusplus
#include <utility>
#endif

#define NORMTUNE_PLATFORM_NAME "HIP"
#define cudaDeviceProp hipDeviceProp_t
#define cudaError_t hipError_t
#define cudaErrorInvalidValue hipErrorInvalidValue
#define cudaErrorNoDevice hipErrorNoDevice
#define cudaEvent_t hipEvent_t
#define cudaEventCreate hipEventCreate
#define cudaEventDestroy hipEventDestroy
#define cudaEventElapsedTime hipEventElapsedTime
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaFree hipFree
#define cudaFuncSetAttribute hipFuncSetAttribute
#define cudaGetDevice hipGetDevice
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaGetErrorName hipGetErrorName
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaMalloc hipMalloc
#define cudaMemcpy hipMemcpy
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaMemset hipMemset
#define cudaMemsetAsync hipMemsetAsync
#define cudaPeekAtLastError hipPeekAtLastError
#define cudaPointerAttributes hipPointerAttribute_t
#define cudaPointerGetAttributes hipPointerGetAttributes
#define cudaSetDevice hipSetDevice
#define cudaStream_t hipStream_t
#define cudaStreamCreate hipStreamCreate
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaSuccess hipSuccess
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaStreamBeginCapture hipStreamBeginCapture
#define cudaStreamEndCapture hipStreamEndCapture
#define cudaStreamCaptureModeGlobal hipStreamCaptureModeGlobal
#define cudaGraph_t hipGraph_t
#define cudaGraphExec_t hipGraphExec_t
#define cudaGraphInstantiate(exec, graph, flags) hipGraphInstantiate(exec, graph, nullptr, nullptr, 0)
#define cudaGraphLaunch hipGraphLaunch
#define cudaGraphDestroy hipGraphDestroy
#define cudaGraphExecDestroy hipGraphExecDestroy
#define cudaDeviceGetAttribute hipDeviceGetAttribute

#ifdef __cplusplus
namespace normtune::platform {
// CDNA (gfx9) wavefronts are 64 lanes; this build targets only gfx9 architectures.
inline constexpr int kWarpSize = 64;
inline constexpr bool kIsHip = true;
// The architecture as the runtime names it ("gfx90a:sramecc+:xnack-").
inline std::string arch_name(const hipDeviceProp_t& prop) { return prop.gcnArchName; }
// Dynamic shared memory a kernel may ask for (no opt-in above the default on gfx9).
inline size_t shared_memory_optin(const hipDeviceProp_t& prop) { return prop.sharedMemPerBlock; }

// Half-precision conversions (round to nearest even). bf16 has no conversion instruction on
// the gfx9 targets we build for: the bit arithmetic of convert.h, inlined.
NORMTUNE_HD_INLINE uint16_t cvt_f32_to_bf16(float f) {
  uint32_t u = __builtin_bit_cast(uint32_t, f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
NORMTUNE_HD_INLINE uint16_t cvt_f32_to_f16(float f) {
  return __half_as_ushort(__float2half_rn(f));
}
NORMTUNE_HD_INLINE float cvt_f16_to_f32(uint16_t h) { return __half2float(__ushort_as_half(h)); }
// Two of the above at once, lo in the low half of the word (no paired instruction here).
NORMTUNE_HD_INLINE uint32_t cvt_f32x2_to_bf16x2(float lo, float hi) {
  return uint32_t{cvt_f32_to_bf16(lo)} | (uint32_t{cvt_f32_to_bf16(hi)} << 16);
}
NORMTUNE_HD_INLINE uint32_t cvt_f32x2_to_f16x2(float lo, float hi) {
  return uint32_t{cvt_f32_to_f16(lo)} | (uint32_t{cvt_f32_to_f16(hi)} << 16);
}
// No fp8 conversion instruction: numeric.h uses convert.h's bit arithmetic.
#define NORMTUNE_HAS_FP8_CONVERT 0

#if NORMTUNE_DEVICE_CODE
__device__ __forceinline__ float shfl_xor(float v, int lane_mask) { return __shfl_xor(v, lane_mask); }
// No thread-block clusters on AMD: the planner never asks for more than one CTA per row.
__device__ __forceinline__ int cluster_rank() { return 0; }
__device__ __forceinline__ void cluster_arrive_relaxed() {}
__device__ __forceinline__ void cluster_arrive_release() {}
__device__ __forceinline__ void cluster_wait_acquire() { __syncthreads(); }
template <typename T>
__device__ __forceinline__ T* cluster_map_shared(T* p, int /*rank*/) { return p; }

// Global -> shared copies: AMD has no asynchronous copy on gfx9; a plain 16-byte load and
// store (complete when it returns, so the wait is empty).
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem) {
  *static_cast<uint4*>(smem) = *static_cast<const uint4*>(gmem);
}
__device__ __forceinline__ void cp_async_wait_all() {}
__device__ __forceinline__ void cp_async_commit() {}
template <int kPending>
__device__ __forceinline__ void cp_async_wait_groups() {}
// The lanes of a wavefront run in lockstep on gfx9: nothing to wait for.
__device__ __forceinline__ void sync_warp() {}
// No named barriers: the whole CTA waits (so every thread of the CTA must call it as often).
__device__ __forceinline__ void group_barrier(int /*id*/, int /*threads*/) { __syncthreads(); }
// Cluster transaction barriers: never reached (no clusters on AMD); defined so that the
// kernels compile unchanged.
__device__ __forceinline__ void mbarrier_init(uint64_t*, unsigned) {}
__device__ __forceinline__ void fence_mbarrier_init_cluster() {}
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t*, unsigned) {}
__device__ __forceinline__ void mbarrier_wait_parity(uint64_t*, unsigned) {}
__device__ __forceinline__ void st_async_cluster(float* slot, float v, uint64_t*, int) { *slot = v; }
#endif

template <typename Kernel>
cudaError_t allow_non_portable_cluster(Kernel) { return hipErrorInvalidConfiguration; }

template <typename Kernel>
cudaError_t max_active_blocks_per_sm(int* n, Kernel kernel, int threads, size_t smem) {
  return hipOccupancyMaxActiveBlocksPerMultiprocessor(n, kernel, threads, smem);
}

// How a kernel is launched beyond grid and block (see the CUDA side).
struct LaunchOptions {
  int cluster = 1;
  size_t smem = 0;
  bool dependent = false;  // no programmatic dependent launch on AMD: ignored
};

// kernel<<<grid, block, options.smem, stream>>>(args...). AMD has no clusters: cluster must be 1.
template <typename... KArgs, typename... Args>
cudaError_t launch(void (*kernel)(KArgs...), unsigned grid, unsigned block, const LaunchOptions& options,
                   cudaStream_t stream, Args&&... args) {
  if (options.cluster != 1) return hipErrorInvalidConfiguration;
  hipLaunchKernelGGL(kernel, dim3(grid), dim3(block), static_cast<unsigned>(options.smem), stream,
                     std::forward<Args>(args)...);
  return hipSuccess;
}

template <typename Kernel>
cudaError_t max_active_clusters(int* n, Kernel, unsigned, const LaunchOptions& options) {
  *n = 0;
  return options.cluster == 1 ? hipSuccess : hipErrorInvalidConfiguration;
}

// kernel<<<grid, block, smem, stream>>>(args...) over a 2-D grid, without clusters.
// `dependent`: may start before the previous kernel on the stream ends (programmatic
// dependent launch); AMD has no such launch: an ordinary one.
template <typename... KArgs, typename... Args>
cudaError_t launch_grid(void (*kernel)(KArgs...), dim3 grid, unsigned block, size_t smem,
                        cudaStream_t stream, bool /*dependent*/, Args&&... args) {
  hipLaunchKernelGGL(kernel, grid, dim3(block), static_cast<unsigned>(smem), stream,
                     std::forward<Args>(args)...);
  return hipSuccess;
}

// Dynamic shared memory above the default limit.
template <typename Kernel>
cudaError_t allow_dynamic_smem(Kernel kernel, size_t bytes) {
  return hipFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                             hipFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

// The kernel's static shared memory (what dynamic shared memory adds to).
template <typename Kernel>
cudaError_t static_smem_bytes(Kernel kernel, size_t* bytes) {
  hipFuncAttributes attr{};
  const hipError_t e = hipFuncGetAttributes(&attr, reinterpret_cast<const void*>(kernel));
  *bytes = attr.sharedSizeBytes;
  return e;
}

#if NORMTUNE_DEVICE_CODE
// Programmatic dependent launch: no-ops (launches are ordinary).
__device__ __forceinline__ void wait_for_prior_grid() {}
__device__ __forceinline__ void allow_dependent_grid() {}
#endif

inline bool supports_clusters(int /*device*/) { return false; }
}  // namespace normtune::platform

#if defined(__AMDGCN_WAVEFRONT_SIZE)
static_assert(__AMDGCN_WAVEFRONT_SIZE == normtune::platform::kWarpSize,
              "normtune's HIP build assumes wave64 (gfx9/CDNA) targets");
#endif
#endif  // __cplusplus

#else  // CUDA (or the CPU emulator)
#if defined(NORMTUNE_USE_EMU) && defined(__cplusplus)
#include <normtune/common/emu.h>
#endif
#include <cuda_runtime.h>
#ifdef __cplusplus
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <utility>
#if NORMTUNE_DEVICE_CODE && !defined(NORMTUNE_USE_EMU)
#include <cooperative_groups.h>
#endif
#endif

#if defined(NORMTUNE_USE_EMU)
#define NORMTUNE_PLATFORM_NAME "CUDA (CPU emulator)"
#else
#define NORMTUNE_PLATFORM_NAME "CUDA"
#endif

#ifdef __cplusplus
namespace normtune::platform {
inline constexpr int kWarpSize = 32;
inline constexpr bool kIsHip = false;
// The architecture as nvcc names it ("sm_90").
inline std::string arch_name(const cudaDeviceProp& prop) {
  return "sm_" + std::to_string(prop.major * 10 + prop.minor);
}
// Dynamic shared memory a kernel may ask for once allow_dynamic_smem() raised its limit.
inline size_t shared_memory_optin(const cudaDeviceProp& prop) { return prop.sharedMemPerBlockOptin; }

// Half-precision conversions (round to nearest even), one instruction each on the GPU.
NORMTUNE_HD_INLINE uint16_t cvt_f32_to_bf16(float f) {
  return static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(f)).x;
}
NORMTUNE_HD_INLINE uint16_t cvt_f32_to_f16(float f) {
  return static_cast<__half_raw>(__float2half_rn(f)).x;
}
NORMTUNE_HD_INLINE float cvt_f16_to_f32(uint16_t h) {
  __half_raw raw;
  raw.x = h;
  return __half2float(__half(raw));
}
// Two of the above at once, lo in the low half of the word: on the GPU one instruction
// (F2FP.PACK_AB) where two conversions and a byte permute would be three; the same bits.
// (PTX, sm_80 and later: cvt.rn.bf16x2.f32 d, a, b puts a in the upper half. Through
// __nv_bfloat162's halves the compiler splits the word and joins it again.)
NORMTUNE_HD_INLINE uint32_t cvt_f32x2_to_bf16x2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t two;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(two) : "f"(hi), "f"(lo));
  return two;
#else
  return uint32_t{cvt_f32_to_bf16(lo)} | (uint32_t{cvt_f32_to_bf16(hi)} << 16);
#endif
}
NORMTUNE_HD_INLINE uint32_t cvt_f32x2_to_f16x2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t two;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(two) : "f"(hi), "f"(lo));
  return two;
#else
  return uint32_t{cvt_f32_to_f16(lo)} | (uint32_t{cvt_f32_to_f16(hi)} << 16);
#endif
}
// fp32 -> fp8, round to nearest even, saturating to the largest finite value (NaN -> 0x7F),
// one instruction on sm_89+ (cvt.rn.satfinite); the same codes as convert.h.
NORMTUNE_HD_INLINE uint8_t cvt_f32_to_e4m3(float f) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3));
}
NORMTUNE_HD_INLINE uint8_t cvt_f32_to_e5m2(float f) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E5M2));
}
// Two at once (one cvt.rn.satfinite.*x2.f32): lo's code in the low byte, hi's in the high.
NORMTUNE_HD_INLINE uint16_t cvt_f32x2_to_e4m3x2(float lo, float hi) {
  return static_cast<uint16_t>(__nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3));
}
NORMTUNE_HD_INLINE uint16_t cvt_f32x2_to_e5m2x2(float lo, float hi) {
  return static_cast<uint16_t>(__nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E5M2));
}
// Four at once into one word, a's code in the low byte: on the GPU two conversions whose
// 16-bit results are joined as the word's halves. (Joining two of the functions above, each
// result widened to a word, the compiler masked both before the permute: two instructions
// more per word.)
NORMTUNE_HD_INLINE uint32_t cvt_f32x4_to_e4m3x4(float a, float b, float c, float d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t four;
  asm("{\n.reg .b16 lo, hi;\ncvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\ncvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n"
      "mov.b32 %0, {lo, hi};\n}"
      : "=r"(four)
      : "f"(a), "f"(b), "f"(c), "f"(d));
  return four;
#else
  return uint32_t{cvt_f32x2_to_e4m3x2(a, b)} | (uint32_t{cvt_f32x2_to_e4m3x2(c, d)} << 16);
#endif
}
NORMTUNE_HD_INLINE uint32_t cvt_f32x4_to_e5m2x4(float a, float b, float c, float d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t four;
  asm("{\n.reg .b16 lo, hi;\ncvt.rn.satfinite.e5m2x2.f32 lo, %2, %1;\ncvt.rn.satfinite.e5m2x2.f32 hi, %4, %3;\n"
      "mov.b32 %0, {lo, hi};\n}"
      : "=r"(four)
      : "f"(a), "f"(b), "f"(c), "f"(d));
  return four;
#else
  return uint32_t{cvt_f32x2_to_e5m2x2(a, b)} | (uint32_t{cvt_f32x2_to_e5m2x2(c, d)} << 16);
#endif
}
#define NORMTUNE_HAS_FP8_CONVERT 1

#if defined(NORMTUNE_USE_EMU)
// The emulator's (emu.h says how each behaves).
inline float shfl_xor(float v, int lane_mask) { return emu::shfl_xor(v, lane_mask); }
inline int cluster_rank() { return emu::cluster_rank(); }
inline void sync_warp() { emu::sync_warp(); }
inline void group_barrier(int id, int threads) { emu::barrier(id, threads); }
inline void cluster_arrive_relaxed() { emu::cluster_arrive(); }
inline void cluster_arrive_release() { emu::cluster_arrive(); }
inline void cluster_wait_acquire() { emu::cluster_wait(); }
template <typename T>
T* cluster_map_shared(T* p, int rank) {
  return static_cast<T*>(emu::cluster_map_shared(p, rank));
}
inline void cp_async_16(void* smem, const void* gmem) {
  *static_cast<uint4*>(smem) = *static_cast<const uint4*>(gmem);
}
inline void cp_async_wait_all() {}
inline void cp_async_commit() {}
template <int kPending>
void cp_async_wait_groups() {}
inline void mbarrier_init(uint64_t* bar, unsigned arrivals) { emu::mbarrier_init(bar, arrivals); }
inline void fence_mbarrier_init_cluster() {}
inline void mbarrier_arrive_expect_tx(uint64_t* bar, unsigned bytes) { emu::mbarrier_arrive_expect_tx(bar, bytes); }
inline void mbarrier_wait_parity(uint64_t* bar, unsigned parity) { emu::mbarrier_wait_parity(bar, parity); }
inline void st_async_cluster(float* slot, float v, uint64_t* bar, int rank) {
  emu::st_async_cluster(slot, v, bar, rank);
}
#elif NORMTUNE_DEVICE_CODE
__device__ __forceinline__ float shfl_xor(float v, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}
__device__ __forceinline__ int cluster_rank() {
  return static_cast<int>(cooperative_groups::this_cluster().block_rank());
}
// The lanes of this warp wait for one another; their shared-memory accesses before it are
// ordered before those after it.
__device__ __forceinline__ void sync_warp() { __syncwarp(); }
// A barrier of `threads` threads (whole warps) of the CTA on named barrier `id` (1..15; 0 is
// __syncthreads'), ordering their shared-memory accesses as __syncthreads does: a group of
// warps waits for itself alone. (AMD: the whole CTA, so every thread must call it as often.)
__device__ __forceinline__ void group_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// The two halves of a cluster barrier, so that work can go between them. Every thread of
// every CTA of the cluster calls them alternately, arrive first. relaxed: orders nothing
// (e.g. "this CTA has started"); release/acquire: the writes before the arrive (to any CTA's
// shared memory) are visible after the wait.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_arrive_release() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait_acquire() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// The address of *p in the shared memory of CTA `rank` of this cluster.
template <typename T>
__device__ __forceinline__ T* cluster_map_shared(T* p, int rank) {
  return cooperative_groups::this_cluster().map_shared_rank(p, rank);
}

// 16 bytes global -> shared without passing through registers (cp.async, sm_80+; cached in
// L2 only). Both addresses 16-byte aligned. The issuing thread sees the bytes after
// cp_async_wait_all(); other threads only after a barrier as well.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem) {
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
}
// Groups of copies: cp_async_commit() closes the copies issued since the last commit into a
// group; cp_async_wait_groups<k>() returns when at most the k most recent groups are still in
// flight (this thread's copies; other threads' bytes only after a barrier as well).
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait_groups() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Transaction barriers (mbarrier, sm_90) for exchanges between the CTAs of a cluster: a CTA
// initializes its barrier (one arrival), makes the initialization visible to the cluster
// (fence_mbarrier_init_cluster, then a cluster barrier), announces the bytes it expects
// (mbarrier_arrive_expect_tx) and waits for phase 0 to complete, which happens when its own
// arrival and every expected byte have come, in whatever order.
__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(arrivals) : "memory");
}
__device__ __forceinline__ void fence_mbarrier_init_cluster() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_address(bar)), "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void mbarrier_wait_parity(uint64_t* bar, unsigned parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_address(bar)), "r"(parity)
        : "memory");
  } while (done == 0);
#endif
}
// Stores v into `slot` and counts 4 bytes on `bar`, both addresses of this CTA's shared memory
// taken in CTA `rank` of the cluster (st.async: the store completes on the remote barrier).
__device__ __forceinline__ void st_async_cluster(float* slot, float v, uint64_t* bar, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t remote_slot, remote_bar;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote_slot) : "r"(smem_address(slot)), "r"(rank));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote_bar) : "r"(smem_address(bar)), "r"(rank));
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n" ::"r"(remote_slot),
               "r"(__float_as_uint(v)), "r"(remote_bar)
               : "memory");
#endif
}
#endif

// Clusters of more than 8 CTAs (sm_90 allows 16) need this attribute on the kernel.
template <typename Kernel>
cudaError_t allow_non_portable_cluster(Kernel kernel) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
}

template <typename Kernel>
cudaError_t max_active_blocks_per_sm(int* n, Kernel kernel, int threads, size_t smem) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(n, kernel, threads, smem);
}

// How a kernel is launched beyond grid and block.
struct LaunchOptions {
  int cluster = 1;          // CTAs per thread-block cluster
  size_t smem = 0;          // dynamic shared memory bytes
  bool dependent = false;   // programmatic dependent launch (see launch_grid)
};

inline cudaLaunchConfig_t launch_config(dim3 grid, unsigned block, const LaunchOptions& o,
                                        cudaStream_t stream, cudaLaunchAttribute (&attrs)[2]) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(block);
  config.dynamicSmemBytes = o.smem;
  config.stream = stream;
  unsigned n = 0;
  if (o.cluster > 1) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n].val.clusterDim.x = static_cast<unsigned>(o.cluster);
    attrs[n].val.clusterDim.y = 1;
    attrs[n].val.clusterDim.z = 1;
    ++n;
  }
  if (o.dependent) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  config.attrs = attrs;
  config.numAttrs = n;
  return config;
}

#if defined(NORMTUNE_USE_EMU)
// The kernel with its arguments converted to its parameter types, as a launch passes them.
template <typename... KArgs, typename... Args>
std::function<void()> emu_bind(void (*kernel)(KArgs...), Args&&... args) {
  return [kernel, bound = std::tuple<std::decay_t<KArgs>...>(std::forward<Args>(args)...)] {
    std::apply(kernel, bound);
  };
}
#endif

// kernel<<<grid, block, options.smem, stream>>>(args...), as clusters when options.cluster > 1.
template <typename... KArgs, typename... Args>
cudaError_t launch(void (*kernel)(KArgs...), unsigned grid, unsigned block, const LaunchOptions& options,
                   cudaStream_t stream, Args&&... args) {
#if defined(NORMTUNE_USE_EMU)
  return emu::launch(dim3(grid), dim3(block), options.smem, options.cluster, stream,
                     emu_bind(kernel, std::forward<Args>(args)...));
#else
  cudaLaunchAttribute attrs[2]{};
  const cudaLaunchConfig_t config = launch_config(dim3(grid), block, options, stream, attrs);
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
#endif
}

// Clusters of `options.cluster` CTAs of kernel that can be resident at once on the device
// (0: the cluster does not fit: too many CTAs, too much shared memory).
template <typename Kernel>
cudaError_t max_active_clusters(int* n, Kernel kernel, unsigned block, const LaunchOptions& options) {
  cudaLaunchAttribute attrs[2]{};
  LaunchOptions o = options;
  o.dependent = false;
  const cudaLaunchConfig_t config = launch_config(dim3(static_cast<unsigned>(o.cluster)), block, o, nullptr, attrs);
  return cudaOccupancyMaxActiveClusters(n, kernel, &config);
}

// kernel<<<grid, block, smem, stream>>>(args...) over a 2-D grid, without clusters.
// `dependent`: programmatic dependent launch, the kernel may start before the previous
// kernel on the stream ends; it must call wait_for_prior_grid() before reading what that
// kernel wrote.
template <typename... KArgs, typename... Args>
cudaError_t launch_grid(void (*kernel)(KArgs...), dim3 grid, unsigned block, size_t smem,
                        cudaStream_t stream, bool dependent, Args&&... args) {
#if defined(NORMTUNE_USE_EMU)
  (void)dependent;  // launches are serial: nothing to overlap
  return emu::launch(grid, dim3(block), smem, 1, stream, emu_bind(kernel, std::forward<Args>(args)...));
#else
  cudaLaunchAttribute attrs[2]{};
  const cudaLaunchConfig_t config =
      launch_config(grid, block, LaunchOptions{.smem = smem, .dependent = dependent}, stream, attrs);
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
#endif
}

// Dynamic shared memory above the default (48 KiB) limit; static plus dynamic shared memory
// may not exceed the device's opt-in limit.
template <typename Kernel>
cudaError_t allow_dynamic_smem(Kernel kernel, size_t bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(bytes));
}

// The kernel's static shared memory (what dynamic shared memory adds to).
template <typename Kernel>
cudaError_t static_smem_bytes(Kernel kernel, size_t* bytes) {
  cudaFuncAttributes attr{};
  const cudaError_t e = cudaFuncGetAttributes(&attr, kernel);
  *bytes = attr.sharedSizeBytes;
  return e;
}

#if defined(NORMTUNE_USE_EMU)
// Programmatic dependent launch: no-ops (launches are serial).
inline void wait_for_prior_grid() {}
inline void allow_dependent_grid() {}
#elif NORMTUNE_DEVICE_CODE
// Programmatic dependent launch (sm_90+; plain stream order before).
__device__ __forceinline__ void wait_for_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void allow_dependent_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}
#endif

inline bool supports_clusters(int device) {
  int value = 0;
  return cudaDeviceGetAttribute(&value, cudaDevAttrClusterLaunch, device) == cudaSuccess &&
         value != 0;
}
}  // namespace normtune::platform
#endif  // __cplusplus
#endif

