// The cuDNN backend: RMSNorm and LayerNorm forward (training: z, rsigma, and mu for
// LayerNorm) and backward (dx, dgamma, and dbeta for LayerNorm) as cudnn-frontend graphs,
// registered as Backend::kCudnn entries of every (wtype, itype) the native kernels take with
// z (dx) of x's type, and the forward with a per-tensor FP8 z where the native kernels take
// it (fp8_finish.cu). Built only with cuDNN's frontend headers (NORMTUNE_ENABLE_CUDNN);
// libcudnn is opened at run time (cudnn_library.h) and reached through the frontend's
// dynamic-loading shim, so libnormtune.so does not link it.
//
// Plans: one graph per (key, zero-centered gamma and how gamma + 1 is formed, rows, hidden,
// device, SM target), built on first
// use (the workspace size query builds it, so the real call only runs it) and kept in a bounded LRU
// cache (NORMTUNE_CUDNN_PLAN_CACHE entries, default 64). epsilon is passed by value at execution,
// so it is not part of the plan. A call runs its plan through cuDNN's backend API itself (not
// the frontend's execute(), which builds hash maps and a new variant pack descriptor each
// call): each plan keeps the variant packs of its last kVariantPacks sets of pointers,
// workspace and epsilon, so that a call bringing a set it has seen allocates nothing. One handle
// per device, kept for the process; builds and executions on a device take its lock (see
// device_handle). multiprocessorCount below the device's SMs (TransformerEngine's sm_margin: SMs
// left to communication kernels) is handed to cuDNN as the graph's SM target, as TE's graphs do
// from cuDNN 9.4 on; a plan per target (TE keys its plans without it, so its first call's count
// stays).
//
// Tensors as TransformerEngine's cuDNN path lays them out: x, z, dz, dx [rows, hidden, 1, 1]
// with strides [hidden, 1, hidden, hidden]; gamma, beta, dgamma, dbeta [1, hidden, 1, 1];
// mu, rsigma [rows, 1, 1, 1] fp32. Zero-centered gamma: gamma + 1 by a pointwise add in fp32
// before the norm (the native kernels add in fp32 too); with TransformerEngine's switch
// nvte_enable_zero_centered_gamma_in_weight_dtype (or NVTE_ZERO_CENTERED_GAMMA_IN_WTYPE=1) and
// a 16-bit gamma, the sum is rounded to gamma's dtype, as TE's graphs do then (the constant 1
// in that dtype too), and the plan is cached apart from the fp32 one.
//
// Per-tensor FP8 z (TransformerEngine's cuDNN graph for delayed scaling, with the native
// kernels' meaning): the norm's output stays in fp32 inside the graph; z = fp8(value * scale)
// by a pointwise multiply with the scale tensor [1, 1, 1, 1]; an AMAX reduction of the values
// into an fp32 slot after cuDNN's workspace (the size query answers both; zeroed before each
// run). Then one small kernel (fp8_finish.cu) folds that amax into z's amax with an atomic
// max, as the native kernels do (a caller that does not zero it keeps the max over calls),
// and writes scale_inv = 1 / scale, an IEEE division as the native kernels'. On the H200
// (cuDNN 9.14), Fp8ForwardMatchesTheReference found both as the native kernels: a NaN row
// leaves the amax the max over the other rows, and the FP8 conversion saturates.
#include "cudnn/cudnn_norm.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <cudnn_frontend.h>

#include <normtune/common/convert.h>
#include <normtune/common/device_info.h>
#include <normtune/common/error.h>
#include <normtune/normtune.h>

#include "cudnn/cudnn_library.h"
#include "cudnn/fp8_finish.h"
#include "cudnn/plan_cache.h"
#include "kernels/norm_bwd_args.h"
#include "kernels/norm_fwd_args.h"

// The frontend's dynamic-loading shim finds cuDNN's functions through this handle.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend

