// Backward RMSNorm / LayerNorm / RMSNorm + add on the GPU against the fp64 reference, and
// against finite differences of the forward (label gpu).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

#include <normtune/normtune.h>
#include <normtune/tuning.h>

#include "bwd_case.h"
#include "protocol.h"

namespace normtune::test {
namespace {

using ::testing::HasSubstr;

constexpr DType kWide[] = {DType::kBFloat16, DType::kFloat16, DType::kFloat32};

class NormBwdGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    NORMTUNE_REQUIRE_GPU();
    setenv("NORMTUNE_WARN_FALLBACK", "0", 1);  // many cases fall back on purpose
  }
};

BwdCase make_case(NormType norm, bool add, DType t, size_t rows, size_t hidden) {
  BwdCase c;
  c.norm = norm;
  c.add = add;
  c.wtype = t;
  c.itype = t;
  c.rows = rows;
  c.hidden = hidden;
  c.seed = static_cast<uint32_t>(rows * 31 + hidden);
  return c;
}

struct Variant {
  NormType norm;
  bool add;
};
constexpr Variant kVariants[] = {{NormType::kRMSNorm, false}, {NormType::kLayerNorm, false}, {NormType::kRMSNorm, true}};

// ---- every tuned entry, at its hidden size ---------------------------------------------
class TunedBwdGpu : public TunedEntryGpu {};

