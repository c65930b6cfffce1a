// TransformerEngine-compatible tensor API: the types and nvte_* tensor functions of
// TransformerEngine 2.18's transformer_engine.h, with the same names, struct layouts, enum
// values and semantics, so a framework built against TE's header can link normtune.
//
// An NVTETensor is a handle to a small descriptor (pointers, shapes, dtypes). It does not own
// the memory it points to. Functions report errors by throwing (like TE, whose nvte_*
// functions throw std::runtime_error); the exception is normtune::Error, derived from
// std::runtime_error, and its message names the argument, the expected and the actual value.
//
// Where normtune differs from TE (all stricter, never for a correct program):
//   - A handle that is not NULL but was never created, or was already destroyed, is an error
//     in every function. TE treats such values as indices into its table and may read a
//     stale or unrelated tensor.
//   - nvte_create_tensor rejects scaling modes that are not NVTEScalingMode values, including
//     NVTE_INVALID_SCALING.
//   - Setting a parameter rejects dtype values outside NVTEDType, shapes with more than 15
//     dimensions and shapes whose element count overflows size_t.
// Like TE, a NULL handle is accepted by the getters that TE documents as tolerant of it
// (they return the values of an empty tensor; see each function) and rejected by the others.
//
// This header is valid C (C11) and C++.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <normtune/common/platform.h>  // cudaStream_t

