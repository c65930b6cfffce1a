// The one place that knows whether we build for CUDA or HIP.
//
// Library code is written against CUDA runtime names; under HIP this header maps them to
// their HIP equivalents (the approach of ggml's vendors/hip.h). No other file may test
// for HIP vs CUDA. The warp (wavefront) size is a property exposed here: never write 32.
//
// The C API header (normtune/transformer_engine.h) includes this file from C as well, for
// cudaStream_t: everything that is C++ only sits under #ifdef __cplusplus.
#pragma once

#include <string>

#if defined(NORMTUNE_USE_HIP)
#include <hip/hip_runtime.h>

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

#ifdef __cplusplus
namespace normtune::platform {
// CDNA (gfx9) wavefronts are 64 lanes; this build targets only gfx9 architectures.
inline constexpr int kWarpSize = 64;
inline constexpr bool kIsHip = true;
// The architecture as the runtime names it ("gfx90a:sramecc+:xnack-").
inline std::string arch_name(const hipDeviceProp_t& prop) { return prop.gcnArchName; }
}  // namespace normtune::platform

#if defined(__AMDGCN_WAVEFRONT_SIZE)
static_assert(__AMDGCN_WAVEFRONT_SIZE == normtune::platform::kWarpSize,
              "normtune's HIP build assumes wave64 (gfx9/CDNA) targets");
#endif
#endif  // __cplusplus

#else  // CUDA
#include <cuda_runtime.h>

#define NORMTUNE_PLATFORM_NAME "CUDA"

#ifdef __cplusplus
namespace normtune::platform {
inline constexpr int kWarpSize = 32;
inline constexpr bool kIsHip = false;
// The architecture as nvcc names it ("sm_90").
inline std::string arch_name(const cudaDeviceProp& prop) {
  return "sm_" + std::to_string(prop.major * 10 + prop.minor);
}
}  // namespace normtune::platform
#endif  // __cplusplus
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
