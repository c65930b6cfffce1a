// Kernels compiled under a tightened register budget, instantiated for tools/sass.sh (CI runs
// `tools/sass.sh tests/sass/register_budgets.cu --max-spill 8 --smem-align 128`): the budgets
// were chosen where ptxas fitted them with no spills (or a few bytes outside the loops), and
// this keeps it so. The same run checks that their static shared memory is padded to 128 bytes,
// so that the dynamic shared memory after it (the ring or slices) starts aligned
// (kDynamicSmemAlign, kernels/vec.cuh).
//  - staged forward, tuned RMSNorm of up to 4 vectors per thread: 40 registers
//    (kStagedMinBlocks, kernels/norm_fwd_staged.cuh);
//  - pipelined forward, plain norm of up to 4 vectors per thread with weights as wide as x: 64
//    registers (kPipelinedMinBlocks, kernels/norm_fwd_pipelined.cuh); a tuned cluster line
//    with dynamic_rows (the ticket exchange) beside it;
//  - register forward, tuned RMSNorm lines of 1 or 2 vectors per thread with an unscaled z of 16
//    or 32 bits: 40 registers (kFwdMinBlocks, kernels/norm_fwd.cuh);
//  - pipelined backward, 2 and 4 vectors per thread, one 512-thread CTA per SM: 128 registers
//    (kernels/norm_bwd_pipelined.cuh).
#include "kernels/norm_bwd_pipelined.cuh"
#include "kernels/norm_fwd_pipelined.cuh"
#include "kernels/norm_fwd_staged.cuh"

namespace normtune {

template <NormType kNorm, typename W, typename I, typename O>
using Fwd = FwdTraits<W, I, O, kNorm, Stage::kForward>;

// Staged, the shapes of sm90.def's RMSNorm lines (bf16 h1536/h4096/h7168, FP8 z, fp32).
template __global__ void norm_fwd_staged_kernel<Fwd<NormType::kRMSNorm, bf16_t, bf16_t, bf16_t>, FwdShape<8, 3, 1536, 64, 1>>(const FwdParams);
template __global__ void norm_fwd_staged_kernel<Fwd<NormType::kRMSNorm, bf16_t, bf16_t, bf16_t>, FwdShape<8, 4, 4096, 128, 1>>(const FwdParams);
template __global__ void norm_fwd_staged_kernel<Fwd<NormType::kRMSNorm, bf16_t, bf16_t, bf16_t>, FwdShape<8, 4, 7168, 224, 1>>(const FwdParams);
template __global__ void norm_fwd_staged_kernel<Fwd<NormType::kRMSNorm, bf16_t, bf16_t, fp8e4m3_t>, FwdShape<8, 4, 7168, 128, 1>>(const FwdParams);
template __global__ void norm_fwd_staged_kernel<Fwd<NormType::kRMSNorm, float, float, float>, FwdShape<4, 4, 4096, 256, 1>>(const FwdParams);

// Pipelined, the general entry's 2- and 4-vector kernels.
template __global__ void norm_fwd_pipelined_kernel<Fwd<NormType::kRMSNorm, bf16_t, bf16_t, bf16_t>, FwdShape<8, 4>>(const FwdParams);
template __global__ void norm_fwd_pipelined_kernel<Fwd<NormType::kLayerNorm, bf16_t, bf16_t, bf16_t>, FwdShape<8, 4>>(const FwdParams);
template __global__ void norm_fwd_pipelined_kernel<Fwd<NormType::kLayerNorm, bf16_t, bf16_t, bf16_t>, FwdShape<8, 2>>(const FwdParams);
template __global__ void norm_fwd_pipelined_kernel<Fwd<NormType::kLayerNorm, fp16_t, fp16_t, fp16_t>, FwdShape<8, 4>>(const FwdParams);
template __global__ void norm_fwd_pipelined_kernel<Fwd<NormType::kLayerNorm, bf16_t, bf16_t, fp8e4m3_t>, FwdShape<8, 4>>(const FwdParams);
template __global__ void norm_fwd_pipelined_kernel<Fwd<NormType::kLayerNorm, float, float, float>, FwdShape<4, 4>>(const FwdParams);

// Pipelined, the tuned cluster lines drawing their rows (sm90.def's RMSNorm bf16 h65536, 4
// vectors on clusters of 4: 64 registers; h262144 on clusters of 16).
template __global__ void norm_fwd_pipelined_kernel<Fwd<NormType::kRMSNorm, bf16_t, bf16_t, bf16_t>,
                                                   FwdShape<8, 4, 65536, 512, 4, true>>(
    const FwdParams);
template __global__ void norm_fwd_pipelined_kernel<Fwd<NormType::kRMSNorm, bf16_t, bf16_t, bf16_t>,
                                                   FwdShape<8, 4, 262144, 512, 16, true>>(
    const FwdParams);

// Registers, tuned short RMSNorm rows at 40 registers (sm90.def's bf16 h128 and h256, fp32 h768).
template __global__ void norm_fwd_kernel<Fwd<NormType::kRMSNorm, bf16_t, bf16_t, bf16_t>,
                                         FwdShape<8, 2, 128, 8, 1>>(const FwdParams);
template __global__ void norm_fwd_kernel<Fwd<NormType::kRMSNorm, bf16_t, bf16_t, bf16_t>,
                                         FwdShape<8, 2, 256, 16, 1>>(const FwdParams);
template __global__ void norm_fwd_kernel<Fwd<NormType::kRMSNorm, float, float, float>,
                                         FwdShape<4, 2, 768, 96, 1>>(const FwdParams);

// Pipelined backward, the general entry's 2- and 4-vector kernels (LayerNorm: two row terms
// and dbeta; the added gradient: its slice in registers across the row's reduction).
template <NormType kNorm, typename T, Stage kStage = Stage::kBackward>
using Bwd = BwdTraits<T, T, kNorm, kStage>;
template __global__ void norm_bwd_pipelined_kernel<Bwd<NormType::kRMSNorm, bf16_t>, BwdShape<8, 4, 0, 0, true, 0, 1>>(const BwdParams);
template __global__ void norm_bwd_pipelined_kernel<Bwd<NormType::kLayerNorm, bf16_t>, BwdShape<8, 4, 0, 0, true, 0, 1>>(const BwdParams);
template __global__ void norm_bwd_pipelined_kernel<Bwd<NormType::kLayerNorm, bf16_t>, BwdShape<8, 2, 0, 0, true, 0, 1>>(const BwdParams);
template __global__ void norm_bwd_pipelined_kernel<Bwd<NormType::kRMSNorm, bf16_t, Stage::kBackwardAdd>, BwdShape<8, 4, 0, 0, true, 0, 1>>(const BwdParams);
template __global__ void norm_bwd_pipelined_kernel<Bwd<NormType::kLayerNorm, float>, BwdShape<4, 4, 0, 0, true, 0, 1>>(const BwdParams);
// The general kernel's row groups (counted at run time; 2 vectors per thread).
template __global__ void norm_bwd_pipelined_kernel<Bwd<NormType::kLayerNorm, bf16_t>, BwdShape<8, 2, 0, 0, true, 0, 0>>(const BwdParams);
template __global__ void norm_bwd_pipelined_kernel<Bwd<NormType::kLayerNorm, float>, BwdShape<4, 2, 0, 0, true, 0, 0>>(const BwdParams);
}  // namespace normtune
