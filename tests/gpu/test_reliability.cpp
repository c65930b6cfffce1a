// Reliability on the GPU: inputs with NaN and Inf, tensors beyond 2^31 elements, and
// threads x streams x GPUs against the same calls made alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bwd_case.h"
#include "fwd_case.h"

namespace normtune::test {
namespace {

class ReliabilityGpu : public ::testing::Test {
 protected:
  void SetUp() override { NORMTUNE_REQUIRE_GPU(); }
};

// ---- NaN and Inf ----------------------------------------------------------------------------
// Of 8 rows, row 1 holds a NaN, row 4 +Inf and row 6 -Inf (RMSNorm: rsigma = 0 there, so z is
// 0 except NaN where x is infinite). LayerNorm gets the NaN row only: with an infinite
// element its mean is Inf or NaN depending on how the partial sums are merged, and IEEE
// arithmetic does not single out one answer (z and rsigma are NaN either way). Every other
// row must match the reference as usual.
constexpr size_t kSpecialRows = 8;
Specials specials_for(NormType norm, size_t hidden) {
  Specials s{{1 * hidden + 5, std::nan("")}};
  if (norm == NormType::kRMSNorm) {
    s.push_back({4 * hidden, INFINITY});
    s.push_back({6 * hidden + hidden - 1, -INFINITY});
  }
  return s;
}

struct SpecialShape {
  DType itype;
  size_t hidden;
};
// The tuned staged kernel (bf16 4096), the general kernel (1000), fp32, a cluster (32768).
const SpecialShape kSpecialShapes[] = {
    {DType::kBFloat16, 4096}, {DType::kBFloat16, 1000}, {DType::kFloat32, 2048}, {DType::kBFloat16, 32768}};

// A forward or backward case of one type throughout, with `norm`'s special values in x.
template <typename Case>
Case special_case(NormType norm, const SpecialShape& sh, uint32_t seed) {
  Case c;
  c.norm = norm;
  c.itype = c.wtype = sh.itype;
  if constexpr (requires { c.otype; }) c.otype = sh.itype;
  c.rows = kSpecialRows;
  c.hidden = sh.hidden;
  c.seed = seed;
  c.x_specials = specials_for(norm, sh.hidden);
  c.poison = 0x7F;  // finite: an expected NaN must have been written
  return c;
}

TEST_F(ReliabilityGpu, NanAndInfInTheInputForward) {
  for (NormType norm : {NormType::kRMSNorm, NormType::kLayerNorm}) {
    for (const SpecialShape& sh : kSpecialShapes) {
      const FwdCase c = special_case<FwdCase>(norm, sh, 70);
      SCOPED_TRACE(c.describe());
      run_fwd(c);
    }
  }
  FwdCase add;  // the fused add: x + residual carries the NaN and the infinities
  add.fused_add = true;
  add.rows = kSpecialRows;
  add.poison = 0x7F;
  add.x_specials = specials_for(NormType::kRMSNorm, add.hidden);
  SCOPED_TRACE(add.describe());
  run_fwd(add);
}

// dx of a row with a special value is NaN throughout; dgamma is NaN in the columns where
// some row's y is NaN (all of them for the NaN row) and exact elsewhere; LayerNorm's dbeta
// (the sum of dz, which is finite) exact.
TEST_F(ReliabilityGpu, NanAndInfInTheInputBackward) {
  for (NormType norm : {NormType::kRMSNorm, NormType::kLayerNorm}) {
    for (const SpecialShape& sh : kSpecialShapes) {
      const BwdCase c = special_case<BwdCase>(norm, sh, 71);
      SCOPED_TRACE(c.describe());
      run_bwd(c);
    }
  }
  // Without the NaN row RMSNorm's dgamma is finite but in the infinite elements' columns.
  BwdCase inf_only;
  inf_only.rows = kSpecialRows;
  inf_only.poison = 0x7F;
  inf_only.x_specials = {{4 * inf_only.hidden, INFINITY}, {6 * inf_only.hidden + 17, -INFINITY}};
  SCOPED_TRACE(inf_only.describe());
  run_bwd(inf_only);
}

// ---- beyond 2^31 elements ----------------------------------------------------------------------
// Inputs from the element index alone (no generator state), rounded to bf16: a hash mapped
// to [-2, 2), never zero. The device copies are filled in chunks by every host core.
float bf16_round(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&v, &u, 4);
  return v;
}
float pattern(uint64_t i, uint64_t salt) {
  uint64_t h = (i + salt * 0x100000001B3ull) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return bf16_round((static_cast<float>(h & 0xFFFF) + 0.5f) / 16384.f - 2.f);
}

template <typename Fn>
void parallel_for(size_t n, Fn&& fn) {
  const size_t workers = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (size_t w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      for (size_t i = w * n / workers; i < (w + 1) * n / workers; ++i) fn(i);
    });
  }
  for (std::thread& t : pool) t.join();
}

