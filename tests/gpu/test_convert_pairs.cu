// The paired 16-bit conversions (platform::cvt_f32x2_to_bf16x2 / _f16x2: one instruction for
// two values) against the one-at-a-time ones, over every fp32 bit pattern (each paired with
// a second, unrelated pattern): the same bits, NaN and infinity included, the first value in
// the low half.
#include <gtest/gtest.h>

#include <cstdint>

#include <normtune/common/error.h>
#include <normtune/common/platform.h>

#include "gpu_test_util.h"

namespace normtune::test {
namespace {

__global__ void compare_pairs(unsigned long long* mismatches, uint32_t* first) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < (uint64_t{1} << 32);
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const uint32_t lo_bits = static_cast<uint32_t>(i);
    const uint32_t hi_bits = (lo_bits * 2654435761u) ^ 0x80000001u;
    const float lo = __uint_as_float(lo_bits), hi = __uint_as_float(hi_bits);
    const uint32_t bf_one = uint32_t{platform::cvt_f32_to_bf16(lo)} | (uint32_t{platform::cvt_f32_to_bf16(hi)} << 16);
    const uint32_t h_one = uint32_t{platform::cvt_f32_to_f16(lo)} | (uint32_t{platform::cvt_f32_to_f16(hi)} << 16);
    if (platform::cvt_f32x2_to_bf16x2(lo, hi) != bf_one || platform::cvt_f32x2_to_f16x2(lo, hi) != h_one) {
      if (atomicAdd(mismatches, 1ull) == 0) *first = lo_bits;
    }
  }
}

TEST(ConvertGpu, PairConversionsGiveTheBitsOfOneAtATime) {
  NORMTUNE_REQUIRE_GPU();
  DeviceBuffer mismatches(sizeof(unsigned long long)), first(sizeof(uint32_t));
  NORMTUNE_CUDA_CHECK(cudaMemset(mismatches.get(), 0, sizeof(unsigned long long)));
  NORMTUNE_CUDA_CHECK(cudaMemset(first.get(), 0, sizeof(uint32_t)));
  compare_pairs<<<132 * 16, 256>>>(reinterpret_cast<unsigned long long*>(mismatches.get()),
                                   reinterpret_cast<uint32_t*>(first.get()));
  NORMTUNE_CUDA_CHECK(cudaGetLastError());
  NORMTUNE_CUDA_CHECK(cudaDeviceSynchronize());
  unsigned long long bad = 0;
  uint32_t at = 0;
  NORMTUNE_CUDA_CHECK(cudaMemcpy(&bad, mismatches.get(), sizeof(bad), cudaMemcpyDeviceToHost));
  NORMTUNE_CUDA_CHECK(cudaMemcpy(&at, first.get(), sizeof(at), cudaMemcpyDeviceToHost));
  EXPECT_EQ(bad, 0u) << "first mismatch at fp32 bits 0x" << std::hex << at;
}

}  // namespace
}  // namespace normtune::test
