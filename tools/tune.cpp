// `normtune tune`: for each (op, dtype, hidden size) times every forward layout the general
// kernel can take (vectors per thread, threads per row, rows per CTA, persistent grid or
// not) on this GPU, verifies each against the fp64 reference (a layout that fails is never
// emitted), and prints the fastest as the line to paste into registry/tuned/<arch>.def.
#include "tune.h"

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <utility>
#include <ctime>
#include <string>

#include <normtune/common/device_info.h>
#include <normtune/common/error.h>
#include <normtune/normalization.h>
#include <normtune/normtune.h>
#include <normtune/tuning.h>

#include "measure.h"

namespace normtune::tune {

const char* const kHelp = R"(normtune tune [options]
  Finds the fastest forward layout per hidden size on this GPU and prints one tuned-table
  line per (op, dtype, hidden size), ready for registry/tuned/<arch>.def, with the measured
  time and where it came from. Every candidate is verified against the fp64 reference first.
  Options:
    --ops LIST       rmsnorm,layernorm (default both)
    --dtypes LIST    bf16,fp16,fp32 (default bf16)
    --hidden LIST    hidden sizes (default: the sizes of the sm90 table)
    --elements N     rows x hidden of the timed problem (default 33554432 = 32M)
    --reps N         timed repetitions per candidate (default 30)
)";