#ifdef __cplusplus
extern "C" {
#endif

/*! \enum NVTEDType
 *  \brief Element type. Values equal normtune::DType (checked below).
 */
enum NVTEDType {
  kNVTEByte = 0,        /*!< Byte */
  kNVTEInt16 = 1,       /*!< 16-bit integer */
  kNVTEInt32 = 2,       /*!< 32-bit integer */
  kNVTEInt64 = 3,       /*!< 64-bit integer */
  kNVTEFloat32 = 4,     /*!< 32-bit float */
  kNVTEFloat16 = 5,     /*!< 16-bit float (E5M10) */
  kNVTEBFloat16 = 6,    /*!< 16-bit bfloat (E8M7) */
  kNVTEFloat8E4M3 = 7,  /*!< 8-bit float (E4M3) */
  kNVTEFloat8E5M2 = 8,  /*!< 8-bit float (E5M2) */
  kNVTEFloat8E8M0 = 9,  /*!< 8-bit exponent-only scale (E8M0) */
  kNVTEFloat4E2M1 = 10, /*!< 4-bit float (E2M1), two elements per byte */
  kNVTENumTypes         /*!< Number of types */
};

/*! \struct NVTEShape
 *  \brief Shape of a tensor: ndim (at most 15) valid entries in data.
 */
struct NVTEShape {
  size_t data[15]; /*!< Dimension sizes, outermost first; entries past ndim are unspecified. */
  size_t ndim;     /*!< Number of dimensions. */
};

/*! \struct NVTEBasicTensor
 *  \brief One buffer of a tensor (data, scale, amax, ...). It does not own its memory.
 */
struct NVTEBasicTensor {
  void* data_ptr;         /*!< Device pointer to the buffer (may be NULL). */
  enum NVTEDType dtype;   /*!< Element type. */
  struct NVTEShape shape; /*!< Shape of the buffer. */
};

/*! \enum NVTETensorParam
 *  \brief The parameter of a tensor that nvte_set_tensor_param_v2 and
 *  nvte_get_tensor_param_v2 access, and the type of their buffer.
 */
enum NVTETensorParam {
  kNVTERowwiseData = 0,            /*!< NVTEBasicTensor: data in row-major order */
  kNVTEColumnwiseData = 1,         /*!< NVTEBasicTensor: data usable column-wise */
  kNVTEScale = 2,                  /*!< NVTEBasicTensor: FP8 scale (fp32) */
  kNVTEAmax = 3,                   /*!< NVTEBasicTensor: absolute maximum (fp32) */
  kNVTERowwiseScaleInv = 4,        /*!< NVTEBasicTensor: scale inverse of row-wise data */
  kNVTEColumnwiseScaleInv = 5,     /*!< NVTEBasicTensor: scale inverse of column-wise data */
  kNVTEColumnwiseAmax = 6,         /*!< NVTEBasicTensor: absolute maximum of column-wise data */
  kNVTEWithGEMMSwizzledScales = 7, /*!< uint8_t (bool): scales are in GEMM-swizzled layout */
  kNVTERowScaledNVFP4 = 8,         /*!< uint8_t (bool): NVFP4 row scaling instead of tensor */
  kNVTENVFP4E4M3Max = 9,           /*!< int: NVFP4 global E4M3 scale bound, 448 or 256 */
  kNVTENumTensorParams
};

/*! \enum NVTEScalingMode
 *  \brief How a (possibly quantized) tensor is scaled.
 */
enum NVTEScalingMode {
  /*! Unquantized, or FP8 with one scale per tensor (the name is historical). */
  NVTE_DELAYED_TENSOR_SCALING = 0,
  /*! MXFP8: one E8M0 scale per 32 consecutive elements, row-wise or column-wise. */
  NVTE_MXFP8_1D_SCALING = 1,
  /*! One scale per 1xN block. */
  NVTE_BLOCK_SCALING_1D = 2,
  /*! One scale per NxN block. */
  NVTE_BLOCK_SCALING_2D = 3,
  /*! NVFP4: one E4M3 scale per 16 consecutive elements. */
  NVTE_NVFP4_1D_SCALING = 4,
  /*! Marker for an invalid mode; rejected by nvte_create_tensor. */
  NVTE_INVALID_SCALING = 100,
  /*! normtune's, not TransformerEngine's (a value outside TE's range): MXFP4, e2m1 data
   *  (kNVTEFloat4E2M1, two per byte, the even element in the low nibble) with one E8M0 scale
   *  per 32 consecutive elements of a row, the row-wise scale tensor shaped as MXFP8's. */
  NVTE_NORMTUNE_MXFP4_1D_SCALING = 200
};

#ifndef __cplusplus
typedef enum NVTEDType NVTEDType;
typedef struct NVTEShape NVTEShape;
typedef struct NVTEBasicTensor NVTEBasicTensor;
typedef enum NVTETensorParam NVTETensorParam;
typedef enum NVTEScalingMode NVTEScalingMode;
#endif

/*! \brief Handle to a tensor descriptor. NULL is never a valid tensor. */
typedef void* NVTETensor;

/*! \brief Create an empty tensor: every buffer unset (NULL pointer, shape [0], fp32),
 *  flags false, NVFP4 E4M3 bound 448.
 *
 *  Thread-safe. About a million tensors may be alive at once.
 *  \param[in] scaling_mode One of the NVTEScalingMode values other than
 *                          NVTE_INVALID_SCALING; anything else is an error.
 *  \return A new handle, never NULL. Destroy it with nvte_destroy_tensor.
 */
NVTETensor nvte_create_tensor(NVTEScalingMode scaling_mode);

/*! \brief Create N tensors with the same scaling mode (nvte_create_tensor N times).
 *
 *  On error no tensor is created and tensors[] is not written.
 *  \param[out] tensors Array of N handles; may be NULL only when N == 0.
 */
void nvte_create_tensors(NVTEScalingMode scaling_mode, NVTETensor* tensors, size_t N);

/*! \brief Destroy a tensor. The memory it points to is not freed.
 *
 *  Thread-safe. NULL is a no-op (as in TE). A handle that was never created or is already
 *  destroyed is an error.
 */
void nvte_destroy_tensor(NVTETensor tensor);

/*! \brief Destroy N tensors; NULL entries are skipped.
 *
 *  All entries are checked first (valid, no handle listed twice); on error none is destroyed.
 */
void nvte_destroy_tensors(NVTETensor* tensors, size_t N);

/*! \brief Pointer to the row-wise data; NULL for a NULL handle. */
void* nvte_tensor_data(const NVTETensor tensor);

/*! \brief Pointer to the column-wise data; NULL for a NULL handle. */
void* nvte_tensor_columnwise_data(const NVTETensor tensor);

/*! \brief Build a shape from ndim sizes.
 *
 *  \param[in] data Sizes, outermost first. If NULL, the ndim entries are zero (as in TE).
 *  \param[in] ndim Number of dimensions, at most 15; more is an error.
 */
NVTEShape nvte_make_shape(const size_t* data, size_t ndim);

/*! \brief Logical shape of the tensor.
 *
 *  The row-wise data shape. When the tensor has no row-wise data but has column-wise data
 *  (see "unset" at nvte_create_tensor) the shape comes from the column-wise data: for
 *  NVTE_MXFP8_1D_SCALING it is that shape; for the other modes the column-wise data is the
 *  transpose, so its first dimension moves to the end ([K, M, N] -> [M, N, K]).
 *  A NULL handle is an error (as in TE).
 */
NVTEShape nvte_tensor_shape(const NVTETensor tensor);

/*! \brief Shape of the column-wise data, as set. A NULL handle is an error. */
NVTEShape nvte_tensor_columnwise_shape(const NVTETensor tensor);

/*! \brief Number of dimensions of the logical shape. A NULL handle is an error. */
size_t nvte_tensor_ndims(const NVTETensor tensor);

/*! \brief Size of dimension dim of the logical shape; dim >= ndims is an error, as is a NULL
 *  handle.
 */
size_t nvte_tensor_size(const NVTETensor tensor, const size_t dim);

/*! \brief Bytes of the logical shape's elements: ceil(numel * element_size_bits / 8);
 *  0 for a NULL handle.
 */
size_t nvte_tensor_size_bytes(const NVTETensor tensor);

/*! \brief Number of elements: the product of the logical shape (1 for ndim 0). A NULL handle
 *  is an error.
 */
size_t nvte_tensor_numel(const NVTETensor tensor);

/*! \brief Bytes per element of the tensor's dtype; 4 (fp32) for a NULL handle.
 *
 *  FP4 (kNVTEFloat4E2M1) has no whole byte size: it is an error, as in TE; use
 *  nvte_tensor_element_size_bits.
 */
size_t nvte_tensor_element_size(const NVTETensor tensor);

/*! \brief Bits per element of the tensor's dtype (4 for FP4); 32 for a NULL handle. */
size_t nvte_tensor_element_size_bits(const NVTETensor tensor);

/*! \brief Element type: of the row-wise data, or of the column-wise data when only that is
 *  set; kNVTEFloat32 for a NULL handle.
 */
NVTEDType nvte_tensor_type(const NVTETensor tensor);

/*! \brief Pointer to the amax buffer; NULL for a NULL handle. Amax of a dtype other than
 *  fp32 is an error.
 */
float* nvte_tensor_amax(const NVTETensor tensor);

/*! \brief Pointer to the scale buffer; NULL for a NULL handle. A scale of a dtype other than
 *  fp32 is an error.
 */
float* nvte_tensor_scale(const NVTETensor tensor);

/*! \brief Pointer to the row-wise scale-inverse buffer (whatever its dtype, as in TE);
 *  NULL for a NULL handle.
 */
float* nvte_tensor_scale_inv(const NVTETensor tensor);

/*! \brief Shape of the row-wise scale-inverse buffer; [0] for a NULL handle. */
NVTEShape nvte_tensor_scale_inv_shape(const NVTETensor tensor);

/*! \brief Set the row-wise data and amax buffers to zero (cudaMemsetAsync on stream).
 *
 *  Buffers with a NULL pointer or no bytes are skipped; a NULL handle is a no-op.
 */
void nvte_zero_tensor(const NVTETensor tensor, cudaStream_t stream);

/*! \brief Set one buffer of the tensor (deprecated in TE in favor of
 *  nvte_set_tensor_param_v2).
 *
 *  \param[in,out] tensor     Pointer to the handle; NULL, or a pointer to a NULL handle, is
 *                            an error.
 *  \param[in]     param_name kNVTERowwiseData .. kNVTEColumnwiseAmax; the flag parameters
 *                            need nvte_set_tensor_param_v2.
 *  \param[in]     param      The buffer; NULL is an error. Validated as in
 *                            nvte_set_tensor_param_v2.
 */
void nvte_set_tensor_param(NVTETensor* tensor, NVTETensorParam param_name,
                           const NVTEBasicTensor* param);

/*! \brief Get one buffer of the tensor (deprecated in TE in favor of
 *  nvte_get_tensor_param_v2).
 *
 *  For a NULL handle returns an unset buffer {NULL, kNVTEFloat32, [0]}.
 *  \param[in] param_name kNVTERowwiseData .. kNVTEColumnwiseAmax.
 */
NVTEBasicTensor nvte_get_tensor_param(const NVTETensor tensor, NVTETensorParam param_name);

/*! \brief Set a tensor parameter from a buffer.
 *
 *  buf holds an NVTEBasicTensor for kNVTERowwiseData .. kNVTEColumnwiseAmax, a uint8_t
 *  (0 = false, anything else = true) for kNVTEWithGEMMSwizzledScales and
 *  kNVTERowScaledNVFP4, and an int (448 or 256) for kNVTENVFP4E4M3Max.
 *  Errors: a NULL or invalid handle, an unknown param, a NULL buf, size_in_bytes smaller than
 *  the parameter's type (the message names the parameter, the needed and the given size),
 *  a dtype outside NVTEDType, a shape with more than 15 dimensions or an element count that
 *  overflows size_t, an NVFP4 bound other than 448 or 256. On error the tensor is unchanged.
 *  A NULL data pointer with a non-empty shape is accepted (the workspace query of the
 *  normalization functions passes one); functions that read or write the buffer check it.
 */
void nvte_set_tensor_param_v2(NVTETensor tensor, NVTETensorParam param, const void* buf,
                              size_t size_in_bytes);

/*! \brief Query a tensor parameter into a buffer (types as in nvte_set_tensor_param_v2).
 *
 *  \param[out] buf           Where to write the value. If NULL, nothing is written to it and
 *                            only *size_written is set.
 *  \param[in]  size_in_bytes Size of buf; smaller than the parameter's type is an error
 *                            naming the parameter, the needed and the given size.
 *  \param[out] size_written  If not NULL, receives the size of the parameter's type (the
 *                            bytes written to buf, or that would be written when buf is
 *                            NULL).
 *  A NULL handle reads the values of an empty tensor (as in TE). On error nothing is
 *  written.
 */
void nvte_get_tensor_param_v2(const NVTETensor tensor, NVTETensorParam param, void* buf,
                              size_t size_in_bytes, size_t* size_written);

/*! \brief Scaling mode the tensor was created with; NVTE_DELAYED_TENSOR_SCALING for a NULL
 *  handle.
 */
NVTEScalingMode nvte_tensor_scaling_mode(const NVTETensor tensor);

#ifdef __cplusplus
}  // extern "C"

