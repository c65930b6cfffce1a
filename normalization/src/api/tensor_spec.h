// The tensor arguments of a C API entry point as data: one table (a CallSpec) per entry point
// lists each argument with its role (in/out), its shape rule relative to x, its dtype rule
// and the input it may alias (in place). One loop (check_call in api_common.h) checks every
// argument from its row and derives every output-vs-input and output-vs-output overlap check,
// so adding an argument (a quantized z's scales, an amax) is one row, not a list of pairs.
// Compile-time proofs (spec_is_valid) keep each table consistent, like NormKey's field table.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include <normtune/registry/norm_key.h>

namespace normtune {

enum class Role : uint8_t { kIn, kOut };

enum class ShapeRule : uint8_t {
  kRowsHidden,  // x's [rows, hidden]
  kHidden,      // [hidden]
  kRows,        // [rows]
};

enum class DTypeRule : uint8_t {
  kInputType,   // x: an itype of the op's type list
  kWeightType,  // gamma: a wtype the type list pairs with x's dtype
  kOutputType,  // z: an otype the type list pairs with (gamma's, x's) dtypes
  kSameAsInput,   // x's dtype
  kSameAsWeight,  // gamma's dtype
  kFp32,          // statistics
};

inline constexpr int kMaxCallSlots = 10;

// The may_alias set of an output: the slots of the inputs it may be exactly (in place).
template <typename... Slot>
constexpr uint32_t in_place_of(Slot... slots) {
  return ((uint32_t{1} << slots) | ...);
}

struct ArgSpec {
  const char* name;             // the C API's parameter name, used in every message
  int slot;                     // where the entry point keeps the handle (its own enum)
  Role role;
  ShapeRule shape;
  DTypeRule dtype;
  uint32_t may_alias = 0;       // bit s: this output may be exactly the input in slot s
};

struct CallSpec {
  const char* function;         // "nvte_rmsnorm_fwd"
  NormType norm;
  Stage stage;
  std::span<const ArgSpec> args;

  constexpr const ArgSpec* find(int slot) const {
    for (const ArgSpec& a : args) {
      if (a.slot == slot) return &a;
    }
    return nullptr;
  }
};

// Whether a table is consistent: names and slots unique and in range; exactly one x
// (kInputType, [rows, hidden]) and one gamma (kWeightType, [hidden]); dtype rules that refer
// to gamma or z only where those exist; an output dtype rule only on a forward output; aliases
// only from an output to an input of the same shape and dtype rule, and only on outputs.
constexpr bool spec_is_valid(const CallSpec& spec) {
  int inputs = 0, weights = 0, outputs = 0;
  for (size_t i = 0; i < spec.args.size(); ++i) {
    const ArgSpec& a = spec.args[i];
    if (a.slot < 0 || a.slot >= kMaxCallSlots) return false;
    for (size_t j = 0; j < i; ++j) {
      if (spec.args[j].slot == a.slot || std::string_view(spec.args[j].name) == a.name) return false;
    }
    switch (a.dtype) {
      case DTypeRule::kInputType:
        inputs += 1;
        if (a.role != Role::kIn || a.shape != ShapeRule::kRowsHidden) return false;
        break;
      case DTypeRule::kWeightType:
        weights += 1;
        if (a.role != Role::kIn || a.shape != ShapeRule::kHidden) return false;
        break;
      case DTypeRule::kOutputType:
        outputs += 1;
        if (a.role != Role::kOut || is_backward(spec.stage)) return false;
        break;
      default: break;
    }
    if (a.may_alias != 0 && a.role != Role::kOut) return false;
    for (int s = 0; s < kMaxCallSlots; ++s) {
      if ((a.may_alias >> s & 1) == 0) continue;
      const ArgSpec* target = spec.find(s);
      if (target == nullptr || target->role != Role::kIn || target->shape != a.shape) return false;
      const bool same_dtype = target->dtype == a.dtype ||
                              (target->dtype == DTypeRule::kInputType && a.dtype == DTypeRule::kSameAsInput);
      if (!same_dtype) return false;
    }
    if ((a.may_alias >> kMaxCallSlots) != 0) return false;
  }
  return inputs == 1 && weights == 1 && outputs == (is_backward(spec.stage) ? 0 : 1);
}

}  // namespace normtune
