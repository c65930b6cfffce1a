// Vectors of kN elements moved with the widest aligned loads and stores (16 bytes when the
// data allows it).
#pragma once

#include <normtune/common/numeric.h>

namespace normtune {

template <typename T, int kN>
struct alignas(sizeof(T) * kN >= 16 ? 16 : sizeof(T) * kN) Vec {
  T v[kN];

  // The caller guarantees the address is aligned to alignof(Vec).
  __device__ __forceinline__ void load(const T* p) { *this = *reinterpret_cast<const Vec*>(p); }
  __device__ __forceinline__ void store(T* p) const { *reinterpret_cast<Vec*>(p) = *this; }
};

template <typename T, int kN>
__device__ __forceinline__ float elem_float(const Vec<T, kN>& x, int i) {
  return to_float(x.v[i]);
}

}  // namespace normtune