// ---- C++ only: the C types match TE's ABI and normtune's DType -------------------------
#include <cstddef>

#include <normtune/common/dtype.h>

static_assert(kNVTENumTypes == normtune::kNumDTypes, "NVTEDType and normtune::DType differ");
#define NORMTUNE_SAME_DTYPE_(nvte, nt) \
  static_assert(static_cast<int>(nvte) == static_cast<int>(nt), #nvte " differs from " #nt)
NORMTUNE_SAME_DTYPE_(kNVTEByte, normtune::DType::kByte);
NORMTUNE_SAME_DTYPE_(kNVTEInt16, normtune::DType::kInt16);
NORMTUNE_SAME_DTYPE_(kNVTEInt32, normtune::DType::kInt32);
NORMTUNE_SAME_DTYPE_(kNVTEInt64, normtune::DType::kInt64);
NORMTUNE_SAME_DTYPE_(kNVTEFloat32, normtune::DType::kFloat32);
NORMTUNE_SAME_DTYPE_(kNVTEFloat16, normtune::DType::kFloat16);
NORMTUNE_SAME_DTYPE_(kNVTEBFloat16, normtune::DType::kBFloat16);
NORMTUNE_SAME_DTYPE_(kNVTEFloat8E4M3, normtune::DType::kFloat8E4M3);
NORMTUNE_SAME_DTYPE_(kNVTEFloat8E5M2, normtune::DType::kFloat8E5M2);
NORMTUNE_SAME_DTYPE_(kNVTEFloat8E8M0, normtune::DType::kFloat8E8M0);
NORMTUNE_SAME_DTYPE_(kNVTEFloat4E2M1, normtune::DType::kFloat4E2M1);
#undef NORMTUNE_SAME_DTYPE_

// TE's layouts: enums are int-sized; NVTEShape is 15 sizes and a count; NVTEBasicTensor is
// pointer, enum, shape in that order with natural alignment.
static_assert(sizeof(NVTEDType) == sizeof(int) && sizeof(NVTETensorParam) == sizeof(int) &&
                  sizeof(NVTEScalingMode) == sizeof(int),
              "NVTE enums must be int-sized as in TE's C ABI");
static_assert(sizeof(NVTEShape) == 16 * sizeof(size_t), "NVTEShape layout differs from TE");
static_assert(offsetof(NVTEShape, data) == 0, "NVTEShape layout differs from TE");
static_assert(offsetof(NVTEShape, ndim) == 15 * sizeof(size_t), "NVTEShape layout differs from TE");
static_assert(offsetof(NVTEBasicTensor, data_ptr) == 0, "NVTEBasicTensor layout differs from TE");
static_assert(offsetof(NVTEBasicTensor, dtype) == sizeof(void*),
              "NVTEBasicTensor layout differs from TE");
static_assert(offsetof(NVTEBasicTensor, shape) ==
                  (sizeof(void*) + sizeof(int) + alignof(NVTEShape) - 1) / alignof(NVTEShape) *
                      alignof(NVTEShape),
              "NVTEBasicTensor layout differs from TE");
static_assert(sizeof(NVTEBasicTensor) == offsetof(NVTEBasicTensor, shape) + sizeof(NVTEShape),
              "NVTEBasicTensor layout differs from TE");
static_assert(sizeof(NVTETensor) == sizeof(void*), "NVTETensor is a pointer-sized handle");
static_assert(kNVTEWithGEMMSwizzledScales == 7 && kNVTENVFP4E4M3Max == 9 &&
                  kNVTENumTensorParams == 10 && NVTE_NVFP4_1D_SCALING == 4 &&
                  NVTE_INVALID_SCALING == 100 && NVTE_NORMTUNE_MXFP4_1D_SCALING > NVTE_INVALID_SCALING,
              "NVTE enum values differ from TE 2.18");
#endif  // __cplusplus