namespace normtune {

namespace fe = cudnn_frontend;

namespace {

// Tensor uids of the variant pack.
enum Uid : int64_t {
  kUidX = 1,
  kUidGamma,
  kUidBeta,
  kUidEpsilon,
  kUidOne,
  kUidZ,
  kUidMu,
  kUidRsigma,
  kUidDz,
  kUidDx,
  kUidDgamma,
  kUidDbeta,
  kUidScale,
  kUidAmax,
  kUidCount,
};

// A call's tensors by uid (nullptr: not in the call); epsilon, passed by value, as a pointer to
// the call's float.
using Tensors = std::array<void*, kUidCount>;

// The fp32 amax slot of a per-tensor FP8 plan, after cuDNN's workspace.
constexpr size_t kAmaxSlotAlign = 16;
size_t amax_slot_offset(int64_t cudnn_workspace) {
  return (static_cast<size_t>(cudnn_workspace) + kAmaxSlotAlign - 1) / kAmaxSlotAlign * kAmaxSlotAlign;
}

fe::DataType_t fe_type(DType t) {
  switch (t) {
    case DType::kFloat32: return fe::DataType_t::FLOAT;
    case DType::kFloat16: return fe::DataType_t::HALF;
    case DType::kBFloat16: return fe::DataType_t::BFLOAT16;
    case DType::kFloat8E4M3: return fe::DataType_t::FP8_E4M3;
    case DType::kFloat8E5M2: return fe::DataType_t::FP8_E5M2;
    default: break;
  }
  NORMTUNE_ERROR("internal: no cuDNN data type for ", dtype_name(t));
}

void check(fe::error_t status, const char* what) {
  if (!status.is_good()) NORMTUNE_ERROR("cuDNN ", what, " failed: ", status.get_message());
}

void check(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS) NORMTUNE_ERROR("cuDNN ", what, " failed with status ", static_cast<int>(status));
}

// Opens libcudnn (once) and hands it to the frontend's shim.
void ensure_library() {
  static std::once_flag once;
  std::string why;
  void* lib = cudnn_library(&why);
  if (lib == nullptr) NORMTUNE_ERROR("cuDNN backend: ", why);
  std::call_once(once, [lib] { fe::cudnn_dlhandle = lib; });
}

// The handle of `device`, created on first use and kept for the life of the process (as
// TransformerEngine keeps its handles), with the lock under which it builds and runs plans:
// a plan keeps the handle it was built with, and a handle is not to be used by two threads
// at once, so every build and every execution on a device takes its lock (host-side
// enqueueing is serialized per device; the GPU work stays asynchronous).
struct DeviceHandle {
  cudnnHandle_t handle = nullptr;
  std::mutex lock;
};
DeviceHandle& device_handle(int device) {
  static std::mutex mutex;
  static auto* handles = new std::unordered_map<int, std::unique_ptr<DeviceHandle>>();  // never destroyed
  std::lock_guard<std::mutex> guard(mutex);
  auto& slot = (*handles)[device];
  if (slot == nullptr) {
    ensure_library();
    auto h = std::make_unique<DeviceHandle>();
    check(fe::detail::create_handle(&h->handle), "cudnnCreate");
    slot = std::move(h);
  }
  return *slot;
}

// What asked for cuDNN in this thread's current call (api_common's cudnn_kernel sets it): the
// backend's errors name it.
thread_local const char* t_source = "the cuDNN backend";

struct PlanKey {
  uint64_t key = 0;  // pack(NormKey), the zero-centered flag included
  int64_t rows = 0;
  int device = 0;
  bool gamma_in_wtype = false;  // zero-centered gamma + 1 rounded to gamma's dtype
  int sm_target = -1;           // the SMs cuDNN is to use (-1: all)
  bool operator==(const PlanKey&) const = default;
};
struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    return std::hash<uint64_t>{}(k.key) ^ (std::hash<int64_t>{}(k.rows) * 0x9E3779B97F4A7C15ull) ^
           (static_cast<size_t>(k.device) << 1) ^ static_cast<size_t>(k.gamma_in_wtype) ^
           (static_cast<size_t>(k.sm_target + 1) << 8);
  }
};

// cudnn-frontend's graph, with what a call needs to run its built plan through cuDNN's backend
// API itself (execute() and variant_pack() below): the frontend's execute() builds hash maps and
// vectors of the call's pointers and creates, finalizes and destroys a variant pack descriptor,
// every call.
class NormGraph : public fe::graph::Graph {
 public:
  // Whether execute() would hand cuDNN the call's pointers and nothing else: no tensor the
  // graph passes by value itself (ours, epsilon and the constant 1, come with the call), none
  // placed in the frontend's part of the workspace, and no such part. (The frontend's other
  // rewrite of a variant pack, for slices, has no node in these graphs.) Else execute() runs it.
  bool runs_plain() {
    std::unordered_map<uid_t, pass_by_values_t> by_value;
    std::unordered_map<uid_t, std::tuple<int64_t, int64_t, std::vector<float>>> in_workspace;
    int64_t offset = 0, total = 0;
    const bool own_work = !collect_pass_by_value_tensors_subtree(by_value).is_good() ||
                          !by_value.empty() ||
                          !collect_tensors_in_workspace_subtree(in_workspace, offset).is_good() ||
                          !in_workspace.empty();
    if (own_work || !plans.is_plan_index_executable(plans.candidate).is_good() ||
        !get_workspace_size(total).is_good()) {
      return false;
    }
    return total == plans.execution_plans[plans.candidate]->getWorkspaceSize();
  }
  cudnnBackendDescriptor_t built_plan() const {
    return plans.execution_plans[plans.candidate]->get_raw_desc();
  }
  const std::unordered_set<uid_t>& uids() const { return variant_pack_uids; }
};

// A variant pack finalized for one call's tensors (cuDNN's descriptor holds the pointers): kept
// for later calls that bring the same pointers, workspace and epsilon.
struct VariantPack {
  std::array<void*, kUidCount> data{};  // by position in Plan::uids; epsilon's: &epsilon
  void* workspace = nullptr;
  float epsilon = 0.f;  // (the pack passes this float by value)
  cudnnBackendDescriptor_t desc = nullptr;
};
// Variant packs kept per plan: a training step calls a shape with a few pointer sets (its
// layers' activations reused step to step by PyTorch's caching allocator); past these, a call
// with new pointers replaces the pack made longest ago.
inline constexpr int kVariantPacks = 8;

