// Element types. The numeric values are TransformerEngine 2.18's NVTEDType values, so a
// DType and an NVTEDType convert with a static_cast (checked in the C API header).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace normtune {

enum class DType : uint8_t {
  kByte = 0,
  kInt16 = 1,
  kInt32 = 2,
  kInt64 = 3,
  kFloat32 = 4,
  kFloat16 = 5,
  kBFloat16 = 6,
  kFloat8E4M3 = 7,
  kFloat8E5M2 = 8,
  kFloat8E8M0 = 9,
  kFloat4E2M1 = 10,
};

inline constexpr int kNumDTypes = 11;

inline constexpr DType kAllDTypes[kNumDTypes] = {
    DType::kByte,     DType::kInt16,       DType::kInt32,       DType::kInt64,
    DType::kFloat32,  DType::kFloat16,     DType::kBFloat16,    DType::kFloat8E4M3,
    DType::kFloat8E5M2, DType::kFloat8E8M0, DType::kFloat4E2M1,
};

constexpr bool is_valid_dtype(int value) { return value >= 0 && value < kNumDTypes; }

// Short names used in keys, kernel names and messages ("bf16", "fp8e4m3", ...).
constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kByte: return "byte";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kFloat32: return "fp32";
    case DType::kFloat16: return "fp16";
    case DType::kBFloat16: return "bf16";
    case DType::kFloat8E4M3: return "fp8e4m3";
    case DType::kFloat8E5M2: return "fp8e5m2";
    case DType::kFloat8E8M0: return "e8m0";
    case DType::kFloat4E2M1: return "fp4e2m1";
  }
  return "invalid";
}

// Parse a short name; returns false when the name is unknown.
constexpr bool dtype_from_name(std::string_view name, DType* out) {
  for (DType t : kAllDTypes) {
    if (dtype_name(t) == name) {
      *out = t;
      return true;
    }
  }
  return false;
}

// Storage size in bits (fp4 packs two elements per byte).
constexpr int dtype_bits(DType t) {
  switch (t) {
    case DType::kByte: return 8;
    case DType::kInt16: return 16;
    case DType::kInt32: return 32;
    case DType::kInt64: return 64;
    case DType::kFloat32: return 32;
    case DType::kFloat16: return 16;
    case DType::kBFloat16: return 16;
    case DType::kFloat8E4M3: return 8;
    case DType::kFloat8E5M2: return 8;
    case DType::kFloat8E8M0: return 8;
    case DType::kFloat4E2M1: return 4;
  }
  return 0;
}

// Bytes needed to store `count` elements (rounded up for sub-byte types).
constexpr size_t dtype_storage_bytes(DType t, size_t count) {
  return (count * static_cast<size_t>(dtype_bits(t)) + 7) / 8;
}

constexpr bool is_fp8(DType t) { return t == DType::kFloat8E4M3 || t == DType::kFloat8E5M2; }
constexpr bool is_fp4(DType t) { return t == DType::kFloat4E2M1; }
// Types a normalization may compute or store its non-quantized tensors in.
constexpr bool is_wide_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16;
}

}  // namespace normtune
