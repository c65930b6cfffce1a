// The one place that knows whether we build for CUDA or HIP.
//
// Library code is written against CUDA runtime names; under HIP this header maps them to
// their HIP equivalents (the approach of ggml's vendors/hip.h). No other file may test
// for HIP vs CUDA. The warp (wavefront) size is a property exposed here: never write 32.
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

#if NORMTUNE_DEVICE_CODE
__device__ __forceinline__ float shfl_xor(float v, int lane_mask) { return __shfl_xor(v, lane_mask); }
// No thread-block clusters on AMD: the planner never asks for more than one CTA per row.
__device__ __forceinline__ int cluster_rank() { return 0; }
__device__ __forceinline__ void cluster_sync() { __syncthreads(); }
__device__ __forceinline__ void cluster_arrive_relaxed() {}
__device__ __forceinline__ void cluster_arrive_release() {}
__device__ __forceinline__ void cluster_wait_acquire() { __syncthreads(); }
template <typename T>
__device__ __forceinline__ T* cluster_map_shared(T* p, int /*rank*/) { return p; }
#endif

template <typename Kernel>
cudaError_t allow_non_portable_cluster(Kernel) { return hipErrorInvalidConfiguration; }

template <typename Kernel>
cudaError_t max_active_blocks_per_sm(int* n, Kernel kernel, int threads, size_t smem) {
  return hipOccupancyMaxActiveBlocksPerMultiprocessor(n, kernel, threads, smem);
}

// kernel<<<grid, block, 0, stream>>>(args...). AMD has no clusters: cluster must be 1.
template <typename... KArgs, typename... Args>
cudaError_t launch(void (*kernel)(KArgs...), unsigned grid, unsigned block, int cluster,
                   cudaStream_t stream, Args&&... args) {
  if (cluster != 1) return hipErrorInvalidConfiguration;
  hipLaunchKernelGGL(kernel, dim3(grid), dim3(block), 0, stream, std::forward<Args>(args)...);
  return hipSuccess;
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

#else  // CUDA
#include <cuda_runtime.h>
#ifdef __cplusplus
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <utility>
#if NORMTUNE_DEVICE_CODE
#include <cooperative_groups.h>
#endif
#endif

#define NORMTUNE_PLATFORM_NAME "CUDA"

#ifdef __cplusplus
namespace normtune::platform {
inline constexpr int kWarpSize = 32;
inline constexpr bool kIsHip = false;
// The architecture as nvcc names it ("sm_90").
inline std::string arch_name(const cudaDeviceProp& prop) {
  return "sm_" + std::to_string(prop.major * 10 + prop.minor);
}

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

#if NORMTUNE_DEVICE_CODE
__device__ __forceinline__ float shfl_xor(float v, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}
__device__ __forceinline__ int cluster_rank() {
  return static_cast<int>(cooperative_groups::this_cluster().block_rank());
}
__device__ __forceinline__ void cluster_sync() { cooperative_groups::this_cluster().sync(); }
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

// kernel<<<grid, block, 0, stream>>>(args...), as clusters of `cluster` CTAs when > 1.
template <typename... KArgs, typename... Args>
cudaError_t launch(void (*kernel)(KArgs...), unsigned grid, unsigned block, int cluster,
                   cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(block);
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned>(cluster);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = cluster > 1 ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// kernel<<<grid, block, smem, stream>>>(args...) over a 2-D grid, without clusters.
// `dependent`: programmatic dependent launch, the kernel may start before the previous
// kernel on the stream ends; it must call wait_for_prior_grid() before reading what that
// kernel wrote.
template <typename... KArgs, typename... Args>
cudaError_t launch_grid(void (*kernel)(KArgs...), dim3 grid, unsigned block, size_t smem,
                        cudaStream_t stream, bool dependent, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(block);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = dependent ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// Dynamic shared memory above the default (48 KiB) limit.
template <typename Kernel>
cudaError_t allow_dynamic_smem(Kernel kernel, size_t bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(bytes));
}

#if NORMTUNE_DEVICE_CODE
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