struct Plan {
  NormGraph graph;
  int64_t workspace = 0;  // cuDNN's
  bool fp8 = false;       // a per-tensor FP8 z: the amax slot after cuDNN's workspace
  // Zero-centered gamma: the constant 1 the graph adds, in its dtype (fp32, or gamma's with
  // gamma_in_wtype), passed by value at execution.
  alignas(4) unsigned char one[4] = {};
  // Run through the backend API (NormGraph::runs_plain): the built plan, its variant pack's
  // uids in a fixed order, and the packs of recent calls (see variant_pack()).
  bool plain = false;
  cudnnBackendDescriptor_t built = nullptr;  // (the graph's: it outlives this)
  int uid_count = 0;
  std::array<int64_t, kUidCount> uids{};
  std::array<VariantPack, kVariantPacks> packs{};
  int next_pack = 0;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    for (VariantPack& vp : packs) {
      if (vp.desc != nullptr) (void)fe::detail::destroy_descriptor(vp.desc);
    }
  }
  // What the size query answers and the call brings.
  size_t call_workspace() const { return fp8 ? amax_slot_offset(workspace) + sizeof(float) : static_cast<size_t>(workspace); }
};

size_t cache_capacity() {
  const char* v = std::getenv("NORMTUNE_CUDNN_PLAN_CACHE");
  if (v == nullptr || *v == '\0') return 64;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  NORMTUNE_CHECK(end != v && *end == '\0' && n >= 1, "NORMTUNE_CUDNN_PLAN_CACHE: expected a count >= 1, got '", v,
                 "'");
  return static_cast<size_t>(n);
}

// Never destroyed: at exit it would release plans after libcudnn has torn itself down.
LruCache<PlanKey, Plan, PlanKeyHash>& plan_cache() {
  static auto* cache = new LruCache<PlanKey, Plan, PlanKeyHash>(cache_capacity());
  return *cache;
}

// Shapes whose plan could not be built, with why: said again at once on every later call of
// that shape, not built again. Whether a shape's graph builds is a fact of (key, rows,
// device), and the tuned table's choice and the workspace answer (api_common.h:
// answered_workspace) must see it the same way on a size query and on its real call, however
// far apart. Bounded: past kMaxFailedPlans shapes, a failing shape is tried again each call.
inline constexpr size_t kMaxFailedPlans = 4096;
class FailedPlans {
 public:
  std::string find(const PlanKey& k) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = why_.find(k);
    return it == why_.end() ? std::string() : it->second;
  }
  void add(const PlanKey& k, std::string why) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (why_.size() < kMaxFailedPlans) why_.emplace(k, std::move(why));
  }

 private:
  std::mutex mutex_;
  std::unordered_map<PlanKey, std::string, PlanKeyHash> why_;
};
FailedPlans& failed_plans() {
  static auto* failed = new FailedPlans();  // (never destroyed, as the cache)
  return *failed;
}

std::shared_ptr<fe::graph::Tensor_attributes> rows_hidden(fe::graph::Graph& g, const char* name, int64_t uid,
                                                           int64_t rows, int64_t hidden, DType t) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({rows, hidden, 1, 1})
                      .set_stride({hidden, 1, hidden, hidden})
                      .set_data_type(fe_type(t)));
}
std::shared_ptr<fe::graph::Tensor_attributes> per_column(fe::graph::Graph& g, const char* name, int64_t uid,
                                                          int64_t hidden, DType t) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({1, hidden, 1, 1})
                      .set_stride({hidden, 1, hidden, hidden})
                      .set_data_type(fe_type(t)));
}
std::shared_ptr<fe::graph::Tensor_attributes> per_row(fe::graph::Graph& g, const char* name, int64_t uid,
                                                       int64_t rows) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({rows, 1, 1, 1})
                      .set_stride({1, 1, 1, 1})
                      .set_data_type(fe::DataType_t::FLOAT));
}
std::shared_ptr<fe::graph::Tensor_attributes> scalar(fe::graph::Graph& g, const char* name, int64_t uid) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({1, 1, 1, 1})
                      .set_stride({1, 1, 1, 1})
                      .set_is_pass_by_value(true)
                      .set_data_type(fe::DataType_t::FLOAT));
}

// gamma as the norm uses it: gamma, or gamma + 1 with zero-centered gamma, added in fp32 and
// kept in fp32, or (in_wtype) rounded to gamma's dtype.
std::shared_ptr<fe::graph::Tensor_attributes> weight(fe::graph::Graph& g, Plan& plan,
                                                     const NormKey& key, int64_t hidden,
                                                     bool in_wtype) {
  auto gamma = per_column(g, "gamma", kUidGamma, hidden, key.wtype);
  if ((key.flags & kFlagZeroCenteredGamma) == 0) return gamma;
  const DType sum_type = in_wtype ? key.wtype : DType::kFloat32;
  auto one = scalar(g, "one", kUidOne);
  one->set_data_type(fe_type(sum_type));
  float_to_dtype(sum_type, 1.f, plan.one, 0);  // (its bytes, passed by value at execution)
  auto shifted = g.pointwise(gamma, one,
                             fe::graph::Pointwise_attributes()
                                 .set_name("gamma_plus_one")
                                 .set_mode(fe::PointwiseMode_t::ADD)
                                 .set_compute_data_type(fe::DataType_t::FLOAT));
  shifted->set_data_type(fe_type(sum_type));
  return shifted;
}

