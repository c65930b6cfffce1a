/* Normalization: TransformerEngine 2.18's forward and backward API (same names, argument
 * order and semantics), plus normtune's fused residual-add forward.
 *
 * Shapes: x is [N, H] (flatten leading dimensions first), gamma and beta are [H], mu and
 * rsigma are [N] fp32, z has x's shape. Types: x, gamma, beta, z in fp32, fp16 or bf16 with
 * gamma and beta of x's type or fp32, and z of x's type, or narrower when x is fp32
 * (fp32 -> bf16/fp16). Statistics and arithmetic are fp32.
 *
 * Backward: dz, x and dx share x's shape and dtype (fp32, fp16 or bf16), gamma is of x's
 * type or fp32, dgamma and dbeta have gamma's shape and dtype; mu and rsigma are the
 * forward's fp32 statistics. dx may be dz (or, for bwd_add, add) itself: in place.
 * dgamma/dbeta are reduced in two deterministic stages through the workspace (fp32 partial
 * rows, no atomics): the same inputs and multiprocessorCount give the same bits every run.
 *
 * Workspace (TransformerEngine 2.18's two-call protocol): a call whose workspace tensor has
 * no elements (numel() == 0: a freshly created tensor, or shape [0]) is the size query: it
 * checks the arguments, picks the kernel, sets the workspace's shape to [bytes] (bytes >= 1,
 * also for the forward calls, which need no scratch memory) and its dtype to byte, and
 * returns without launching anything or writing any output. Allocate exactly that (16-byte
 * aligned) and call again: the work runs, asynchronously on `stream`. A workspace of another
 * shape or dtype on the second call is an error. The size depends on the shapes, the dtypes,
 * the alignment of the data and multiprocessorCount (backward), so query again when any of
 * them changes.
 *
 * multiprocessorCount bounds the persistent grid (pass the SM count, or fewer to leave SMs
 * to other work; 0 means all SMs of the device).
 *
 * Errors are thrown as normtune::Error (a std::runtime_error) with a message naming the
 * argument, what was expected and what was given; a rejected call writes no output.
 */
#ifndef NORMTUNE_NORMALIZATION_H_
#define NORMTUNE_NORMALIZATION_H_

#include <stdbool.h>

#include <normtune/transformer_engine.h>

