// The supported (wtype, itype, otype) combinations of every op as values, from
// register/type_lists.def (host code: the C API's checks, tests through the registry).
#pragma once

#include <cstddef>
#include <span>

#include <normtune/common/dtype.h>
#include <normtune/normtune.h>
#include <normtune/registry/norm_key.h>

namespace normtune {

namespace type_token {  // the tokens of type_lists.def and the tuned tables, as values
inline constexpr DType fp32 = DType::kFloat32;
inline constexpr DType fp16 = DType::kFloat16;
inline constexpr DType bf16 = DType::kBFloat16;
inline constexpr DType fp8e4m3 = DType::kFloat8E4M3;
inline constexpr DType fp8e5m2 = DType::kFloat8E5M2;
inline constexpr DType fp4e2m1 = DType::kFloat4E2M1;
}  // namespace type_token

inline constexpr TypeCombo kFwdTypeCombos[] = {
#define NORMTUNE_FWD_TYPES(w, i, o) {type_token::w, type_token::i, type_token::o},
#define NORMTUNE_FWD_SCALED_TYPES(w, i, o, scaling) \
  {type_token::w, type_token::i, type_token::o, ScalingMode::k##scaling},
#define NORMTUNE_BWD_TYPES(w, i)
#include "type_lists.def"
#undef NORMTUNE_FWD_TYPES
#undef NORMTUNE_FWD_SCALED_TYPES
#undef NORMTUNE_BWD_TYPES
};

inline constexpr TypeCombo kBwdTypeCombos[] = {
#define NORMTUNE_FWD_TYPES(w, i, o)
#define NORMTUNE_FWD_SCALED_TYPES(w, i, o, scaling)
#define NORMTUNE_BWD_TYPES(w, i) {type_token::w, type_token::i, type_token::i},
#include "type_lists.def"
#undef NORMTUNE_FWD_TYPES
#undef NORMTUNE_FWD_SCALED_TYPES
#undef NORMTUNE_BWD_TYPES
};

// The combinations an op (by its stage) supports.
constexpr std::span<const TypeCombo> supported_type_list(Stage stage) {
  if (is_backward(stage)) return kBwdTypeCombos;
  return kFwdTypeCombos;
}

}  // namespace normtune
