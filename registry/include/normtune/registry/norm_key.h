// NormKey: what a normalization call is, packed into 64 bits.
//
// The layout is one table of named fields (kKeyFields: offset, width). pack/unpack are
// constexpr and driven by that table; the static_asserts at the end of this file prove that
// the fields do not overlap, fit in 64 bits, are wide enough for every value of their
// enum, and that unpack(pack(k)) == k for representative keys (every dtype, every enum
// value, the largest hidden size). Change the layout so that a round trip breaks and the
// build fails. Packing a value that does not fit its field raises normtune::Error (and, in
// a constant expression, is a compile error): never a silent truncation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <normtune/common/dtype.h>
#include <normtune/common/error.h>

namespace normtune {

enum class NormType : uint8_t { kLayerNorm = 0, kRMSNorm = 1 };
inline constexpr int kNumNormTypes = 2;

enum class Stage : uint8_t {
  kForward = 0,      // z = norm(x)
  kBackward = 1,     // dx, dgamma (, dbeta)
  kBackwardAdd = 2,  // backward with dx += add (nvte_rmsnorm_bwd_add)
  kForwardAdd = 3,   // residual_out = x + residual; z = norm(residual_out)
};
inline constexpr int kNumStages = 4;

// Output scaling, with TransformerEngine's NVTEScalingMode values (its INVALID = 100 is not a
// key value), and normtune's MXFP4 (NVTE_NORMTUNE_MXFP4_1D_SCALING = 200 in the C API) as 5.
enum class ScalingMode : uint8_t {
  kNone = 0,  // NVTE_DELAYED_TENSOR_SCALING: unquantized, or FP8 with one per-tensor scale
  kMxfp8_1D = 1,
  kBlock1D = 2,
  kBlock2D = 3,
  kNvfp4_1D = 4,
  kMxfp4_1D = 5,
};
inline constexpr int kNumScalingModes = 6;

// Independent boolean properties of a call.
enum KeyFlag : uint8_t {
  kFlagZeroCenteredGamma = 1u << 0,  // the weight is stored as gamma - 1
  kFlagSwizzledScales = 1u << 1,     // block scales in the 128x4 layout GEMMs read
  kFlagColumnwise = 1u << 2,         // a block-scaled z with column-wise data too (MXFP8 32x1, NVFP4 16x1 blocks)
};
inline constexpr uint8_t kAllKeyFlags = kFlagZeroCenteredGamma | kFlagSwizzledScales | kFlagColumnwise;
// Flags every kernel takes as a run-time argument: they are part of a call's key (its
// messages, a backend's plan cache) but not of the registry entry that serves it. The scale
// layout is one: a block-scaled kernel computes each scale's offset either way. Column-wise
// output is another: the general block-scaled entry launches its row-tile kernel for it, and
// a tuned entry declines it (can_implement).
inline constexpr uint8_t kRunTimeKeyFlags = kFlagZeroCenteredGamma | kFlagSwizzledScales | kFlagColumnwise;

// hidden_size == kAnyHiddenSize marks a general entry (handles every hidden size).
inline constexpr uint32_t kAnyHiddenSize = 0;

// How many rows a call has, as the tuned table tells them apart: decode (serving one token per
// sequence, M <= kDecodeMaxRows rows) wants another layout than a training step's thousands of
// rows (few rows fill few SMs, and the per-call latency in a CUDA graph is what counts). A
// call's key carries its class; a table line is either for any row count or for decode calls
// (NORMTUNE_TUNED_DECODE), and a decode call takes its decode line first, else the other.
enum class RowClass : uint8_t {
  kAny = 0,     // a table line for every row count (a call of more than kDecodeMaxRows rows)
  kDecode = 1,  // at most kDecodeMaxRows rows
};
inline constexpr int kNumRowClasses = 2;
inline constexpr size_t kDecodeMaxRows = 128;
constexpr RowClass row_class_of(size_t rows) { return rows <= kDecodeMaxRows ? RowClass::kDecode : RowClass::kAny; }

struct NormKey {
  NormType norm = NormType::kRMSNorm;
  Stage stage = Stage::kForward;
  DType wtype = DType::kFloat32;  // gamma (and beta)
  DType itype = DType::kFloat32;  // x
  DType otype = DType::kFloat32;  // z
  DType ctype = DType::kFloat32;  // compute
  uint32_t hidden_size = kAnyHiddenSize;
  ScalingMode scaling = ScalingMode::kNone;
  uint8_t flags = 0;
  RowClass rows = RowClass::kAny;