void fill_bf16(const DeviceArray& d, uint64_t salt) {
  constexpr size_t kChunk = size_t{1} << 26;
  std::vector<uint16_t> host(kChunk);
  for (size_t start = 0; start < d.count; start += kChunk) {
    const size_t n = std::min(kChunk, d.count - start);
    parallel_for(n, [&](size_t i) {
      const float v = pattern(start + i, salt);
      uint32_t u;
      std::memcpy(&u, &v, 4);
      host[i] = static_cast<uint16_t>(u >> 16);
    });
    NORMTUNE_CUDA_CHECK(cudaMemcpy(d.ptr + start * 2, host.data(), n * 2, cudaMemcpyHostToDevice));
  }
}

HostArray pattern_rows(const std::vector<size_t>& rows, size_t hidden, uint64_t salt) {
  HostArray a(DType::kBFloat16, rows.size() * hidden);
  for (size_t k = 0; k < rows.size(); ++k) {
    for (size_t j = 0; j < hidden; ++j) a.set(k * hidden + j, pattern(rows[k] * hidden + j, salt));
  }
  return a;
}

HostArray rows_of(const DeviceArray& d, const std::vector<size_t>& rows, size_t hidden) {
  HostArray h(d.dtype, rows.size() * hidden);
  const size_t row_bytes = dtype_storage_bytes(d.dtype, hidden);
  for (size_t k = 0; k < rows.size(); ++k) {
    NORMTUNE_CUDA_CHECK(cudaMemcpy(h.raw.data() + k * row_bytes, d.ptr + rows[k] * row_bytes, row_bytes,
                                   cudaMemcpyDeviceToHost));
  }
  return h;
}

