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
#include <memory>
#include <vector>
#include <string>

#include <normtune/common/device_info.h>
#include <normtune/common/error.h>
#include <normtune/normalization.h>
#include <normtune/normtune.h>
#include <normtune/tuning.h>

#include "measure.h"

namespace normtune::tune {

const char* const kHelp = R"(normtune tune [options]
  Finds the fastest layout per hidden size on this GPU and prints one tuned-table line per
  (op, dtype, hidden size), ready for registry/tuned/<arch>.def, with the measured time and
  where it came from. Candidates are timed, then verified against the fp64 reference from
  the fastest down: the first that passes is printed.
  Options:
    --ops LIST       rmsnorm,layernorm (forward; the default),
                     rmsnorm_bwd,layernorm_bwd,rmsnorm_bwd_add (backward)
    --dtypes LIST    bf16,fp16,fp32 (default bf16)
    --hidden LIST    hidden sizes (default: the sizes of the sm90 table)
    --elements N     rows x hidden of the timed problem (default 33554432 = 32M; backward
                     at most 16M, so that dgamma is verified over every row)
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

// Threads sharing a row of nvec vectors, n per thread: a power of two below the warp size,
// else whole warps; 0 when more than 512.
int threads_per_row(int nvec, int n, int warp) {
  int g = ceil_div(nvec, n);
  if (g < warp) {
    int p = 1;
    while (p < g) p *= 2;
    return p;
  }
  g = ceil_div(g, warp) * warp;
  return g <= 512 ? g : 0;
}

std::vector<FwdPlan> candidates(int hidden, int vec, int warp) {
  std::vector<FwdPlan> out;
  const int nvec = hidden / vec;
  for (int n : {1, 2, 4, 8}) {
    const int g = threads_per_row(nvec, n, warp);
    if (g == 0) continue;
    for (int r : {1, 2, 4, 8, 16, 32, 64}) {
      const int threads = g * r;
      if (threads > 512 || threads < 64) continue;
      for (bool persistent : {true, false}) out.push_back(FwdPlan{n, g, 1, r, persistent});
    }
  }
  return out;
}

// Backward layouts: 1, 2 or 4 vectors of x and dz per thread, every rows-per-CTA count up
// to 512 threads, and the long-row (column-tiled) path.
std::vector<BwdPlan> backward_candidates(int hidden, int vec, int warp) {
  std::vector<BwdPlan> out{BwdPlan{0, 0, 0}};
  const int nvec = hidden / vec;
  for (int n : {1, 2, 4}) {
    const int g = threads_per_row(nvec, n, warp);
    if (g == 0) continue;
    for (int r : {1, 2, 4, 8, 16, 32, 64}) {
      const int threads = g * r;
      if (threads <= 512 && threads >= 64) out.push_back(BwdPlan{n, g, r});
    }
  }
  return out;
}

struct Problem {
  DType t;
  std::string dname;
  int hidden;
  size_t rows;
};

// Times every backward candidate of `op` (rmsnorm_bwd, layernorm_bwd, rmsnorm_bwd_add) and
// prints the line of the fastest that matches the reference.
void tune_backward(const std::string& op, const Problem& pb, const DeviceInfo& dev, bench::Timer& timer,
                   int reps, const char* date) {
  const DType t = pb.t;
  const size_t e = dtype_storage_bytes(t, 1);
  const size_t rows = pb.rows;
  const size_t hidden = static_cast<size_t>(pb.hidden);
  const size_t n = rows * hidden;
  const bool ln = op == "layernorm_bwd";
  const bool add = op == "rmsnorm_bwd_add";
  bench::DeviceMem x(n * e), dz(n * e), a(n * e), dx(n * e), gamma(hidden * e), beta(hidden * e),
      dgamma(hidden * e), dbeta(hidden * e), mu(rows * 4), rs(rows * 4);
  bench::fill_random(x.ptr, t, n, 1, 0.3, 1.0);
  bench::fill_random(dz.ptr, t, n, 2, 0.0, 1.0);
  bench::fill_random(a.ptr, t, n, 5, 0.0, 1.0);
  bench::fill_random(gamma.ptr, t, hidden, 3, 1.0, 0.2);
  bench::fill_random(beta.ptr, t, hidden, 4, 0.0, 0.5);
  bench::Handle hx(x.ptr, {rows, hidden}, t), hdz(dz.ptr, {rows, hidden}, t), ha(a.ptr, {rows, hidden}, t),
      hdx(dx.ptr, {rows, hidden}, t), hg(gamma.ptr, {hidden}, t), hb(beta.ptr, {hidden}, t),
      hdg(dgamma.ptr, {hidden}, t), hdb(dbeta.ptr, {hidden}, t), hmu(mu.ptr, {rows}, DType::kFloat32),
      hrs(rs.ptr, {rows}, DType::kFloat32), no_ws(nullptr, {0}, DType::kByte);
  // The forward's statistics (written to dx, overwritten below).
  if (ln) {
    nvte_layernorm_fwd(hx, hg, hb, 1e-5f, hdx, hmu, hrs, no_ws, 0, false, timer.stream());
  } else {
    nvte_rmsnorm_fwd(hx, hg, 1e-5f, hdx, hrs, no_ws, 0, false, timer.stream());
  }
  auto call = [&](NVTETensor ws, cudaStream_t s) {
    if (ln) {
      nvte_layernorm_bwd(hdz, hx, hmu, hrs, hg, hdx, hdg, hdb, ws, 0, false, s);
    } else if (add) {
      nvte_rmsnorm_bwd_add(hdz, hx, ha, hrs, hg, hdx, hdg, ws, 0, false, s);
    } else {
      nvte_rmsnorm_bwd(hdz, hx, hrs, hg, hdx, hdg, ws, 0, false, s);
    }
  };
  // Each plan needs its own workspace size: query, allocate (outside the timed region), run.
  struct Prepared {
    std::unique_ptr<bench::DeviceMem> mem;
    std::unique_ptr<bench::Handle> ws;
  };
  auto prepare = [&](const BwdPlan& plan) {
    set_backward_plan_override(&plan);
    bench::Handle query(nullptr, {}, DType::kByte);
    call(query, timer.stream());
    const size_t bytes = nvte_tensor_shape(query).data[0];
    Prepared p;
    p.mem = std::make_unique<bench::DeviceMem>(std::max<size_t>(bytes, 16));
    p.ws = std::make_unique<bench::Handle>(bytes > 0 ? p.mem->ptr : nullptr, std::vector<size_t>{bytes},
                                           DType::kByte);
    return p;
  };
  std::vector<std::pair<double, BwdPlan>> timed;
  for (const BwdPlan& plan : backward_candidates(pb.hidden, static_cast<int>(16 / e), dev.warp_size)) {
    const Prepared p = prepare(plan);
    call(*p.ws, timer.stream());
    NORMTUNE_CHECK(!last_kernel().tuned, "tune: the override did not select the general kernel");
    timed.emplace_back(timer.time([&](cudaStream_t s) { call(*p.ws, s); }, 3, reps).median_us, plan);
  }
  std::sort(timed.begin(), timed.end(), [](const auto& l, const auto& r) { return l.first < r.first; });
  BwdPlan best;
  double best_us = 0;
  for (const auto& [us, plan] : timed) {
    const Prepared p = prepare(plan);
    NORMTUNE_CUDA_CHECK(cudaMemsetAsync(dx.ptr, 0xFF, n * e, timer.stream()));
    NORMTUNE_CUDA_CHECK(cudaMemsetAsync(dgamma.ptr, 0xFF, hidden * e, timer.stream()));
    call(*p.ws, timer.stream());
    NORMTUNE_CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
    try {
      bench::verify_bwd(op, t, rows, hidden, dz.ptr, x.ptr, add ? a.ptr : nullptr, mu.ptr, rs.ptr,
                        gamma.ptr, dx.ptr, dgamma.ptr, dbeta.ptr);
    } catch (const Error& err) {
      std::fprintf(stderr, "candidate rejected: %s\n", err.what());
      continue;
    }
    best = plan;
    best_us = us;
    break;
  }
  set_backward_plan_override(nullptr);
  NORMTUNE_CHECK(best_us > 0, "tune: no candidate passed verification for ", op, " ", pb.dname, " ", hidden);
  const char* d = pb.dname.c_str();
  std::printf(
      "NORMTUNE_TUNED(%s, %s, %s, %s, %s, fp32, %d, (.vecs_per_thread = %d, .threads_per_row = %d, "
      ".rows_per_cta = %d), (.device = \"%s\", .date = \"%s\", .time_us = %.2f, .tool = \"normtune tune "
      "%s, %zux%d\"))\n",
      ln ? "LayerNorm" : "RMSNorm", add ? "BackwardAdd" : "Backward", d, d, d, pb.hidden,
      best.vecs_per_thread, best.threads_per_row, best.rows_per_cta, dev.name.c_str(), date, best_us,
      version(), rows, pb.hidden);
  std::fflush(stdout);
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
        if (op == "rmsnorm_bwd" || op == "layernorm_bwd" || op == "rmsnorm_bwd_add") {
          // 16M elements: the fastest candidate's dx and dgamma are checked over every row.
          const size_t bwd_rows = std::max<size_t>(1, std::min(elements, size_t{16} << 20) / hidden);
          tune_backward(op, Problem{t, dname, hidden, bwd_rows}, dev, timer, reps, date);
          continue;
        }
        NORMTUNE_CHECK(op == "rmsnorm" || op == "layernorm", "tune: op ", op,
                       ": expected rmsnorm, layernorm, rmsnorm_bwd, layernorm_bwd or rmsnorm_bwd_add");
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
