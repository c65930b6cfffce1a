#include <normtune/registry/norm_key.h>

namespace normtune {

std::string_view norm_type_name(NormType t) {
  switch (t) {
    case NormType::kLayerNorm: return "LayerNorm";
    case NormType::kRMSNorm: return "RMSNorm";
  }
  return "invalid";
}

std::string_view stage_name(Stage s) {
  switch (s) {
    case Stage::kForward: return "Forward";
    case Stage::kBackward: return "Backward";
    case Stage::kBackwardAdd: return "BackwardAdd";
    case Stage::kForwardAdd: return "ForwardAdd";
  }
  return "invalid";
}

std::string_view scaling_mode_name(ScalingMode m) {
  switch (m) {
    case ScalingMode::kNone: return "none";
    case ScalingMode::kMxfp8_1D: return "mxfp8_1d";
    case ScalingMode::kBlock1D: return "block_1d";
    case ScalingMode::kBlock2D: return "block_2d";
    case ScalingMode::kNvfp4_1D: return "nvfp4_1d";
    case ScalingMode::kMxfp4_1D: return "mxfp4_1d";
  }
  return "invalid";
}

std::string_view row_class_name(RowClass r) {
  switch (r) {
    case RowClass::kAny: return "any";
    case RowClass::kDecode: return "decode";
  }
  return "invalid";
}

std::string to_string(const NormKey& key) {
  std::string s;
  s += norm_type_name(key.norm);
  s += ' ';
  s += stage_name(key.stage);
  s += " hidden=";
  s += key.hidden_size == kAnyHiddenSize ? std::string("any") : std::to_string(key.hidden_size);
  s += detail::concat(" wtype=", dtype_name(key.wtype), " itype=", dtype_name(key.itype),
                      " otype=", dtype_name(key.otype), " ctype=", dtype_name(key.ctype));
  if (key.scaling != ScalingMode::kNone) s += detail::concat(" scaling=", scaling_mode_name(key.scaling));
  if (key.flags & kFlagZeroCenteredGamma) s += " zero_centered_gamma";
  if (key.flags & kFlagSwizzledScales) s += " swizzled_scales";
  if (key.flags & kFlagColumnwise) s += " columnwise";
  if (key.rows == RowClass::kDecode) s += detail::concat(" rows<=", kDecodeMaxRows);
  return s;
}

}  // namespace normtune
