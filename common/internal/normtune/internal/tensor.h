// The C++ side of an NVTETensor handle: the descriptor it points to, and the lookup that
// the nvte_* functions use to turn a handle argument into a descriptor (or a clear error
// naming the argument).
//
// A Tensor mirrors TransformerEngine's: seven buffers, the scaling mode and three flags.
// A buffer is "unset" when its pointer is NULL and its shape is [0] (TE's convention);
// has_data() is false only then, so a buffer with a shape but a NULL pointer (the workspace
// query passes one) counts as set. Code that dereferences a buffer checks dptr itself.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include <normtune/common/dtype.h>
#include <normtune/transformer_engine.h>

namespace normtune {

inline constexpr size_t kMaxTensorDims = 15;  // NVTEShape::data holds 15 sizes

// Where a function was called from, captured by a default argument so that an error raised
// inside a helper names the C API function that called it. (std::source_location would do,
// but needs clang >= 15 under libstdc++; these builtins work in gcc, clang and nvcc.)
struct CallSite {
  const char* function;
  const char* file;
  int line;
  static constexpr CallSite current(const char* function = __builtin_FUNCTION(),
                                    const char* file = __builtin_FILE(),
                                    int line = __builtin_LINE()) {
    return {function, file, line};
  }
};

constexpr DType to_dtype(NVTEDType t) {
  return static_cast<DType>(t);
}
constexpr NVTEDType to_nvte_dtype(DType t) {
  return static_cast<NVTEDType>(t);
}

// Enumerator names for messages: "kNVTERowwiseData", "NVTE_MXFP8_1D_SCALING"; "unknown" for
// values outside the enum.
std::string_view tensor_param_name(int param);
std::string_view scaling_mode_name(int mode);
constexpr bool is_valid_scaling_mode(int mode) {
  return (mode >= 0 && mode <= 4) || mode == NVTE_NORMTUNE_MXFP4_1D_SCALING;
}

// A shape of at most kMaxTensorDims dimensions, stored inline (no allocation).
class Shape {
 public:
  constexpr Shape() = default;  // ndim 0: a scalar, numel 1
  Shape(std::initializer_list<size_t> dims);
  // Precondition: s.ndim <= kMaxTensorDims (the C API checks it before calling).
  static Shape from_nvte(const NVTEShape& s);
  NVTEShape to_nvte() const;

  size_t ndim() const { return ndim_; }
  bool empty() const { return ndim_ == 0; }
  size_t operator[](size_t i) const { return dims_[i]; }
  size_t& operator[](size_t i) { return dims_[i]; }
  const size_t* begin() const { return dims_.data(); }
  const size_t* end() const { return dims_.data() + ndim_; }
  size_t back() const { return dims_[ndim_ - 1]; }  // precondition: ndim > 0
  void push_back(size_t d);                         // error past kMaxTensorDims
  // Product of the sizes (1 for ndim 0).
  size_t numel() const;
  bool operator==(const Shape& other) const;
  // "[4, 4096]"
  std::string str() const;

 private:
  std::array<size_t, kMaxTensorDims> dims_{};
  size_t ndim_ = 0;
};

// A shape flattened to a matrix: [d0, ..., dn-2, dn-1] -> rows = d0*...*dn-2, cols = dn-1.
// A scalar (ndim 0) is 1 x 1.
struct Dims2D {
  size_t rows;
  size_t cols;
};
Dims2D flatten_2d(const Shape& shape);

// One buffer of a tensor. Defaults are TE's unset buffer: {NULL, fp32, [0]}.
struct BasicTensor {
  void* dptr = nullptr;
  DType dtype = DType::kFloat32;
  Shape shape{0};

  // False only for an unset buffer (NULL pointer and shape [0]).
  bool has_data() const { return !(dptr == nullptr && shape.ndim() == 1 && shape[0] == 0); }
  size_t ndim() const { return shape.ndim(); }
  size_t numel() const { return shape.numel(); }
  // ceil(numel * bits / 8): fp4 packs two elements per byte.
  size_t size_bytes() const { return dtype_storage_bytes(dtype, numel()); }
  Dims2D flat_2d() const { return flatten_2d(shape); }
  void clear() { *this = BasicTensor{}; }