#ifdef __cplusplus
extern "C" {
#endif

/* LayerNorm forward:
 *   mu = mean(x), rsigma = 1 / sqrt(mean((x - mu)^2) + epsilon),
 *   z = (x - mu) * rsigma * g + beta,  g = gamma (+ 1 when zero_centered_gamma). */
void nvte_layernorm_fwd(const NVTETensor x, const NVTETensor gamma, const NVTETensor beta,
                        const float epsilon, NVTETensor z, NVTETensor mu, NVTETensor rsigma,
                        NVTETensor workspace, const int multiprocessorCount,
                        const bool zero_centered_gamma, cudaStream_t stream);

/* RMSNorm forward:
 *   rsigma = 1 / sqrt(mean(x^2) + epsilon),  z = x * rsigma * g,
 *   g = gamma (+ 1 when zero_centered_gamma). */
void nvte_rmsnorm_fwd(const NVTETensor x, const NVTETensor gamma, const float epsilon,
                      NVTETensor z, NVTETensor rsigma, NVTETensor workspace,
                      const int multiprocessorCount, const bool zero_centered_gamma,
                      cudaStream_t stream);

/* Fused residual add + RMSNorm forward (normtune's extension; one pass over memory):
 *   residual_out = x + residual            (added in fp32, stored in x's type)
 *   rsigma = 1 / sqrt(mean(residual_out^2) + epsilon),  z = residual_out * rsigma * g
 * The same bits as nvte_add + nvte_rmsnorm_fwd on residual_out. residual and residual_out
 * have x's shape and dtype; residual_out may be the same buffer as residual (in place). */
void normtune_rmsnorm_add_fwd(const NVTETensor x, const NVTETensor residual,
                              const NVTETensor gamma, const float epsilon, NVTETensor z,
                              NVTETensor residual_out, NVTETensor rsigma, NVTETensor workspace,
                              const int multiprocessorCount, const bool zero_centered_gamma,
                              cudaStream_t stream);

/* RMSNorm backward (with y = x * rsigma, dy = dz * g):
 *   dx = rsigma * (dy - y * mean(dy * y)),  dgamma = sum over rows of dz * y. */
void nvte_rmsnorm_bwd(const NVTETensor dz, const NVTETensor x, const NVTETensor rsigma,
                      const NVTETensor gamma, NVTETensor dx, NVTETensor dgamma,
                      NVTETensor workspace, const int multiprocessorCount,
                      const bool zero_centered_gamma, cudaStream_t stream);

/* RMSNorm backward with a gradient added: dx = (RMSNorm backward's dx) + add, summed in
 * fp32 and rounded once. add has x's shape and dtype. */
void nvte_rmsnorm_bwd_add(const NVTETensor dz, const NVTETensor x, const NVTETensor add,
                          const NVTETensor rsigma, const NVTETensor gamma, NVTETensor dx,
                          NVTETensor dgamma, NVTETensor workspace, const int multiprocessorCount,
                          const bool zero_centered_gamma, cudaStream_t stream);

/* LayerNorm backward (with y = (x - mu) * rsigma, dy = dz * g):
 *   dx = rsigma * (dy - mean(dy) - y * mean(dy * y)),
 *   dgamma = sum over rows of dz * y,  dbeta = sum over rows of dz. */
void nvte_layernorm_bwd(const NVTETensor dz, const NVTETensor x, const NVTETensor mu,
                        const NVTETensor rsigma, const NVTETensor gamma, NVTETensor dx,
                        NVTETensor dgamma, NVTETensor dbeta, NVTETensor workspace,
                        const int multiprocessorCount, const bool zero_centered_gamma,
                        cudaStream_t stream);

/* TransformerEngine's backend switches: enable routes the forward (backward) calls of the
 * whole process to the cuDNN backend, disable to normtune's kernels (even where the tuned
 * table names cuDNN). Until called, TE's variables NVTE_NORM_FWD_USE_CUDNN /
 * NVTE_NORM_BWD_USE_CUDNN (1: cuDNN) decide; when they do not ask for cuDNN,
 * NORMTUNE_BACKEND=auto|native|cudnn does (auto: the tuned table's choice per key, which may
 * be cuDNN: NORMTUNE_TUNED_CUDNN lines). A call routed to cuDNN runs there or raises
 * normtune::Error (no cuDNN in this build, libcudnn not found, or an unsupported call:
 * the fused-add forward and backward, quantized z, an amax of z); it never falls back
 * silently. */
void nvte_enable_cudnn_norm_fwd(bool enable);
void nvte_enable_cudnn_norm_bwd(bool enable);

/* TransformerEngine's switch for zero-centered gamma in gamma's dtype, with TE's meaning: on,
 * the cuDNN backend computes gamma + 1 in fp32 and rounds it to gamma's dtype before the norm
 * uses it (forward and backward), as TE's cuDNN graphs do; off (the default), it uses gamma + 1
 * in fp32. Until called, TE's variable NVTE_ZERO_CENTERED_GAMMA_IN_WTYPE (1: on) decides.
 * Only the cuDNN backend reads it (TE: "if CuDNN is not used, this setting has no effect"):
 * normtune's kernels always use gamma + 1 in fp32. For the whole process; a call that builds
 * a cuDNN plan takes the setting of that moment (plans of both settings are cached apart). */
void nvte_enable_zero_centered_gamma_in_weight_dtype(bool enable);

#ifdef __cplusplus
}  // extern "C"

#include <string>

namespace normtune {

/* The kernel the last normalization call of this thread ran (empty before any): tuned when a
 * tuned-table line chose it (a native tuned entry, or another backend the table names). */
struct KernelChoice {
  std::string name;
  bool tuned = false;
  std::string backend;  // "native", "cudnn"
};
KernelChoice last_kernel();

}  // namespace normtune
#endif

#endif  // NORMTUNE_NORMALIZATION_H_