namespace {

std::vector<std::string> split(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = s.find(',', start);
    out.emplace_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

int ceil_div(int a, int b) { return (a + b - 1) / b; }

std::vector<FwdPlan> candidates(int hidden, int vec, int warp) {
  std::vector<FwdPlan> out;
  const int nvec = hidden / vec;
  for (int n : {1, 2, 4, 8}) {
    int g = ceil_div(nvec, n);
    if (g < warp) {
      int p = 1;
      while (p < g) p *= 2;
      g = p;
    } else {
      g = ceil_div(g, warp) * warp;
    }
    if (g > 512) continue;
    for (int r : {1, 2, 4, 8, 16, 32, 64}) {
      const int threads = g * r;
      if (threads > 512 || threads < 64) continue;
      for (bool persistent : {true, false}) out.push_back(FwdPlan{n, g, 1, r, persistent});
    }
  }
  return out;
}

}  // namespace

int run(const std::vector<std::string_view>& args) {
  std::vector<std::string> ops{"rmsnorm", "layernorm"}, dtypes{"bf16"};
  std::vector<int> hiddens{128,  256,  512,  768,  1024, 1536, 2048,  2560, 3072,
                           3584, 4096, 5120, 6144, 7168, 8192, 12288, 16384};
  size_t elements = size_t{1} << 25;
  int reps = 30;
  for (size_t i = 0; i < args.size(); ++i) {
    auto value = [&]() -> std::string {
      NORMTUNE_CHECK(i + 1 < args.size(), "tune: option ", args[i], " needs a value");
      return std::string(args[++i]);
    };
    if (args[i] == "--ops") {
      ops = split(value());
    } else if (args[i] == "--dtypes") {
      dtypes = split(value());
    } else if (args[i] == "--hidden") {
      hiddens.clear();
      for (const auto& h : split(value())) hiddens.push_back(std::stoi(h));
    } else if (args[i] == "--elements") {
      elements = std::stoull(value());
    } else if (args[i] == "--reps") {
      reps = std::stoi(value());
    } else {
      NORMTUNE_ERROR("tune: unknown option '", args[i], "' (see normtune tune --help)");
    }
  }
  if (device_count() == 0) {
    std::printf("normtune tune: no GPU is visible to this process, so nothing can be tuned.\n");
    return 0;
  }
  const DeviceInfo& dev = device_info(current_device());
  setenv("NORMTUNE_WARN_FALLBACK", "0", 1);  // the general kernel runs on purpose
  bench::Timer timer(dev.l2_bytes);
  char date[16];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%d", std::gmtime(&now));
  std::fprintf(stderr, "tuning on %s (%s)\n", dev.name.c_str(), dev.arch_name.c_str());

  for (const std::string& dname : dtypes) {
    DType t;
    NORMTUNE_CHECK(dtype_from_name(dname, &t) && is_wide_float(t), "tune: dtype ", dname, ": expected bf16, fp16 or fp32");
    const size_t e = dtype_storage_bytes(t, 1);
    const int vec = static_cast<int>(16 / e);
    for (const int hidden : hiddens) {
      const size_t rows = std::max<size_t>(1, elements / hidden);
      const size_t n = rows * hidden;
      bench::DeviceMem x(n * e), z(n * e), gamma(hidden * e), beta(hidden * e), mu(rows * 4), rs(rows * 4);
      bench::fill_random(x.ptr, t, n, 1, 0.3, 1.0);
      bench::fill_random(gamma.ptr, t, hidden, 3, 1.0, 0.2);
      bench::fill_random(beta.ptr, t, hidden, 4, 0.0, 0.5);
      bench::Handle hx(x.ptr, {rows, static_cast<size_t>(hidden)}, t), hz(z.ptr, {rows, static_cast<size_t>(hidden)}, t),
          hg(gamma.ptr, {static_cast<size_t>(hidden)}, t), hb(beta.ptr, {static_cast<size_t>(hidden)}, t),
          hmu(mu.ptr, {rows}, DType::kFloat32), hrs(rs.ptr, {rows}, DType::kFloat32),
          ws(nullptr, {0}, DType::kByte);
      for (const std::string& op : ops) {
        NORMTUNE_CHECK(op == "rmsnorm" || op == "layernorm", "tune: op ", op, ": expected rmsnorm or layernorm");
        const bool ln = op == "layernorm";
        auto call = [&](cudaStream_t s) {
          if (ln) {
            nvte_layernorm_fwd(hx, hg, hb, 1e-5f, hz, hmu, hrs, ws, 0, false, s);
          } else {
            nvte_rmsnorm_fwd(hx, hg, 1e-5f, hz, hrs, ws, 0, false, s);
          }
        };
        // Time every candidate, then verify from the fastest down: the first that matches the
        // fp64 reference is the one printed.
        std::vector<std::pair<double, FwdPlan>> timed;
        for (const FwdPlan& plan : candidates(hidden, vec, dev.warp_size)) {
          // With an override set, forward calls run the general kernel with that plan.
          set_forward_plan_override(&plan);
          call(timer.stream());
          NORMTUNE_CHECK(!last_kernel().tuned, "tune: the override did not select the general kernel");
          timed.emplace_back(timer.time(call, 3, reps).median_us, plan);
        }
        std::sort(timed.begin(), timed.end(),
                  [](const auto& a, const auto& b) { return a.first < b.first; });
        FwdPlan best;
        double best_us = 0;
        for (const auto& [us, plan] : timed) {
          set_forward_plan_override(&plan);
          NORMTUNE_CUDA_CHECK(cudaMemsetAsync(z.ptr, 0xFF, n * e, timer.stream()));
          call(timer.stream());
          NORMTUNE_CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
          try {
            bench::verify(op, t, rows, hidden, x.ptr, nullptr, gamma.ptr, ln ? beta.ptr : nullptr,
                          z.ptr, rs.ptr, 1e-5f);
          } catch (const Error& err) {
            std::fprintf(stderr, "candidate rejected: %s\n", err.what());
            continue;
          }
          best = plan;
          best_us = us;
          break;
        }
        NORMTUNE_CHECK(best_us > 0, "tune: no candidate passed verification for ", op, " ", dname, " ", hidden);
        set_forward_plan_override(nullptr);
        std::printf(
            "NORMTUNE_TUNED(%s, Forward, %s, %s, %s, fp32, %d, (.vecs_per_thread = %d, "
            ".threads_per_row = %d, .ctas_per_row = %d, .rows_per_cta = %d, .persistent = %s), "
            "(.device = \"%s\", .date = \"%s\", .time_us = %.2f, .tool = \"normtune tune %s, %zux%d\"))\n",
            ln ? "LayerNorm" : "RMSNorm", dname.c_str(), dname.c_str(), dname.c_str(), hidden,
            best.vecs_per_thread, best.threads_per_row, best.ctas_per_row, best.rows_per_cta,
            best.persistent ? "true" : "false", dev.name.c_str(), date, best_us, version(), rows, hidden);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace normtune::tune