// RMSNorm forward and backward, bf16, on [rows, hidden] with rows * hidden > 2^31: z and dx on
// sampled rows (the first, the one that straddles element 2^31, the last) and rsigma on
// every row against the fp64 reference, dgamma (a sum over every row) on every column.
void check_huge_rmsnorm(size_t rows, size_t hidden) {
  SCOPED_TRACE(detail::concat("RMSNorm bf16 ", rows, "x", hidden));
  const size_t n = rows * hidden;
  ASSERT_GT(n, size_t{1} << 31);
  const size_t straddle = (size_t{1} << 31) / hidden;
  const std::vector<size_t> sample{0, 1, straddle - 1, straddle, straddle + 1, rows - 2, rows - 1};
  constexpr uint64_t kX = 1, kDz = 2;

  DeviceArray x(DType::kBFloat16, n), z(DType::kBFloat16, n), rs(DType::kFloat32, rows);
  HostArray gamma_h(DType::kBFloat16, hidden);
  for (size_t j = 0; j < hidden; ++j) gamma_h.set(j, 1.0 + 0.25 * pattern(j, 3));
  const DeviceArray gamma = DeviceArray::from_host(gamma_h);
  fill_bf16(x, kX);
  z.poison();
  rs.poison();
  TensorHandle tx(x, {rows, hidden}), tg(gamma, {hidden}), tz(z, {rows, hidden}), trs(rs, {rows});
  call_with_workspace([&](NVTETensor ws) { nvte_rmsnorm_fwd(tx, tg, 1e-5f, tz, trs, ws, 0, false, nullptr); });
  NORMTUNE_CUDA_CHECK(cudaDeviceSynchronize());
  const std::string kernel = last_kernel().name;

  // rsigma of every row (fp64 sums of squares, rows spread over the host's cores).
  std::vector<double> want_rs(rows);
  parallel_for(rows, [&](size_t r) {
    double ss = 0;
    for (size_t j = 0; j < hidden; ++j) {
      const double v = pattern(r * hidden + j, kX);
      ss += v * v;
    }
    want_rs[r] = 1.0 / std::sqrt(ss / static_cast<double>(hidden) + 1e-5);
  });
  const HostArray got_rs = rs.to_host();
  EXPECT_TRUE(close_to_reference(got_rs, want_rs, stat_tolerance(), "rsigma (" + kernel + ")"));
  // z on the sampled rows.
  const HostArray xs = pattern_rows(sample, hidden, kX);
  const reference::FwdOutputs want = reference_fwd(NormType::kRMSNorm, sample.size(), hidden, xs, nullptr, gamma_h,
                                                   gamma_h, false, DType::kBFloat16);
  EXPECT_TRUE(close_to_reference(rows_of(z, sample, hidden), want.z, output_tolerance(DType::kBFloat16),
                                 "z on sampled rows (" + kernel + ")"));
  z.buffer = DeviceBuffer();  // freed: room for the backward (z is not read again)

  // Backward with the forward's rsigma.
  DeviceArray dz(DType::kBFloat16, n), dx(DType::kBFloat16, n), dgamma(DType::kBFloat16, hidden);
  fill_bf16(dz, kDz);
  dx.poison();
  dgamma.poison();
  TensorHandle tdz(dz, {rows, hidden}), tdx(dx, {rows, hidden}), tdg(dgamma, {hidden});
  call_with_workspace([&](NVTETensor ws) { nvte_rmsnorm_bwd(tdz, tx, trs, tg, tdx, tdg, ws, 0, false, nullptr); });
  NORMTUNE_CUDA_CHECK(cudaDeviceSynchronize());
  const std::string bwd_kernel = last_kernel().name;

  std::vector<double> rs_sample(sample.size());
  for (size_t k = 0; k < sample.size(); ++k) rs_sample[k] = got_rs.get(sample[k]);
  const std::vector<double> xv = xs.values(), dzv = pattern_rows(sample, hidden, kDz).values(), gv = gamma_h.values();
  reference::BwdInputs in;
  in.rows = static_cast<int64_t>(sample.size());
  in.hidden = static_cast<int64_t>(hidden);
  in.dz = dzv.data();
  in.x = xv.data();
  in.rsigma = rs_sample.data();
  in.gamma = gv.data();
  const reference::BwdOutputs wb = reference::norm_bwd(in);
  EXPECT_TRUE(close_to_reference(rows_of(dx, sample, hidden), wb.dx, {output_tolerance(DType::kBFloat16).rtol, 1e-6},
                                 "dx on sampled rows (" + bwd_kernel + ")", &wb.dx_scale, kFp32TermError));
  // dgamma[j] = sum over every row of dz * x * rsigma, with the fp32 rsigma the kernel read.
  const std::vector<double> rsv = got_rs.values();
  std::vector<double> want_dg(hidden), dg_scale(hidden);
  parallel_for(hidden, [&](size_t j) {
    double s = 0, a = 0;
    for (size_t r = 0; r < rows; ++r) {
      const double t = static_cast<double>(pattern(r * hidden + j, kDz)) * pattern(r * hidden + j, kX) * rsv[r];
      s += t;
      a += std::fabs(t);
    }
    want_dg[j] = s;
    dg_scale[j] = a;
  });
  EXPECT_TRUE(close_to_reference(dgamma.to_host(), want_dg, {output_tolerance(DType::kBFloat16).rtol, 1e-6},
                                 "dgamma (" + bwd_kernel + ")", &dg_scale, kFp32TermError));
}

bool device_has_free(size_t bytes) {
  size_t free = 0, total = 0;
  return cudaMemGetInfo(&free, &total) == cudaSuccess && free >= bytes;
}

// 32800 x 65537: rows of odd length (no vector loads; the byte offset of every row after the
// first is odd); 33000 x 65536: aligned rows, the vector paths.
TEST_F(ReliabilityGpu, TensorsBeyondTwoToThe31Elements) {
  if (!device_has_free(size_t{20} << 30)) GTEST_SKIP() << "needs 20 GiB of free device memory";
  check_huge_rmsnorm(32800, 65537);
  check_huge_rmsnorm(33000, 65536);
}

// ---- threads x streams x GPUs ----------------------------------------------------------------
// One call of a mixed set: forward RMSNorm, LayerNorm and the fused add, the RMSNorm and
// LayerNorm backward, over tuned and untuned shapes (LayerNorm fp16 4003: no tuned kernel,
// shared by every thread, whose fallback warning must be printed once).
struct Job {
  std::unique_ptr<FwdProblem> fwd;
  std::unique_ptr<BwdProblem> bwd;

