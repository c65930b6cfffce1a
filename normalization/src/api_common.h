// Checks and helpers shared by the nvte_* normalization entry points: argument validation
// with messages that name the argument, the workspace protocol, kernel selection.
#pragma once

#include <cstdint>
#include <string>

#include <normtune/common/error.h>
#include <normtune/normalization.h>
#include <normtune/registry/registry.h>

#include "tensor_impl.h"

namespace normtune {

// A handle's row-wise buffer, checked: a valid handle, unquantized, of the given shape
// (`shape_text` names it in the message: "[rows, hidden]"). Dtypes are checked by the caller.
const BasicTensor& checked_buffer(NVTETensor handle, const char* arg, const Shape& shape,
                                  const char* shape_text);

// x's [rows, hidden] after the checks every entry point makes: a valid handle, 2-D, a hidden
// size in [1, kMaxHiddenSize], rows x hidden within int64; and multiprocessorCount >= 0.
struct RowsHidden {
  size_t rows, hidden;
};
RowsHidden checked_rows_hidden(NVTETensor x, int multiprocessorCount);

// gamma's dtype: x's, or fp32.
void expect_gamma_dtype(const BasicTensor& gamma, DType x_dtype);

void expect_dtype(const BasicTensor& t, const char* arg, DType expected);
void expect_wide_float(const BasicTensor& t, const char* arg);
// Data must be present (non-null) when the tensor has elements.
void expect_data(const BasicTensor& t, const char* arg);
// `out` may not share memory with `in` (except where an API documents in-place use).
void expect_no_overlap(const BasicTensor& out, const char* out_arg, const BasicTensor& in,
                       const char* in_arg);

// TransformerEngine's two-call workspace protocol. Returns true when this call was the
// size query (the workspace's shape and dtype were set; nothing else may happen).
bool workspace_query(NVTETensor workspace, size_t bytes_needed);

// The entry for `key` on the current device (tuned, else general; reports a fallback once).
// general_only: skip tuned entries (the autotuner times the general kernel's layouts).
const KernelEntry& select_kernel(const NormKey& key, const void* args, bool general_only = false);

// Runs `entry` and records it for last_kernel().
void run_kernel(const KernelEntry& entry, const void* args, cudaStream_t stream);

// select_kernel + run_kernel.
void run_selected(const NormKey& key, const void* args, cudaStream_t stream,
                  bool general_only = false);

// A workspace given for the real call must start at a 16-byte boundary (vector access).
void expect_workspace_aligned(NVTETensor workspace);

}  // namespace normtune