void finish(Plan& plan, cudnnHandle_t h) {
  check(plan.graph.validate(), "graph validation");
  check(plan.graph.build_operation_graph(h), "operation graph");
  check(plan.graph.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), "execution plans");
  check(plan.graph.check_support(h), "support check");
  check(plan.graph.build_plans(h), "plan build");
  check(plan.graph.get_workspace_size(plan.workspace), "workspace size");
  plan.plain = plan.graph.runs_plain();
  if (!plan.plain) return;
  plan.built = plan.graph.built_plan();
  for (int64_t uid : plan.graph.uids()) {
    NORMTUNE_CHECK(uid > 0 && uid < kUidCount && plan.uid_count < kUidCount,
                   "internal: cuDNN graph uid ", uid);
    plan.uids[plan.uid_count++] = uid;
  }
  std::sort(plan.uids.begin(), plan.uids.begin() + plan.uid_count);
}

// An empty graph with x's dtype for input and output, fp32 inside, and the SM target if any.
std::shared_ptr<Plan> new_plan(const NormKey& key, int sm_target) {
  auto plan = std::make_shared<Plan>();
  plan->graph.set_io_data_type(fe_type(key.itype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  if (sm_target > 0 && fe::detail::get_backend_version() >= 90400)
    plan->graph.set_sm_count(sm_target);
  return plan;
}

// z of the forward graph: the norm's output `z` written in z's dtype, or (per-tensor FP8)
// kept in fp32, multiplied by the scale into the FP8 z, and reduced to its amax.
void forward_output(fe::graph::Graph& g, const NormKey& key, Plan& plan,
                    const std::shared_ptr<fe::graph::Tensor_attributes>& z) {
  if (!is_fp8(key.otype)) {
    z->set_output(true).set_uid(kUidZ).set_data_type(fe_type(key.otype));
    return;
  }
  plan.fp8 = true;
  z->set_data_type(fe::DataType_t::FLOAT);
  auto scale = g.tensor(fe::graph::Tensor_attributes()
                            .set_name("scale")
                            .set_uid(kUidScale)
                            .set_dim({1, 1, 1, 1})
                            .set_stride({1, 1, 1, 1})
                            .set_data_type(fe::DataType_t::FLOAT));
  auto scaled = g.pointwise(z, scale,
                            fe::graph::Pointwise_attributes()
                                .set_name("z_times_scale")
                                .set_mode(fe::PointwiseMode_t::MUL)
                                .set_compute_data_type(fe::DataType_t::FLOAT));
  scaled->set_output(true).set_uid(kUidZ).set_data_type(fe_type(key.otype));
  auto amax = g.reduction(z, fe::graph::Reduction_attributes()
                                 .set_name("amax")
                                 .set_mode(fe::ReductionMode_t::AMAX)
                                 .set_compute_data_type(fe::DataType_t::FLOAT));
  amax->set_output(true).set_uid(kUidAmax).set_data_type(fe::DataType_t::FLOAT).set_dim({1, 1, 1, 1});
}

std::shared_ptr<Plan> build_forward(const NormKey& key, int64_t rows, int64_t hidden,
                                    bool gamma_in_wtype, int sm_target, cudnnHandle_t h) {
  auto plan = new_plan(key, sm_target);
  fe::graph::Graph& g = plan->graph;
  auto x = rows_hidden(g, "x", kUidX, rows, hidden, key.itype);
  auto gamma = weight(g, *plan, key, hidden, gamma_in_wtype);
  auto epsilon = scalar(g, "epsilon", kUidEpsilon);
  if (key.norm == NormType::kRMSNorm) {
    auto attrs = fe::graph::Rmsnorm_attributes()
                     .set_forward_phase(fe::NormFwdPhase_t::TRAINING)
                     .set_epsilon(epsilon)
                     .set_compute_data_type(fe::DataType_t::FLOAT);
    auto [z, rsigma] = g.rmsnorm(x, gamma, attrs);
    forward_output(g, key, *plan, z);
    rsigma->set_output(true).set_uid(kUidRsigma).set_data_type(fe::DataType_t::FLOAT);
  } else {
    auto beta = per_column(g, "beta", kUidBeta, hidden, key.wtype);
    auto attrs = fe::graph::Layernorm_attributes()
                     .set_forward_phase(fe::NormFwdPhase_t::TRAINING)
                     .set_epsilon(epsilon)
                     .set_compute_data_type(fe::DataType_t::FLOAT);
    auto [z, mu, rsigma] = g.layernorm(x, gamma, beta, attrs);
    forward_output(g, key, *plan, z);
    mu->set_output(true).set_uid(kUidMu).set_data_type(fe::DataType_t::FLOAT);
    rsigma->set_output(true).set_uid(kUidRsigma).set_data_type(fe::DataType_t::FLOAT);
  }
  finish(*plan, h);
  return plan;
}

std::shared_ptr<Plan> build_backward(const NormKey& key, int64_t rows, int64_t hidden,
                                     bool gamma_in_wtype, int sm_target, cudnnHandle_t h) {
  auto plan = new_plan(key, sm_target);
  fe::graph::Graph& g = plan->graph;
  auto dz = rows_hidden(g, "dz", kUidDz, rows, hidden, key.itype);
  auto x = rows_hidden(g, "x", kUidX, rows, hidden, key.itype);
  auto gamma = weight(g, *plan, key, hidden, gamma_in_wtype);
  auto rsigma = per_row(g, "rsigma", kUidRsigma, rows);
  if (key.norm == NormType::kRMSNorm) {
    auto attrs = fe::graph::Rmsnorm_backward_attributes().has_dbias(false).set_compute_data_type(fe::DataType_t::FLOAT);
    auto [dx, dgamma, dbias] = g.rmsnorm_backward(dz, x, gamma, rsigma, attrs);
    dx->set_output(true).set_uid(kUidDx).set_data_type(fe_type(key.itype));
    dgamma->set_output(true).set_uid(kUidDgamma).set_data_type(fe_type(key.wtype));
    (void)dbias;
  } else {
    auto mu = per_row(g, "mu", kUidMu, rows);
    auto attrs = fe::graph::Layernorm_backward_attributes()
                     .set_saved_mean_and_inv_variance(mu, rsigma)
                     .set_compute_data_type(fe::DataType_t::FLOAT);
    auto [dx, dgamma, dbeta] = g.layernorm_backward(dz, x, gamma, attrs);
    dx->set_output(true).set_uid(kUidDx).set_data_type(fe_type(key.itype));
    dgamma->set_output(true).set_uid(kUidDgamma).set_data_type(fe_type(key.wtype));
    dbeta->set_output(true).set_uid(kUidDbeta).set_data_type(fe_type(key.wtype));
  }
  finish(*plan, h);
  return plan;
}

// Errors of the backend: what asked for cuDNN, the call, what failed. The frontend's own
// exceptions (its loader) become normtune::Error too: nothing else leaves the C API.
// sm_target > 0: the graph was held to that many SMs (the call's multiprocessorCount), which
// the message names: cuDNN may have no engine for it (cuDNN 9.14's backward, when its
// finalize kernel wants more CTAs than the target), as in TE's cuDNN path.
template <typename Fn>
auto with_context(const NormKey& key, int64_t rows, const char* what, int sm_target, Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    const std::string target = sm_target > 0 ? detail::concat(", for multiprocessorCount ",
                                                              sm_target, " (the graph's SM target)")
                                             : "";
    NORMTUNE_ERROR(t_source, " asks for the cuDNN backend; ", what, " for ", to_string(key), ", ",
                   rows, " rows", target, " failed: ", e.what());
  }
}

// The plan of a call of `key` (types from the entry; from the call's Args: zero-centered gamma,
// TransformerEngine's switch for how gamma + 1 is formed as the call read it, which matters for
// a 16-bit gamma, and the SMs the call may use, multiprocessorCount as api_common.h's
// sm_bound()). The workspace query and the run of one call both come here with the same Args.
template <typename Args>
std::shared_ptr<Plan> plan_for(NormKey key, const Args& args) {
  const auto& p = args.params;
  const bool zero_centered = p.zero_centered_gamma;
  const int64_t rows = p.rows;
  const int64_t hidden = p.hidden;
  const int sm_bound = args.sm_bound;
  key.flags = zero_centered ? kFlagZeroCenteredGamma : 0;
  key.hidden_size = static_cast<uint32_t>(hidden);
  const int device = current_device();
  const bool in_wtype = zero_centered && key.wtype != DType::kFloat32 && args.cudnn_gamma_in_wtype;
  const int sm_target = sm_bound > 0 && sm_bound < device_info(device).sm_count ? sm_bound : -1;
  const PlanKey pk{pack(key), rows, device, in_wtype, sm_target};
  const char* what = in_wtype
                         ? "building the graph (zero-centered gamma + 1 rounded to gamma's dtype)"
                         : "building the graph";
  return with_context(key, rows, what, sm_target, [&] {
    if (std::string why = failed_plans().find(pk); !why.empty()) {
      NORMTUNE_ERROR(why, " (an earlier build of this shape in this process; not tried again)");
    }
    return plan_cache().get(pk, [&] {
      try {
        DeviceHandle& dh = device_handle(device);
        if (zero_centered && fe::detail::get_backend_version() < 90700) {
          NORMTUNE_ERROR("zero-centered gamma through cuDNN needs cuDNN 9.7 or newer (this is ",
                         fe::detail::get_backend_version(), ")");
        }
        std::lock_guard<std::mutex> lock(dh.lock);
        return is_backward(key.stage)
                   ? build_backward(key, rows, hidden, in_wtype, sm_target, dh.handle)
                   : build_forward(key, rows, hidden, in_wtype, sm_target, dh.handle);
      } catch (const std::exception& e) {
        failed_plans().add(pk, e.what());
        throw;
      }
    });
  });
}

// cuDNN launches through the driver API, which needs a current context on the calling thread;
// the runtime binds the device's primary context to a thread only at its first runtime call
// that needs one (our kernels' launches do). A thread whose first GPU work is a call routed
// to cuDNN (a new thread handed the TE two-call protocol, measured on the H200: "cuLaunchKernelEx
// returned error invalid device context (201)") gets it bound here: cudaSetDevice makes the
// primary context current (CUDA 12+), once per thread and device.
void bind_primary_context(int device) {
  thread_local int bound = -1;
  if (bound == device) return;
  NORMTUNE_CUDA_CHECK(cudaSetDevice(device));
  bound = device;
}

// The variant pack of a call's tensors (the plan's uids from `t`, the workspace, epsilon's
// value): the one finalized for an earlier call that brought the same, else a new one in the
// slot of the pack made longest ago. Under the device's lock (the plan is the device's).
cudnnBackendDescriptor_t variant_pack(Plan& plan, const Tensors& t, void* workspace) {
  const float epsilon =
      t[kUidEpsilon] != nullptr ? *static_cast<const float*>(t[kUidEpsilon]) : 0.f;
  auto same = [&](const VariantPack& vp) {
    if (vp.desc == nullptr || vp.workspace != workspace ||
        std::memcmp(&vp.epsilon, &epsilon, sizeof(float)) != 0) {
      return false;
    }
    for (int i = 0; i < plan.uid_count; ++i) {
      if (plan.uids[i] != kUidEpsilon && vp.data[i] != t[plan.uids[i]]) return false;
    }
    return true;
  };
  for (const VariantPack& vp : plan.packs) {
    if (same(vp)) return vp.desc;
  }
  VariantPack& vp = plan.packs[plan.next_pack];
  plan.next_pack = (plan.next_pack + 1) % kVariantPacks;
  if (vp.desc != nullptr) {
    (void)fe::detail::destroy_descriptor(vp.desc);
    vp.desc = nullptr;
  }
  vp.workspace = workspace;
  vp.epsilon = epsilon;
  for (int i = 0; i < plan.uid_count; ++i) {
    const int64_t uid = plan.uids[i];
    vp.data[i] = uid == kUidEpsilon ? &vp.epsilon : t[uid];
    NORMTUNE_CHECK(vp.data[i] != nullptr, "internal: no tensor for the cuDNN graph's uid ", uid);
  }
  cudnnBackendDescriptor_t desc = nullptr;
  check(fe::detail::create_descriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &desc),
        "variant pack");
  const cudnnStatus_t status = [&] {
    cudnnStatus_t s = fe::detail::set_attribute(desc, CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                                                CUDNN_TYPE_VOID_PTR, 1, &vp.workspace);
    if (s == CUDNN_STATUS_SUCCESS) {
      s = fe::detail::set_attribute(desc, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                    CUDNN_TYPE_VOID_PTR, plan.uid_count, vp.data.data());
    }
    if (s == CUDNN_STATUS_SUCCESS) {
      s = fe::detail::set_attribute(desc, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
                                    plan.uid_count, plan.uids.data());
    }
    return s == CUDNN_STATUS_SUCCESS ? fe::detail::finalize(desc) : s;
  }();
  if (status != CUDNN_STATUS_SUCCESS) {
    (void)fe::detail::destroy_descriptor(desc);
    check(status, "variant pack");
  }
  vp.desc = desc;
  return desc;
}

