// The output stage of a block-scaled z in the kernels: from a block's max |value| its scale
// (written) and the multiplier of its values, and the codes of a vector (fp8, or e2m1 packed
// two per byte). The formats and their arithmetic: kernels/block_scale.h.
#pragma once

#include "kernels/block_scale.h"
#include "kernels/norm_fwd_args.h"
#include "kernels/vec.cuh"

namespace normtune {

// NVFP4: the multiplier of every E4M3 scale code (a block gets 0..0x7E: non-negative,
// saturated, never NaN), computed once per CTA into shared memory (an IEEE division each),
// so that a block's multiplier is a table read rather than a decode and a division.
inline constexpr int kNvfp4ScaleCodes = 128;  // (0x7F, NaN, never produced: its entry is NaN)
template <typename Traits>
inline constexpr int kBlockTableSize = Traits::kScaling == ScalingMode::kNvfp4_1D ? kNvfp4ScaleCodes : 1;

template <typename Traits>
struct BlockQuantizer {
  static constexpr ScalingMode kMode = Traits::kScaling;
  using O = typename Traits::Output;
  static constexpr int kBlock = block_elements(kMode);
  static_assert(kBlock > 0, "a block-scaled z");
  static constexpr bool kFp4 = block_codes_fp4(kMode);

  float s_enc = 1.f;               // NVFP4: the encode scale
  const float* table = nullptr;    // NVFP4: fill_table's multipliers

  // `table`: kBlockTableSize<Traits> floats of shared memory that fill_table has filled (and a
  // CTA barrier has published) before block() is called, from the same global amax: z's
  // row-wise one, or another (NVFP4's column-wise data encodes with z.columnwise_amax).
  __device__ __forceinline__ BlockQuantizer(const FwdParams& p, const float* table_)
      : BlockQuantizer(p.global_amax, table_) {}
  __device__ __forceinline__ BlockQuantizer(const float* global_amax, const float* table_) : table(table_) {
    if constexpr (kMode == ScalingMode::kNvfp4_1D) s_enc = encode_scale(global_amax);
  }

  // NVFP4: S_enc from a global amax (none: an amax of 0, an encode scale of 1); z's row-wise
  // one by default.
  __device__ __forceinline__ static float encode_scale(const float* global_amax) {
    return nvfp4_encode_scale(global_amax != nullptr ? *global_amax : 0.f);
  }
  __device__ __forceinline__ static float encode_scale(const FwdParams& p) { return encode_scale(p.global_amax); }

  // Every thread of the CTA calls it (after wait_for_prior_grid: it reads the global amax).
  __device__ __forceinline__ static void fill_table(const FwdParams& p, float* table_) {
    fill_table(p.global_amax, table_);
  }
  __device__ __forceinline__ static void fill_table(const float* global_amax, float* table_) {
    if constexpr (kMode == ScalingMode::kNvfp4_1D) {
      const float s_dec = 1.f / encode_scale(global_amax);
      for (int c = static_cast<int>(threadIdx.x); c < kNvfp4ScaleCodes; c += static_cast<int>(blockDim.x)) {
        table_[c] = nvfp4_block_multiplier(fp8e4m3_to_float(static_cast<uint8_t>(c)), s_dec);
      }
    }
  }

  // The multiplier of a block whose max |value| is amax; its scale stored at offset `at` of
  // `scales` (z's row-wise scales unless said) when `write`.
  __device__ __forceinline__ float block(const FwdParams& p, float amax, int64_t at, bool write) const {
    return block(p.block_scales, amax, at, write);
  }
  __device__ __forceinline__ float block(uint8_t* scales, float amax, int64_t at, bool write) const {
    if constexpr (kMode == ScalingMode::kMxfp8_1D || kMode == ScalingMode::kMxfp4_1D) {
      // (amax: a chain of fmaxf from 0 in every caller, never NaN)
      const uint32_t e = mx_scale_exponent_u32(amax, kFp4 ? kFp4E2M1Max : fp8_max(Elem<O>::kDType));
      if (write) scales[at] = static_cast<uint8_t>(e);
      return mx_inverse_scale_not_nan(e);
    } else if constexpr (kMode == ScalingMode::kNvfp4_1D) {
      const uint8_t code = from_float<fp8e4m3_t>(nvfp4_block_decode_scale(amax, s_enc)).bits;
      if (write) scales[at] = code;
      return table[code & 0x7F];  // (the mask only tells the compiler the index's range)
    } else {
      const float scale = fp8_block_scale(amax, fp8_max(Elem<O>::kDType));
      if (write) reinterpret_cast<float*>(scales)[at] = fp8_block_scale_inv(scale);
      return scale;
    }
  }

