// `normtune tune`: for each (op, dtype, hidden size) times every layout the general kernel
// can take (the planner's candidate lists: vectors per thread, threads per row, rows per CTA,
// persistent grid or not, registers / streamed / staged in shared memory, clusters for long
// forward rows, the backward's column path) on this GPU, verifies from the fastest down
// against the fp64 reference (a layout that fails is never emitted), and prints the winner
// as the line to paste into registry/tuned/<arch>.def.
#include "tune.h"

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <utility>
#include <ctime>
#include <functional>
#include <memory>
#include <vector>
#include <string>

#include <normtune/common/device_info.h>
#include <normtune/common/error.h>
#include <normtune/normalization.h>
#include <normtune/normtune.h>
#include <normtune/tuning.h>

#include "measure.h"
#include "normalization/src/kernels/block_scale.h"

namespace normtune::tune {

const char* const kHelp = R"(normtune tune [options]
  Finds the fastest layout per hidden size on this GPU and prints one tuned-table line per
  (op, dtype, hidden size), ready for registry/tuned/<arch>.def, with the measured time and
  where it came from. Candidates are timed, then verified against the fp64 reference from
  the fastest down: the first that passes is printed.
  Options:
    --ops LIST       rmsnorm,layernorm (forward; the default), rmsnorm_add (fused add),
                     rmsnorm_bwd,layernorm_bwd,rmsnorm_bwd_add (backward)
    --dtypes LIST    bf16,fp16,fp32 (default bf16)
    --out LIST       z of the forward ops: same (x's dtype; the default), fp8 (per-tensor
                     scaled e4m3: the lines for an fp8e4m3 otype), mxfp8, nvfp4, mxfp4,
                     fp8b128 (row-wise block-scaled z, as in bench: NORMTUNE_TUNED_SCALED
                     lines, staged and pipelined layouts, whole blocks per group of lanes)
    --hidden LIST    hidden sizes (default: the sm90 table's 17, 128 to 16384)
    --elements N     rows x hidden of the timed problem (default 33554432 = 32M; backward
                     at most 16M, so that dgamma is verified over every row)
    --confirm N      the candidates within 3% of the fastest (at most 6) are checked
                     (64 sampled rows) and timed again on a problem of N elements and
                     ranked by that time, which the line then records (default 134217728
                     = 128M, the row counts of a training step; 0: off). Layouts that tie
                     on 32M elements part on larger problems (the pipelined and staged
                     RMSNorm lines at 4096-8192: within 1% on 32M elements, 1.1x apart at
                     32768 x 8192); the backward's long-row layouts, timed on 16M elements
                     (a few rows per cluster), too
    --clusters N     also try splitting rows of 1024+ vectors over clusters of up to N CTAs
                     (forward: slices in registers or staged in shared memory; backward: the
                     pipelined layout) (default 8; 16 needs the non-portable cluster size; 1:
                     none). A layout the GPU cannot launch is skipped with a message.
    --rows LIST      any (the default: lines for every row count, timed on the problem
                     above), decode (NORMTUNE_TUNED_DECODE lines for calls of at most 128
                     rows, forward with z same or fp8 and backward: each candidate timed per
                     call in a CUDA graph at 1 and at 128 rows, ranked by the sum)
    --backends LIST  native,cudnn (the default): cuDNN's plan is timed beside the native
                     layouts on the problem the native winner's time was recorded on, its
                     result checked; where it is faster by more than 1%, a
                     NORMTUNE_TUNED_CUDNN line follows the native line (the native line
                     stays: it runs where cuDNN cannot). cuDNN runs RMSNorm and LayerNorm
                     forward (z of x's dtype) and backward; it is skipped with a message where
                     it does not run (no cuDNN in the build, libcudnn missing, other ops)
    --reps N         timed repetitions per candidate (default 30)
    --verbose        print every candidate's time to stderr
  Times are those of the general kernel running each layout; the line compiles the layout
  with its hidden size, threads per row, cluster size (and, staged, vectors per thread)
  fixed, which can run faster, by different amounts per layout. Where the finalists are
  close, time the compiled lines with tools/ab.sh before choosing. A forward pipelined
  layout on clusters is timed with its clusters walking fixed rows (the general kernel) and
  printed with .dynamic_rows = false; whether its clusters should draw their rows from a
  counter instead (true) is for tools/ab.sh variant-lines to say.
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

struct Problem {
  DType t;
  DType o;  // z's dtype
  ScalingMode scaling;
  std::string dname;
  int hidden;
  size_t rows;
  RowClass row_class = RowClass::kAny;
};

// What the tuner races: the native layouts, and cuDNN's plan where it runs.
struct Options {
  int reps = 30;
  bool race_cudnn = true;
  bool verbose = false;
  const char* date = "";
};

// The problem a line's time was measured on ("16384x2048", "per call in a CUDA graph, 1 + 128 rows").
std::string shape_of(const Problem& pb) {
  return pb.row_class == RowClass::kDecode
             ? detail::concat("per call in a CUDA graph, 1 + ", kDecodeMaxRows, " rows")
             : detail::concat(pb.rows, "x", pb.hidden);
}

// The tensors of a forward problem of rows x hidden in dtype t, filled with the same
// distributions whatever the size.
struct FwdTensors {
  FwdTensors(DType t, size_t rows, int hidden)
      : rows(rows),
        x(rows * hidden * dtype_storage_bytes(t, 1)),
        res(rows * hidden * dtype_storage_bytes(t, 1)),
        res_out(rows * hidden * dtype_storage_bytes(t, 1)),
        gamma(hidden * dtype_storage_bytes(t, 1)),
        beta(hidden * dtype_storage_bytes(t, 1)),
        mu(rows * 4),
        rs(rows * 4),
        hx(x.ptr, {rows, static_cast<size_t>(hidden)}, t),
        hg(gamma.ptr, {static_cast<size_t>(hidden)}, t),
        hb(beta.ptr, {static_cast<size_t>(hidden)}, t),
        hmu(mu.ptr, {rows}, DType::kFloat32),
        hrs(rs.ptr, {rows}, DType::kFloat32),
        hres(res.ptr, {rows, static_cast<size_t>(hidden)}, t),
        hro(res_out.ptr, {rows, static_cast<size_t>(hidden)}, t) {
    const size_t n = rows * hidden;
    bench::fill_random(x.ptr, t, n, 1, 0.3, 1.0);
    bench::fill_random(res.ptr, t, n, 2, 0.0, 1.0);
    bench::fill_random(gamma.ptr, t, hidden, 3, 1.0, 0.2);
    bench::fill_random(beta.ptr, t, hidden, 4, 0.0, 0.5);
  }
  size_t rows;
  bench::DeviceMem x, res, res_out, gamma, beta, mu, rs;
  bench::Handle hx, hg, hb, hmu, hrs, hres, hro;
};

// The forward call of `op` on T with z.
bench::CallWithWorkspace forward_call(const OpInfo& op, const FwdTensors& T, const bench::ZOutput& z) {
  return [&op, &T, &z](NVTETensor ws, cudaStream_t s) {
    if (op.norm == NormType::kLayerNorm) {
      nvte_layernorm_fwd(T.hx, T.hg, T.hb, 1e-5f, z, T.hmu, T.hrs, ws, 0, false, s);
    } else if (op.stage == Stage::kForwardAdd) {
      normtune_rmsnorm_add_fwd(T.hx, T.hres, T.hg, 1e-5f, z, T.hro, T.hrs, ws, 0, false, s);
    } else {
      nvte_rmsnorm_fwd(T.hx, T.hg, 1e-5f, z, T.hrs, ws, 0, false, s);
    }
  };
}

NormKey key_of(const OpInfo& op, const Problem& pb) {
  NormKey key = make_key(op.norm, op.stage, pb.t, pb.t, pb.o, static_cast<uint32_t>(pb.hidden), pb.scaling);
  key.rows = pb.row_class;
  return key;
}

// The line for the fastest plan: "<NORMTUNE_TUNED(...)>" from the plan's field table.
template <typename Plan>
void print_line(const OpInfo& op, const Problem& pb, const Plan& plan, double us, const DeviceInfo& dev,
                const char* date) {
  const std::string tool = detail::concat("normtune tune ", version(), ", ", shape_of(pb));
  std::printf("%s\n", tuned_table_line(key_of(op, pb), plan, Provenance{dev.name.c_str(), date, us, tool.c_str()}).c_str());
  std::fflush(stdout);
}

using Run = std::function<void(cudaStream_t)>;

// cuDNN's plan for `call` (TransformerEngine's switch on for it): check(run) runs it with its
// outputs poisoned and verifies them (throws on a mismatch), then timing(run) gives its µs.
// -1 when cuDNN does not run the call here (not built in, libcudnn not found, a call it does
// not implement, a wrong result): said on stderr.
double cudnn_time(const bench::CallWithWorkspace& call, cudaStream_t stream, const std::function<double(const Run&)>& timing,
                  const std::function<void(const Run&)>& check, const std::string& what) {
  const bench::BackendScope scope("cudnn");
  try {
    const bench::Workspace ws(call, stream);
    const Run run = [&](cudaStream_t s) { call(ws, s); };
    check(run);
    return timing(run);
  } catch (const Error& err) {
    std::fprintf(stderr, "%s: cuDNN not timed: %s\n", what.c_str(), err.what());
    return -1;
  }
}

// After the native line: the line naming cuDNN, when its plan beat the native winner by more
// than 1% on the same problem.
void print_cudnn_line_if_faster(const OpInfo& op, const Problem& pb, double native_us, double cudnn_us,
                                const DeviceInfo& dev, const char* date) {
  std::fprintf(stderr, "%s %s %d (%s): native %.2f us, cuDNN %s\n", op.name, pb.dname.c_str(), pb.hidden,
               shape_of(pb).c_str(), native_us, cudnn_us < 0 ? "-" : detail::concat(cudnn_us, " us").c_str());
  if (cudnn_us < 0 || cudnn_us >= 0.99 * native_us) return;
  const std::string tool = detail::concat("normtune tune ", version(), ", ", shape_of(pb), ", native ", native_us, " us");
  std::printf("%s\n", tuned_backend_table_line(key_of(op, pb), Backend::kCudnn,
                                               Provenance{dev.name.c_str(), date, cudnn_us, tool.c_str()})
                          .c_str());
  std::fflush(stdout);
}

// Verifies the timed candidates from the fastest down and returns the first whose result
// matches the fp64 reference, with its time: run(plan) runs it with its outputs poisoned and
// waits for it; verify() throws normtune::Error on a mismatch (the candidate is reported and
// skipped). No candidate passing is an error naming `what`.
template <typename Plan, typename Run, typename Verify>
std::pair<Plan, double> fastest_verified(std::vector<std::pair<double, Plan>> timed, Run&& run, Verify&& verify,
                                         const std::string& what) {
  std::sort(timed.begin(), timed.end(), [](const auto& l, const auto& r) { return l.first < r.first; });
  for (const auto& [us, plan] : timed) {
    run(plan);
    try {
      verify();
    } catch (const Error& err) {
      std::fprintf(stderr, "candidate rejected: %s\n", err.what());
      continue;
    }
    return {plan, us};
  }
  NORMTUNE_ERROR("tune: no candidate passed verification for ", what);
}

// The backward's tensors on `rows` x `hidden` (the forward's statistics written once), and the
// call of `op` on them.
struct BwdTensors {
  BwdTensors(const OpInfo& op, DType t, size_t rows, size_t hidden, cudaStream_t stream)
      : op(op), t(t), rows(rows), hidden(hidden), e(dtype_storage_bytes(t, 1)),
        x(rows * hidden * e), dz(rows * hidden * e), a(rows * hidden * e), dx(rows * hidden * e),
        gamma(hidden * e), beta(hidden * e), dgamma(hidden * e), dbeta(hidden * e), mu(rows * 4), rs(rows * 4),
        hx(x.ptr, {rows, hidden}, t), hdz(dz.ptr, {rows, hidden}, t), ha(a.ptr, {rows, hidden}, t),
        hdx(dx.ptr, {rows, hidden}, t), hg(gamma.ptr, {hidden}, t), hb(beta.ptr, {hidden}, t),
        hdg(dgamma.ptr, {hidden}, t), hdb(dbeta.ptr, {hidden}, t), hmu(mu.ptr, {rows}, DType::kFloat32),
        hrs(rs.ptr, {rows}, DType::kFloat32) {
    const size_t n = rows * hidden;
    bench::fill_random(x.ptr, t, n, 1, 0.3, 1.0);
    bench::fill_random(dz.ptr, t, n, 2, 0.0, 1.0);
    bench::fill_random(a.ptr, t, n, 5, 0.0, 1.0);
    bench::fill_random(gamma.ptr, t, hidden, 3, 1.0, 0.2);
    bench::fill_random(beta.ptr, t, hidden, 4, 0.0, 0.5);
    // The forward's statistics (its z written to dx, overwritten by every backward call).
    const bench::CallWithWorkspace fwd = [&](NVTETensor ws, cudaStream_t s) {
      if (ln()) {
        nvte_layernorm_fwd(hx, hg, hb, 1e-5f, hdx, hmu, hrs, ws, 0, false, s);
      } else {
        nvte_rmsnorm_fwd(hx, hg, 1e-5f, hdx, hrs, ws, 0, false, s);
      }
    };
    fwd(bench::Workspace(fwd, stream), stream);
  }
  bool ln() const { return op.norm == NormType::kLayerNorm; }
  bool add() const { return op.stage == Stage::kBackwardAdd; }
  bench::CallWithWorkspace call() const {
    return [this](NVTETensor ws, cudaStream_t s) {
      if (ln()) {
        nvte_layernorm_bwd(hdz, hx, hmu, hrs, hg, hdx, hdg, hdb, ws, 0, false, s);
      } else if (add()) {
        nvte_rmsnorm_bwd_add(hdz, hx, ha, hrs, hg, hdx, hdg, ws, 0, false, s);
      } else {
        nvte_rmsnorm_bwd(hdz, hx, hrs, hg, hdx, hdg, ws, 0, false, s);
      }
    };
  }
  void poison(cudaStream_t s) const {
    NORMTUNE_CUDA_CHECK(cudaMemsetAsync(dx.ptr, 0xFF, rows * hidden * e, s));
    NORMTUNE_CUDA_CHECK(cudaMemsetAsync(dgamma.ptr, 0xFF, hidden * e, s));
    if (ln()) NORMTUNE_CUDA_CHECK(cudaMemsetAsync(dbeta.ptr, 0xFF, hidden * e, s));
  }
  // Against the fp64 reference: every row (dx, dgamma, dbeta) up to 16M elements, else 64
  // sampled rows of dx.
  void verify() const {
    bench::verify_bwd(op, t, rows, hidden, dz.ptr, x.ptr, add() ? a.ptr : nullptr, mu.ptr, rs.ptr, gamma.ptr, dx.ptr,
                      dgamma.ptr, dbeta.ptr);
  }

  const OpInfo& op;
  DType t;
  size_t rows, hidden, e;
  bench::DeviceMem x, dz, a, dx, gamma, beta, dgamma, dbeta, mu, rs;
  bench::Handle hx, hdz, ha, hdx, hg, hb, hdg, hdb, hmu, hrs;
};

// Times every backward candidate of `op` (a backward op) on pb.rows rows and prints the line of
// the fastest that matches the reference. With confirm_rows > pb.rows, the candidates within 3%
// of the fastest (at most 6) are timed again on confirm_rows rows (checked there on sampled
// rows) and ranked by that time, which the line records, as the forward's --confirm: on 16M
// elements a long-row layout's persistent clusters see a few rows each.
void tune_backward(const OpInfo& op, const Problem& pb, size_t confirm_rows, int max_cluster, const DeviceInfo& dev,
                   bench::Timer& timer, const Options& opt) {
  const int reps = opt.reps;
  const size_t hidden = static_cast<size_t>(pb.hidden);
  const size_t e = dtype_storage_bytes(pb.t, 1);
  const BwdTensors small(op, pb.t, pb.rows, hidden, timer.stream());
  const bench::CallWithWorkspace call = small.call();
  // Each plan needs its own workspace size: query, allocate (outside the timed region), run.
  auto prepare = [&](const BwdPlan& plan, const bench::CallWithWorkspace& c) {
    set_backward_plan_override(&plan);
    return std::make_unique<bench::Workspace>(c, timer.stream());
  };
  std::vector<std::pair<double, BwdPlan>> timed;
  for (const BwdPlan& plan : backward_plan_candidates(pb.hidden, static_cast<int>(16 / e), dev.warp_size, max_cluster)) {
    try {
      const auto ws = prepare(plan, call);
      call(*ws, timer.stream());
      NORMTUNE_CHECK(!last_kernel().tuned, "tune: the override did not select the general kernel");
      timed.emplace_back(timer.time([&](cudaStream_t s) { call(*ws, s); }, 3, reps).median_us, plan);
    } catch (const Error& err) {  // a layout the device cannot launch (a cluster too large for it)
      std::fprintf(stderr, "candidate %s skipped: %s\n", config_string(plan).c_str(), err.what());
      continue;
    }
    if (opt.verbose) std::fprintf(stderr, "  %8.2f us  %s\n", timed.back().first, config_string(plan).c_str());
  }
  std::sort(timed.begin(), timed.end(), [](const auto& l, const auto& r) { return l.first < r.first; });
  // The finalists on the larger problem: ranked by that time, verified first, in that order.
  std::vector<std::pair<double, BwdPlan>> confirmed;
  std::unique_ptr<BwdTensors> big;
  if (confirm_rows > pb.rows && !timed.empty()) {
    big = std::make_unique<BwdTensors>(op, pb.t, confirm_rows, hidden, timer.stream());
    const bench::CallWithWorkspace call_big = big->call();
    for (size_t k = 0; k < timed.size() && k < 6 && timed[k].first <= 1.03 * timed.front().first; ++k) {
      try {
        const auto ws = prepare(timed[k].second, call_big);
        big->poison(timer.stream());
        call_big(*ws, timer.stream());
        NORMTUNE_CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
        big->verify();
        confirmed.emplace_back(timer.time([&](cudaStream_t s) { call_big(*ws, s); }, 3, reps).median_us, timed[k].second);
      } catch (const Error& err) {  // not a finalist: verified and ranked with the others
        std::fprintf(stderr, "finalist %s dropped on %zux%zu: %s\n", config_string(timed[k].second).c_str(), confirm_rows,
                     hidden, err.what());
        continue;
      }
      if (opt.verbose) {
        std::fprintf(stderr, "  %8.2f us  %s (%zux%zu)\n", confirmed.back().first, config_string(timed[k].second).c_str(),
                     confirm_rows, hidden);
      }
    }
    std::sort(confirmed.begin(), confirmed.end(), [](const auto& l, const auto& r) { return l.first < r.first; });
  }
  // fastest_verified orders by the first member: the confirmed finalists as 0, 1, ..., then
  // the others in their order.
  std::vector<std::pair<double, BwdPlan>> order;
  for (const auto& c : confirmed) order.emplace_back(static_cast<double>(order.size()), c.second);
  for (const auto& r : timed) {
    const bool in = std::any_of(confirmed.begin(), confirmed.end(), [&](const auto& c) { return c.second == r.second; });
    if (!in) order.emplace_back(static_cast<double>(order.size()), r.second);
  }
  const std::pair<BwdPlan, double> verified = fastest_verified(
      order,
      [&](const BwdPlan& plan) {
        const auto ws = prepare(plan, call);
        small.poison(timer.stream());
        call(*ws, timer.stream());
        NORMTUNE_CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
      },
      [&] { small.verify(); }, detail::concat(op.name, " ", pb.dname, " ", hidden));
  set_backward_plan_override(nullptr);
  const BwdPlan best = verified.first;
  // The time recorded: on the larger problem for a confirmed finalist, else on the timed one.
  const auto hit = std::find_if(confirmed.begin(), confirmed.end(), [&](const auto& c) { return c.second == best; });
  const bool on_big = hit != confirmed.end();
  const double best_us =
      on_big ? hit->first : std::find_if(timed.begin(), timed.end(), [&](const auto& c) { return c.second == best; })->first;
  Problem line_pb = pb;
  if (on_big) line_pb.rows = confirm_rows;
  print_line(op, line_pb, best, best_us, dev, opt.date);
  if (opt.race_cudnn && !small.add()) {
    // cuDNN on the problem the native time was recorded on.
    const BwdTensors& T = on_big ? *big : small;
    const bench::CallWithWorkspace cudnn_call = T.call();
    const double cudnn_us = cudnn_time(
        cudnn_call, timer.stream(), [&](const Run& run) { return timer.time(run, 3, reps).median_us; },
        [&](const Run& run) {
          T.poison(timer.stream());
          run(timer.stream());
          NORMTUNE_CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
          T.verify();
        },
        detail::concat(op.name, " ", pb.dname, " ", hidden));
    print_cudnn_line_if_faster(op, line_pb, best_us, cudnn_us, dev, opt.date);
  }
}

// The general kernel's plan, forward or backward, overridden (nullptr: not).
void set_plan_override(const FwdPlan* plan) { set_forward_plan_override(plan); }
void set_plan_override(const BwdPlan* plan) { set_backward_plan_override(plan); }

// The decode line of `op`: every candidate layout timed per call in a CUDA graph (inputs in L2,
// launch gaps removed: the latency of a serving step) at 1 and at kDecodeMaxRows rows (each
// call with its own workspace, sized by the plan's query outside the graph), ranked by the sum,
// verified from the fastest down at both row counts (poison, both calls, verify). With
// race_cudnn, cuDNN's plan is timed and checked the same way and named where it is faster.
template <typename Plan>
void tune_decode(const OpInfo& op, Problem pb, const std::vector<Plan>& candidates,
                 const bench::CallWithWorkspace& call_one, const bench::CallWithWorkspace& call_many,
                 const std::function<void(cudaStream_t)>& poison, const std::function<void()>& verify,
                 bool race_cudnn, const DeviceInfo& dev, bench::Timer& timer, const Options& opt) {
  const int calls = 100, graph_reps = std::max(10, opt.reps);
  auto decode_us = [&] {
    const bench::Workspace w1(call_one, timer.stream()), w128(call_many, timer.stream());
    return timer.time_graph([&](cudaStream_t s) { call_one(w1, s); }, calls, graph_reps).median_us +
           timer.time_graph([&](cudaStream_t s) { call_many(w128, s); }, calls, graph_reps).median_us;
  };
  auto run_both = [&] {
    const bench::Workspace w1(call_one, timer.stream()), w128(call_many, timer.stream());
    poison(timer.stream());
    call_one(w1, timer.stream());
    call_many(w128, timer.stream());
    NORMTUNE_CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
  };
  const std::string what = detail::concat(op.name, " ", pb.dname, " ", pb.hidden, " decode");
  std::vector<std::pair<double, Plan>> timed;
  for (const Plan& plan : candidates) {
    set_plan_override(&plan);
    try {
      timed.emplace_back(decode_us(), plan);
    } catch (const Error& err) {  // a layout the device cannot launch
      std::fprintf(stderr, "candidate %s skipped: %s\n", config_string(plan).c_str(), err.what());
      continue;
    }
    NORMTUNE_CHECK(!last_kernel().tuned, "tune: the override did not select the general kernel");
    if (opt.verbose) std::fprintf(stderr, "  %8.2f us  %s (decode)\n", timed.back().first, config_string(plan).c_str());
  }
  set_plan_override(static_cast<const Plan*>(nullptr));
  const std::pair<Plan, double> verified = fastest_verified(
      timed,
      [&](const Plan& plan) {
        set_plan_override(&plan);
        run_both();
      },
      verify, what);
  set_plan_override(static_cast<const Plan*>(nullptr));
  pb.row_class = RowClass::kDecode;
  pb.rows = kDecodeMaxRows;
  print_line(op, pb, verified.first, verified.second, dev, opt.date);
  if (race_cudnn) {
    // (Both row counts: run_both and decode_us make their own workspaces.)
    const double cudnn_us = cudnn_time(
        call_many, timer.stream(), [&](const Run&) { return decode_us(); },
        [&](const Run&) {
          run_both();
          verify();
        },
        what);
    print_cudnn_line_if_faster(op, pb, verified.second, cudnn_us, dev, opt.date);
  }
}

// A forward op's decode line (z of x's type or per-tensor FP8; cuDNN raced for RMSNorm and
// LayerNorm with z of x's type).
void tune_forward_decode(const OpInfo& op, const Problem& pb, bench::ZFormat out, int max_cluster,
                         const DeviceInfo& dev, bench::Timer& timer, const Options& opt) {
  const bool ln = op.norm == NormType::kLayerNorm;
  const bool add = op.stage == Stage::kForwardAdd;
  const size_t hidden = static_cast<size_t>(pb.hidden);
  const int vec = static_cast<int>(16 / dtype_storage_bytes(pb.t, 1));
  const FwdTensors one(pb.t, 1, pb.hidden), many(pb.t, kDecodeMaxRows, pb.hidden);
  const bench::ZOutput z_one(out, pb.t, 1, hidden), z_many(out, pb.t, kDecodeMaxRows, hidden);
  tune_decode<FwdPlan>(
      op, pb, forward_plan_candidates(pb.hidden, vec, dev.warp_size, max_cluster), forward_call(op, one, z_one),
      forward_call(op, many, z_many),
      [&](cudaStream_t s) {
        z_one.poison(s);
        z_many.poison(s);
      },
      [&] {
        bench::verify(op, pb.t, 1, pb.hidden, one.x.ptr, add ? one.res.ptr : nullptr, one.gamma.ptr,
                      ln ? one.beta.ptr : nullptr, z_one, one.rs.ptr, 1e-5f);
        bench::verify(op, pb.t, kDecodeMaxRows, pb.hidden, many.x.ptr, add ? many.res.ptr : nullptr, many.gamma.ptr,
                      ln ? many.beta.ptr : nullptr, z_many, many.rs.ptr, 1e-5f);
      },
      opt.race_cudnn && !add && out == bench::ZFormat::kSame, dev, timer, opt);
}

// A backward op's decode line (dx, dgamma, dbeta checked over every row at both row counts;
// cuDNN raced for RMSNorm and LayerNorm).
void tune_backward_decode(const OpInfo& op, const Problem& pb, int max_cluster, const DeviceInfo& dev,
                          bench::Timer& timer, const Options& opt) {
  const size_t hidden = static_cast<size_t>(pb.hidden);
  const int vec = static_cast<int>(16 / dtype_storage_bytes(pb.t, 1));
  const BwdTensors one(op, pb.t, 1, hidden, timer.stream()), many(op, pb.t, kDecodeMaxRows, hidden, timer.stream());
  tune_decode<BwdPlan>(
      op, pb, backward_plan_candidates(pb.hidden, vec, dev.warp_size, max_cluster), one.call(), many.call(),
      [&](cudaStream_t s) {
        one.poison(s);
        many.poison(s);
      },
      [&] {
        one.verify();
        many.verify();
      },
      opt.race_cudnn && !one.add(), dev, timer, opt);
}

}  // namespace

int run(const std::vector<std::string_view>& args) {
  std::vector<const OpInfo*> ops{find_op("rmsnorm"), find_op("layernorm")};
  std::vector<std::string> dtypes{"bf16"};
  std::vector<bench::ZFormat> outs{bench::ZFormat::kSame};
  std::vector<int> hiddens{128,  256,  512,  768,  1024, 1536, 2048,  2560, 3072,
                           3584, 4096, 5120, 6144, 7168, 8192, 12288, 16384};
  size_t elements = size_t{1} << 25;
  size_t confirm = size_t{1} << 27;
  int clusters = kMaxPortableCtasPerRow;
  Options opt;
  std::vector<RowClass> row_classes{RowClass::kAny};
  for (size_t i = 0; i < args.size(); ++i) {
    auto value = [&]() -> std::string {
      NORMTUNE_CHECK(i + 1 < args.size(), "tune: option ", args[i], " needs a value");
      return std::string(args[++i]);
    };
    if (args[i] == "--ops") {
      ops.clear();
      for (const std::string& name : split(value())) {
        const OpInfo* op = find_op(name);
        NORMTUNE_CHECK(op != nullptr, "tune: op ", name, ": expected one of ", op_names(true, true));
        ops.push_back(op);
      }
    } else if (args[i] == "--dtypes") {
      dtypes = split(value());
    } else if (args[i] == "--out") {
      outs.clear();
      for (const std::string& name : split(value())) {
        bench::ZFormat f;
        // (Column-wise MXFP8 and NVFP4 take their own row-tile kernels: no table lines.)
        NORMTUNE_CHECK(bench::z_format_from_name(name, &f) && !bench::has_colwise(f), "tune: --out ",
                       name, ": expected same, fp8, mxfp8, nvfp4, mxfp4 or fp8b128");
        outs.push_back(f);
      }
    } else if (args[i] == "--hidden") {
      hiddens.clear();
      for (const auto& h : split(value())) hiddens.push_back(std::stoi(h));
    } else if (args[i] == "--elements") {
      elements = std::stoull(value());
    } else if (args[i] == "--confirm") {
      const std::string v(value());
      NORMTUNE_CHECK(!v.empty() && v.find_first_not_of("0123456789") == std::string::npos,
                     "tune: --confirm: expected a count of elements (0: off), got '", v, "'");
      confirm = std::stoull(v);
    } else if (args[i] == "--clusters") {
      clusters = std::stoi(value());
      NORMTUNE_CHECK(clusters >= 1 && clusters <= kMaxCtasPerRow, "tune: --clusters: expected 1..", kMaxCtasPerRow);
    } else if (args[i] == "--verbose") {
      opt.verbose = true;
    } else if (args[i] == "--reps") {
      opt.reps = std::stoi(value());
    } else if (args[i] == "--rows") {
      row_classes.clear();
      for (const std::string& name : split(value())) {
        NORMTUNE_CHECK(name == "any" || name == "decode", "tune: --rows ", name, ": expected any or decode");
        row_classes.push_back(name == "any" ? RowClass::kAny : RowClass::kDecode);
      }
    } else if (args[i] == "--backends") {
      opt.race_cudnn = false;
      bool native = false;
      for (const std::string& name : split(value())) {
        NORMTUNE_CHECK(name == "native" || name == "cudnn", "tune: --backends ", name, ": expected native or cudnn");
        native = native || name == "native";
        opt.race_cudnn = opt.race_cudnn || name == "cudnn";
      }
      NORMTUNE_CHECK(native, "tune: --backends: the native layouts are always timed (a cuDNN line needs the native "
                             "line beside it); expected native or native,cudnn");
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
  // However the tuning ends (an error leaves through here), no override points at a plan
  // that is gone.
  struct ClearOverrides {
    ~ClearOverrides() {
      set_forward_plan_override(nullptr);
      set_backward_plan_override(nullptr);
    }
  } clear_overrides;
  bench::Timer timer(dev.l2_bytes);
  char date[16];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%d", std::gmtime(&now));
  opt.date = date;
  const int reps = opt.reps;
  const bool any_rows = std::find(row_classes.begin(), row_classes.end(), RowClass::kAny) != row_classes.end();
  const bool decode_rows = std::find(row_classes.begin(), row_classes.end(), RowClass::kDecode) != row_classes.end();
  std::fprintf(stderr, "tuning on %s (%s)\n", dev.name.c_str(), dev.arch_name.c_str());

  for (const std::string& dname : dtypes) {
    DType t;
    NORMTUNE_CHECK(dtype_from_name(dname, &t) && is_wide_float(t), "tune: dtype ", dname, ": expected bf16, fp16 or fp32");
    const size_t e = dtype_storage_bytes(t, 1);
    const int vec = static_cast<int>(16 / e);
    for (const int hidden : hiddens) {
      const size_t rows = std::max<size_t>(1, elements / hidden);
      if (decode_rows) {
        for (const bench::ZFormat out : outs) {
          for (const OpInfo* op : ops) {
            if (is_backward(op->stage)) {
              if (out == bench::ZFormat::kSame) {
                tune_backward_decode(*op, Problem{t, t, ScalingMode::kNone, dname, hidden, 1},
                                     dev.supports_clusters ? clusters : 1, dev, timer, opt);
              }
              continue;
            }
            if (out != bench::ZFormat::kSame && out != bench::ZFormat::kFp8) {
              std::fprintf(stderr, "%s z %s: no decode line (forward ops: z same or fp8)\n", op->name,
                           bench::z_format_name(out));
              continue;
            }
            const bench::ZOutput probe(out, t, 1, static_cast<size_t>(hidden));
            tune_forward_decode(*op, Problem{t, probe.dtype(), ScalingMode::kNone, dname, hidden, 1}, out,
                                dev.supports_clusters ? clusters : 1, dev, timer, opt);
          }
        }
      }
      if (!any_rows) continue;
      const FwdTensors small(t, rows, hidden);
      // The confirmation problem (forward only), when it is larger.
      const size_t big_rows = confirm / hidden;
      const bool forward_ops = std::any_of(ops.begin(), ops.end(), [](const OpInfo* o) { return !is_backward(o->stage); });
      const std::unique_ptr<FwdTensors> big =
          big_rows > rows && forward_ops ? std::make_unique<FwdTensors>(t, big_rows, hidden) : nullptr;
      if (forward_ops && confirm != 0 && big == nullptr) {
        std::fprintf(stderr, "hidden %d: no confirmation run (--confirm %zu elements is not more than the %zux%d timed)\n",
                     hidden, confirm, rows, hidden);
      }
      for (const bench::ZFormat out : outs) {
      const bench::ZOutput hz(out, t, rows, static_cast<size_t>(hidden));
      const std::unique_ptr<bench::ZOutput> hz_big =
          big ? std::make_unique<bench::ZOutput>(out, t, big_rows, static_cast<size_t>(hidden)) : nullptr;
      for (const OpInfo* op_ptr : ops) {
        const OpInfo& op = *op_ptr;
        if (is_backward(op.stage)) {
          // 16M elements: the fastest candidate's dx and dgamma are checked over every row.
          // The finalists again on --confirm's elements (their time recorded), as forward.
          const size_t bwd_rows = std::max<size_t>(1, std::min(elements, size_t{16} << 20) / hidden);
          if (out == bench::ZFormat::kSame) {
            tune_backward(op, Problem{t, t, ScalingMode::kNone, dname, hidden, bwd_rows}, confirm / hidden,
                          dev.supports_clusters ? clusters : 1, dev, timer, opt);
          }
          continue;
        }
        const bool ln = op.norm == NormType::kLayerNorm;
        const bool add = op.stage == Stage::kForwardAdd;
        const bench::CallWithWorkspace fwd = forward_call(op, small, hz);
        const bench::Workspace ws(fwd, timer.stream());
        auto call = [&](cudaStream_t s) { fwd(ws, s); };
        // Time every candidate, then verify from the fastest down: the first that matches the
        // fp64 reference is the one printed.
        std::vector<std::pair<double, FwdPlan>> timed;
        const int max_cluster = dev.supports_clusters ? clusters : 1;
        const ScalingMode scaling = bench::block_scaling_of(out);
        for (const FwdPlan& plan : forward_plan_candidates(hidden, vec, dev.warp_size, max_cluster)) {
          // Block-scaled z: the staged and pipelined layouts whose groups hold whole blocks.
          if (scaling != ScalingMode::kNone &&
              ((plan.layout != FwdLayout::kStaged && plan.layout != FwdLayout::kPipelined) ||
               plan.threads_per_row % std::max(block_elements(scaling) / vec, 1) != 0)) {
            continue;
          }
          // With an override set, forward calls run the general kernel with that plan. A
          // layout the device cannot launch (a cluster too large for it) is skipped.
          set_forward_plan_override(&plan);
          try {
            call(timer.stream());
            NORMTUNE_CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
          } catch (const Error& err) {
            std::fprintf(stderr, "candidate %s skipped: %s\n", config_string(plan).c_str(), err.what());
            continue;
          }
          NORMTUNE_CHECK(!last_kernel().tuned, "tune: the override did not select the general kernel");
          timed.emplace_back(timer.time(call, 3, reps).median_us, plan);
          if (opt.verbose) std::fprintf(stderr, "  %8.2f us  %s\n", timed.back().first, config_string(plan).c_str());
        }
        set_forward_plan_override(nullptr);  // (the candidates' vector is gone)
        // The finalists again on the larger problem, ranked by that time: the order in
        // which they are verified (before the others), and the time and shape recorded.
        std::vector<std::pair<double, FwdPlan>> ranked = timed;
        std::vector<std::pair<double, FwdPlan>> confirmed;
        if (big && !timed.empty()) {
          std::sort(ranked.begin(), ranked.end(), [](const auto& l, const auto& r) { return l.first < r.first; });
          const bench::CallWithWorkspace fwd_big = forward_call(op, *big, *hz_big);
          const bench::Workspace ws_big(fwd_big, timer.stream());
          auto call_big = [&](cudaStream_t s) { fwd_big(ws_big, s); };
          size_t finalists = 0;
          while (finalists < ranked.size() && finalists < 6 && ranked[finalists].first <= 1.03 * ranked.front().first) {
            ++finalists;
          }
          for (size_t k = 0; k < finalists; ++k) {
            set_forward_plan_override(&ranked[k].second);
            try {  // checked on the larger problem too (64 sampled rows), then timed
              hz_big->poison(timer.stream());
              call_big(timer.stream());
              NORMTUNE_CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
              bench::verify(op, t, big_rows, hidden, big->x.ptr, add ? big->res.ptr : nullptr, big->gamma.ptr,
                            ln ? big->beta.ptr : nullptr, *hz_big, big->rs.ptr, 1e-5f);
              confirmed.emplace_back(timer.time(call_big, 3, reps).median_us, ranked[k].second);
            } catch (const Error& err) {  // not a finalist: verified and ranked with the others
              std::fprintf(stderr, "finalist %s dropped on %zux%d: %s\n", config_string(ranked[k].second).c_str(),
                           big_rows, hidden, err.what());
              continue;
            }
            if (opt.verbose) {
              std::fprintf(stderr, "  %8.2f us  %s (%zux%d)\n", confirmed.back().first,
                           config_string(ranked[k].second).c_str(), big_rows, hidden);
            }
          }
          set_forward_plan_override(nullptr);
          std::sort(confirmed.begin(), confirmed.end(), [](const auto& l, const auto& r) { return l.first < r.first; });
          // fastest_verified orders by the first member: the finalists as 0, 1, ..., the
          // others after them in their own order.
          std::vector<std::pair<double, FwdPlan>> order;
          for (const auto& c : confirmed) order.emplace_back(static_cast<double>(order.size()), c.second);
          for (const auto& r : ranked) {  // the others (and any finalist dropped above), in their order
            const bool in = std::any_of(confirmed.begin(), confirmed.end(), [&](const auto& c) { return c.second == r.second; });
            if (!in) order.emplace_back(static_cast<double>(order.size()), r.second);
          }
          ranked = std::move(order);
        }
        // (A pair, not a structured binding: clang before 16, hipcc's, cannot capture one.)
        const std::pair<FwdPlan, double> verified = fastest_verified(
            ranked,
            [&](const FwdPlan& plan) {
              set_forward_plan_override(&plan);
              hz.poison(timer.stream());
              call(timer.stream());
              NORMTUNE_CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
            },
            [&] {
              bench::verify(op, t, rows, hidden, small.x.ptr, add ? small.res.ptr : nullptr, small.gamma.ptr,
                            ln ? small.beta.ptr : nullptr, hz, small.rs.ptr, 1e-5f);
            },
            detail::concat(op.name, " ", dname, " ", hidden, " z ", bench::z_format_name(out)));
        set_forward_plan_override(nullptr);
        const FwdPlan best = verified.first;
        double best_us = verified.second;
        // The time recorded: on the confirmation problem for a finalist, else on the timed one.
        // (With a confirmation run, `ranked` held ranks, not times: the time comes from
        // `confirmed` or `timed`, also when every finalist was dropped.)
        size_t line_rows = rows;
        if (big) {
          const auto hit = std::find_if(confirmed.begin(), confirmed.end(), [&](const auto& c) { return c.second == best; });
          if (hit != confirmed.end()) {
            best_us = hit->first;
            line_rows = big_rows;
          } else {
            best_us = std::find_if(timed.begin(), timed.end(), [&](const auto& c) { return c.second == best; })->first;
          }
        }
        const Problem line_pb{t, hz.dtype(), scaling, dname, hidden, line_rows};
        print_line(op, line_pb, best, best_us, dev, date);
        // cuDNN on the problem the native time was recorded on.
        if (opt.race_cudnn && !add && out == bench::ZFormat::kSame) {
          const bool on_big = line_rows != rows;
          const FwdTensors& T = on_big ? *big : small;
          const bench::ZOutput& Z = on_big ? *hz_big : hz;
          const double cudnn_us = cudnn_time(
              forward_call(op, T, Z), timer.stream(), [&](const Run& run) { return timer.time(run, 3, reps).median_us; },
              [&](const Run& run) {
                Z.poison(timer.stream());
                run(timer.stream());
                NORMTUNE_CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
                bench::verify(op, t, line_rows, hidden, T.x.ptr, nullptr, T.gamma.ptr, ln ? T.beta.ptr : nullptr, Z,
                              T.rs.ptr, 1e-5f);
              },
              detail::concat(op.name, " ", dname, " ", hidden));
          print_cudnn_line_if_faster(op, line_pb, best_us, cudnn_us, dev, date);
        }
      }
      }  // outs
    }
  }
  return 0;
}

}  // namespace normtune::tune
