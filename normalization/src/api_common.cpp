#include "api_common.h"

#include <limits>

#include <normtune/common/device_info.h>
#include <normtune/normtune.h>

namespace normtune {

namespace {
thread_local const KernelEntry* t_last_kernel = nullptr;
}

KernelChoice last_kernel() {
  if (t_last_kernel == nullptr) return {};
  return {t_last_kernel->name, !t_last_kernel->is_general()};
}

const BasicTensor& checked_buffer(NVTETensor handle, const char* arg, const Shape& shape,
                                  const char* shape_text) {
  const Tensor& t = const_tensor_from_handle(handle, arg);
  NORMTUNE_CHECK_ARG(t.scaling_mode == NVTE_DELAYED_TENSOR_SCALING, arg,
                     "an unquantized tensor (NVTE_DELAYED_TENSOR_SCALING)",
                     scaling_mode_name(static_cast<int>(t.scaling_mode)));
  NORMTUNE_CHECK_ARG(t.data.shape == shape, arg, detail::concat("shape ", shape_text, " = ", shape.str()),
                     detail::concat("shape ", t.data.shape.str()));
  return t.data;
}

RowsHidden checked_rows_hidden(NVTETensor handle, int multiprocessorCount) {
  const Tensor& x = const_tensor_from_handle(handle, "x");
  NORMTUNE_CHECK_ARG(x.data.ndim() == 2, "x", "a 2-D tensor [rows, hidden] (flatten leading dims)",
                     detail::concat("shape ", x.data.shape.str()));
  const size_t rows = x.data.shape[0];
  const size_t hidden = x.data.shape[1];
  NORMTUNE_CHECK_ARG(hidden >= 1 && hidden <= kMaxHiddenSize, "x",
                     detail::concat("a hidden size (last dim) in [1, ", kMaxHiddenSize, "]"), hidden);
  NORMTUNE_CHECK_ARG(rows <= static_cast<size_t>(std::numeric_limits<int64_t>::max() / hidden),
                     "x", "fewer rows", rows);
  NORMTUNE_CHECK_ARG(multiprocessorCount >= 0, "multiprocessorCount", "a count >= 0 (0: all SMs)",
                     multiprocessorCount);
  return {rows, hidden};
}

void expect_gamma_dtype(const BasicTensor& gamma, DType x_dtype) {
  NORMTUNE_CHECK_ARG(gamma.dtype == x_dtype || gamma.dtype == DType::kFloat32, "gamma",
                     detail::concat("dtype ", dtype_name(x_dtype), " (x's) or fp32"),
                     dtype_name(gamma.dtype));
}

void expect_dtype(const BasicTensor& t, const char* arg, DType expected) {
  NORMTUNE_CHECK_ARG(t.dtype == expected, arg, detail::concat("dtype ", dtype_name(expected)),
                     dtype_name(t.dtype));
}

void expect_wide_float(const BasicTensor& t, const char* arg) {
  NORMTUNE_CHECK_ARG(is_wide_float(t.dtype), arg, "dtype fp32, fp16 or bf16", dtype_name(t.dtype));
}

void expect_data(const BasicTensor& t, const char* arg) {
  NORMTUNE_CHECK_ARG(t.dptr != nullptr || t.numel() == 0, arg,
                     detail::concat("a device pointer to ", t.numel(), " elements"), "NULL");
}

void expect_no_overlap(const BasicTensor& out, const char* out_arg, const BasicTensor& in,
                       const char* in_arg) {
  const auto a = reinterpret_cast<uintptr_t>(out.dptr);
  const auto b = reinterpret_cast<uintptr_t>(in.dptr);
  const bool overlap = a != 0 && b != 0 && a < b + in.size_bytes() && b < a + out.size_bytes();
  NORMTUNE_CHECK_ARG(!overlap || out.size_bytes() == 0 || in.size_bytes() == 0, out_arg,
                     detail::concat("memory separate from '", in_arg, "'"), "overlapping buffers");
}

bool workspace_query(NVTETensor workspace, size_t bytes_needed) {
  Tensor& ws = tensor_from_handle(workspace, "workspace");
  const Shape needed{bytes_needed};
  // A workspace without memory that is not yet the query's answer (shape, dtype byte) is the
  // size query. With 0 bytes needed, the answer itself, [0] bytes without memory, is a
  // valid second call.
  if (ws.data.dptr == nullptr && !(ws.data.shape == needed && ws.data.dtype == DType::kByte)) {
    ws.data.shape = needed;
    ws.data.dtype = DType::kByte;
    return true;
  }
  NORMTUNE_CHECK_ARG(ws.data.shape == needed && ws.data.dtype == DType::kByte, "workspace",
                     detail::concat("the shape ", needed.str(),
                                    " and dtype byte given by the size query"),
                     detail::concat("shape ", ws.data.shape.str(), " dtype ", dtype_name(ws.data.dtype)));
  expect_data(ws.data, "workspace");
  return false;
}

const KernelEntry& select_kernel(const NormKey& key, const void* args, bool general_only) {
  return general_only ? kernel_registry().get_kernel(key.general(), ArchFamily::kAny, args)
                      : kernel_registry().get_kernel(key, current_arch_family(), args);
}

void run_kernel(const KernelEntry& entry, const void* args, cudaStream_t stream) {
  t_last_kernel = &entry;
  entry.run(args, stream);
}

void run_selected(const NormKey& key, const void* args, cudaStream_t stream, bool general_only) {
  run_kernel(select_kernel(key, args, general_only), args, stream);
}

void expect_workspace_aligned(NVTETensor workspace) {
  const Tensor& ws = const_tensor_from_handle(workspace, "workspace");
  NORMTUNE_CHECK_ARG(reinterpret_cast<uintptr_t>(ws.data.dptr) % 16 == 0, "workspace",
                     "a pointer aligned to 16 bytes", ws.data.dptr);
}

}  // namespace normtune