TEST_P(TunedBwdGpu, MatchesReferenceAndRunsTheTunedKernel) {
  const KernelEntry& e = *GetParam();
  for (size_t rows : rows_for(e)) {
    BwdCase c = make_case(e.key.norm, e.key.stage == Stage::kBackwardAdd, e.key.itype, rows, e.key.hidden_size);
    c.wtype = e.key.wtype;
    const BwdResult r = run_bwd(c);
    EXPECT_EQ(r.kernel.name, e.name);
    EXPECT_TRUE(r.kernel.tuned);
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, TunedBwdGpu, ::testing::ValuesIn(tuned_entries({Stage::kBackward, Stage::kBackwardAdd})),
                         tuned_entry_name);

// ---- odd shapes, every dtype and variant (general kernels) -----------------------------
struct Shape2 {
  size_t rows, hidden;
};
constexpr Shape2 kOddShapes[] = {
    {1, 1},    {7, 8},     {3, 111},   {37, 768},  {129, 64},   {5, 4097},  {300, 1000},
    {9, 9000}, {3, 20000}, {2, 65536}, {1, 262144}, {2, 131073},
};

TEST_F(NormBwdGpu, OddShapesEveryDtypeAndVariant) {
  for (const Variant v : kVariants) {
    for (DType t : kWide) {
      for (const Shape2 s : kOddShapes) {
        SCOPED_TRACE(detail::concat(s.rows, "x", s.hidden, " ", dtype_name(t)));
        run_bwd(make_case(v.norm, v.add, t, s.rows, s.hidden));
      }
    }
  }
}

TEST_F(NormBwdGpu, Fp32GammaWithNarrowInputs) {
  for (const Variant v : kVariants) {
    for (DType t : {DType::kBFloat16, DType::kFloat16}) {
      for (size_t hidden : {size_t{1024}, size_t{3000}, size_t{40000}}) {
        BwdCase c = make_case(v.norm, v.add, t, 33, hidden);
        c.wtype = DType::kFloat32;
        run_bwd(c);
      }
    }
  }
}

TEST_F(NormBwdGpu, MisalignedStorageUsesTheScalarPath) {
  for (const Variant v : kVariants) {
    for (size_t offset : {size_t{2}, size_t{4}, size_t{8}}) {
      for (size_t hidden : {size_t{1024}, size_t{5000}}) {
        BwdCase c = make_case(v.norm, v.add, DType::kBFloat16, 19, hidden);
        c.x_offset = offset;
        const BwdResult r = run_bwd(c);
        EXPECT_FALSE(r.kernel.tuned) << r.kernel.name;
        BwdCase g = c;
        g.x_offset = 0;
        g.gamma_offset = offset;
        run_bwd(g);
      }
    }
  }
}

TEST_F(NormBwdGpu, ZeroCenteredGamma) {
  for (const Variant v : kVariants) {
    for (size_t hidden : {size_t{4096}, size_t{777}, size_t{40000}}) {
      BwdCase c = make_case(v.norm, v.add, DType::kBFloat16, 21, hidden);
      c.zero_centered_gamma = true;
      run_bwd(c);
    }
  }
}

TEST_F(NormBwdGpu, ZeroRowsWriteZeroGradients) {
  for (const Variant v : kVariants) {
    const BwdResult r = run_bwd(make_case(v.norm, v.add, DType::kBFloat16, 0, 4096));
    EXPECT_GE(r.workspace_bytes, 1u);  // nothing to reduce, but every answer is at least one byte
    for (size_t i = 0; i < r.dgamma.count; ++i) ASSERT_EQ(r.dgamma.get(i), 0.0) << i;
    for (size_t i = 0; i < r.dbeta.count; ++i) ASSERT_EQ(r.dbeta.get(i), 0.0) << i;
  }
}

TEST_F(NormBwdGpu, OneRow) {
  for (const Variant v : kVariants) {
    for (size_t hidden : {size_t{4096}, size_t{12288}, size_t{100000}}) {
      run_bwd(make_case(v.norm, v.add, DType::kBFloat16, 1, hidden));
    }
  }
}

TEST_F(NormBwdGpu, MultiprocessorCounts) {
  const int sms = device_info(current_device()).sm_count;
  for (const Variant v : kVariants) {
    for (int count : {1, 7, sms, 3 * sms}) {
      for (Shape2 s : {Shape2{2000, 1024}, Shape2{4096, 128}, Shape2{50, 40000}}) {
        BwdCase c = make_case(v.norm, v.add, DType::kBFloat16, s.rows, s.hidden);
        c.multiprocessor_count = count;
        run_bwd(c);
      }
    }
  }
}

TEST_F(NormBwdGpu, BitwiseDeterministicAcrossRuns) {
  for (const Variant v : kVariants) {
    for (Shape2 s : {Shape2{3000, 4096}, Shape2{5000, 256}, Shape2{40, 50000}, Shape2{77, 3001}}) {
      const BwdCase c = make_case(v.norm, v.add, DType::kBFloat16, s.rows, s.hidden);
      const BwdResult a = run_bwd(c);
      for (int rep = 0; rep < 3; ++rep) {
        const BwdResult b = run_bwd(c, false);
        EXPECT_TRUE(same_bits(a.dx, b.dx, c.describe() + " dx"));
        EXPECT_TRUE(same_bits(a.dgamma, b.dgamma, c.describe() + " dgamma"));
        EXPECT_TRUE(same_bits(a.dbeta, b.dbeta, c.describe() + " dbeta"));
      }
    }
  }
}

TEST_F(NormBwdGpu, InPlaceDxOverDz) {
  for (const Variant v : kVariants) {
    for (size_t hidden : {size_t{2048}, size_t{40000}}) {
      BwdCase c = make_case(v.norm, v.add, DType::kBFloat16, 65, hidden);
      c.in_place = true;
      run_bwd(c);
    }
  }
}

// nvte_rmsnorm_bwd_add with dx written over add (its in-place rule), on the layouts of
// InPlaceDxOverDz.
TEST_F(NormBwdGpu, InPlaceDxOverAdd) {
  for (size_t hidden : {size_t{2048}, size_t{40000}}) {
    BwdCase c = make_case(NormType::kRMSNorm, true, DType::kBFloat16, 65, hidden);
    c.in_place_of_add = true;
    SCOPED_TRACE(c.describe());
    run_bwd(c);
  }
}

// Calls queued back to back on one stream, nothing synchronized between them, each reading
// what the one before wrote: the forward's statistics, then the first backward's dx as the
// second backward's dz, both backward calls with the same workspace (NaN-poisoned first). Every
// kernel is a programmatic dependent launch, scheduled while the previous one drains and
// waiting for it before touching global memory; a call that read its inputs early would see
// the poison (NaN) or the other call's values. (Not a proof of each wait: on the H200 this test
// also passed with the backward's first-kernel waits taken out, the windows being shorter than
// the launch; it checks the chained calls' results, the way training runs them.) The pipelined
// layout at decode (one row: dgamma written directly; 128 rows), the register layout (128
// columns) and a cluster (40000).
TEST_F(NormBwdGpu, BackToBackCallsOnOneStreamReadEachOthersResults) {
  constexpr DType kT = DType::kBFloat16;
  const std::pair<size_t, size_t> shapes[] = {{1, 4096}, {128, 7168}, {2048, 128}, {6, 40000}};
  cudaStream_t stream = nullptr;
  NORMTUNE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (NormType norm : {NormType::kRMSNorm, NormType::kLayerNorm}) {
    for (const auto& [rows, hidden] : shapes) {
      const bool ln = norm == NormType::kLayerNorm;
      const size_t n = rows * hidden;
      const uint32_t seed = static_cast<uint32_t>(rows * 7 + hidden);
      const HostArray x = random_array(kT, n, seed, ln ? 0.5 : 0.0, 1.0);
      const HostArray dz = random_array(kT, n, seed + 1, 0.0, 1.0);
      const HostArray gamma = random_array(kT, hidden, seed + 2, 1.0, 0.2);
      const HostArray beta = random_array(kT, hidden, seed + 3, 0.0, 0.5);
      DeviceArray d_x = DeviceArray::from_host(x), d_dz = DeviceArray::from_host(dz),
                  d_g = DeviceArray::from_host(gamma), d_b = DeviceArray::from_host(beta);
      DeviceArray d_z(kT, n), d_mu(DType::kFloat32, rows), d_rs(DType::kFloat32, rows), d_dx1(kT, n), d_dx2(kT, n),
          d_dg1(kT, hidden), d_dg2(kT, hidden), d_db1(kT, hidden), d_db2(kT, hidden);
      for (DeviceArray* out : {&d_z, &d_mu, &d_rs, &d_dx1, &d_dx2, &d_dg1, &d_dg2, &d_db1, &d_db2}) out->poison();
      TensorHandle tx(d_x, {rows, hidden}), tdz(d_dz, {rows, hidden}), tg(d_g, {hidden}), tb(d_b, {hidden}),
          tz(d_z, {rows, hidden}), tmu(d_mu, {rows}), trs(d_rs, {rows}), tdx1(d_dx1, {rows, hidden}),
          tdx2(d_dx2, {rows, hidden}), tdg1(d_dg1, {hidden}), tdg2(d_dg2, {hidden}), tdb1(d_db1, {hidden}),
          tdb2(d_db2, {hidden});
      auto fwd = [&](NVTETensor ws) {
        if (ln) {
          nvte_layernorm_fwd(tx, tg, tb, 1e-5f, tz, tmu, trs, ws, 0, false, stream);
        } else {
          nvte_rmsnorm_fwd(tx, tg, 1e-5f, tz, trs, ws, 0, false, stream);
        }
      };
      auto bwd = [&](NVTETensor dz_in, NVTETensor dx, NVTETensor dg, NVTETensor db, NVTETensor ws) {
        if (ln) {
          nvte_layernorm_bwd(dz_in, tx, tmu, trs, tg, dx, dg, db, ws, 0, false, stream);
        } else {
          nvte_rmsnorm_bwd(dz_in, tx, trs, tg, dx, dg, ws, 0, false, stream);
        }
      };
      // The workspaces, allocated before anything is queued (freeing one synchronizes).
      TensorHandle query_f, query_b;
      fwd(query_f);
      bwd(tdz, tdx1, tdg1, tdb1, query_b);
      const size_t bytes_f = answered_workspace_bytes(query_f), bytes_b = answered_workspace_bytes(query_b);
      DeviceBuffer mem_f(bytes_f), mem_b(bytes_b);
      TensorHandle ws_f(mem_f.get(), {bytes_f}, DType::kByte), ws_b(mem_b.get(), {bytes_b}, DType::kByte);
      NORMTUNE_CUDA_CHECK(cudaMemsetAsync(mem_b.get(), 0xFF, bytes_b, stream));  // NaN partials
      NORMTUNE_CUDA_CHECK(cudaDeviceSynchronize());  // the inputs and the poison in place (other streams)

      fwd(ws_f);
      bwd(tdz, tdx1, tdg1, tdb1, ws_b);
      bwd(tdx1, tdx2, tdg2, tdb2, ws_b);
      NORMTUNE_CUDA_CHECK(cudaStreamSynchronize(stream));

      // The references take what the device computed before each call as that call's input.
      const std::vector<double> xv = x.values(), gv = gamma.values(), rs = d_rs.to_host().values(),
                                mu = ln ? d_mu.to_host().values() : std::vector<double>(rows, 0.0);
      const HostArray dx1 = d_dx1.to_host();
      const std::string what = detail::concat(ln ? "LayerNorm" : "RMSNorm", " ", rows, "x", hidden);
      struct Call {
        std::vector<double> dz;
        HostArray dx, dg, db;
        const char* name;
      };
      const Call calls[] = {{dz.values(), dx1, d_dg1.to_host(), d_db1.to_host(), "first backward"},
                            {dx1.values(), d_dx2.to_host(), d_dg2.to_host(), d_db2.to_host(), "second backward"}};
      for (const Call& c : calls) {
        reference::BwdInputs in;
        in.norm = norm;
        in.rows = static_cast<int64_t>(rows);
        in.hidden = static_cast<int64_t>(hidden);
        in.dz = c.dz.data();
        in.x = xv.data();
        in.mu = mu.data();
        in.rsigma = rs.data();
        in.gamma = gv.data();
        expect_bwd_matches_reference(in, kT, kT, c.dx, c.dg, c.db, what + " " + c.name);
      }
    }
  }
  NORMTUNE_CUDA_CHECK(cudaStreamDestroy(stream));
}

// The pipelined layout (long rows over a cluster) forced through the plan override: one CTA
// per row (no cluster) and clusters of 2..16, one warp per CTA (no CTA barrier in its
// reduction) to 512 threads, 2 and 4 vectors per thread, rows that leave the last CTA's slice
// partly empty, row counts from 1 to many per cluster (each ring stage reused; the grid
// bounded to 1..3 SMs), every variant, bf16, fp16 and fp32 (4-element vectors), zero-centered
// gamma and dx in place of dz; each result bitwise the same on a second run. One CTA per row
// in row groups (rows_per_cta 2..5): groups past the last row (1 and 37 rows on the whole
// device), uneven row counts per group.
struct BwdPipelinedCase {
  size_t hidden;
  int ctas, threads, vecs;
  DType t;
  int groups = 1;
};
class BwdPipelinedEveryShapeGpu : public NormBwdGpu, public ::testing::WithParamInterface<BwdPipelinedCase> {};

TEST_P(BwdPipelinedEveryShapeGpu, ThroughTheOverride) {
  const BwdPipelinedCase& k = GetParam();
  const BwdPlan plan{.layout = BwdLayout::kPipelined, .vecs_per_thread = k.vecs, .threads_per_row = k.threads,
                     .rows_per_cta = k.groups, .ctas_per_row = k.ctas};
  const bool clusters = device_info(current_device()).supports_clusters;
  if (plan.ctas_per_row > 1 && !clusters) GTEST_SKIP() << "no thread-block clusters";
  const int vec = k.t == DType::kFloat32 ? 4 : 8;
  ASSERT_TRUE(plan_fits(plan, static_cast<int>(k.hidden), vec, clusters)) << config_string(plan);
  ASSERT_EQ(set_backward_plan_override(&plan), nullptr);
  for (const Variant v : kVariants) {
    const size_t many = k.hidden > 100000 ? 41 : 301;  // (the fp64 reference's time)
    for (size_t rows : {size_t{1}, size_t{37}, many}) {
      BwdCase c = make_case(v.norm, v.add, k.t, rows, k.hidden);
      c.zero_centered_gamma = rows == 37;
      c.in_place = rows == many && !v.add;
      c.multiprocessor_count = rows == many ? 1 + (v.norm == NormType::kLayerNorm ? 1 : 0) + (v.add ? 1 : 0) : 0;
      SCOPED_TRACE(c.describe() + " " + config_string(plan));
      try {
        const BwdResult a = run_bwd(c);
        EXPECT_FALSE(a.kernel.tuned);
        EXPECT_THAT(a.kernel.name, HasSubstr("general")) << "the general kernel, pipelined by the override";
        if (rows == 37) {
          const BwdResult b = run_bwd(c, false);
          EXPECT_TRUE(same_bits(a.dx, b.dx, c.describe() + " dx"));
          EXPECT_TRUE(same_bits(a.dgamma, b.dgamma, c.describe() + " dgamma"));
          EXPECT_TRUE(same_bits(a.dbeta, b.dbeta, c.describe() + " dbeta"));
        }
      } catch (const std::exception& e) {  // a CUDA error: name the case (a trace is not printed for a throw)
        set_backward_plan_override(nullptr);
        FAIL() << e.what();
      }
    }
  }
  set_backward_plan_override(nullptr);
}

INSTANTIATE_TEST_SUITE_P(
    NormBwdGpu, BwdPipelinedEveryShapeGpu,
    ::testing::Values(BwdPipelinedCase{2048, 1, 128, 2, DType::kBFloat16}, BwdPipelinedCase{16384, 1, 512, 4, DType::kBFloat16},
                      BwdPipelinedCase{2048, 2, 64, 2, DType::kFloat16}, BwdPipelinedCase{8192, 16, 32, 2, DType::kBFloat16},
                      BwdPipelinedCase{16000, 4, 128, 4, DType::kBFloat16}, BwdPipelinedCase{8192, 8, 128, 2, DType::kFloat32},
                      BwdPipelinedCase{24576, 4, 384, 4, DType::kFloat32}, BwdPipelinedCase{40000, 8, 160, 4, DType::kFloat16},
                      BwdPipelinedCase{32768, 4, 512, 2, DType::kBFloat16}, BwdPipelinedCase{262144, 16, 512, 4, DType::kBFloat16},
                      // One CTA at mid rows, as the tuner's candidates from 128 vectors up: three
                      // warps over 129 vectors; fp32 with 4 vectors per thread.
                      BwdPipelinedCase{1032, 1, 96, 2, DType::kBFloat16}, BwdPipelinedCase{4096, 1, 256, 4, DType::kFloat32},
                      // Row groups: two of 256 threads, five of three warps, three one-warp
                      // groups (no barrier in their reduction), fp32 in four groups.
                      BwdPipelinedCase{4096, 1, 256, 2, DType::kBFloat16, 2},
                      BwdPipelinedCase{1536, 1, 96, 2, DType::kBFloat16, 5},
                      BwdPipelinedCase{504, 1, 32, 2, DType::kFloat16, 3},
                      BwdPipelinedCase{1024, 1, 128, 2, DType::kFloat32, 4}),
    [](const ::testing::TestParamInfo<BwdPipelinedCase>& i) {
      const BwdPipelinedCase& k = i.param;
      return detail::concat("h", k.hidden, "_c", k.ctas, "_g", k.threads, "_n", k.vecs, "_", dtype_name(k.t),
                            k.groups > 1 ? detail::concat("_r", k.groups) : std::string());
    });

// Forward then backward on a small fp32 problem; the gradient of L = sum(z * w) must match
// central differences of the fp64 reference forward.
TEST_F(NormBwdGpu, MatchesFiniteDifferencesOfTheForward) {
  constexpr size_t kRows = 3, kHidden = 64;
  for (NormType norm : {NormType::kRMSNorm, NormType::kLayerNorm}) {
    for (bool zero_centered : {false, true}) {
      const bool ln = norm == NormType::kLayerNorm;
      const HostArray x = random_array(DType::kFloat32, kRows * kHidden, 11, ln ? 0.5 : 0.0, 1.0);
      const HostArray w = random_array(DType::kFloat32, kRows * kHidden, 12, 0.0, 1.0);
      const HostArray gamma = random_array(DType::kFloat32, kHidden, 13, zero_centered ? 0.0 : 1.0, 0.2);
      const HostArray beta = random_array(DType::kFloat32, kHidden, 14, 0.0, 0.5);
      const float eps = 1e-5f;

      // GPU forward (mu, rsigma), then GPU backward with dz = w.
      DeviceArray d_x = DeviceArray::from_host(x), d_w = DeviceArray::from_host(w),
                  d_g = DeviceArray::from_host(gamma), d_b = DeviceArray::from_host(beta);
      DeviceArray d_z(DType::kFloat32, kRows * kHidden), d_mu(DType::kFloat32, kRows),
          d_rs(DType::kFloat32, kRows), d_dx(DType::kFloat32, kRows * kHidden),
          d_dg(DType::kFloat32, kHidden), d_db(DType::kFloat32, kHidden);
      TensorHandle tx(d_x, {kRows, kHidden}), tw(d_w, {kRows, kHidden}), tg(d_g, {kHidden}),
          tb(d_b, {kHidden}), tz(d_z, {kRows, kHidden}), tmu(d_mu, {kRows}), trs(d_rs, {kRows}),
          tdx(d_dx, {kRows, kHidden}), tdg(d_dg, {kHidden}), tdb(d_db, {kHidden});
      for (DeviceArray* out : {&d_z, &d_mu, &d_rs, &d_dx, &d_dg, &d_db}) out->poison();
      call_with_workspace([&](NVTETensor ws) {
        if (ln) {
          nvte_layernorm_fwd(tx, tg, tb, eps, tz, tmu, trs, ws, 0, zero_centered, nullptr);
        } else {
          nvte_rmsnorm_fwd(tx, tg, eps, tz, trs, ws, 0, zero_centered, nullptr);
        }
      });
      call_with_workspace([&](NVTETensor ws) {
        if (ln) {
          nvte_layernorm_bwd(tw, tx, tmu, trs, tg, tdx, tdg, tdb, ws, 0, zero_centered, nullptr);
        } else {
          nvte_rmsnorm_bwd(tw, tx, trs, tg, tdx, tdg, ws, 0, zero_centered, nullptr);
        }
      });
      // dbeta exists for LayerNorm only (RMSNorm leaves d_db as poisoned, never read).
      const HostArray dx = d_dx.to_host(), dg = d_dg.to_host(), db = ln ? d_db.to_host() : HostArray(DType::kFloat32, 0);

      std::vector<double> xv = x.values(), gv = gamma.values(), bv = beta.values();
      const std::vector<double> wv = w.values();
      auto loss = [&] {
        reference::FwdInputs in;
        in.norm = norm;
        in.rows = kRows;
        in.hidden = kHidden;
        in.x = xv.data();
        in.gamma = gv.data();
        in.beta = bv.data();
        in.epsilon = eps;
        in.zero_centered_gamma = zero_centered;
        const reference::FwdOutputs f = reference::norm_fwd(in);
        double l = 0;
        for (size_t i = 0; i < f.z.size(); ++i) l += f.z[i] * wv[i];
        return l;
      };
      auto central = [&](std::vector<double>& v, size_t i) {
        const double h = 1e-4, keep = v[i];
        v[i] = keep + h;
        const double up = loss();
        v[i] = keep - h;
        const double down = loss();
        v[i] = keep;
        return (up - down) / (2 * h);
      };
      const std::string what = detail::concat(ln ? "LayerNorm" : "RMSNorm", zero_centered ? " zero-centered" : "");
      for (size_t i = 0; i < kRows * kHidden; i += 5) {
        EXPECT_NEAR(dx.get(i), central(xv, i), 2e-4) << what << " dx[" << i << "]";
      }
      for (size_t k = 0; k < kHidden; ++k) {
        EXPECT_NEAR(dg.get(k), central(gv, k), 2e-4) << what << " dgamma[" << k << "]";
        if (ln) {
          EXPECT_NEAR(db.get(k), central(bv, k), 2e-4) << what << " dbeta[" << k << "]";
        }
      }
    }
  }
}

// ---- the workspace protocol and bad input that needs the device -------------------------
class BwdApiGpu : public NormBwdGpu {
 protected:
  static constexpr size_t kRows = 64, kHidden = 1024;
  // Allocated in SetUp, after the GPU check (a fixture member would allocate without a GPU).
  struct Buffers {
    DeviceArray x{DType::kBFloat16, kRows * kHidden}, dz{DType::kBFloat16, kRows * kHidden},
        dx{DType::kBFloat16, kRows * kHidden}, gamma{DType::kBFloat16, kHidden},
        dgamma{DType::kBFloat16, kHidden}, rsigma{DType::kFloat32, kRows};
    TensorHandle tx{x, {kRows, kHidden}}, tdz{dz, {kRows, kHidden}}, tdx{dx, {kRows, kHidden}},
        tg{gamma, {kHidden}}, tdg{dgamma, {kHidden}}, trs{rsigma, {kRows}};
  };
  std::unique_ptr<Buffers> b;

  void SetUp() override {
    NormBwdGpu::SetUp();
    if (!IsSkipped()) b = std::make_unique<Buffers>();
  }
  void call(NVTETensor ws, int sms = 0) {
    nvte_rmsnorm_bwd(b->tdz, b->tx, b->trs, b->tg, b->tdx, b->tdg, ws, sms, false, nullptr);
  }
  size_t query(int sms = 0) {
    TensorHandle ws;
    call(ws, sms);
    return nvte_tensor_shape(ws).data[0];
  }
};

TEST_F(BwdApiGpu, WorkspaceQueryIsStableAndScalesWithPrograms) {
  const size_t full = query();
  EXPECT_GT(full, 0u);
  EXPECT_EQ(query(), full);
  EXPECT_LT(query(1), full);  // one SM: fewer partial rows
  EXPECT_EQ(query(1) % 16, 0u);
}

TEST_F(BwdApiGpu, WrongOrMisalignedWorkspaceIsAnErrorAndWritesNothing) {
  const size_t bytes = query();
  DeviceBuffer mem(bytes + 64);
  b->dx.poison();
  b->dgamma.poison();
  TensorHandle small(mem.get(), {bytes - 16}, DType::kByte);
  EXPECT_THAT([&] { call(small); }, ::testing::ThrowsMessage<Error>(HasSubstr("argument 'workspace': expected the shape")));
  TensorHandle odd(mem.get() + 4, {bytes}, DType::kByte);
  EXPECT_THAT([&] { call(odd); }, ::testing::ThrowsMessage<Error>(HasSubstr("argument 'workspace': expected a pointer aligned to 16 bytes")));
  TensorHandle null_data(nullptr, {kRows, kHidden}, DType::kBFloat16);
  TensorHandle ws(mem.get(), {bytes}, DType::kByte);
  EXPECT_THAT([&] { nvte_rmsnorm_bwd(null_data, b->tx, b->trs, b->tg, b->tdx, b->tdg, ws, 0, false, nullptr); },
              ::testing::ThrowsMessage<Error>(HasSubstr("argument 'dz': expected a device pointer")));
  EXPECT_THAT([&] { nvte_rmsnorm_bwd(b->tdz, b->tx, b->trs, b->tg, b->tx, b->tdg, ws, 0, false, nullptr); },
              ::testing::ThrowsMessage<Error>(HasSubstr("argument 'dx': expected memory separate from 'x'")));
  TensorHandle dg_on_ws(mem.get(), {kHidden}, DType::kBFloat16);
  EXPECT_THAT([&] { nvte_rmsnorm_bwd(b->tdz, b->tx, b->trs, b->tg, b->tdx, dg_on_ws, ws, 0, false, nullptr); },
              ::testing::ThrowsMessage<Error>(HasSubstr("argument 'dgamma': expected memory separate from 'workspace'")));
  const HostArray dx_h = b->dx.to_host(), dg_h = b->dgamma.to_host();
  for (size_t i = 0; i < dx_h.count; ++i) ASSERT_TRUE(std::isnan(dx_h.get(i))) << "dx written at " << i;
  for (size_t i = 0; i < dg_h.count; ++i) ASSERT_TRUE(std::isnan(dg_h.get(i))) << "dgamma written at " << i;
}

// ---- TransformerEngine's two-call protocol, as its PyTorch binding runs it (protocol.h) ----
TEST_F(NormBwdGpu, TransformerEngineProtocolEveryEntryPoint) {
  struct Types {
    DType w, i;
    size_t rows, hidden;
  };
  // A tuned shape, fp32 gamma with a narrow x, and a long row (the column-tiled path).
  for (const Types t : {Types{DType::kBFloat16, DType::kBFloat16, 37, 4096}, Types{DType::kFloat32, DType::kBFloat16, 19, 1000},
                        Types{DType::kFloat16, DType::kFloat16, 5, 40000}, Types{DType::kFloat32, DType::kFloat32, 64, 768}}) {
    for (const Variant v : kVariants) {
      for (bool in_place : {false, true}) {
        BwdCase c = make_case(v.norm, v.add, t.i, t.rows, t.hidden);
        c.wtype = t.w;
        c.in_place = in_place;
        c.multiprocessor_count = device_info(current_device()).sm_count - 2;  // the binding's SM margin
        const BwdProblem p(c);
        check_workspace_protocol(p);
        if (HasFailure()) return;
      }
    }
  }
}

// Which kernel runs depends on alignment (a tuned kernel needs vector-aligned data; the
// general one then takes its scalar path), but the size query may come without data (TE's
// JAX binding) or with other buffers: the answer must not depend on where the buffers are,
// and the real call must run with exactly that answer.
TEST_F(NormBwdGpu, WorkspaceSizeDoesNotDependOnWhereTheBuffersAre) {
  for (const Variant v : kVariants) {
    for (size_t offset : {size_t{0}, size_t{2}}) {
      BwdCase c = make_case(v.norm, v.add, DType::kBFloat16, 4096, 4096);  // a tuned hidden size
      c.x_offset = offset;
      const BwdProblem p(c);
      SCOPED_TRACE(c.describe());
      const std::vector<size_t> rows_hidden{c.rows, c.hidden}, hidden{c.hidden}, rows{c.rows};
      TensorHandle x(nullptr, rows_hidden, DType::kBFloat16), dz(nullptr, rows_hidden, DType::kBFloat16),
          add(nullptr, rows_hidden, DType::kBFloat16), dx(nullptr, rows_hidden, DType::kBFloat16),
          g(nullptr, hidden, DType::kBFloat16), dg(nullptr, hidden, DType::kBFloat16), db(nullptr, hidden, DType::kBFloat16),
          mu(nullptr, rows, DType::kFloat32), rs(nullptr, rows, DType::kFloat32);
      TensorHandle without_data, with_data;
      if (v.add) {
        nvte_rmsnorm_bwd_add(dz, x, add, rs, g, dx, dg, without_data, 0, false, nullptr);
      } else if (v.norm == NormType::kLayerNorm) {
        nvte_layernorm_bwd(dz, x, mu, rs, g, dx, dg, db, without_data, 0, false, nullptr);
      } else {
        nvte_rmsnorm_bwd(dz, x, rs, g, dx, dg, without_data, 0, false, nullptr);
      }
      p.call(with_data.get());
      EXPECT_EQ(answered_workspace_bytes(without_data), answered_workspace_bytes(with_data));
      check_workspace_protocol(p);
      if (HasFailure()) return;
    }
  }
}

TEST_F(NormBwdGpu, ZeroRowsStillAnswerAtLeastOneByte) {
  for (const Variant v : kVariants) {
    const BwdProblem p(make_case(v.norm, v.add, DType::kBFloat16, 0, 4096));
    TensorHandle query;
    EXPECT_EQ(kernel_run_by([&] { p.call(query.get()); }).name, "");
    const size_t bytes = answered_workspace_bytes(query);
    EXPECT_GE(bytes, 1u);
    EXPECT_TRUE(p.untouched());
    DeviceBuffer mem(bytes);
    TensorHandle ws(mem.get(), {bytes}, DType::kByte);
    p.call(ws.get());
    const BwdResult r = p.outputs();
    for (size_t i = 0; i < r.dgamma.count; ++i) ASSERT_EQ(r.dgamma.get(i), 0.0) << i;
    for (size_t i = 0; i < r.dbeta.count; ++i) ASSERT_EQ(r.dbeta.get(i), 0.0) << i;
  }
}

}  // namespace
}  // namespace normtune::test