// Runs the plan with a call's tensors: through the backend API with a kept variant pack (no
// allocation when the call's pointers were seen before), or where the frontend has work of its
// own at execution (see NormGraph::runs_plain), through its execute().
void execute(const NormKey& key, int64_t rows, Plan& plan, const Tensors& t, void* workspace,
             cudaStream_t stream) {
  with_context(key, rows, "running the graph", -1, [&] {
    const int device = current_device();
    bind_primary_context(device);
    DeviceHandle& dh = device_handle(device);
    std::lock_guard<std::mutex> lock(dh.lock);
    check(fe::detail::set_stream(dh.handle, stream), "cudnnSetStream");
    if (plan.plain) {
      check(fe::detail::execute(dh.handle, plan.built, variant_pack(plan, t, workspace)),
            "execution");
      return 0;
    }
    std::unordered_map<int64_t, void*> pack;
    for (int64_t uid = 1; uid < kUidCount; ++uid) {
      if (t[uid] != nullptr) pack.emplace(uid, t[uid]);
    }
    check(plan.graph.execute(dh.handle, pack, workspace), "execution");
    return 0;
  });
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// ---- the entries' functions ------------------------------------------------------------
template <NormType kNorm, DType kW, DType kI, DType kO = kI>
constexpr NormKey entry_key(Stage stage) {
  return make_key(kNorm, stage, kW, kI, kO, kAnyHiddenSize, ScalingMode::kNone, false);
}

// kFp8: the entry of a per-tensor FP8 z (its amax is computed; a high-precision z's is not).
template <bool kFp8>
const char* forward_rejection(const void* a) {
  const FwdParams& p = static_cast<const FwdArgs*>(a)->params;
  if (!kFp8 && p.amax != nullptr) return "it does not compute the amax of a high-precision z";
  if (!aligned16(p.x) || !aligned16(p.gamma) || !aligned16(p.beta) || !aligned16(p.z) || !aligned16(p.mu) ||
      !aligned16(p.rsigma)) {
    return "its graphs take x, gamma, beta, z, mu and rsigma at 16-byte aligned addresses";
  }
  return nullptr;
}

const char* backward_rejection(const void* a) {
  const BwdParams& p = static_cast<const BwdArgs*>(a)->params;
  if (!aligned16(p.dz) || !aligned16(p.x) || !aligned16(p.gamma) || !aligned16(p.dx) || !aligned16(p.dgamma) ||
      !aligned16(p.dbeta) || !aligned16(p.mu) || !aligned16(p.rsigma)) {
    return "its graphs take dz, x, gamma, mu, rsigma, dx, dgamma and dbeta at 16-byte aligned addresses";
  }
  if (p.dx == p.dz && p.dx != nullptr) return "it does not write dx over dz (in place)";
  return nullptr;
}

// The workspace of a call's plan (FwdArgs or BwdArgs): built here, by the size query.
template <NormType kNorm, DType kW, DType kI, DType kO, typename Args>
size_t plan_workspace(const void* a) {
  const Args& args = *static_cast<const Args*>(a);
  const auto& p = args.params;
  if (p.rows == 0) return 0;
  constexpr Stage kStage = std::is_same_v<Args, BwdArgs> ? Stage::kBackward : Stage::kForward;
  return plan_for(entry_key<kNorm, kW, kI, kO>(kStage), args)->call_workspace();
}

// A call's plan (cached) run with its tensors (`t`; the plan's constant 1 of zero-centered
// gamma added here, and a per-tensor FP8 plan's amax slot in the workspace), for FwdParams or
// BwdParams (with its call's FwdArgs / BwdArgs: the workspace and the SM bound). Returns the plan.
template <typename Args>
std::shared_ptr<Plan> run_graph(const NormKey& key, const Args& args, Tensors& t,
                                cudaStream_t stream) {
  const auto& p = args.params;
  void* workspace = args.workspace;
  auto plan = plan_for(key, args);
  if (p.zero_centered_gamma) t[kUidOne] = plan->one;
  if (plan->fp8) {
    // (Zeroed first: whether cuDNN's AMAX reduction overwrites its output or folds into it,
    // the slot then holds this call's max.)
    void* slot = static_cast<char*>(workspace) + amax_slot_offset(plan->workspace);
    NORMTUNE_CUDA_CHECK(cudaMemsetAsync(slot, 0, sizeof(float), stream));
    t[kUidAmax] = slot;
  }
  execute(key, p.rows, *plan, t, workspace, stream);
  return plan;
}

template <NormType kNorm, DType kW, DType kI, DType kO>
void forward_run(const void* a, cudaStream_t stream) {
  const FwdArgs& args = *static_cast<const FwdArgs*>(a);
  const FwdParams& p = args.params;
  if (p.rows == 0) return;
  float epsilon = p.epsilon;
  Tensors t{};
  t[kUidX] = const_cast<void*>(p.x);
  t[kUidGamma] = const_cast<void*>(p.gamma);
  t[kUidEpsilon] = &epsilon;
  t[kUidZ] = p.z;
  t[kUidRsigma] = p.rsigma;
  if (kNorm == NormType::kLayerNorm) {
    t[kUidBeta] = const_cast<void*>(p.beta);
    t[kUidMu] = p.mu;
  }
  if constexpr (is_fp8(kO)) t[kUidScale] = const_cast<float*>(p.scale);
  const auto plan = run_graph(entry_key<kNorm, kW, kI, kO>(Stage::kForward), args, t, stream);
  if constexpr (is_fp8(kO)) {
    const auto* slot = reinterpret_cast<const float*>(static_cast<const char*>(args.workspace) +
                                                      amax_slot_offset(plan->workspace));
    launch_fp8_finish(slot, p.amax, p.scale, p.scale_inv, stream);
  }
}

template <NormType kNorm, DType kW, DType kI>
void backward_run(const void* a, cudaStream_t stream) {
  const BwdArgs& args = *static_cast<const BwdArgs*>(a);
  const BwdParams& p = args.params;
  if (p.rows == 0) {  // no rows: dgamma (dbeta) are sums of nothing
    const size_t bytes = static_cast<size_t>(p.hidden) * dtype_storage_bytes(kW, 1);
    NORMTUNE_CUDA_CHECK(cudaMemsetAsync(p.dgamma, 0, bytes, stream));
    if (kNorm == NormType::kLayerNorm) NORMTUNE_CUDA_CHECK(cudaMemsetAsync(p.dbeta, 0, bytes, stream));
    return;
  }
  Tensors t{};
  t[kUidDz] = const_cast<void*>(p.dz);
  t[kUidX] = const_cast<void*>(p.x);
  t[kUidGamma] = const_cast<void*>(p.gamma);
  t[kUidRsigma] = const_cast<float*>(p.rsigma);
  t[kUidDx] = p.dx;
  t[kUidDgamma] = p.dgamma;
  if (kNorm == NormType::kLayerNorm) {
    t[kUidMu] = const_cast<float*>(p.mu);
    t[kUidDbeta] = p.dbeta;
  }
  (void)run_graph(entry_key<kNorm, kW, kI>(Stage::kBackward), args, t, stream);
}

template <NormType kNorm, DType kW, DType kI>
void add_entries(Registry& registry, std::span<const TypeCombo> fwd, std::span<const TypeCombo> bwd) {
  auto listed = [](std::span<const TypeCombo> list, DType otype) {
    for (const TypeCombo& c : list) {
      if (c.wtype == kW && c.itype == kI && c.otype == otype && c.scaling == ScalingMode::kNone) return true;
    }
    return false;
  };
  const std::string types = detail::concat(dtype_name(kW), "_", dtype_name(kI));
  const char* norm = kNorm == NormType::kRMSNorm ? "rmsnorm" : "layernorm";
  auto add = [&](const NormKey& key, const std::string& name, const char* what, CanImplementFn can, RunFn run,
                 WorkspaceFn workspace) {
    KernelEntry e;
    e.key = key;
    e.backend = Backend::kCudnn;
    e.name = name;
    e.config = detail::concat("cudnn-frontend graph (", what, "), one plan per rows x hidden");
    e.can_implement = can;
    e.run = run;
    e.workspace_bytes = workspace;
    registry.add_backend(std::move(e));
  };
  if (listed(fwd, kI)) {
    add(entry_key<kNorm, kW, kI>(Stage::kForward), detail::concat(norm, "_fwd_", types, "_cudnn"),
        "training: z, rsigma, mu", forward_rejection<false>, forward_run<kNorm, kW, kI, kI>,
        plan_workspace<kNorm, kW, kI, kI, FwdArgs>);
  }
  // Per-tensor FP8 z, where the native kernels take it.
  auto add_fp8 = [&](auto otype_tag) {
    constexpr DType kO = decltype(otype_tag)::value;
    if (!listed(fwd, kO)) return;
    add(entry_key<kNorm, kW, kI, kO>(Stage::kForward), detail::concat(norm, "_fwd_", types, "_", dtype_name(kO), "_cudnn"),
        "training: FP8 z = fp8(value x scale), its amax and scale_inv, rsigma, mu", forward_rejection<true>,
        forward_run<kNorm, kW, kI, kO>, plan_workspace<kNorm, kW, kI, kO, FwdArgs>);
  };
  add_fp8(std::integral_constant<DType, DType::kFloat8E4M3>{});
  add_fp8(std::integral_constant<DType, DType::kFloat8E5M2>{});
  if (listed(bwd, kI)) {
    add(entry_key<kNorm, kW, kI>(Stage::kBackward), detail::concat(norm, "_bwd_", types, "_cudnn"),
        "dx, dgamma, dbeta", backward_rejection, backward_run<kNorm, kW, kI>,
        plan_workspace<kNorm, kW, kI, kI, BwdArgs>);
  }
}

template <NormType kNorm, DType kI>
void add_entries_of_input(Registry& registry) {
  const auto fwd = supported_types(Stage::kForward);
  const auto bwd = supported_types(Stage::kBackward);
  add_entries<kNorm, kI, kI>(registry, fwd, bwd);
  if constexpr (kI != DType::kFloat32) add_entries<kNorm, DType::kFloat32, kI>(registry, fwd, bwd);
}

}  // namespace

void register_cudnn_entries(Registry& registry) {
  for (NormType norm : {NormType::kRMSNorm, NormType::kLayerNorm}) {
    if (norm == NormType::kRMSNorm) {
      add_entries_of_input<NormType::kRMSNorm, DType::kFloat32>(registry);
      add_entries_of_input<NormType::kRMSNorm, DType::kFloat16>(registry);
      add_entries_of_input<NormType::kRMSNorm, DType::kBFloat16>(registry);
    } else {
      add_entries_of_input<NormType::kLayerNorm, DType::kFloat32>(registry);
      add_entries_of_input<NormType::kLayerNorm, DType::kFloat16>(registry);
      add_entries_of_input<NormType::kLayerNorm, DType::kBFloat16>(registry);
    }
  }
}

void set_cudnn_call_source(const char* source) { t_source = source; }

CudnnCacheStats cudnn_plan_cache_stats() {
  const auto& cache = plan_cache();
  return {cache.size(), cache.capacity(), cache.hits(), cache.builds()};
}

}  // namespace normtune