  explicit Job(int j) {
    const size_t hidden[] = {768, 4096, 1000, 7168, 16384};
    const size_t rows = 32 + 48 * static_cast<size_t>(j % 3);
    if (j % 5 == 4) {
      BwdCase c;
      c.norm = j % 2 ? NormType::kLayerNorm : NormType::kRMSNorm;
      c.rows = rows;
      c.hidden = hidden[j % 4];
      c.seed = 900 + j;
      bwd = std::make_unique<BwdProblem>(c);
      return;
    }
    FwdCase c;
    c.norm = j % 2 ? NormType::kLayerNorm : NormType::kRMSNorm;
    c.fused_add = j % 3 == 2 && c.norm == NormType::kRMSNorm;
    c.rows = rows;
    c.hidden = hidden[j % 5];
    if (j % 7 == 3) {
      c.norm = NormType::kLayerNorm;
      c.fused_add = false;
      c.wtype = c.itype = c.otype = DType::kFloat16;
      c.hidden = 4003;
    }
    c.seed = 900 + j;
    fwd = std::make_unique<FwdProblem>(c);
  }
  void call(NVTETensor ws, cudaStream_t stream) const {
    if (fwd) {
      fwd->call(ws, stream);
    } else {
      bwd->call(ws, stream);
    }
  }
  std::vector<HostArray> outputs() const {
    if (fwd) {
      const FwdResult r = fwd->outputs();
      return {r.z, r.rsigma, r.mu, r.residual_out};
    }
    const BwdResult r = bwd->outputs();
    return {r.dx, r.dgamma, r.dbeta};
  }
};

// The two-call protocol on a stream: the query, a workspace of the answered size, the call.
std::unique_ptr<DeviceBuffer> launch(const Job& job, cudaStream_t stream) {
  TensorHandle query;
  job.call(query, stream);
  const size_t bytes = answered_workspace_bytes(query);
  auto mem = std::make_unique<DeviceBuffer>(bytes);
  TensorHandle ws(mem->get(), {bytes}, DType::kByte);
  job.call(ws, stream);
  return mem;
}

TEST_F(ReliabilityGpu, ThreadsTimesStreamsTimesGpusMatchCallsMadeAloneBitwise) {
  unsetenv("NORMTUNE_WARN_FALLBACK");
  const int gpus = std::min(device_count(), 2);
  constexpr int kThreads = 8, kStreams = 4, kRounds = 3;
  // Results per job index, concurrently: each thread on GPU t % gpus issues its kStreams jobs
  // on its own streams, back to back, kRounds times over.
  std::vector<std::vector<HostArray>> concurrent(kThreads * kStreams);
  std::vector<std::string> failures(kThreads);
  ::testing::internal::CaptureStderr();
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        try {
          NORMTUNE_CUDA_CHECK(cudaSetDevice(t % gpus));
          std::vector<cudaStream_t> streams(kStreams);
          for (cudaStream_t& s : streams) NORMTUNE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
          std::vector<std::unique_ptr<Job>> jobs;
          for (int s = 0; s < kStreams; ++s) jobs.push_back(std::make_unique<Job>(t * kStreams + s));
          // The jobs' inputs and poisoned outputs were set up on the legacy default stream
          // (pageable copies, memsets), which the non-blocking streams do not wait for.
          NORMTUNE_CUDA_CHECK(cudaDeviceSynchronize());
          for (int round = 0; round < kRounds; ++round) {
            std::vector<std::unique_ptr<DeviceBuffer>> workspaces;
            for (int s = 0; s < kStreams; ++s) workspaces.push_back(launch(*jobs[s], streams[s]));
            for (cudaStream_t s : streams) NORMTUNE_CUDA_CHECK(cudaStreamSynchronize(s));
          }
          for (int s = 0; s < kStreams; ++s) concurrent[t * kStreams + s] = jobs[s]->outputs();
          for (cudaStream_t s : streams) NORMTUNE_CUDA_CHECK(cudaStreamDestroy(s));
        } catch (const std::exception& e) {
          failures[t] = e.what();
        }
      });
    }
    for (std::thread& th : threads) th.join();
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;

  // Every fallback warning once (one line per key), the shared untuned key's among them.
  std::istringstream lines(err);
  std::set<std::string> seen;
  int shared = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("falling back to the general kernel") == std::string::npos) continue;
    EXPECT_TRUE(seen.insert(line).second) << "printed twice: " << line;
    shared += line.find("LayerNorm Forward hidden=4003") != std::string::npos;
  }
  EXPECT_EQ(shared, 1) << err;

  // Alone: the same job on the same device, nothing else running.
  for (int t = 0; t < kThreads; ++t) {
    NORMTUNE_CUDA_CHECK(cudaSetDevice(t % gpus));
    for (int s = 0; s < kStreams; ++s) {
      const int j = t * kStreams + s;
      const Job job(j);
      launch(job, nullptr);
      const std::vector<HostArray> alone = job.outputs();
      ASSERT_EQ(alone.size(), concurrent[j].size()) << "job " << j;
      for (size_t k = 0; k < alone.size(); ++k) {
        EXPECT_TRUE(same_bits(concurrent[j][k], alone[k], detail::concat("job ", j, " on GPU ", t % gpus, " output ", k)));
      }
    }
  }
  NORMTUNE_CUDA_CHECK(cudaSetDevice(0));
}

}  // namespace
}  // namespace normtune::test
