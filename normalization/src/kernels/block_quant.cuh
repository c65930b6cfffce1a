// The output stage of a block-scaled z in the kernels: from a block's max |value| its scale
// (written) and the multiplier of its values, and the codes of a vector (fp8, or e2m1 packed
// two per byte). The formats and their arithmetic: kernels/block_scale.h.
#pragma once

#include "kernels/block_scale.h"
#include "kernels/norm_fwd_args.h"
#include "kernels/reduce.cuh"
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
      // (Not unrolled: the unrolled loop's trip count took an integer division, about twenty
      // instructions for the one or two codes a thread of the short-lived CTAs fills.)
#pragma unroll 1
      for (int c = static_cast<int>(threadIdx.x); c < kNvfp4ScaleCodes; c += static_cast<int>(blockDim.x)) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
        // (The conversion instruction, exact: every E4M3 value is an fp16 one.)
        const float decoded = __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c), __NV_E4M3)));
#else
        const float decoded = fp8e4m3_to_float(static_cast<uint8_t>(c));
#endif
        table_[c] = nvfp4_block_multiplier(decoded, s_dec);
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
  // power of two, goes into the bounded conversion's lines. NVFP4's is applied first, as
  // TransformerEngine's quantizer does (the products rounded to fp32), unless kFoldNvfp4:
  // then it goes into the lines too, one multiply per value fewer, and each code is that of
  // the exact product, rounded once, which differs from the code of the fp32 product only
  // where that product lies within half an fp32 ulp of a midpoint of the e2m1 grid (about
  // 1e-7 of the values; the code is then the one nearer the exact product). The codes are
  // returned (e2m1: packed, kN / 2 bytes), or (fp8) the products left in y for store_floats.
  // kRowScale: y holds the values divided by row_scale (RMSNorm's x * gamma, row_scale its
  // rsigma; amax already multiplied by it), which goes into the multiplier: one multiply per
  // value fewer again (e2m1: with the multiplier folded, kFoldNvfp4 or MXFP4).
  template <bool kFoldNvfp4, bool kRowScale = false, int kN>
  __device__ __forceinline__ static uint32_t block_codes(float (&y)[kN], float amax, float mult,
                                                         float row_scale = 1.f) {
    const float m = kRowScale ? mult * row_scale : mult;
    if constexpr (kFp4) {
      static_assert(kN == 4 || kN == 8, "e2m1 codes: 2 or 4 bytes per vector");
      constexpr bool kFold = kMode == ScalingMode::kMxfp4_1D || kFoldNvfp4;
      static_assert(kFold || !kRowScale, "the row's scale goes into folded lines only");
      if (amax * mult < 7.f && (!kFold || m <= 0x1p126f)) {
        if constexpr (!kFold) {
#pragma unroll
          for (int k = 0; k < kN; ++k) y[k] *= mult;
        }
        return fp4e2m1_codes_below7<true>(y, kFold ? m : 1.f);
      }
#pragma unroll
      for (int k = 0; k < kN; ++k) y[k] = kRowScale ? y[k] * row_scale * mult : y[k] * mult;
      return fp4e2m1_codes<true>(y);
    } else {
#pragma unroll
      for (int k = 0; k < kN; ++k) y[k] *= m;
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
  // element `elem` of z on (the column-wise tile kernels; e2m1 by the clamped conversion).
  template <int kN>
  __device__ __forceinline__ static void store_codes(const float (&y)[kN], void* z, int64_t elem) {
    static_assert(!kFp4 || kN == 4 || kN == 8, "e2m1 codes: 2 or 4 bytes per vector");
    uint8_t* const dst =
        static_cast<uint8_t*>(z) + (kFp4 ? elem / 2 : elem * static_cast<int64_t>(sizeof(O)));
    uint32_t codes = 0;  // (fp8: the products themselves are stored)
    if constexpr (kFp4) codes = fp4e2m1_codes</*kCanonicalNan=*/true>(y);
    store_block_codes(y, codes, dst);
  }
};

// The block-scaled output of the part of one row a thread holds: its vectors v = first + i * G
// (i < N; G threads hold the row's part, G and the part multiples of kGroup = kBlock / kVec,
// so that a block is kGroup consecutive vectors held by kGroup adjacent lanes and never spans
// two rows or two CTAs). values(i, v, y) gives vector i's kVec values in fp32 (y). Per vector:
// the block's max |value| by shuffles among its lanes, its scale (written by the block's
// first lane), then each lane's codes of its own vector. Every lane takes every step, as the
// shuffles need the whole warp; lanes past the row's end (v >= nvec) or of a missing row
// (!row_ok) store nothing: they hold zeros, or, with kExact, whatever values() gives for them.
// kN > 0: N is that (the loop unrolled, so that the next vectors' loads are issued before
// this one's shuffles); kExact: a compile-time shape that covers the row exactly (every tuned
// line), so every vector of every thread lies in the row and only the row's own bound is
// left: the vectors are computed whether or not the row exists, branch-free.
// kFoldNvfp4: NVFP4's multiplier in the e2m1 conversion's lines (block_codes).
// Used by the staged (norm_fwd_staged.cuh) and pipelined (norm_fwd_pipelined.cuh) kernels.
template <typename Traits, int kVec, int kN, bool kExact, bool kFoldNvfp4 = false, bool kRowScale = false,
          typename Values>
__device__ __forceinline__ void store_block_scaled_part(const FwdParams& p,
                                                        const BlockQuantizer<Traits>& quant,
                                                        int64_t row, bool row_ok, int hidden, int G,
                                                        int N, int first, Values&& values,
                                                        float row_scale = 1.f) {
  using Quant = BlockQuantizer<Traits>;
  constexpr int kGroup = Quant::kBlock / kVec;
  static_assert(kGroup >= 1 && kGroup <= kWarp && Quant::kBlock % kVec == 0,
                "a block is whole vectors of a warp");
  const int nvec = hidden / kVec;
  const int64_t scale_row = block_scale_row_part(Traits::kScaling, row, hidden, p.swizzled_scales);
  // This thread's first vector's codes; vector i's lie i * G vectors on, a constant offset
  // in the exact shapes. (e2m1: held in a register by the empty asm, without which the
  // compiler recomputed the 64-bit address from the row for every vector's store, seven
  // instructions; fp8 codes: not, as there it let the loads of later vectors be hoisted
  // until the kernel took all 64 registers, 46 before: MXFP8 h8192 1-4% slower on the H200.)
  int64_t zvec_at = Quant::row_byte(row, hidden) + Quant::template vector_byte<kVec>(first);
#if defined(__CUDA_ARCH__)
  if constexpr (Quant::kFp4) asm volatile("" : "+l"(zvec_at));
#endif
  uint8_t* const zvec = static_cast<uint8_t*>(p.z) + zvec_at;
  // The scale of vector i's block is at0 + i * step where consecutive i's blocks lie a fixed
  // distance apart in the scale tensor: compact scales, 1x128's, and 128x4 swizzled tiles
  // when a row's G lanes' blocks span whole 4-block columns of a tile (G / kGroup a multiple
  // of 4: block b0 + i * Gb then keeps b0's place in its column); else it is computed per
  // vector. (Block v / kGroup = b0 + i * Gb: G and the parts are multiples of kGroup.)
  const int Gb = G / kGroup;
  const bool strided =
      Traits::kScaling == ScalingMode::kBlock1D || !p.swizzled_scales || Gb % 4 == 0;
  const int b0 = static_cast<int>(static_cast<unsigned>(first) / kGroup);
  const int64_t at0 =
      scale_row + block_scale_block_part(Traits::kScaling, b0, p.rows, p.swizzled_scales);
  const int64_t step = block_scale_block_part(Traits::kScaling, Gb, p.rows, p.swizzled_scales);
  // (e2m1, strided: vector 0's scale address, held in a register as zvec is, and vector i's
  // i * step bytes on: without it the address was rebuilt from the parameter for every vector,
  // six instructions where two do. The fp8 formats keep the offsets: held there, it took 1-4
  // registers more in some of their kernels and fewer in others.)
  int64_t scale0_at = at0;
#if defined(__CUDA_ARCH__)
  if constexpr (Quant::kFp4) asm volatile("" : "+l"(scale0_at));
#endif
  uint8_t* const scale0 = p.block_scales + scale0_at;
  const int t = first % kGroup;  // (the lane's place in its block: first = b0 * kGroup + t)
  auto block_vector = [&](int i) {
    const int v = first + i * G;
    const bool valid = row_ok && (kExact || v < nvec);
    float y[kVec];
    float amax = 0.f;
    if (kExact || valid) {
      values(i, v, y);
#pragma unroll
      for (int k = 0; k < kVec; ++k) amax = fmaxf(amax, fabsf(y[k]));
    } else {
#pragma unroll
      for (int k = 0; k < kVec; ++k) y[k] = 0.f;
    }
#pragma unroll
    for (int lanes = 1; lanes < kGroup; lanes *= 2)
      amax = fmaxf(amax, platform::shfl_xor(amax, lanes));
    const int64_t at = strided ? at0 + i * step
                               : scale_row + block_scale_block_part(Traits::kScaling, v / kGroup,
                                                                    p.rows, p.swizzled_scales);
    // (kRowScale: amax of the values before the row's scale; a NaN product, from a NaN, zero or
    // infinite rsigma, is an amax of 0, as the unscaled values' NaNs would have been.)
    if constexpr (kRowScale) amax = fmaxf(amax * row_scale, 0.f);
    const float mult = Quant::kFp4 && strided ? quant.block(scale0 + i * step, amax, 0, valid && t == 0)
                                              : quant.block(p, amax, at, valid && t == 0);
    uint8_t* const dst = zvec + Quant::template vector_byte<kVec>(i * G);
    if constexpr (Quant::kFp4) {
      // (Every lane: no branch around it.)
      const uint32_t codes = Quant::template block_codes<kFoldNvfp4, kRowScale>(y, amax, mult, row_scale);
      if (valid) Quant::store_block_codes(y, codes, dst);
    } else if (valid) {  // (fp8: in the row's branch, as before: every lane's took MXFP8 h7168 +3%)
      Quant::store_block_codes(y, Quant::template block_codes<false, kRowScale>(y, amax, mult, row_scale), dst);
    }
  };
  if constexpr (kN > 0) {
#pragma unroll
    for (int i = 0; i < kN; ++i) block_vector(i);
  } else {
    // (Not unrolled: a loop of unknown trip count with shuffles cannot be partly unrolled
    // without breaking the lanes' convergence, and LLVM refuses.)
    for (int i = 0; i < N; ++i) block_vector(i);
  }
}

}  // namespace normtune