  // The offset of row `row`'s codes in z, and of vector v's (kVec values) in a row, in bytes.
  __device__ __forceinline__ static int64_t row_byte(int64_t row, int hidden) {
    return row * (kFp4 ? hidden / 2 : hidden * static_cast<int>(sizeof(O)));
  }
  template <int kVec>
  __device__ __forceinline__ static int vector_byte(int v) {
    static_assert(!kFp4 || kVec % 2 == 0, "e2m1 vectors are whole bytes");
    return v * (kFp4 ? kVec / 2 : kVec * static_cast<int>(sizeof(O)));
  }

  // The codes of kN values of a block, not yet multiplied (a NaN among them an arithmetic
  // result's, the canonical NaN): amax is the block's max |value| (a chain of fmaxf, never
  // NaN), mult its multiplier. e2m1: the bounded conversion (fp4e2m1_codes_below7) when
  // amax * mult is below 7, which every block of a data-derived scale meets (MXFP4: with a
  // multiplier up to 2^126, not that of an all-zero block; NVFP4: its scale saturates only
  // when the global amax is below the block's); else the clamped one. MXFP4's multiplier, a
  // power of two, goes into the bounded conversion's lines; NVFP4's is applied first, as
  // TransformerEngine's quantizer does. The codes are returned (e2m1: packed, kN / 2 bytes),
  // or (fp8) the products left in y for store_floats.
  template <int kN>
  __device__ __forceinline__ static uint32_t block_codes(float (&y)[kN], float amax, float mult) {
    if constexpr (kFp4) {
      static_assert(kN == 4 || kN == 8, "e2m1 codes: 2 or 4 bytes per vector");
      constexpr bool kPowerOfTwo = kMode == ScalingMode::kMxfp4_1D;
      if (amax * mult < 7.f && (!kPowerOfTwo || mult <= 0x1p126f)) {
        if constexpr (!kPowerOfTwo) {
#pragma unroll
          for (int k = 0; k < kN; ++k) y[k] *= mult;
        }
        return fp4e2m1_codes_below7<true>(y, kPowerOfTwo ? mult : 1.f);
      }
#pragma unroll
      for (int k = 0; k < kN; ++k) y[k] *= mult;
      return fp4e2m1_codes<true>(y);
    } else {
#pragma unroll
      for (int k = 0; k < kN; ++k) y[k] *= mult;
      return 0;
    }
  }
  // Stores what block_codes gave at `dst`.
  template <int kN>
  __device__ __forceinline__ static void store_block_codes(const float (&y)[kN], uint32_t codes,
                                                           uint8_t* dst) {
    if constexpr (kFp4) {
      if constexpr (kN == 8) {
        *reinterpret_cast<uint32_t*>(dst) = codes;
      } else {
        *reinterpret_cast<uint16_t*>(dst) = static_cast<uint16_t>(codes);
      }
    } else {
      store_floats(y, reinterpret_cast<O*>(dst));
    }
  }

  // The codes of kN values (already multiplied: a NaN among them is a multiply's) of z from
  // element `elem` of z on.
  template <int kN>
  __device__ __forceinline__ static void store_codes(const float (&y)[kN], void* z, int64_t elem) {
    if constexpr (kFp4) {
      static_assert(kN == 4 || kN == 8, "e2m1 codes: 2 or 4 bytes per vector");
      const uint32_t w = fp4e2m1_codes</*kCanonicalNan=*/true>(y);  // (y: the products value * multiplier)
      uint8_t* dst = static_cast<uint8_t*>(z) + elem / 2;
      if constexpr (kN == 8) {
        *reinterpret_cast<uint32_t*>(dst) = w;
      } else {
        *reinterpret_cast<uint16_t*>(dst) = static_cast<uint16_t>(w);
      }
    } else {
      store_floats(y, static_cast<O*>(z) + elem);
    }
  }
};

}  // namespace normtune
