// The pipelined forward kernel launched alone, for compute-sanitizer (tools/sanitizer_repro/run.sh). Case by argv[1].
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "kernels/norm_fwd_pipelined.cuh"
using namespace normtune;
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorName(e_)); return 1; } } while (0)

// Minimal isolating kernels: a 16 KiB ring of cp.async, wait_group kW, optional griddepcontrol.
template <int kW, bool kPdl>
__global__ void __launch_bounds__(512, 1) ring(const uint4* x, uint4* z, int rows, int n) {
  extern __shared__ uint4 sm[];
  const int t = threadIdx.x, S = 4;
  if (kPdl) platform::wait_for_prior_grid();
  auto issue = [&](int r, int s) { if (r < rows) for (int i = 0; i < n; ++i) platform::cp_async_16(&sm[(s * n + i) * blockDim.x + t], &x[(size_t)r * n * blockDim.x + i * blockDim.x + t]); platform::cp_async_commit(); };
  for (int s = 0; s < S; ++s) issue(s, s);
  for (int r = 0; r < rows; ++r) {
    platform::cp_async_wait_groups<kW>();
    for (int i = 0; i < n; ++i) z[(size_t)r * n * blockDim.x + i * blockDim.x + t] = sm[((r % S) * n + i) * blockDim.x + t];
    issue(r + S, r % S);
  }
  if (kPdl) platform::allow_dependent_grid();
}

template <typename K> int run_ring(K k, bool pdl) {
  const int rows = 37, n = 2, G = 128;
  uint4 *x, *z; CK(cudaMalloc(&x, rows * n * G * 16)); CK(cudaMalloc(&z, rows * n * G * 16));
  CK(cudaMemset(x, 1, rows * n * G * 16));
  CK(platform::launch(k, 1, G, platform::LaunchOptions{.smem = size_t(4 * n * G * 16), .dependent = pdl}, nullptr, (const uint4*)x, z, rows, n));
  CK(cudaDeviceSynchronize()); printf("ring ok\n"); return 0;
}

template <typename Traits, typename Shape>
int run_real(int hidden, int G, int C, int rows, int grid_clusters, int stages, bool pdl) {
  using I = typename Traits::Input;
  FwdParams p;
  size_t n = (size_t)rows * hidden;
  void *x, *res, *g, *b, *z, *ro; float *mu, *rs;
  CK(cudaMalloc(&x, n * 2)); CK(cudaMalloc(&res, n * 2)); CK(cudaMalloc(&g, hidden * 2)); CK(cudaMalloc(&b, hidden * 2));
  CK(cudaMalloc(&z, n * 2)); CK(cudaMalloc(&ro, n * 2)); CK(cudaMalloc(&mu, rows * 4)); CK(cudaMalloc(&rs, rows * 4));
  CK(cudaMemset(x, 0x3f, n * 2)); CK(cudaMemset(res, 0x3f, n * 2)); CK(cudaMemset(g, 0x3f, hidden * 2)); CK(cudaMemset(b, 0, hidden * 2));
  p.x = x; p.residual = res; p.gamma = g; p.beta = b; p.z = z; p.residual_out = ro; p.mu = mu; p.rsigma = rs;
  p.rows = rows; p.hidden = hidden; p.epsilon = 1e-5f; p.threads_per_row = G; p.ctas_per_row = C;
  p.vecs_per_thread = Shape::kN; p.stages = stages;
  auto kernel = norm_fwd_pipelined_kernel<Traits, Shape>;
  size_t smem = PipelinedLayout<Traits, Shape::kVec>::bytes(Shape::kN * G, stages);
  CK(platform::allow_dynamic_smem(kernel, smem));
  if (C > 8) CK(platform::allow_non_portable_cluster(kernel));
  CK(platform::launch(kernel, grid_clusters * C, G, platform::LaunchOptions{.cluster = C, .smem = smem, .dependent = pdl}, nullptr, p));
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  float h = 0; CK(cudaMemcpy(&h, rs, 4, cudaMemcpyDeviceToHost));
  printf("real ok rsigma[0]=%g\n", h); return 0;
}

using RmsBf = FwdTraits<bf16_t, bf16_t, bf16_t, NormType::kRMSNorm, Stage::kForward>;
using LnBf = FwdTraits<bf16_t, bf16_t, bf16_t, NormType::kLayerNorm, Stage::kForward>;
using AddBf = FwdTraits<bf16_t, bf16_t, bf16_t, NormType::kRMSNorm, Stage::kForwardAdd>;

int main(int argc, char** argv) {
  const int c = argc > 1 ? atoi(argv[1]) : 0;
  switch (c) {
    case 0: return run_ring(ring<0, false>, false);
    case 1: return run_ring(ring<3, false>, false);
    case 2: return run_ring(ring<0, true>, true);
    case 3: return run_ring(ring<3, true>, true);
    case 4: return run_real<RmsBf, FwdShape<8, 2>>(2048, 128, 1, 1, 1, 4, true);   // the test's first case
    case 5: return run_real<RmsBf, FwdShape<8, 2>>(2048, 128, 1, 1, 1, 4, false);  // no PDL
    case 6: return run_real<RmsBf, FwdShape<8, 2>>(2048, 128, 1, 37, 2, 4, false);
    case 7: return run_real<RmsBf, FwdShape<8, 2>>(2048, 64, 2, 37, 2, 4, false);  // cluster exchange
    case 8: return run_real<RmsBf, FwdShape<8, 2>>(2048, 128, 1, 1, 1, 2, false);  // S = 2
    case 9: return run_real<LnBf, FwdShape<8, 2>>(8192, 32, 16, 37, 1, 4, false);  // one-warp CTAs, C = 16
    case 10: return run_real<RmsBf, FwdShape<8, 2>>(2048, 128, 1, 1, 264, 4, true);  // persistent grid, one row
    case 11: return run_real<RmsBf, FwdShape<8, 2>>(2048, 128, 1, 37, 264, 4, true);
    case 12: return run_real<RmsBf, FwdShape<8, 2>>(2048, 128, 1, 1, 1056, 4, false);
    case 13: return run_real<LnBf, FwdShape<8, 2>>(2048, 128, 1, 1, 264, 4, true);
    case 15: return run_real<RmsBf, FwdShape<8, 2>>(8192, 32, 16, 37, 8, 4, true);   // the failing test case, 8 clusters
    case 16: return run_real<RmsBf, FwdShape<8, 2>>(4096, 32, 8, 37, 16, 4, true);
    case 17: return run_real<RmsBf, FwdShape<8, 2>>(16384, 64, 16, 37, 8, 4, true);
    case 18: return run_real<RmsBf, FwdShape<8, 2>>(1024, 32, 2, 37, 64, 4, true);
    case 19: return run_real<RmsBf, FwdShape<8, 2>>(8192, 32, 16, 37, 1, 4, true);   // one cluster
    case 14: return run_real<AddBf, FwdShape<8, 2>>(2048, 128, 1, 1, 264, 4, true);
  }
  return 2;
}
