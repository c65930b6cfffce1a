// `normtune bench`: CUDA-event timing of the normalizations (forward and backward), with
// warm-up, the L2 flushed before every repetition, the median (and 10th/90th percentiles)
// of many repetitions; every result is given in µs, TB/s, % of the copy bandwidth measured
// in the same run (a 2 GiB device copy), and as a ratio to a same-shape memory operation
// timed in the same run (a copy x -> z for a norm, 2 reads + 2 writes for the fused add,
// 2 reads + 1 write for a backward, 3 reads + 1 write with an added gradient). Decode
// shapes (rows <= 128) are also timed per call inside a CUDA graph of many calls, and their
// host (CPU) time per call measured over back-to-back calls.
#include "bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <normtune/common/convert.h>
#include <normtune/common/device_info.h>
#include <normtune/common/error.h>
#include <normtune/normalization.h>
#include <normtune/normtune.h>
#include <normtune/reference.h>

#include "bench_kernels.h"
#include "measure.h"
#include "normalization/src/kernels/block_scale.h"

namespace normtune::bench {

const char* const kHelp = R"(normtune bench [options]
  Times the normalization kernels on the GPU. Without options: forward RMSNorm, LayerNorm
  and fused add + RMSNorm, and their backward (RMSNorm, LayerNorm, RMSNorm with an added
  gradient), in bf16 over the default suite of LLM shapes:
    4096x4096 4096x8192 8192x7168 16384x4096 32768x8192 16384x1536 65536x128
    8192x32768 4096x65536 1024x262144, and the decode shapes 1x4096 128x7168.
  Options:
    --ops LIST       rmsnorm,layernorm,rmsnorm_add,rmsnorm_bwd,layernorm_bwd,rmsnorm_bwd_add
                     (default: all six)
    --dtype LIST     bf16,fp16,fp32: x, gamma and z, each dtype a pass over the shapes with
                     its own baselines (default bf16; --dtypes is the same option)
    --out LIST       z of the forward ops: same (x's dtype; the default), fp8 (per-tensor
                     scaled e4m3, scale 8, amax and scale_inv written), mxfp8 (row-wise
                     e4m3, an E8M0 scale per 32 elements, compact layout), mxfp8c (mxfp8
                     plus the column-wise copy, an E8M0 scale per 32 rows of a column),
                     nvfp4 (e2m1, an E4M3 scale per 16, global amax 16), nvfp4c (nvfp4 plus
                     the column-wise copy: the transpose, an E4M3 scale per 16 rows of a
                     column; rows a multiple of 16), mxfp4 (e2m1, an E8M0 scale per 32),
                     fp8b128 (e4m3, an fp32 scale per 128; nvfp4, mxfp4 and fp8b128
                     row-wise, compact scales); each a pass over the shapes (the backward
                     ops run in the `same` pass only)
    --shapes LIST    MxN,MxN,... (default: the suite above)
    --sms N          multiprocessorCount passed to the calls (default 0: all SMs)
    --reps N         timed repetitions per measurement (default 200; at least 100 advised)
    --warmup N       untimed runs first (default 20)
    --verify         check each result against the fp64 reference before timing (every
                     row when rows x hidden <= 16M, else 64 sampled rows; backward:
                     dgamma/dbeta too at <= 16M)
    --backend LIST   auto,native,cudnn: each op and shape once per backend (default auto:
                     as the library's switches say: the tuned table's choice per key,
                     native or cuDNN, unless NVTE_NORM_*_USE_CUDNN or NORMTUNE_BACKEND say
                     otherwise). native and cudnn set TransformerEngine's switches
                     (nvte_enable_cudnn_norm_fwd/bwd: false, true) for their calls; a call
                     the cuDNN backend does not run (the fused add, forward or backward,
                     block-scaled z, ...) is listed as such and skipped. The kernel column
                     names the backend (..._cudnn).
    --csv FILE       write the results as CSV
    --json FILE      write the results as JSON
  Columns: µs (median; p10-p90 spread), TB/s of useful bytes, % of the 2 GiB copy bandwidth
  of this run, the same-shape baseline's µs and the ratio to it, which kernel ran; decode
  shapes (rows <= 128) also µs per call in a CUDA graph of 100 calls (graph_us, and the
  baseline's) and the host's µs per call over 100 back-to-back calls (the CPU cost of the
  checks, the kernel choice, a cuDNN plan lookup and the launch; "host" after the kernel).
  The header gives the floor under that: the host's µs per launch of an empty kernel by
  <<<>>> and by cudaLaunchKernelEx with programmatic dependent launch, as the norms are
  launched (host_us_per_empty_launch in the JSON).
  Bytes: norm = read x, gamma (+beta), write z, rsigma (+mu); fused add = read x, residual,
  gamma, write z, residual_out, rsigma (z: FP8 a byte per element, e2m1 half a byte, block
  scales one scale each, mxfp8c and nvfp4c both copies and both scales); backward = read dz, x, rsigma (+mu), gamma (+add),
  write dx, dgamma (+dbeta). The backward's fp32 partials (workspace, allocated outside the
  timed region) cost time but are not counted. Backward is timed as a whole (main kernel +
  finalize). Baselines: copy of x into z (cudaMemcpyAsync); for the fused add a kernel that
  reads two tensors and writes two; for a backward one that reads two (three with add) and
  writes one. FP8, MXFP8 and fp8b128 z: a cast of x to fp8 e4m3 (reads x, writes a byte per
  element; with the fused add, also writes x + residual); nvfp4 and mxfp4: x read and half a byte
  per element written, a copy of those bytes with no e2m1 conversion (cast4); mxfp8c
  RMSNorm/LayerNorm: x read once and cast to two fp8 outputs (cast8x2); nvfp4c: two such
  half-byte outputs (cast4x2, both in x's layout). The baseline kernels take one 16-byte
  step per thread in 128-thread CTAs (as fast as a copy by cudaMemcpyAsync). Row-wise
  block-scaled rows also time the unfused way, the norm into x's dtype then a separate
  quantization pass of the format, and print the fused speedup.
  Without a GPU: says so, lists the registry and exits 0.
)";

namespace {

std::vector<const OpInfo*> all_ops() {
  std::vector<const OpInfo*> ops;
  for (const OpInfo& op : kOps) ops.push_back(&op);
  return ops;
}

struct Options {
  std::vector<const OpInfo*> ops = all_ops();
  std::vector<DType> dtypes{DType::kBFloat16};
  std::vector<ZFormat> outs{ZFormat::kSame};
  std::vector<std::pair<size_t, size_t>> shapes{
      {4096, 4096},  {4096, 8192},  {8192, 7168}, {16384, 4096}, {32768, 8192}, {16384, 1536},
      {65536, 128},  {8192, 32768}, {4096, 65536}, {1024, 262144}, {1, 4096},   {128, 7168}};
  int sms = 0;
  int reps = 200;
  int warmup = 20;
  bool verify = false;
  std::vector<std::string> backends{"auto"};
  std::string csv, json;
};

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = s.find(sep, start);
    out.emplace_back(s.substr(start, end == std::string_view::npos ? s.size() - start : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}


Options parse(const std::vector<std::string_view>& args) {
  Options o;
  auto value = [&](size_t& i) -> std::string_view {
    NORMTUNE_CHECK(i + 1 < args.size(), "bench: option ", args[i], " needs a value");
    return args[++i];
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a == "--ops") {
      o.ops.clear();
      for (const auto& name : split(value(i), ',')) {
        const OpInfo* op = find_op(name);
        NORMTUNE_CHECK(op != nullptr, "bench: unknown op '", name, "' (", op_names(true, true), ")");
        o.ops.push_back(op);
      }
    } else if (a == "--dtype" || a == "--dtypes") {
      o.dtypes.clear();
      for (const auto& name : split(value(i), ',')) {
        DType t;
        NORMTUNE_CHECK(dtype_from_name(name, &t) && is_wide_float(t), "bench: ", a, " ", name,
                       ": expected bf16, fp16 or fp32");
        o.dtypes.push_back(t);
      }
    } else if (a == "--out") {
      o.outs.clear();
      for (const auto& name : split(value(i), ',')) {
        ZFormat f;
        NORMTUNE_CHECK(z_format_from_name(name, &f), "bench: --out ", name,
                       ": expected same, fp8, mxfp8, mxfp8c, nvfp4, nvfp4c, mxfp4 or fp8b128");
        o.outs.push_back(f);
      }
    } else if (a == "--shapes") {
      o.shapes.clear();
      for (const auto& s : split(value(i), ',')) {
        const size_t x = s.find('x');
        NORMTUNE_CHECK(x != std::string::npos, "bench: shape '", s, "': expected MxN");
        o.shapes.emplace_back(std::stoull(s.substr(0, x)), std::stoull(s.substr(x + 1)));
      }
    } else if (a == "--sms") {
      o.sms = std::stoi(std::string(value(i)));
    } else if (a == "--reps") {
      o.reps = std::stoi(std::string(value(i)));
      NORMTUNE_CHECK(o.reps >= 1, "bench: --reps must be >= 1");
    } else if (a == "--warmup") {
      o.warmup = std::stoi(std::string(value(i)));
    } else if (a == "--verify") {
      o.verify = true;
    } else if (a == "--backend" || a == "--backends") {
      o.backends.clear();
      for (const auto& name : split(value(i), ',')) {
        NORMTUNE_CHECK(name == "auto" || name == "native" || name == "cudnn", "bench: --backend ", name,
                       ": expected auto, native or cudnn");
        o.backends.push_back(name);
      }
    } else if (a == "--csv") {
      o.csv = value(i);
    } else if (a == "--json") {
      o.json = value(i);
    } else {
      NORMTUNE_ERROR("bench: unknown option '", a, "' (see normtune bench --help)");
    }
  }
  return o;
}

struct Result {
  std::string op, dtype, out, kernel, backend = "auto";
  bool tuned = false;
  size_t rows = 0, hidden = 0;
  double bytes = 0;
  Timing t, base;
  std::string base_name;
  double graph_us = -1, base_graph_us = -1;
  double host_us = -1;  // decode rows: CPU time per call (Timer::time_host)
  double unfused_us = -1;  // MXFP8: the norm into x's dtype + a separate quantization pass
  std::string verified = "no";
};

// The host's time per launch of an empty kernel, both ways the library could launch: the part
// of a call's host time (Result::host_us) that is the launch itself rather than normtune's
// checks and kernel choice.
struct LaunchFloor {
  double plain_us = -1, extended_us = -1;
};

LaunchFloor launch_floor(Timer& timer) {
  LaunchFloor f;
  f.plain_us = timer.time_host([](cudaStream_t s) { launch_empty(false, s); }, 100, 20).median_us;
  f.extended_us = timer.time_host([](cudaStream_t s) { launch_empty(true, s); }, 100, 20).median_us;
  NORMTUNE_CUDA_CHECK(cudaGetLastError());
  return f;
}

void write_outputs(const Options& o, const std::vector<Result>& results, double peak,
                   const LaunchFloor& floor, const DeviceInfo& dev) {
  auto tbps = [](const Result& r) { return r.bytes / (r.t.median_us * 1e-6) / 1e12; };
  if (!o.csv.empty()) {
    std::ofstream f(o.csv);
    f << "op,dtype,out,rows,hidden,backend,kernel,tuned,us,p10_us,p90_us,tbps,pct_copy_peak,baseline,baseline_us,"
         "ratio_to_baseline,graph_us_per_call,baseline_graph_us_per_call,host_us_per_call,unfused_us,verified\n";
    for (const Result& r : results) {
      f << r.op << ',' << r.dtype << ',' << r.out << ',' << r.rows << ',' << r.hidden << ',' << r.backend << ','
        << r.kernel << ','
        << (r.tuned ? 1 : 0) << ',' << r.t.median_us << ',' << r.t.p10_us << ',' << r.t.p90_us << ','
        << tbps(r) << ',' << 100 * tbps(r) / peak << ',' << r.base_name << ',' << r.base.median_us << ','
        << r.t.median_us / r.base.median_us << ',' << r.graph_us << ',' << r.base_graph_us << ',' << r.host_us
        << ',' << r.unfused_us << ',' << r.verified << '\n';
    }
  }
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    f << "{\n  \"device\": \"" << dev.name << "\",\n  \"sm_count\": " << dev.sm_count
      << ",\n  \"copy_peak_tbps\": " << peak << ",\n  \"host_us_per_empty_launch\": {\"plain\": " << floor.plain_us
      << ", \"extended_pdl\": " << floor.extended_us << "},\n  \"results\": [\n";
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      f << "    {\"op\": \"" << r.op << "\", \"dtype\": \"" << r.dtype << "\", \"out\": \"" << r.out
        << "\", \"rows\": " << r.rows
        << ", \"hidden\": " << r.hidden << ", \"backend\": \"" << r.backend << "\", \"kernel\": \"" << r.kernel
        << "\", \"tuned\": "
        << (r.tuned ? "true" : "false") << ", \"us\": " << r.t.median_us << ", \"p10_us\": " << r.t.p10_us
        << ", \"p90_us\": " << r.t.p90_us << ", \"tbps\": " << tbps(r) << ", \"pct_copy_peak\": "
        << 100 * tbps(r) / peak << ", \"baseline\": \"" << r.base_name << "\", \"baseline_us\": "
        << r.base.median_us << ", \"ratio_to_baseline\": " << r.t.median_us / r.base.median_us
        << ", \"graph_us_per_call\": " << r.graph_us << ", \"baseline_graph_us_per_call\": "
        << r.base_graph_us << ", \"host_us_per_call\": " << r.host_us << ", \"unfused_us\": " << r.unfused_us << ", \"verified\": \"" << r.verified << "\"}"
        << (i + 1 < results.size() ? "," : "") << "\n";
    }
    f << "  ]\n}\n";
  }
}

}  // namespace

