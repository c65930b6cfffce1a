#include "api/api_common.h"
#include "kernels/block_scale.h"

#include <limits>
#include <string>
#include <vector>

#include <normtune/common/device_info.h>
#include <normtune/normtune.h>

#include "cudnn/backend_choice.h"
#include "cudnn/cudnn_library.h"
#ifdef NORMTUNE_WITH_CUDNN
#include "cudnn/cudnn_norm.h"
#endif
#include "register/type_lists.h"

namespace normtune {

namespace {

thread_local const KernelEntry* t_last_kernel = nullptr;
thread_local bool t_last_kernel_from_table = false;  // another backend, named by a tuned line
thread_local bool t_selected_from_table = false;     // the same, for the call being selected
// The tuned line naming another backend that select_kernel considered for the call being
// selected (whether its backend runs the call or not; null: none).
thread_local const TunedBackendLine* t_table_line = nullptr;

// Tuned lines naming a backend that could not run a call here (reported once each).
OnceSet<const void*>& warned_table_lines() {
  static OnceSet<const void*> lines;
  return lines;
}

// The key's scaling of a tensor's NVTEScalingMode (check_call admits the modes mapped here).
ScalingMode scaling_of_mode(NVTEScalingMode mode) {
  switch (mode) {
    case NVTE_MXFP8_1D_SCALING: return ScalingMode::kMxfp8_1D;
    case NVTE_BLOCK_SCALING_1D: return ScalingMode::kBlock1D;
    case NVTE_NVFP4_1D_SCALING: return ScalingMode::kNvfp4_1D;
    case NVTE_NORMTUNE_MXFP4_1D_SCALING: return ScalingMode::kMxfp4_1D;
    default: return ScalingMode::kNone;
  }
}

// What a block-scaled z's messages call its scaling.
const char* block_format_name(ScalingMode m) {
  switch (m) {
    case ScalingMode::kMxfp8_1D: return "NVTE_MXFP8_1D_SCALING";
    case ScalingMode::kBlock1D: return "NVTE_BLOCK_SCALING_1D";
    case ScalingMode::kNvfp4_1D: return "NVTE_NVFP4_1D_SCALING";
    default: return "NVTE_NORMTUNE_MXFP4_1D_SCALING";
  }
}

// ... and its short name, with its article ("an MXFP8"), and its scales' name.
const char* block_format_short(ScalingMode m) {
  switch (m) {
    case ScalingMode::kMxfp8_1D: return "MXFP8";
    case ScalingMode::kBlock1D: return "1x128-block FP8";
    case ScalingMode::kNvfp4_1D: return "NVFP4";
    default: return "MXFP4";
  }
}
const char* block_format_article(ScalingMode m) { return m == ScalingMode::kBlock1D ? "a" : "an"; }
const char* block_scale_name(ScalingMode m) {
  switch (block_scale_dtype(m)) {
    case DType::kFloat8E4M3: return "E4M3";
    case DType::kFloat32: return "fp32";
    default: return "E8M0";
  }
}


const char* shape_text(const ArgSpec& a) {
  switch (a.shape) {
    case ShapeRule::kRowsHidden: return a.dtype == DTypeRule::kInputType ? "[rows, hidden]" : "x's";
    case ShapeRule::kHidden: return "[hidden]";
    case ShapeRule::kRows: return "[rows]";
  }
  return "?";
}

Shape expected_shape(ShapeRule rule, size_t rows, size_t hidden) {
  switch (rule) {
    case ShapeRule::kRowsHidden: return Shape{rows, hidden};
    case ShapeRule::kHidden: return Shape{hidden};
    case ShapeRule::kRows: return Shape{rows};
  }
  return Shape{};
}

// "fp32, fp16 or bf16"; the dtype equal to `mark` (x's) is followed by " (x's)".
std::string dtype_choices(const std::vector<DType>& dtypes, DType mark, bool mark_x) {
  std::string out = "dtype ";
  for (size_t i = 0; i < dtypes.size(); ++i) {
    if (i > 0) out += i + 1 == dtypes.size() ? " or " : ", ";
    out += dtype_name(dtypes[i]);
    if (mark_x && dtypes[i] == mark) out += " (x's)";
  }
  return out;
}

void add_unique(std::vector<DType>& v, DType t) {
  for (DType u : v) {
    if (u == t) return;
  }
  v.push_back(t);
}

// The dtype a type-list line gives an argument of rule `rule`, if the line applies given
// x's and gamma's dtypes and z's scaling (kInputType: every line; kWeightType: lines of x's
// dtype; kOutputType: lines of x's and gamma's, and of z's scaling).
bool list_dtype(const TypeCombo& c, DTypeRule rule, DType x, DType gamma, ScalingMode scaling, DType* out) {
  switch (rule) {
    case DTypeRule::kInputType: *out = c.itype; return true;
    case DTypeRule::kWeightType: *out = c.wtype; return c.itype == x;
    case DTypeRule::kOutputType: *out = c.otype; return c.itype == x && c.wtype == gamma && c.scaling == scaling;
    default: return false;
  }
}

// The dtypes the op's type list allows for an argument (for the message of a rejected call).
std::vector<DType> allowed_dtypes(Stage stage, DTypeRule rule, DType x, DType gamma, ScalingMode scaling) {
  std::vector<DType> out;
  for (const TypeCombo& c : supported_type_list(stage)) {
    DType d;
    if (list_dtype(c, rule, x, gamma, scaling, &d)) add_unique(out, d);
  }
  return out;
}

void check_dtype(const CallSpec& spec, const ArgSpec& a, const BasicTensor& t, DType x, DType gamma,
                 ScalingMode scaling) {
  DType expected = DType::kFloat32;
  switch (a.dtype) {
    case DTypeRule::kInputType:
    case DTypeRule::kWeightType:
    case DTypeRule::kOutputType: {
      // No allocation on the path of an accepted call: the list is searched in place.
      for (const TypeCombo& c : supported_type_list(spec.stage)) {
        DType d;
        if (list_dtype(c, a.dtype, x, gamma, scaling, &d) && d == t.dtype) return;
      }
      const std::vector<DType> allowed = allowed_dtypes(spec.stage, a.dtype, x, gamma, scaling);
      const bool quantized = is_fp8(t.dtype) || is_fp4(t.dtype);
      const std::string want =
          allowed.empty() ? detail::concat("no dtype: no supported z for x of dtype ", dtype_name(x), ", gamma of dtype ",
                                           dtype_name(gamma), " and scaling ", scaling_mode_name(scaling))
                          : dtype_choices(allowed, x, a.dtype != DTypeRule::kInputType) +
                                (a.dtype == DTypeRule::kOutputType && scaling != ScalingMode::kNone
                                     ? detail::concat(" for ", block_format_name(scaling))
                                     : std::string());
      NORMTUNE_CHECK_ARG(false, a.name, want,
                         detail::concat(dtype_name(t.dtype),
                                        a.dtype == DTypeRule::kOutputType && quantized
                                            ? " (a quantized z takes gamma of x's dtype; e2m1 needs NVFP4 or MXFP4 "
                                              "scaling, fp8 block scales MXFP8 or 1x128 blocks)"
                                            : ""));
      return;
    }
    case DTypeRule::kSameAsInput: expected = x; break;
    case DTypeRule::kSameAsWeight: expected = gamma; break;
    case DTypeRule::kFp32: expected = DType::kFloat32; break;
  }
  NORMTUNE_CHECK_ARG(t.dtype == expected, a.name, detail::concat("dtype ", dtype_name(expected)),
                     dtype_name(t.dtype));
}

const ArgSpec& arg_with_rule(const CallSpec& spec, DTypeRule rule) {
  for (const ArgSpec& a : spec.args) {
    if (a.dtype == rule) return a;
  }
  NORMTUNE_ERROR("internal: ", spec.function, "'s argument table has no argument of dtype rule ",
                 static_cast<int>(rule));
}

void expect_no_overlap(const BasicTensor& out, const char* out_arg, const BasicTensor& other,
                       const char* other_arg) {
  const auto a = reinterpret_cast<uintptr_t>(out.dptr);
  const auto b = reinterpret_cast<uintptr_t>(other.dptr);
  const size_t na = out.size_bytes(), nb = other.size_bytes();
  const bool overlap = a != 0 && b != 0 && na != 0 && nb != 0 && a < b + nb && b < a + na;
  NORMTUNE_CHECK_ARG(!overlap, out_arg, detail::concat("memory separate from '", other_arg, "'"),
                     "overlapping buffers");
}

// Whether a scale, scale_inv or amax buffer of z is given. A NULL pointer counts as absent,
// whatever the shape: TransformerEngine's TensorWrapper(dptr, shape, dtype) sets all three
// to {NULL, [1], fp32} when the caller passes none, and TE reads a NULL amax as "no amax".
bool is_given(const BasicTensor& t) { return t.has_data() && t.dptr != nullptr; }

// z's per-tensor buffers, each one fp32 value. FP8 z: scale (read) and scale_inv (written)
// required, amax (max |value| folded in, written) optional. A high-precision z may have an
// amax (of its rounded values: TransformerEngine's norm + amax for current scaling), and no
// scale or scale_inv.
struct ScaleBuffer {
  const char* name;  // as messages name it
  BasicTensor Tensor::*member;
  bool required;            // with an FP8 z
  bool written;
  const char* without_fp8;  // why a high-precision z may not have it; null: it may
};
constexpr ScaleBuffer kZScaleBuffers[] = {
    {"z.scale (kNVTEScale)", &Tensor::scale, true, false, "scales belong to FP8 outputs"},
    {"z.scale_inv (kNVTERowwiseScaleInv)", &Tensor::scale_inv, true, true, "scales belong to FP8 outputs"},
    {"z.amax (kNVTEAmax)", &Tensor::amax, false, true, nullptr},
};

// A scale tensor `name` (`what`): present, of dtype `dtype` and shape `want` (`formula`).
void check_scale_tensor(const BasicTensor& s, const char* name, const char* what, DType dtype, const Shape& want,
                        const std::string& formula) {
  NORMTUNE_CHECK_ARG(s.has_data(), name, detail::concat(what, ", ", dtype_name(dtype), " of shape ", want.str()),
                     "none");
  NORMTUNE_CHECK_ARG(s.dtype == dtype && s.shape == want, name,
                     detail::concat(dtype_name(dtype), " of shape ", want.str(), " = ", formula),
                     detail::concat(dtype_name(s.dtype), " of shape ", s.shape.str()));
}

// A block-scaled z (kernels/block_scale.h): row-wise data of the format's dtype (fp8; e2m1
// for NVFP4 and MXFP4), hidden a multiple of the block (of 16 for 1x128 FP8, whose last block
// may be partial), its scales in scale_inv, shaped as
// TransformerEngine allocates them (the padding is not written); no per-tensor scale; an
// amax only for NVFP4 (its global amax, read). MXFP8 and NVFP4 may have column-wise data too:
//   MXFP8: FP8 of the row-wise dtype and shape [rows, hidden], one E8M0 scale per 32 rows of a
//     column in columnwise_scale_inv, [roundup(ceil(rows / 32), 4), roundup(hidden, 128)]; no
//     column-wise amax.
//   NVFP4 (TransformerEngine's layout): the transpose, e2m1 of shape [hidden, rows], one E4M3
//     scale per 16 rows of a column in columnwise_scale_inv, [roundup(hidden, 128),
//     roundup(rows / 16, 4)] (the transpose's row-wise scales); rows a multiple of 16; the
//     column-wise global amax in columnwise_amax (read; none: z.amax's, as TE's quantizer).
// (Column-wise data alone is refused by check_call: the norm's output is read row-wise by
// the next GEMM's forward.)
void check_block_scaled_output(const Tensor& z, ScalingMode mode, size_t rows, size_t hidden) {
  const char* format = block_format_name(mode);
  const bool fp4 = block_codes_fp4(mode);
  NORMTUNE_CHECK_ARG(fp4 ? is_fp4(z.data.dtype) : is_fp8(z.data.dtype), "z",
                     detail::concat(fp4 ? "dtype fp4e2m1" : "dtype fp8e4m3 or fp8e5m2", " for ", format),
                     dtype_name(z.data.dtype));
  const size_t block = static_cast<size_t>(block_elements(mode));
  const size_t multiple = static_cast<size_t>(block_hidden_multiple(mode));
  NORMTUNE_CHECK_ARG(hidden % multiple == 0, "z",
                     detail::concat("a hidden size divisible by ", multiple, " (", block_format_short(mode), " blocks of ",
                                    block, " elements", multiple == block ? "" : ", a row's last one may be partial",
                                    ")"),
                     hidden);
  constexpr const char* kC = "z.columnwise_data (kNVTEColumnwiseData)";
  constexpr const char* kCs = "z.columnwise_scale_inv (kNVTEColumnwiseScaleInv)";
  constexpr const char* kCa = "z.columnwise_amax (kNVTEColumnwiseAmax)";
  if (!has_colwise_format(mode)) {
    NORMTUNE_CHECK_ARG(!z.has_columnwise_data(), kC,
                       detail::concat("no column-wise data (", block_format_short(mode),
                                      " z is row-wise only here; MXFP8 and NVFP4 also have column-wise)"),
                       detail::concat("a buffer of shape ", z.columnwise_data.shape.str()));
  }
  NORMTUNE_CHECK_ARG(z.has_columnwise_data() || !is_given(z.columnwise_scale_inv), kCs,
                     "no buffer without column-wise data (kNVTEColumnwiseData)",
                     detail::concat("a buffer of shape ", z.columnwise_scale_inv.shape.str()));
  const auto rows64 = static_cast<int64_t>(rows), hidden64 = static_cast<int64_t>(hidden);
  if (z.has_columnwise_data() && mode == ScalingMode::kMxfp8_1D) {
    const BasicTensor& c = z.columnwise_data;
    NORMTUNE_CHECK_ARG(c.dtype == z.data.dtype && c.shape == z.data.shape, kC,
                       detail::concat(dtype_name(z.data.dtype), " of shape ", z.data.shape.str(), " (the row-wise data's)"),
                       detail::concat(dtype_name(c.dtype), " of shape ", c.shape.str()));
    check_scale_tensor(z.columnwise_scale_inv, kCs, "the column-wise E8M0 block scales", DType::kFloat8E8M0,
                       Shape{static_cast<size_t>(mx_colwise_scale_rows(rows64)),
                             static_cast<size_t>(mx_colwise_scale_cols(hidden64))},
                       "[roundup(ceil(rows / 32), 4), roundup(hidden, 128)]");
    NORMTUNE_CHECK_ARG(!is_given(z.columnwise_amax), kCa, "no buffer (an MXFP8 z has block scales only)",
                       detail::concat("a buffer of shape ", z.columnwise_amax.shape.str()));
  } else if (z.has_columnwise_data()) {  // NVFP4: the transpose
    const BasicTensor& c = z.columnwise_data;
    const Shape want{hidden, rows};
    NORMTUNE_CHECK_ARG(c.dtype == DType::kFloat4E2M1 && c.shape == want, kC,
                       detail::concat("fp4e2m1 of shape ", want.str(),
                                      " = [hidden, rows] (NVFP4's column-wise data is the transpose)"),
                       detail::concat(dtype_name(c.dtype), " of shape ", c.shape.str()));
    NORMTUNE_CHECK_ARG(rows % kNvfp4Block == 0, kC,
                       "a row count divisible by 16 (NVFP4 column-wise blocks are 16 rows of a column)", rows);
    check_scale_tensor(z.columnwise_scale_inv, kCs, "the column-wise E4M3 block scales", DType::kFloat8E4M3,
                       Shape{static_cast<size_t>(nvfp4_colwise_scale_rows(hidden64)),
                             static_cast<size_t>(nvfp4_colwise_scale_cols(rows64))},
                       "[roundup(hidden, 128), roundup(rows / 16, 4)]");
    if (is_given(z.columnwise_amax)) {
      NORMTUNE_CHECK_ARG(z.columnwise_amax.dtype == DType::kFloat32 && z.columnwise_amax.numel() == 1, kCa,
                         "one fp32 value (NVFP4: the column-wise global amax, read)",
                         detail::concat(dtype_name(z.columnwise_amax.dtype), " of shape ",
                                        z.columnwise_amax.shape.str()));
    }
  } else {
    NORMTUNE_CHECK_ARG(!is_given(z.columnwise_amax), kCa, "no buffer without column-wise data (kNVTEColumnwiseData)",
                       detail::concat("a buffer of shape ", z.columnwise_amax.shape.str()));
  }
  const DType sdtype = block_scale_dtype(mode);
  const std::string formula =
      mode == ScalingMode::kBlock1D
          ? std::string("[ceil(hidden / 128), roundup(rows, 4)]")
          : detail::concat("[roundup(rows, 128), roundup(hidden / ", block, ", 4)]");
  check_scale_tensor(z.scale_inv, "z.scale_inv (kNVTERowwiseScaleInv)",
                     detail::concat("the ", block_scale_name(mode), " block scales").c_str(), sdtype,
                     Shape{static_cast<size_t>(block_scale_rows(mode, static_cast<int64_t>(rows), static_cast<int64_t>(hidden))),
                           static_cast<size_t>(block_scale_cols(mode, static_cast<int64_t>(rows), static_cast<int64_t>(hidden)))},
                     formula);
  NORMTUNE_CHECK_ARG(!(mode == ScalingMode::kBlock1D && z.with_gemm_swizzled_scales),
                     "z (kNVTEWithGEMMSwizzledScales)",
                     "false for NVTE_BLOCK_SCALING_1D (its scales have one layout; the swizzle is MXFP8's, NVFP4's and "
                     "MXFP4's)",
                     "true");
  const std::string only_blocks =
      detail::concat("no buffer (", block_format_article(mode), " ", block_format_short(mode), " z has block scales only)");
  NORMTUNE_CHECK_ARG(!is_given(z.scale), "z.scale (kNVTEScale)", only_blocks,
                     detail::concat("a buffer of shape ", z.scale.shape.str()));
  if (mode == ScalingMode::kNvfp4_1D) {
    NORMTUNE_CHECK_ARG(!z.row_scaled_nvfp4, "z (kNVTERowScaledNVFP4)",
                       "false (one global amax per tensor; row-scaled NVFP4 is not supported)", "true");
    NORMTUNE_CHECK_ARG(z.nvfp4_e4m3_max == 448, "z (kNVTENVFP4E4M3Max)",
                       "448 (256 belongs to 4over6 quantization, not supported)", z.nvfp4_e4m3_max);
    if (is_given(z.amax)) {
      NORMTUNE_CHECK_ARG(z.amax.dtype == DType::kFloat32 && z.amax.numel() == 1, "z.amax (kNVTEAmax)",
                         "one fp32 value (NVFP4: the global amax, read)",
                         detail::concat(dtype_name(z.amax.dtype), " of shape ", z.amax.shape.str()));
    }
  } else {
    NORMTUNE_CHECK_ARG(!is_given(z.amax), "z.amax (kNVTEAmax)", only_blocks,
                       detail::concat("a buffer of shape ", z.amax.shape.str()));
  }
}

void check_output_scale_buffers(const Tensor& z, size_t rows, size_t hidden) {
  const ScalingMode mode = scaling_of_mode(z.scaling_mode);
  if (mode != ScalingMode::kNone) return check_block_scaled_output(z, mode, rows, hidden);
  NORMTUNE_CHECK_ARG(!is_fp4(z.data.dtype), "z", "NVTE_NVFP4_1D_SCALING or NVTE_NORMTUNE_MXFP4_1D_SCALING for an e2m1 z",
                     "NVTE_DELAYED_TENSOR_SCALING");
  const bool fp8 = is_fp8(z.data.dtype);
  for (const ScaleBuffer& b : kZScaleBuffers) {
    const BasicTensor& t = z.*b.member;
    if (!fp8 && b.without_fp8 != nullptr) {
      NORMTUNE_CHECK_ARG(!is_given(t), b.name,
                         detail::concat("no buffer for a z of dtype ", dtype_name(z.data.dtype), " (",
                                        b.without_fp8, ")"),
                         detail::concat("a buffer of shape ", t.shape.str()));
      continue;
    }
    if (!(fp8 && b.required) && !is_given(t)) continue;
    NORMTUNE_CHECK_ARG(is_given(t), b.name, detail::concat("a buffer (z is ", dtype_name(z.data.dtype), ")"),
                       "none (no buffer, or a NULL pointer)");
    NORMTUNE_CHECK_ARG(t.dtype == DType::kFloat32 && t.numel() == 1, b.name, "one fp32 value",
                       detail::concat(dtype_name(t.dtype), " of shape ", t.shape.str()));
  }
}

// On a real call: the FP8 buffers present, aligned, and those written apart from every
// argument and from one another (scale is only read: it may share memory with an input).
void check_output_scale_data(const CallSpec& spec, const CheckedCall& call, const Tensor& z) {
  if (const ScalingMode mode = scaling_of_mode(z.scaling_mode); mode != ScalingMode::kNone) {
    const BasicTensor& s = z.scale_inv;
    constexpr const char* kS = "z.scale_inv (kNVTERowwiseScaleInv)";
    // (No rows: every buffer is empty, and NULL, as frameworks pass it, is fine.)
    NORMTUNE_CHECK_ARG(s.dptr != nullptr || s.numel() == 0, kS,
                       detail::concat("a device pointer to ", s.numel(), " ", block_scale_name(mode), " scales"), "NULL");
    NORMTUNE_CHECK_ARG(reinterpret_cast<uintptr_t>(s.dptr) % dtype_storage_bytes(s.dtype, 1) == 0, kS,
                       detail::concat("a pointer aligned to its ", dtype_storage_bytes(s.dtype, 1), "-byte scales"),
                       s.dptr);
    for (const ArgSpec& a : spec.args) expect_no_overlap(s, kS, call[a.slot], a.name);
    if (mode == ScalingMode::kNvfp4_1D && is_given(z.amax)) {  // read: apart from what the call writes
      constexpr const char* kA = "z.amax (kNVTEAmax)";
      NORMTUNE_CHECK_ARG(reinterpret_cast<uintptr_t>(z.amax.dptr) % alignof(float) == 0, kA,
                         "a pointer aligned to 4 bytes", z.amax.dptr);
      for (const ArgSpec& a : spec.args) {
        if (a.role == Role::kOut) expect_no_overlap(z.amax, kA, call[a.slot], a.name);
      }
      expect_no_overlap(z.amax, kA, s, kS);
    }
    if (z.has_columnwise_data()) {  // two more outputs: apart from every argument and each other
      const BasicTensor& c = z.columnwise_data;
      const BasicTensor& cs = z.columnwise_scale_inv;
      constexpr const char* kC = "z.columnwise_data (kNVTEColumnwiseData)";
      constexpr const char* kCs = "z.columnwise_scale_inv (kNVTEColumnwiseScaleInv)";
      NORMTUNE_CHECK_ARG(c.dptr != nullptr || c.numel() == 0, kC,
                         detail::concat("a device pointer to ", c.numel(), " elements"), "NULL");
      NORMTUNE_CHECK_ARG(cs.dptr != nullptr || cs.numel() == 0, kCs,
                         detail::concat("a device pointer to ", cs.numel(), " ", block_scale_name(mode), " scales"),
                         "NULL");
      NORMTUNE_CHECK_ARG(reinterpret_cast<uintptr_t>(c.dptr) % 16 == 0, kC,
                         detail::concat("a 16-byte aligned pointer (", block_format_short(mode), ")"), c.dptr);
      for (const ArgSpec& a : spec.args) {
        expect_no_overlap(c, kC, call[a.slot], a.name);
        expect_no_overlap(cs, kCs, call[a.slot], a.name);
      }
      expect_no_overlap(c, kC, s, kS);
      expect_no_overlap(cs, kCs, s, kS);
      expect_no_overlap(cs, kCs, c, kC);
      if (is_given(z.amax)) {  // NVFP4's global amax, read: apart from these outputs too
        for (const auto& [out, name] : {std::pair{&c, kC}, std::pair{&cs, kCs}}) {
          expect_no_overlap(z.amax, "z.amax (kNVTEAmax)", *out, name);
        }
      }
      if (is_given(z.columnwise_amax)) {  // NVFP4's column-wise global amax, read
        constexpr const char* kCa = "z.columnwise_amax (kNVTEColumnwiseAmax)";
        NORMTUNE_CHECK_ARG(reinterpret_cast<uintptr_t>(z.columnwise_amax.dptr) % alignof(float) == 0, kCa,
                           "a pointer aligned to 4 bytes", z.columnwise_amax.dptr);
        for (const ArgSpec& a : spec.args) {
          if (a.role == Role::kOut) expect_no_overlap(z.columnwise_amax, kCa, call[a.slot], a.name);
        }
        for (const auto& [out, name] : {std::pair{&s, kS}, std::pair{&c, kC}, std::pair{&cs, kCs}}) {
          expect_no_overlap(z.columnwise_amax, kCa, *out, name);
        }
      }
    }
    for (const ArgSpec& a : spec.args) {
      if (a.role != Role::kIn) continue;
      NORMTUNE_CHECK_ARG(reinterpret_cast<uintptr_t>(call[a.slot].dptr) % 16 == 0, a.name,
                         detail::concat("a 16-byte aligned pointer (", block_format_short(mode), " output)"),
                       call[a.slot].dptr);
    }
    NORMTUNE_CHECK_ARG(reinterpret_cast<uintptr_t>(z.data.dptr) % 16 == 0, "z",
                       detail::concat("a 16-byte aligned pointer (", block_format_short(mode), ")"), z.data.dptr);
    return;
  }
  for (const ScaleBuffer& b : kZScaleBuffers) {  // those present (checked above)
    const BasicTensor& t = z.*b.member;
    if (!is_given(t)) continue;
    NORMTUNE_CHECK_ARG(reinterpret_cast<uintptr_t>(t.dptr) % alignof(float) == 0, b.name,
                       "a pointer aligned to 4 bytes", t.dptr);
    if (!b.written) continue;
    for (const ArgSpec& a : spec.args) expect_no_overlap(t, b.name, call[a.slot], a.name);
    for (const ScaleBuffer& other : kZScaleBuffers) {
      const BasicTensor& o = z.*other.member;
      if (&other != &b && is_given(o)) expect_no_overlap(t, b.name, o, other.name);
    }
  }
}

}  // namespace

KernelChoice last_kernel() {
  if (t_last_kernel == nullptr) return {};
  return {t_last_kernel->name, !t_last_kernel->is_general() || t_last_kernel_from_table,
          std::string(backend_name(t_last_kernel->backend))};
}

CheckedCall check_call(const CallSpec& spec, std::span<const NVTETensor> handles,
                       int multiprocessorCount) {
  CheckedCall call;
  // x first: every other shape is relative to its [rows, hidden].
  const ArgSpec& x_spec = arg_with_rule(spec, DTypeRule::kInputType);
  const Tensor& x = const_tensor_from_handle(handles[x_spec.slot], x_spec.name);
  NORMTUNE_CHECK_ARG(x.data.ndim() == 2, x_spec.name, "a 2-D tensor [rows, hidden] (flatten leading dims)",
                     detail::concat("shape ", x.data.shape.str()));
  call.rows = x.data.shape[0];
  call.hidden = x.data.shape[1];
  NORMTUNE_CHECK_ARG(call.hidden >= 1 && call.hidden <= kMaxHiddenSize, x_spec.name,
                     detail::concat("a hidden size (last dim) in [1, ", kMaxHiddenSize, "]"), call.hidden);
  NORMTUNE_CHECK_ARG(call.rows <= static_cast<size_t>(std::numeric_limits<int64_t>::max() / call.hidden),
                     x_spec.name, "fewer rows", call.rows);
  NORMTUNE_CHECK_ARG(multiprocessorCount >= 0, "multiprocessorCount", "a count >= 0 (0: all SMs)",
                     multiprocessorCount);

  // Handles, scaling modes and shapes of every argument, in table order.
  for (const ArgSpec& a : spec.args) {
    const Tensor& t = const_tensor_from_handle(handles[a.slot], a.name);
    const bool block_z = a.dtype == DTypeRule::kOutputType && scaling_of_mode(t.scaling_mode) != ScalingMode::kNone;
    NORMTUNE_CHECK_ARG(t.scaling_mode == NVTE_DELAYED_TENSOR_SCALING || block_z, a.name,
                       a.dtype == DTypeRule::kOutputType
                           ? "NVTE_DELAYED_TENSOR_SCALING (unquantized, or FP8 with one per-tensor scale), "
                             "NVTE_MXFP8_1D_SCALING, NVTE_BLOCK_SCALING_1D, NVTE_NVFP4_1D_SCALING or "
                             "NVTE_NORMTUNE_MXFP4_1D_SCALING (2-D blocks are not supported)"
                           : "NVTE_DELAYED_TENSOR_SCALING (an unquantized tensor)",
                       scaling_mode_name(static_cast<int>(t.scaling_mode)));
    NORMTUNE_CHECK_ARG(!(block_z && t.columnwise_only()), a.name,
                       "row-wise data (column-wise data alone is not supported)", "column-wise data only");
    const Shape want = expected_shape(a.shape, call.rows, call.hidden);
    NORMTUNE_CHECK_ARG(t.data.shape == want, a.name, detail::concat("shape ", shape_text(a), " = ", want.str()),
                       detail::concat("shape ", t.data.shape.str()));
    call.by_slot[a.slot] = &t;
  }
  // Dtypes: x's against the type list first, then gamma's given x's, then the rest.
  const DType x_dtype = x.data.dtype;
  const ScalingMode z_scaling =
      is_backward(spec.stage)
          ? ScalingMode::kNone
          : scaling_of_mode(call.by_slot[arg_with_rule(spec, DTypeRule::kOutputType).slot]->scaling_mode);
  check_dtype(spec, x_spec, x.data, x_dtype, x_dtype, z_scaling);
  const ArgSpec& g_spec = arg_with_rule(spec, DTypeRule::kWeightType);
  const DType g_dtype = call[g_spec.slot].dtype;
  check_dtype(spec, g_spec, call[g_spec.slot], x_dtype, g_dtype, z_scaling);
  for (const ArgSpec& a : spec.args) {
    if (&a != &x_spec && &a != &g_spec) check_dtype(spec, a, call[a.slot], x_dtype, g_dtype, z_scaling);
  }
  if (!is_backward(spec.stage)) {
    check_output_scale_buffers(*call.by_slot[arg_with_rule(spec, DTypeRule::kOutputType).slot], call.rows, call.hidden);
  }
  return call;
}

NormKey key_of_call(const CallSpec& spec, const CheckedCall& call, bool zero_centered_gamma) {
  const DType x = call[arg_with_rule(spec, DTypeRule::kInputType).slot].dtype;
  const DType w = call[arg_with_rule(spec, DTypeRule::kWeightType).slot].dtype;
  DType o = x;
  ScalingMode scaling = ScalingMode::kNone;
  if (!is_backward(spec.stage)) {
    const Tensor& z = *call.by_slot[arg_with_rule(spec, DTypeRule::kOutputType).slot];
    o = z.data.dtype;
    scaling = scaling_of_mode(z.scaling_mode);  // check_call admits these modes only
  }
  NormKey key = make_key(spec.norm, spec.stage, w, x, o, static_cast<uint32_t>(call.hidden), scaling,
                         zero_centered_gamma);
  key.rows = row_class_of(call.rows);
  if (scaling != ScalingMode::kNone) {
    const Tensor& z = *call.by_slot[arg_with_rule(spec, DTypeRule::kOutputType).slot];
    if (z.with_gemm_swizzled_scales) key.flags |= kFlagSwizzledScales;
    if (z.has_columnwise_data()) key.flags |= kFlagColumnwise;
  }
  return key;
}

const KernelEntry* usable_backend_entry(const NormKey& key, Backend backend, const void* args, std::string* why) {
  const Selection sel = kernel_registry().select_backend(key, backend, args);
  if (sel.general_candidate == nullptr) {
    *why =
        kCudnnBackendBuilt
            ? detail::concat("it does not implement ", to_string(key),
                             " (it runs RMSNorm and LayerNorm forward and backward with z, dx of "
                             "x's dtype, and the forward with a per-tensor FP8 z; not the fused "
                             "add, forward or backward, not block-scaled z)")
            : std::string(
                  "this build of normtune has no cuDNN backend (configure with cuDNN's "
                  "frontend headers: NORMTUNE_ENABLE_CUDNN=ON)");
    return nullptr;
  }
  if (sel.entry == nullptr) {
    *why = detail::concat("it cannot run this call of ", to_string(key), ": ", sel.general_rejection);
    return nullptr;
  }
  return cudnn_library(why) != nullptr ? sel.entry : nullptr;
}

const KernelEntry* table_backend_kernel(const TunedBackendLine& line, const NormKey& key, const void* args) {
  std::string why;
  if (const KernelEntry* entry = usable_backend_entry(key, line.backend, args, &why)) {
#ifdef NORMTUNE_WITH_CUDNN
    set_cudnn_call_source("the tuned table (NORMTUNE_BACKEND=auto)");
#endif
    // The plan is built here (then cached: the size query and the call find it), so that a
    // graph cuDNN cannot build for this call (zero-centered gamma before cuDNN 9.7, a shape
    // its heuristics do not cover) leaves the call to the native kernel, as the table's
    // choice must never make a call fail. A plan that cannot be built is remembered per
    // (key, rows, device) by the backend (cudnn_norm.cpp), so later calls of that shape fail
    // here at once, and the size query and the real call of one shape always agree. (The
    // cuDNN entry's checks that look at the data, 16-byte alignment, dx over dz, can pass on
    // a size query made with null pointers and fail on the real call: answered_workspace
    // gives both calls the same size.)
    try {
      if (entry->workspace_bytes != nullptr) (void)entry->workspace_bytes(args);
      return entry;
    } catch (const Error& err) {
      why = err.what();
    }
  }
  if (warned_table_lines().first_time(&line) && !env_flag_is_off("NORMTUNE_WARN_FALLBACK")) {
    print_warning(detail::concat("the tuned table names ", backend_name(line.backend), " (", line.name, ") for ",
                                 to_string(key), ", but ", why, "; running the native kernel"));
  }
  return nullptr;
}

const KernelEntry& select_kernel(const NormKey& key, const void* args, bool general_only) {
  t_selected_from_table = false;
  t_table_line = nullptr;
  if (general_only) return kernel_registry().get_kernel(key.general(), ArchFamily::kAny, args);
  const BackendChoice choice = backend_choice(is_backward(key.stage));
  if (choice.request == BackendRequest::kCudnn) return cudnn_kernel(key, args, choice.source);
  const ArchFamily arch = current_arch_family();
  if (choice.request == BackendRequest::kAuto) {
    if (const TunedBackendLine* line = kernel_registry().tuned_backend(key, arch)) {
      const KernelEntry* e = table_backend_kernel(*line, key, args);
      t_table_line = line;
      if (e != nullptr) {
        t_selected_from_table = true;
        return *e;
      }
    }
  }
  return kernel_registry().get_kernel(key, arch, args);
}

std::optional<size_t> table_backend_workspace(const NormKey& key, const void* args) {
  const TunedBackendLine* line = t_table_line;
  if (line == nullptr) return std::nullopt;
  // The line's backend's need for the key and row count (its plan's: the data is not looked
  // at), 0 where it has none for the key or cannot say: its library missing, or a plan it
  // cannot build for this shape (remembered per shape: then neither call runs it).
  size_t backend = 0;
  std::string why;
  if (const KernelEntry* e = kernel_registry().select_backend(key, line->backend, args).general_candidate;
      e != nullptr && e->workspace_bytes != nullptr && cudnn_library(&why) != nullptr) {
    try {
      backend = e->workspace_bytes(args);
    } catch (const Error&) {
      backend = 0;
    }
  }
  return backend;
}

const KernelEntry& cudnn_kernel(const NormKey& key, const void* args, const char* source) {
  std::string why;
  const KernelEntry* entry = usable_backend_entry(key, Backend::kCudnn, args, &why);
  if (entry == nullptr) NORMTUNE_ERROR(source, " asks for the cuDNN backend, but ", why);
#ifdef NORMTUNE_WITH_CUDNN
  set_cudnn_call_source(source);
#endif
  return *entry;
}

bool is_size_query(NVTETensor workspace) {
  return const_tensor_from_handle(workspace, "workspace").data.numel() == 0;
}

bool workspace_protocol(NVTETensor workspace, size_t bytes_needed) {
  Tensor& ws = tensor_from_handle(workspace, "workspace");
  // Every size handed out is at least one byte, so that an exactly allocated workspace is
  // never mistaken for a query.
  const Shape needed{bytes_needed > 0 ? bytes_needed : 1};
  if (ws.data.numel() == 0) {
    ws.data.shape = needed;
    ws.data.dtype = DType::kByte;
    return true;
  }
  NORMTUNE_CHECK_ARG(ws.data.shape == needed && ws.data.dtype == DType::kByte, "workspace",
                     detail::concat("the shape ", needed.str(), " and dtype byte given by the size query"),
                     detail::concat("shape ", ws.data.shape.str(), " dtype ", dtype_name(ws.data.dtype)));
  NORMTUNE_CHECK_ARG(ws.data.dptr != nullptr, "workspace",
                     detail::concat("a device pointer to ", needed.str(), " bytes"), "NULL");
  NORMTUNE_CHECK_ARG(reinterpret_cast<uintptr_t>(ws.data.dptr) % 16 == 0, "workspace",
                     "a pointer aligned to 16 bytes", ws.data.dptr);
  return false;
}

void check_call_data(const CallSpec& spec, const CheckedCall& call, NVTETensor workspace_handle) {
  const BasicTensor& workspace = const_tensor_from_handle(workspace_handle, "workspace").data;
  for (const ArgSpec& a : spec.args) {
    const BasicTensor& t = call[a.slot];
    NORMTUNE_CHECK_ARG(t.dptr != nullptr || t.numel() == 0, a.name,
                       detail::concat("a device pointer to ", t.numel(), " elements"), "NULL");
    const size_t align = dtype_storage_bytes(t.dtype, 1);
    NORMTUNE_CHECK_ARG(reinterpret_cast<uintptr_t>(t.dptr) % align == 0, a.name,
                       detail::concat("a pointer aligned to its ", align, "-byte elements"), t.dptr);
  }
  // Every output against every input and every other output (each pair once), and against
  // the workspace; an output may be exactly the input its row names (in place), but not a
  // shifted view of it.
  const auto args = spec.args;
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgSpec& out = args[i];
    if (out.role != Role::kOut) continue;
    const BasicTensor& o = call[out.slot];
    for (size_t j = 0; j < args.size(); ++j) {
      const ArgSpec& other = args[j];
      if (j == i || (other.role == Role::kOut && j < i)) continue;
      const BasicTensor& t = call[other.slot];
      if ((out.may_alias >> other.slot & 1) != 0 && o.dptr == t.dptr) continue;
      expect_no_overlap(o, out.name, t, other.name);
    }
    expect_no_overlap(o, out.name, workspace, "workspace");
  }
  // The workspace is written too (the backward's partials): no input may share it either.
  for (const ArgSpec& in : args) {
    if (in.role == Role::kIn) expect_no_overlap(workspace, "workspace", call[in.slot], in.name);
  }
  if (!is_backward(spec.stage)) {
    check_output_scale_data(spec, call, *call.by_slot[arg_with_rule(spec, DTypeRule::kOutputType).slot]);
  }
}

void run_kernel(const KernelEntry& entry, const void* args, cudaStream_t stream) {
  t_last_kernel = &entry;
  t_last_kernel_from_table = t_selected_from_table;
  entry.run(args, stream);
}

}  // namespace normtune