  constexpr bool operator==(const NormKey&) const = default;

  // The key of the registry entry that serves this call: run-time flags cleared.
  constexpr NormKey entry_key() const {
    NormKey k = *this;
    k.flags = static_cast<uint8_t>(k.flags & ~kRunTimeKeyFlags);
    return k;
  }

  // The entry key with the hidden size and the row class wildcarded: the key of the general
  // entry.
  constexpr NormKey general() const {
    NormKey k = entry_key();
    k.hidden_size = kAnyHiddenSize;
    k.rows = RowClass::kAny;
    return k;
  }

  // The same key for any row count (the line a decode call takes when it has no decode line).
  constexpr NormKey any_rows() const {
    NormKey k = *this;
    k.rows = RowClass::kAny;
    return k;
  }
};

constexpr bool is_backward(Stage s) { return s == Stage::kBackward || s == Stage::kBackwardAdd; }

// The one place a key is assembled (the C API, the registration of every kernel, the tuner
// and the tests call it), so the rules every key obeys are written once:
//   - ctype is fp32: every kernel keeps statistics and arithmetic in fp32;
//   - a backward key's otype is dx's type, which is x's (itype);
//   - zero-centered gamma is a flag of the call (kFlagZeroCenteredGamma).
// Breaking a rule raises normtune::Error (a compile error in a constant expression).
constexpr NormKey make_key(NormType norm, Stage stage, DType wtype, DType itype, DType otype,
                           uint32_t hidden_size, ScalingMode scaling = ScalingMode::kNone,
                           bool zero_centered_gamma = false) {
  if (is_backward(stage) && otype != itype) {
    NORMTUNE_ERROR("NormKey: a backward key's otype (dx) must be its itype (x)");
  }
  NormKey k;
  k.norm = norm;
  k.stage = stage;
  k.wtype = wtype;
  k.itype = itype;
  k.otype = otype;
  k.ctype = DType::kFloat32;
  k.hidden_size = hidden_size;
  k.scaling = scaling;
  k.flags = zero_centered_gamma ? kFlagZeroCenteredGamma : 0;
  return k;
}

// ---- the layout -------------------------------------------------------------------------
enum class KeyField : uint8_t { kNorm, kStage, kWType, kIType, kOType, kCType, kHidden, kScaling, kFlags, kRows };
inline constexpr int kNumKeyFields = 10;

struct KeyFieldSpec {
  KeyField field;
  const char* name;
  unsigned offset;  // first bit
  unsigned width;   // bits
  uint64_t limit;   // values must be < limit (enum count, or 2^width for plain integers)
};

// Bits 58..63 are free (the registry puts the architecture family or the backend there).
inline constexpr KeyFieldSpec kKeyFields[kNumKeyFields] = {
    {KeyField::kNorm, "norm", 0, 2, kNumNormTypes},
    {KeyField::kStage, "stage", 2, 3, kNumStages},
    {KeyField::kWType, "wtype", 5, 4, kNumDTypes},
    {KeyField::kIType, "itype", 9, 4, kNumDTypes},
    {KeyField::kOType, "otype", 13, 4, kNumDTypes},
    {KeyField::kCType, "ctype", 17, 4, kNumDTypes},
    {KeyField::kHidden, "hidden", 21, 24, uint64_t{1} << 24},
    {KeyField::kScaling, "scaling", 45, 4, kNumScalingModes},
    {KeyField::kFlags, "flags", 49, 8, uint64_t{kAllKeyFlags} + 1},
    {KeyField::kRows, "rows", 57, 1, kNumRowClasses},
};
inline constexpr unsigned kFirstFreeKeyBit = 58;

constexpr const KeyFieldSpec& key_field(KeyField f) { return kKeyFields[static_cast<int>(f)]; }

inline constexpr uint32_t kMaxHiddenSize = (1u << 24) - 1;

namespace detail {

constexpr uint64_t field_mask(const KeyFieldSpec& s) {
  return (s.width >= 64 ? ~uint64_t{0} : (uint64_t{1} << s.width) - 1) << s.offset;
}

constexpr uint64_t put_field(uint64_t bits, KeyField f, uint64_t value) {
  const KeyFieldSpec& s = key_field(f);
  if (value >= s.limit) {
    NORMTUNE_ERROR("NormKey field '", s.name, "': value ", value, " does not fit (expected < ",
                   s.limit, ")");
  }
  return bits | (value << s.offset);
}

constexpr uint64_t get_field(uint64_t bits, KeyField f) {
  const KeyFieldSpec& s = key_field(f);
  const uint64_t value = (bits & field_mask(s)) >> s.offset;
  if (value >= s.limit) {
    NORMTUNE_ERROR("packed NormKey ", detail::hex(bits), ": field '", s.name,
                   "' holds ", value, ", expected < ", s.limit);
  }
  return value;
}

}  // namespace detail

constexpr uint64_t pack(const NormKey& k) {
  using detail::put_field;
  uint64_t bits = 0;
  bits = put_field(bits, KeyField::kNorm, static_cast<uint64_t>(k.norm));
  bits = put_field(bits, KeyField::kStage, static_cast<uint64_t>(k.stage));
  bits = put_field(bits, KeyField::kWType, static_cast<uint64_t>(k.wtype));
  bits = put_field(bits, KeyField::kIType, static_cast<uint64_t>(k.itype));
  bits = put_field(bits, KeyField::kOType, static_cast<uint64_t>(k.otype));
  bits = put_field(bits, KeyField::kCType, static_cast<uint64_t>(k.ctype));
  bits = put_field(bits, KeyField::kHidden, k.hidden_size);
  bits = put_field(bits, KeyField::kScaling, static_cast<uint64_t>(k.scaling));
  bits = put_field(bits, KeyField::kFlags, k.flags);
  bits = put_field(bits, KeyField::kRows, static_cast<uint64_t>(k.rows));
  return bits;
}

constexpr NormKey unpack(uint64_t bits) {
  using detail::get_field;
  uint64_t used = 0;
  for (const KeyFieldSpec& s : kKeyFields) used |= detail::field_mask(s);
  if ((bits & ~used) != 0) {
    NORMTUNE_ERROR("packed NormKey ", detail::hex(bits), ": unused bits are set (mask ",
                   detail::hex(bits & ~used), ")");
  }
  NormKey k;
  k.norm = static_cast<NormType>(get_field(bits, KeyField::kNorm));
  k.stage = static_cast<Stage>(get_field(bits, KeyField::kStage));
  k.wtype = static_cast<DType>(get_field(bits, KeyField::kWType));
  k.itype = static_cast<DType>(get_field(bits, KeyField::kIType));
  k.otype = static_cast<DType>(get_field(bits, KeyField::kOType));
  k.ctype = static_cast<DType>(get_field(bits, KeyField::kCType));
  k.hidden_size = static_cast<uint32_t>(get_field(bits, KeyField::kHidden));
  k.scaling = static_cast<ScalingMode>(get_field(bits, KeyField::kScaling));
  k.flags = static_cast<uint8_t>(get_field(bits, KeyField::kFlags));
  k.rows = static_cast<RowClass>(get_field(bits, KeyField::kRows));
  return k;
}

// ---- names ------------------------------------------------------------------------------
std::string_view norm_type_name(NormType t);    // "RMSNorm", "LayerNorm"
std::string_view stage_name(Stage s);           // "Forward", "Backward", ...
std::string_view scaling_mode_name(ScalingMode m);  // "none", "mxfp8_1d", ...
std::string_view row_class_name(RowClass r);        // "any", "decode"

// "RMSNorm Forward hidden=7168 wtype=bf16 itype=bf16 otype=bf16 ctype=fp32", followed by
// " scaling=...", " zero_centered_gamma" / " swizzled_scales" and " rows<=128" (a decode
// call or line) when they apply;
// "hidden=any" for a general key.
std::string to_string(const NormKey& key);

// ---- compile-time proofs ----------------------------------------------------------------
namespace detail {

constexpr bool key_fields_are_disjoint_and_fit() {
  uint64_t seen = 0;
  for (int i = 0; i < kNumKeyFields; ++i) {
    const KeyFieldSpec& s = kKeyFields[i];
    if (static_cast<int>(s.field) != i) return false;  // table order matches KeyField
    if (s.width == 0 || s.offset + s.width > 64) return false;
    if ((seen & field_mask(s)) != 0) return false;
    seen |= field_mask(s);
  }
  return true;
}

constexpr bool key_fields_hold_their_values() {
  for (const KeyFieldSpec& s : kKeyFields) {
    if (s.width < 64 && s.limit > (uint64_t{1} << s.width)) return false;
  }
  return key_field(KeyField::kHidden).limit == uint64_t{kMaxHiddenSize} + 1;
}

constexpr bool round_trips(const NormKey& k) { return unpack(pack(k)) == k; }

constexpr bool representative_keys_round_trip() {
  for (int n = 0; n < kNumNormTypes; ++n) {
    for (int s = 0; s < kNumStages; ++s) {
      for (DType t : kAllDTypes) {
        NormKey k;
        k.norm = static_cast<NormType>(n);
        k.stage = static_cast<Stage>(s);
        k.wtype = t;
        k.itype = t;
        k.otype = t;
        k.ctype = t;
        k.hidden_size = 7168;
        if (!round_trips(k)) return false;
        // Each dtype field on its own, so a field that swallowed a neighbour would show.
        NormKey w = k, i = k, o = k, c = k;
        w.wtype = DType::kFloat4E2M1;
        i.itype = DType::kFloat4E2M1;
        o.otype = DType::kFloat4E2M1;
        c.ctype = DType::kFloat4E2M1;
        if (!round_trips(w) || !round_trips(i) || !round_trips(o) || !round_trips(c)) return false;
      }
    }
  }
  for (int m = 0; m < kNumScalingModes; ++m) {
    for (uint8_t f = 0; f <= kAllKeyFlags; ++f) {
      NormKey k;
      k.scaling = static_cast<ScalingMode>(m);
      k.flags = f;
      for (uint32_t h : {kAnyHiddenSize, 1u, 111u, 4096u, 262144u, kMaxHiddenSize}) {
        k.hidden_size = h;
        for (int r = 0; r < kNumRowClasses; ++r) {
          k.rows = static_cast<RowClass>(r);
          if (!round_trips(k)) return false;
        }
      }
    }
  }
  return true;
}

}  // namespace detail

static_assert(detail::key_fields_are_disjoint_and_fit(),
              "NormKey fields overlap, are out of order, or do not fit in 64 bits");
static_assert(detail::key_fields_hold_their_values(),
              "a NormKey field is narrower than the values it must hold");
static_assert(detail::representative_keys_round_trip(),
              "NormKey unpack(pack(k)) != k: the layout in kKeyFields is broken");

}  // namespace normtune