int run(const std::vector<std::string_view>& args) {
  const Options o = parse(args);
  if (device_count() == 0) {
    std::printf("normtune bench: no GPU is visible to this process (no device or no driver), so "
                "nothing can be timed.\nThe kernels this build would choose from:\n\n");
    return -1;  // the caller lists the registry and exits 0
  }
  const DeviceInfo& dev = device_info(current_device());
  Timer timer(dev.l2_bytes);
  const double peak = copy_peak_tbps(timer, o.reps);
  std::printf("device: %s (%d SMs); 2 GiB device copy: %.2f TB/s (the 100%% below)\n", dev.name.c_str(),
              dev.sm_count, peak);
  std::printf("timing: median of %d reps after %d warm-up, L2 flushed before each; decode rows <= 128 "
              "also per call in a CUDA graph, and the host's time per call\n", o.reps, o.warmup);
  const LaunchFloor floor = launch_floor(timer);
  std::printf("host time per launch of an empty kernel (the floor under \"host\"): <<<>>> %.2f us, "
              "cudaLaunchKernelEx with programmatic dependent launch %.2f us\n\n", floor.plain_us, floor.extended_us);
  std::printf("%-15s %-10s %13s %9s %15s %7s %6s  %-10s %9s %6s %9s %9s  %s\n", "op", "dtype>z", "shape", "us",
              "p10-p90", "TB/s", "%copy", "baseline", "base_us", "ratio", "graph_us", "base_gr", "kernel");

  std::vector<Result> results;
  for (const DType t : o.dtypes) {
    const size_t e = dtype_storage_bytes(t, 1);
    for (const auto& shape : o.shapes) {
      const size_t rows = shape.first, hidden = shape.second;  // (lambdas below capture them)
      const size_t n = rows * hidden;
      DeviceMem x(n * e), res(n * e), add(n * e), res_out(n * e), gamma(hidden * e), beta(hidden * e),
          mu(rows * 4), rsigma(rows * 4), dgamma(hidden * e), dbeta(hidden * e);
      fill_random(x.ptr, t, n, 1, 0.3, 1.0);
      fill_random(res.ptr, t, n, 2, 0.0, 1.0);
      fill_random(gamma.ptr, t, hidden, 3, 1.0, 0.2);
      fill_random(beta.ptr, t, hidden, 4, 0.0, 0.5);
      fill_random(add.ptr, t, n, 5, 0.0, 1.0);  // the backward's added gradient
      Handle hx(x.ptr, {rows, hidden}, t), hres(res.ptr, {rows, hidden}, t), hro(res_out.ptr, {rows, hidden}, t),
          hg(gamma.ptr, {hidden}, t), hb(beta.ptr, {hidden}, t), hmu(mu.ptr, {rows}, DType::kFloat32),
          hrs(rsigma.ptr, {rows}, DType::kFloat32), hdg(dgamma.ptr, {hidden}, t), hdb(dbeta.ptr, {hidden}, t),
          hadd(add.ptr, {rows, hidden}, t);
      const float eps = 1e-5f;
      // Every op through its C API entry point, forward ops writing z. Backward: dz =
      // residual, dx = residual_out; the statistics come from the forward of x.
      auto op_call = [&](const OpInfo& op, NVTETensor zt) -> CallWithWorkspace {
        const bool ln = op.norm == NormType::kLayerNorm;
        switch (op.stage) {
          case Stage::kForward:
            if (ln) return [&, zt](NVTETensor w, cudaStream_t s) { nvte_layernorm_fwd(hx, hg, hb, eps, zt, hmu, hrs, w, o.sms, false, s); };
            return [&, zt](NVTETensor w, cudaStream_t s) { nvte_rmsnorm_fwd(hx, hg, eps, zt, hrs, w, o.sms, false, s); };
          case Stage::kForwardAdd:
            return [&, zt](NVTETensor w, cudaStream_t s) {
              normtune_rmsnorm_add_fwd(hx, hres, hg, eps, zt, hro, hrs, w, o.sms, false, s);
            };
          case Stage::kBackward:
            if (ln) {
              return [&](NVTETensor w, cudaStream_t s) {
                nvte_layernorm_bwd(hres, hx, hmu, hrs, hg, hro, hdg, hdb, w, o.sms, false, s);
              };
            }
            return [&](NVTETensor w, cudaStream_t s) { nvte_rmsnorm_bwd(hres, hx, hrs, hg, hro, hdg, w, o.sms, false, s); };
          case Stage::kBackwardAdd:
            return [&](NVTETensor w, cudaStream_t s) {
              nvte_rmsnorm_bwd_add(hres, hx, hadd, hrs, hg, hro, hdg, w, o.sms, false, s);
            };
        }
        NORMTUNE_ERROR("bench: no call for op ", op.name);
      };

      for (const ZFormat out : o.outs) {
        const ScalingMode mode = block_scaling_of(out);
        const size_t block = mode == ScalingMode::kNone ? 1 : static_cast<size_t>(block_elements(mode));
        if (hidden % block != 0) {
          std::printf("(%zux%zu: no %s pass, hidden is not a multiple of %zu)\n", rows, hidden, z_format_name(out),
                      block);
          continue;
        }
        if (out == ZFormat::kNvfp4Colwise && rows % kNvfp4Block != 0) {
          std::printf("(%zux%zu: no %s pass, rows is not a multiple of 16)\n", rows, hidden, z_format_name(out));
          continue;
        }
        const ZOutput z(out, t, rows, hidden);
        std::unique_ptr<ZOutput> z_wide;  // row-wise block-scaled: the unfused norm's output in x's dtype
        if (mode != ScalingMode::kNone && !has_colwise(out)) {
          z_wide = std::make_unique<ZOutput>(ZFormat::kSame, t, rows, hidden);
        }
        for (const OpInfo* op_ptr : o.ops) {
        for (const std::string& backend : o.backends) {
          const OpInfo& op = *op_ptr;
          const bool backward = is_backward(op.stage);
          if (backward && out != ZFormat::kSame) continue;
          const bool ln = op.norm == NormType::kLayerNorm;
          const BackendScope backend_scope(backend);
          Result r;
          r.backend = backend;
          r.op = op.name;
          r.dtype = std::string(dtype_name(t));
          r.out = z_format_name(out);
          r.rows = rows;
          r.hidden = hidden;
          if (backward) {
            // The forward's statistics (rsigma and mu of the norm being differentiated).
            const CallWithWorkspace fwd = op_call(op_of(op.norm, Stage::kForward), z);
            fwd(Workspace(fwd, timer.stream()), timer.stream());
          }
          const CallWithWorkspace run_op = op_call(op, z);
          if (backend == "cudnn") {
            try {  // the size query selects the kernel: a call cuDNN does not run stops here
              const Workspace probe(run_op, timer.stream());
            } catch (const Error& e) {
              std::printf("%-15s %-10s %6zux%-6zu cudnn: %s\n", op.name,
                          out == ZFormat::kSame ? r.dtype.c_str() : (r.dtype + ">" + z_format_name(out)).c_str(), rows,
                          hidden, e.what());
              continue;
            }
          }
          const Workspace ws(run_op, timer.stream());  // allocated outside the timed region
          const std::function<void(cudaStream_t)> call = [&](cudaStream_t s) { run_op(ws, s); };
          const double z_bytes = static_cast<double>(z.data_bytes() + z.scale_bytes());
          switch (op.stage) {
            case Stage::kForward: r.bytes = n * e + z_bytes + (ln ? 2.0 : 1.0) * hidden * e + (ln ? 8.0 : 4.0) * rows; break;
            case Stage::kForwardAdd: r.bytes = 3.0 * n * e + z_bytes + hidden * e + 4.0 * rows; break;
            case Stage::kBackward:
            case Stage::kBackwardAdd:
              r.bytes = (op.stage == Stage::kBackwardAdd ? 4.0 : 3.0) * n * e + (ln ? 3.0 : 2.0) * hidden * e +
                        (ln ? 8.0 : 4.0) * rows;
              break;
          }
          if (!backward) z.poison(timer.stream());
          call(timer.stream());
          NORMTUNE_CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
          const KernelChoice k = last_kernel();
          r.kernel = k.name;
          r.tuned = k.tuned;
          if (o.verify && backward) {
            r.verified = verify_bwd(op, t, rows, hidden, res.ptr, x.ptr, op.stage == Stage::kBackwardAdd ? add.ptr : nullptr,
                                    mu.ptr, rsigma.ptr, gamma.ptr, res_out.ptr, dgamma.ptr, dbeta.ptr);
          } else if (o.verify) {
            r.verified = verify(op, t, rows, hidden, x.ptr, op.stage == Stage::kForwardAdd ? res.ptr : nullptr, gamma.ptr,
                                ln ? beta.ptr : nullptr, z, rsigma.ptr, eps);
          }
          r.t = timer.time(call, o.warmup, o.reps);
          std::function<void(cudaStream_t)> base;
          if (out == ZFormat::kMxfp8Colwise && op.stage == Stage::kForward) {
            r.base_name = "cast8x2";  // x read once, both fp8 outputs written
            base = [&](cudaStream_t s) {
              launch_cast_fp8_twice(x.ptr, t, z.data(), z.colwise_data(), n, s);
            };
          } else if (out == ZFormat::kNvfp4Colwise && op.stage == Stage::kForward) {
            r.base_name = "cast4x2";  // x read once, both half-byte outputs written
            base = [&](cudaStream_t s) {
              launch_cast_fp4_twice(x.ptr, t, z.data(), z.colwise_data(), n, s);
            };
          } else if (!backward && out != ZFormat::kSame) {
            const bool with_add = op.stage == Stage::kForwardAdd;
            const bool fp4 = z.dtype() == DType::kFloat4E2M1;
            r.base_name = detail::concat(with_add ? "add+" : "", fp4 ? "cast4" : "cast8");
            base = [&, with_add, fp4](cudaStream_t s) {
              (fp4 ? launch_cast_fp4 : launch_cast_fp8)(x.ptr, with_add ? res.ptr : nullptr, t,
                                                        res_out.ptr, z.data(), n, s);
            };
          } else if (op.stage == Stage::kForwardAdd) {
            r.base_name = "2r2w";
            base = [&](cudaStream_t s) {
              launch_two_reads(x.ptr, res.ptr, z.data(), res_out.ptr, n * e, s);
            };
          } else if (op.stage == Stage::kBackwardAdd) {
            r.base_name = "3r1w";
            base = [&](cudaStream_t s) {
              launch_three_reads(x.ptr, res.ptr, add.ptr, res_out.ptr, n * e, s);
            };
          } else if (backward) {
            r.base_name = "2r1w";
            base = [&](cudaStream_t s) {
              launch_two_reads(x.ptr, res.ptr, res_out.ptr, nullptr, n * e, s);
            };
          } else {
            r.base_name = "copy";
            base = [&](cudaStream_t s) {
              NORMTUNE_CUDA_CHECK(cudaMemcpyAsync(z.data(), x.ptr, n * e, cudaMemcpyDeviceToDevice, s));
            };
          }
          r.base = timer.time(base, o.warmup, o.reps);
          std::string unfused;
          if (z_wide) {
            // The unfused way: the norm into x's dtype, then a separate quantization.
            const CallWithWorkspace wide_op = op_call(op, *z_wide);
            const Workspace wide_ws(wide_op, timer.stream());
            r.unfused_us = timer.time([&](cudaStream_t s) {
                                 wide_op(wide_ws, s);
                                 launch_block_quantize(mode, z_wide->data(), t, z.data(),
                                                       z.block_scales(), z.global_amax(), rows,
                                                       hidden, s);
                               }, o.warmup, o.reps).median_us;
            unfused = detail::concat("; unfused norm + quantize ", r.unfused_us, " us (fused ",
                                     r.unfused_us / r.t.median_us, "x faster)");
          }
          if (rows <= 128) {
            try {
              r.graph_us = timer.time_graph(call, 100, 50).median_us;
            } catch (const Error& e) {  // (a backend whose calls cannot be captured: said, not timed)
              std::printf("(%s %zux%zu, %s: not timed in a CUDA graph: %s)\n", op.name, rows, hidden, backend.c_str(),
                          e.what());
            }
            r.base_graph_us = timer.time_graph(base, 100, 50).median_us;
            r.host_us = timer.time_host(call, 100, 20).median_us;
            unfused += detail::concat("; host ", r.host_us, " us per call");
          }
          const double tbps = r.bytes / (r.t.median_us * 1e-6) / 1e12;
          const std::string dtype_z = out == ZFormat::kSame ? r.dtype : r.dtype + ">" + r.out;
          std::printf("%-15s %-10s %6zux%-6zu %9.2f %7.2f-%-7.2f %7.3f %5.1f%%  %-10s %9.2f %6.3f %9s %9s  %s%s%s\n",
                      op.name, dtype_z.c_str(), rows, hidden, r.t.median_us, r.t.p10_us, r.t.p90_us, tbps,
                      100 * tbps / peak, r.base_name.c_str(), r.base.median_us, r.t.median_us / r.base.median_us,
                      r.graph_us < 0 ? "-" : detail::concat(r.graph_us).substr(0, 6).c_str(),
                      r.base_graph_us < 0 ? "-" : detail::concat(r.base_graph_us).substr(0, 6).c_str(),
                      r.kernel.c_str(), r.tuned ? " (tuned)" : " (general)", unfused.c_str());
          std::fflush(stdout);
          results.push_back(r);
        }
        }  // backends
      }  // outs
    }
  }  // dtypes
  write_outputs(o, results, peak, floor, dev);
  return 0;
}

}  // namespace normtune::bench