  // Precondition for from_nvte: dtype and ndim valid (the C API checks them).
  static BasicTensor from_nvte(const NVTEBasicTensor& t);
  NVTEBasicTensor to_nvte() const;
};

struct Tensor {
  BasicTensor data;                  // kNVTERowwiseData
  BasicTensor columnwise_data;       // kNVTEColumnwiseData
  BasicTensor scale;                 // kNVTEScale
  BasicTensor amax;                  // kNVTEAmax
  BasicTensor scale_inv;             // kNVTERowwiseScaleInv
  BasicTensor columnwise_scale_inv;  // kNVTEColumnwiseScaleInv
  BasicTensor columnwise_amax;       // kNVTEColumnwiseAmax
  NVTEScalingMode scaling_mode = NVTE_DELAYED_TENSOR_SCALING;
  bool with_gemm_swizzled_scales = false;  // kNVTEWithGEMMSwizzledScales
  bool row_scaled_nvfp4 = false;           // kNVTERowScaledNVFP4
  int nvfp4_e4m3_max = 448;                // kNVTENVFP4E4M3Max

  bool has_data() const { return data.has_data(); }
  bool has_columnwise_data() const { return columnwise_data.has_data(); }
  // Only column-wise data is set: the logical shape and dtype come from it.
  bool columnwise_only() const { return !has_data() && has_columnwise_data(); }

  // dtype of the row-wise data, or of the column-wise data when only that is set.
  DType dtype() const { return columnwise_only() ? columnwise_data.dtype : data.dtype; }
  // Logical shape (what nvte_tensor_shape returns): the row-wise shape; when only
  // column-wise data is set, its shape, with the first dimension moved last except for
  // NVTE_MXFP8_1D_SCALING (whose column-wise data is not transposed).
  Shape shape() const;
  size_t ndim() const { return shape().ndim(); }
  size_t numel() const { return shape().numel(); }
  // Logical shape as a matrix: rows = product of all but the last dim, cols = last dim.
  Dims2D flat_2d() const { return flatten_2d(shape()); }
  size_t rows() const { return flat_2d().rows; }
  size_t last_dim() const { return flat_2d().cols; }

  // The buffer a parameter names; nullptr for the non-buffer parameters (flags) and
  // out-of-range values.
  BasicTensor* buffer(NVTETensorParam param);
  const BasicTensor* buffer(NVTETensorParam param) const;

  void clear() { *this = Tensor{}; }
};

// The descriptor behind a handle argument of a C API function. arg_name is the parameter's
// name in the C API ("x", "gamma"); it appears in the error. Errors:
//   argument 'x': expected a valid NVTETensor handle, got NULL
//   argument 'x': expected a valid NVTETensor handle, got 0x... (already destroyed)
//   argument 'x': expected a valid NVTETensor handle, got 0x... (not created by nvte_create_tensor)
// The error's location is the caller (the nvte_* function), not this function.
// Lookups take no lock. The reference stays valid until the handle is destroyed.
Tensor& tensor_from_handle(NVTETensor handle, const char* arg_name,
                           CallSite where = CallSite::current());
const Tensor& const_tensor_from_handle(NVTETensor handle, const char* arg_name,
                                       CallSite where = CallSite::current());
// For optional arguments: nullptr for a NULL handle; an invalid non-NULL handle is an error.
Tensor* tensor_from_handle_or_null(NVTETensor handle, const char* arg_name,
                                   CallSite where = CallSite::current());

// True for a live handle (never throws).
bool is_valid_tensor_handle(NVTETensor handle) noexcept;
// Number of handles created and not yet destroyed (for leak checks in tests).
size_t live_tensor_count() noexcept;
// How many handles may be alive at once.
size_t max_live_tensors() noexcept;

}  // namespace normtune
