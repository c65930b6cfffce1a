// normtune's PyTorch operators (namespace `normtune`): the only file that includes torch
// headers. Every op calls the library's C API under its normtune_ names (so a process that
// also loads TransformerEngine still reaches normtune), on the tensors' device and that
// device's current stream, with the workspace of the two-call protocol taken from the
// caching allocator.
//
//   rms_norm_fwd, rms_norm_bwd, rms_norm_bwd_add, layer_norm_fwd, layer_norm_bwd,
//   fused_add_rms_norm_fwd          the kernels: a CUDA implementation and a Meta one (shapes
//                                   only, for FakeTensor / torch.compile)
//   rms_norm, layer_norm,           the differentiable ops: CUDA and Meta run the forward
//   fused_add_rms_norm              kernel; the Autograd implementation (C++) saves what the
//                                   backward kernel needs and calls it
//
// Inputs: x [..., H] (fp32, fp16, bf16), weight [H] (x's dtype or fp32), bias [H] (LayerNorm).
// A non-contiguous x (or weight, bias, dy) is copied to a contiguous one first. The
// statistics (mu, rsigma) are fp32 of shape [rows]; the gradients of the weight and bias have
// the weight's dtype.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <exception>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <string>
#include <unordered_map>
#include <tuple>
#include <type_traits>
#include <vector>

#include <normtune/normtune_api.h>

namespace {

using at::Tensor;

NVTEDType nvte_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return kNVTEFloat32;
    case at::kHalf: return kNVTEFloat16;
    case at::kBFloat16: return kNVTEBFloat16;
    case at::kByte: return kNVTEByte;
    case at::ScalarType::Float8_e4m3fn: return kNVTEFloat8E4M3;
    case at::ScalarType::Float8_e5m2: return kNVTEFloat8E5M2;
    case at::ScalarType::Float8_e8m0fnu: return kNVTEFloat8E8M0;
    case at::ScalarType::Float4_e2m1fn_x2: return kNVTEFloat4E2M1;  // (a handle's dims count elements)
    default: TORCH_CHECK(false, "normtune: dtype ", t, " is not supported (fp32, fp16 or bf16)");
  }
}

// The shape of a handle's buffer: [n] or [rows, hidden].
struct Dims {
  size_t d[2];
  size_t n;
};

// An NVTETensor over a torch tensor's storage (row-wise data; an FP8 output also its scale
// buffers). The handles are reused per thread and scaling mode (created once, re-pointed for
// each call, destroyed when the thread ends): six creations and destructions per call showed
// in the eager overhead.
class Handle {
 public:
  Handle(void* data, NVTEDType dtype, Dims dims, NVTEScalingMode mode = NVTE_DELAYED_TENSOR_SCALING)
      : mode_(mode), h_(acquire(mode)) {
    const NVTEBasicTensor b{data, dtype, normtune_make_shape(dims.d, dims.n)};
    try {
      normtune_set_tensor_param_v2(h_, kNVTERowwiseData, &b, sizeof(b));
    } catch (...) {
      pool(mode_).free.push_back(h_);
      throw;
    }
  }
  Handle(const Tensor& t, Dims dims, NVTEScalingMode mode = NVTE_DELAYED_TENSOR_SCALING)
      : Handle(t.data_ptr(), nvte_dtype(t.scalar_type()), dims, mode) {}
  ~Handle() {
    // A pooled handle goes back without its other buffers: a NULL scale buffer is an absent
    // one; column-wise data (and its scales) absent is NULL with shape [0]. Otherwise the next
    // call on this handle would write to the last call's column-wise buffers.
    for (NVTETensorParam p : {kNVTEScale, kNVTEAmax, kNVTERowwiseScaleInv, kNVTEColumnwiseData,
                              kNVTEColumnwiseScaleInv, kNVTEColumnwiseAmax}) {
      if (!(extras_ & (1u << p))) continue;
      const size_t extent = p == kNVTEColumnwiseData || p == kNVTEColumnwiseScaleInv ? 0 : 1;
      const NVTEBasicTensor none{nullptr, kNVTEFloat32, normtune_make_shape(&extent, 1)};
      normtune_set_tensor_param_v2(h_, p, &none, sizeof(none));
    }
    if (swizzled_) {
      const uint8_t off = 0;
      normtune_set_tensor_param_v2(h_, kNVTEWithGEMMSwizzledScales, &off, sizeof(off));
    }
    pool(mode_).free.push_back(h_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  operator NVTETensor() const { return h_; }

  // kNVTEWithGEMMSwizzledScales (put back to false when the handle goes back to its pool).
  void set_swizzled(bool on) {
    const uint8_t v = on ? 1 : 0;
    normtune_set_tensor_param_v2(h_, kNVTEWithGEMMSwizzledScales, &v, sizeof(v));
    swizzled_ = on;
  }

  // Another buffer of the tensor: kNVTEScale, kNVTEAmax, kNVTERowwiseScaleInv,
  // kNVTEColumnwiseData, kNVTEColumnwiseScaleInv or kNVTEColumnwiseAmax (cleared again when
  // the handle goes back).
  void set(NVTETensorParam param, const Tensor& t, Dims dims) {
    const NVTEBasicTensor b{t.data_ptr(), nvte_dtype(t.scalar_type()), normtune_make_shape(dims.d, dims.n)};
    normtune_set_tensor_param_v2(h_, param, &b, sizeof(b));
    extras_ |= 1u << param;
  }

 private:
  struct Pool {
    std::vector<NVTETensor> free;
    ~Pool() {
      for (NVTETensor h : free) normtune_destroy_tensor(h);
    }
  };
  static Pool& pool(NVTEScalingMode mode) {
    // One pool per scaling mode a handle is created with.
    thread_local Pool pools[5];
    switch (mode) {
      case NVTE_MXFP8_1D_SCALING: return pools[1];
      case NVTE_BLOCK_SCALING_1D: return pools[2];
      case NVTE_NORMTUNE_MXFP4_1D_SCALING: return pools[3];
      case NVTE_NVFP4_1D_SCALING: return pools[4];
      default: return pools[0];
    }
  }
  static NVTETensor acquire(NVTEScalingMode mode) {
    std::vector<NVTETensor>& free = pool(mode).free;
    if (free.empty()) return normtune_create_tensor(mode);
    const NVTETensor h = free.back();
    free.pop_back();
    return h;
  }
  NVTEScalingMode mode_;
  NVTETensor h_;
  unsigned extras_ = 0;
  bool swizzled_ = false;
};

// What every kernel call shares: the checks of x and the weight, the [rows, H] view, the
// device guard and the stream.
struct Call {
  const char* op;
  Tensor x;  // contiguous
  int64_t rows = 0, hidden = 0;
  cudaStream_t stream = nullptr;
};

// Numbers in messages go through std::to_string (sym_str, dims_str), never an ostream: the
// H200 machine's compiler (/opt/gcc, GCC 13) links libstdc++ into this library statically,
// and that copy's stream locale is never set up, so the first integer streamed into a
// TORCH_CHECK message crashed the process (SIGSEGV in std::ostream::_M_insert<long>, a null
// num_put facet) instead of raising; seen again in session 11 with an int64_t block size.
// Symbolic sizes (torch.compile with dynamic shapes) print as "?".
std::string sym_str(const c10::SymInt& d) {
  const std::optional<int64_t> v = d.maybe_as_int();
  return v ? std::to_string(*v) : std::string("?");
}

std::string dims_str(c10::SymIntArrayRef dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + sym_str(dims[i]);
  return s + "]";
}

void check_same_device(const char* op, const char* name, const Tensor& t, const Tensor& x) {
  TORCH_CHECK(t.device() == x.device(), "normtune.", op, ": ", name, " is on ", t.device(), ", x on ", x.device());
}

// Shapes (also checked by the Meta kernels, so FakeTensor raises the same errors).
void check_shapes(const char* op, const Tensor& x, const Tensor& weight) {
  TORCH_CHECK(x.dim() >= 1, "normtune.", op, ": x must have a last dimension (the hidden size), got a scalar");
  TORCH_CHECK(weight.dim() == 1 && weight.sym_size(0) == x.sym_size(-1), "normtune.", op, ": weight must have shape ",
              dims_str(x.sym_sizes().slice(x.dim() - 1)), " (x's last dimension), got ", dims_str(weight.sym_sizes()));
}

Call make_call(const char* op, const Tensor& x, const Tensor& weight) {
  TORCH_CHECK(x.is_cuda(), "normtune.", op, ": x must be a CUDA tensor, got one on ", x.device());
  check_same_device(op, "weight", weight, x);
  check_shapes(op, x, weight);
  Call c{op, x.contiguous()};
  c.hidden = x.size(-1);
  c.rows = c.hidden == 0 ? 0 : x.numel() / c.hidden;
  c10::impl::VirtualGuardImpl impl(x.device().type());
  c.stream = static_cast<cudaStream_t>(impl.getStream(x.device()).native_handle());
  return c;
}

// The C API's errors (std::runtime_error naming the argument) as torch errors.
template <typename Fn>
void translated(const char* op, Fn&& fn) {
  try {
    fn();
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "normtune.", op, ": ", e.what());
  }
}

Dims dims2(const Call& c) { return {{static_cast<size_t>(c.rows), static_cast<size_t>(c.hidden)}, 2}; }
Dims dims1(int64_t n) { return {{static_cast<size_t>(n), 0}, 1}; }

// TransformerEngine's two-call protocol: the call with an empty workspace sets its size;
// allocate exactly that (caching allocator, the call's stream) and call again. The size is a
// function of the call's key, rows and device only, so it is remembered per (op, device,
// rows, hidden, dtypes, flags) and the query is made once per such call, not on every call
// (the eager per-call overhead). A bounded map: it starts afresh past 4096 entries (a server
// sees every batch size).
struct WorkspaceKey {
  const char* op;
  int64_t rows, hidden;
  int32_t device, types;  // types: x, weight dtypes and the op's flags, packed
  bool operator==(const WorkspaceKey& o) const {
    return op == o.op && rows == o.rows && hidden == o.hidden && device == o.device && types == o.types;
  }
};
struct WorkspaceKeyHash {
  size_t operator()(const WorkspaceKey& k) const {
    size_t h = std::hash<const void*>{}(k.op);
    for (int64_t v : {k.rows, k.hidden, int64_t{k.device} << 32 | uint32_t(k.types)}) h = h * 1000003u ^ std::hash<int64_t>{}(v);
    return h;
  }
};

template <typename Fn>
void with_workspace(const Call& c, const Tensor& weight, int flags, Fn&& call) {
  static std::mutex mutex;
  static std::unordered_map<WorkspaceKey, int64_t, WorkspaceKeyHash> sizes;
  const WorkspaceKey key{c.op, c.rows, c.hidden, c.x.get_device(),
                         int32_t(c.x.scalar_type()) | int32_t(weight.scalar_type()) << 8 | flags << 16};
  translated(c.op, [&] {
    int64_t bytes = -1;
    {
      const std::lock_guard<std::mutex> lock(mutex);
      if (const auto it = sizes.find(key); it != sizes.end()) bytes = it->second;
    }
    if (bytes < 0) {
      Handle query(nullptr, kNVTEByte, dims1(0));
      call(static_cast<NVTETensor>(query));
      const NVTEShape shape = normtune_tensor_shape(query);
      bytes = shape.ndim == 1 ? static_cast<int64_t>(shape.data[0]) : 0;
      const std::lock_guard<std::mutex> lock(mutex);
      if (sizes.size() >= 4096) sizes.clear();
      sizes.emplace(key, bytes);
    }
    const Tensor ws = at::empty({bytes}, c.x.options().dtype(at::kByte));
    Handle w(ws, dims1(bytes));
    call(static_cast<NVTETensor>(w));
  });
}

at::TensorOptions stats_options(const Tensor& x) { return x.options().dtype(at::kFloat); }

// ---- kernels (CUDA) -----------------------------------------------------------------------
std::tuple<Tensor, Tensor> rms_norm_fwd_cuda(const Tensor& x, const Tensor& weight, double eps, bool zcg) {
  const c10::DeviceGuard guard(x.device());
  Call c = make_call("rms_norm", x, weight);
  const Tensor w = weight.contiguous();
  Tensor y = at::empty_like(c.x);
  Tensor rsigma = at::empty({c.rows}, stats_options(x));
  Handle hx(c.x, dims2(c)), hw(w, dims1(c.hidden)), hy(y, dims2(c)), hr(rsigma, dims1(c.rows));
  with_workspace(c, w, zcg, [&](NVTETensor ws) {
    normtune_rmsnorm_fwd(hx, hw, static_cast<float>(eps), hy, hr, ws, 0, zcg, c.stream);
  });
  return {y, rsigma};
}

std::tuple<Tensor, Tensor, Tensor> fused_add_rms_norm_fwd_cuda(const Tensor& x, const Tensor& residual,
                                                                const Tensor& weight, double eps, bool zcg) {
  const c10::DeviceGuard guard(x.device());
  Call c = make_call("fused_add_rms_norm", x, weight);
  check_same_device(c.op, "residual", residual, x);
  TORCH_CHECK(residual.sizes() == x.sizes() && residual.scalar_type() == x.scalar_type(), "normtune.", c.op,
              ": residual must have x's shape and dtype (", dims_str(x.sym_sizes()), ", ", x.scalar_type(), "), got ",
              dims_str(residual.sym_sizes()), ", ", residual.scalar_type());
  const Tensor r = residual.contiguous(), w = weight.contiguous();
  Tensor y = at::empty_like(c.x), residual_out = at::empty_like(c.x);
  Tensor rsigma = at::empty({c.rows}, stats_options(x));
  Handle hx(c.x, dims2(c)), hres(r, dims2(c)), hw(w, dims1(c.hidden)), hy(y, dims2(c)), hro(residual_out, dims2(c)),
      hr(rsigma, dims1(c.rows));
  with_workspace(c, w, zcg, [&](NVTETensor ws) {
    normtune_rmsnorm_add_fwd(hx, hres, hw, static_cast<float>(eps), hy, hro, hr, ws, 0, zcg, c.stream);
  });
  return {y, residual_out, rsigma};
}

std::tuple<Tensor, Tensor, Tensor> layer_norm_fwd_cuda(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                                       double eps, bool zcg) {
  const c10::DeviceGuard guard(x.device());
  Call c = make_call("layer_norm", x, weight);
  check_same_device(c.op, "bias", bias, x);
  TORCH_CHECK(bias.sizes() == weight.sizes(), "normtune.", c.op, ": bias must have weight's shape ",
              dims_str(weight.sym_sizes()), ", got ", dims_str(bias.sym_sizes()));
  const Tensor w = weight.contiguous(), b = bias.contiguous();
  Tensor y = at::empty_like(c.x);
  Tensor mu = at::empty({c.rows}, stats_options(x)), rsigma = at::empty({c.rows}, stats_options(x));
  Handle hx(c.x, dims2(c)), hw(w, dims1(c.hidden)), hb(b, dims1(c.hidden)), hy(y, dims2(c)), hm(mu, dims1(c.rows)),
      hr(rsigma, dims1(c.rows));
  with_workspace(c, w, zcg, [&](NVTETensor ws) {
    normtune_layernorm_fwd(hx, hw, hb, static_cast<float>(eps), hy, hm, hr, ws, 0, zcg, c.stream);
  });
  return {y, mu, rsigma};
}

// The backward's own arguments against x (CUDA and Meta kernels): dy and add of x's shape
// and dtype, rsigma and mu fp32 of [rows] (rows: every dimension of x but the last); on x's
// device. The library checks its handles against x's [rows, H], so a tensor of another size
// must be caught here.
// The rows of x's [rows, H] view (symbolic under torch.compile with dynamic shapes).
c10::SymInt sym_rows(const Tensor& x) {
  c10::SymInt rows = 1;
  for (int64_t i = 0; i + 1 < x.dim(); ++i) rows *= x.sym_size(i);
  return rows;
}

void check_bwd_args(const char* op, const Tensor& dy, const Tensor& x, const Tensor* add, const Tensor* mu,
                    const Tensor& rsigma, const Tensor& weight) {
  check_shapes(op, x, weight);
  const c10::SymInt rows = sym_rows(x);
  for (const Tensor* t : {&dy, add}) {
    if (t == nullptr) continue;
    const char* name = t == &dy ? "dy" : "add";
    TORCH_CHECK(t->sym_sizes() == x.sym_sizes() && t->scalar_type() == x.scalar_type(), "normtune.", op, ": ", name,
                " must have x's shape and dtype (", dims_str(x.sym_sizes()), ", ", x.scalar_type(), "), got ",
                dims_str(t->sym_sizes()), ", ", t->scalar_type());
  }
  for (const Tensor* t : {&rsigma, mu}) {
    if (t == nullptr) continue;
    const char* name = t == &rsigma ? "rsigma" : "mu";
    TORCH_CHECK(t->dim() == 1 && t->sym_size(0) == rows && t->scalar_type() == at::kFloat, "normtune.", op, ": ",
                name, " must be fp32 of shape [rows] (rows: x's dimensions but the last), got ", t->scalar_type(),
                " of shape ", dims_str(t->sym_sizes()));
  }
  if (x.device().type() != c10::DeviceType::Meta) {
    for (const Tensor* t : {&dy, add, mu, &rsigma}) {
      if (t == nullptr) continue;
      check_same_device(op, t == &dy ? "dy" : t == add ? "add" : t == mu ? "mu" : "rsigma", *t, x);
    }
  }
}

// dx = the norm's backward (+ add: the gradient of residual_out in the fused add), dweight.
std::tuple<Tensor, Tensor> rms_norm_bwd_impl(const Tensor& dy, const Tensor& x, const Tensor* add, const Tensor& rsigma,
                                             const Tensor& weight, bool zcg) {
  const c10::DeviceGuard guard(x.device());
  Call c = make_call(add != nullptr ? "rms_norm_bwd_add" : "rms_norm_bwd", x, weight);
  check_bwd_args(c.op, dy, x, add, nullptr, rsigma, weight);
  const Tensor g = dy.contiguous(), w = weight.contiguous(), rs = rsigma.contiguous();
  const Tensor a = add != nullptr ? add->contiguous() : Tensor();
  Tensor dx = at::empty_like(c.x), dw = at::empty_like(w);
  Handle hdy(g, dims2(c)), hx(c.x, dims2(c)), hr(rs, dims1(c.rows)), hw(w, dims1(c.hidden)), hdx(dx, dims2(c)),
      hdw(dw, dims1(c.hidden));
  if (add != nullptr) {
    Handle ha(a, dims2(c));
    with_workspace(c, w, zcg, [&](NVTETensor ws) {
      normtune_rmsnorm_bwd_add(hdy, hx, ha, hr, hw, hdx, hdw, ws, 0, zcg, c.stream);
    });
  } else {
    with_workspace(c, w, zcg, [&](NVTETensor ws) { normtune_rmsnorm_bwd(hdy, hx, hr, hw, hdx, hdw, ws, 0, zcg, c.stream); });
  }
  return {dx, dw};
}

std::tuple<Tensor, Tensor> rms_norm_bwd_cuda(const Tensor& dy, const Tensor& x, const Tensor& rsigma,
                                             const Tensor& weight, bool zcg) {
  return rms_norm_bwd_impl(dy, x, nullptr, rsigma, weight, zcg);
}

std::tuple<Tensor, Tensor> rms_norm_bwd_add_cuda(const Tensor& dy, const Tensor& x, const Tensor& add,
                                                 const Tensor& rsigma, const Tensor& weight, bool zcg) {
  return rms_norm_bwd_impl(dy, x, &add, rsigma, weight, zcg);
}

std::tuple<Tensor, Tensor, Tensor> layer_norm_bwd_cuda(const Tensor& dy, const Tensor& x, const Tensor& mu,
                                                       const Tensor& rsigma, const Tensor& weight, bool zcg) {
  const c10::DeviceGuard guard(x.device());
  Call c = make_call("layer_norm_bwd", x, weight);
  check_bwd_args(c.op, dy, x, nullptr, &mu, rsigma, weight);
  const Tensor g = dy.contiguous(), w = weight.contiguous(), m = mu.contiguous(), rs = rsigma.contiguous();
  Tensor dx = at::empty_like(c.x), dw = at::empty_like(w), db = at::empty_like(w);
  Handle hdy(g, dims2(c)), hx(c.x, dims2(c)), hm(m, dims1(c.rows)), hr(rs, dims1(c.rows)),
      hw(w, dims1(c.hidden)), hdx(dx, dims2(c)), hdw(dw, dims1(c.hidden)), hdb(db, dims1(c.hidden));
  with_workspace(c, w, zcg, [&](NVTETensor ws) {
    normtune_layernorm_bwd(hdy, hx, hm, hr, hw, hdx, hdw, hdb, ws, 0, zcg, c.stream);
  });
  return {dx, dw, db};
}

// ---- kernels (Meta: shapes and dtypes only) ------------------------------------------------
// [rows] fp32: rows = the product of every dimension but the last (symbolic ones too).
Tensor stats_like(const Tensor& x) {
  return at::empty_symint({sym_rows(x)}, x.options().dtype(at::kFloat));
}

std::tuple<Tensor, Tensor> rms_norm_fwd_meta(const Tensor& x, const Tensor& weight, double, bool) {
  check_shapes("rms_norm", x, weight);
  return {at::empty_like(x, at::MemoryFormat::Contiguous), stats_like(x)};
}
std::tuple<Tensor, Tensor, Tensor> fused_add_rms_norm_fwd_meta(const Tensor& x, const Tensor& residual,
                                                                const Tensor& weight, double, bool) {
  check_shapes("fused_add_rms_norm", x, weight);
  TORCH_CHECK(residual.sym_sizes() == x.sym_sizes() && residual.scalar_type() == x.scalar_type(),
              "normtune.fused_add_rms_norm: residual must have x's shape and dtype (", dims_str(x.sym_sizes()), ", ",
              x.scalar_type(), "), got ", dims_str(residual.sym_sizes()), ", ", residual.scalar_type());
  return {at::empty_like(x, at::MemoryFormat::Contiguous), at::empty_like(x, at::MemoryFormat::Contiguous),
          stats_like(x)};
}
std::tuple<Tensor, Tensor, Tensor> layer_norm_fwd_meta(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                                       double, bool) {
  check_shapes("layer_norm", x, weight);
  TORCH_CHECK(bias.sym_sizes() == weight.sym_sizes(), "normtune.layer_norm: bias must have weight's shape ",
              dims_str(weight.sym_sizes()), ", got ", dims_str(bias.sym_sizes()));
  return {at::empty_like(x, at::MemoryFormat::Contiguous), stats_like(x), stats_like(x)};
}
std::tuple<Tensor, Tensor> rms_norm_bwd_meta(const Tensor& dy, const Tensor& x, const Tensor& rsigma,
                                             const Tensor& weight, bool) {
  check_bwd_args("rms_norm_bwd", dy, x, nullptr, nullptr, rsigma, weight);
  return {at::empty_like(x, at::MemoryFormat::Contiguous), at::empty_like(weight, at::MemoryFormat::Contiguous)};
}
std::tuple<Tensor, Tensor> rms_norm_bwd_add_meta(const Tensor& dy, const Tensor& x, const Tensor& add,
                                                 const Tensor& rsigma, const Tensor& weight, bool) {
  check_bwd_args("rms_norm_bwd_add", dy, x, &add, nullptr, rsigma, weight);
  return {at::empty_like(x, at::MemoryFormat::Contiguous), at::empty_like(weight, at::MemoryFormat::Contiguous)};
}
std::tuple<Tensor, Tensor, Tensor> layer_norm_bwd_meta(const Tensor& dy, const Tensor& x, const Tensor& mu,
                                                       const Tensor& rsigma, const Tensor& weight, bool) {
  check_bwd_args("layer_norm_bwd", dy, x, nullptr, &mu, rsigma, weight);
  return {at::empty_like(x, at::MemoryFormat::Contiguous), at::empty_like(weight, at::MemoryFormat::Contiguous),
          at::empty_like(weight, at::MemoryFormat::Contiguous)};
}

// ---- quantized outputs (forward only) --------------------------------------------------------
// FP8 with one per-tensor scale (TransformerEngine's delayed or current scaling):
//   y = fp8(norm(x) * scale), amax = max |norm(x)| (before the scale, from a zero each call),
//   scale_inv = 1 / scale.
// MXFP8: FP8 data with one E8M0 scale per 32 elements of a row; the scales are
//   [roundup(rows, 128), roundup(H / 32, 4)] (TransformerEngine's layout; the padding is not
//   written), dtype torch.float8_e8m0fnu.
// Gradients do not flow through a quantized y: a training recipe saves x and rsigma (and mu)
// and calls rms_norm_bwd / layer_norm_bwd with the gradient of y, as TransformerEngine does.
enum class NormOp { kRms, kLayer, kRmsAdd };
// kFp8: per-tensor scale; kMxfp8: E8M0 block scales; kMxfp8Colwise: those and the
// column-wise copy (TransformerEngine's MXFP8 column-wise usage: y's shape, one E8M0 scale per
// 32 rows of a column, [roundup(ceil(rows / 32), 4), roundup(H, 128)]); kAmax: a
// high-precision y (x's dtype) and the amax of its rounded values (TransformerEngine's norm +
// amax, for current scaling).
// kBlock: the other row-wise block scalings (QuantCall::block says which): NVFP4 (y e2m1 as
// torch.float4_e2m1fn_x2 [..., H / 2], E4M3 scales [roundup(rows, 128), roundup(H / 16, 4)],
// the global amax an optional input), MXFP4 (E8M0 scales per 32, shaped as MXFP8's), FP8 with
// 1x128 blocks (fp32 scale_inv [ceil(H / 128), roundup(rows, 4)], TransformerEngine's transposed
// layout); NVFP4 and MXFP4 scales compact or GEMM-swizzled. NVFP4 may add the column-wise
// copy (QuantCall::colwise; TransformerEngine's layout): the transpose, e2m1 [H, rows / 2]
// bytes, E4M3 scales [roundup(H, 128), roundup(rows / 16, 4)], rows a multiple of 16, encoded
// with colwise_global_amax (None: global_amax).
enum class Quant { kFp8, kMxfp8, kAmax, kMxfp8Colwise, kBlock };
bool is_mx(Quant q) { return q == Quant::kMxfp8 || q == Quant::kMxfp8Colwise; }

enum class Block { kNone, kNvfp4, kMxfp4, kFp8Block128 };
Block block_format(const char* op, c10::string_view name) {
  if (name == "nvfp4") return Block::kNvfp4;
  if (name == "mxfp4") return Block::kMxfp4;
  if (name == "fp8_block128") return Block::kFp8Block128;
  TORCH_CHECK(false, "normtune.", op, ": format must be 'nvfp4', 'mxfp4' or 'fp8_block128', got '", name, "'");
}
int64_t block_size(Block b) { return b == Block::kNvfp4 ? 16 : b == Block::kMxfp4 ? 32 : 128; }
bool block_fp4(Block b) { return b == Block::kNvfp4 || b == Block::kMxfp4; }
NVTEScalingMode block_mode(Block b) {
  return b == Block::kNvfp4   ? NVTE_NVFP4_1D_SCALING
         : b == Block::kMxfp4 ? NVTE_NORMTUNE_MXFP4_1D_SCALING
                              : NVTE_BLOCK_SCALING_1D;
}

struct QuantOutputs {
  Tensor y, scales, y_colwise, colwise_scales, residual_out, mu, rsigma, amax, scale_inv;
};

// One quantized call: which norm and output, and its arguments (residual, bias, scale: null
// when the op has none).
struct QuantCall {
  const char* op;
  NormOp norm;
  Quant quant;
  const Tensor& x;
  const Tensor* residual;
  const Tensor& weight;
  const Tensor* bias;
  const Tensor* scale;
  double eps;
  at::ScalarType out_dtype;  // kAmax: x's dtype; kBlock: fp8 (1x128) or Float4_e2m1fn_x2
  bool zcg;
  Block block = Block::kNone;              // kBlock
  const Tensor* global_amax = nullptr;     // kBlock NVFP4 (optional)
  bool swizzled = false;                   // kBlock NVFP4 / MXFP4
  bool colwise = false;                    // kBlock NVFP4: the column-wise copy too
  const Tensor* colwise_global_amax = nullptr;  // with it (optional)
};

void check_fp8_dtype(const char* op, at::ScalarType t) {
  TORCH_CHECK(t == at::ScalarType::Float8_e4m3fn || t == at::ScalarType::Float8_e5m2, "normtune.", op,
              ": out_dtype must be torch.float8_e4m3fn or torch.float8_e5m2, got ", t);
}

// The checks every quantized op shares (CUDA and Meta): shapes, the FP8 dtype, the scale.
void check_quant_args(const QuantCall& q) {
  check_shapes(q.op, q.x, q.weight);
  if (q.quant != Quant::kAmax && !(q.quant == Quant::kBlock && block_fp4(q.block))) check_fp8_dtype(q.op, q.out_dtype);
  if (q.quant == Quant::kBlock || is_mx(q.quant)) {
    // (fp8_block128: of 16; a row's last block of 128 may be partial, as in TransformerEngine.)
    const bool ragged = q.quant == Quant::kBlock && q.block == Block::kFp8Block128;
    const int64_t multiple = ragged ? 16 : q.quant == Quant::kBlock ? block_size(q.block) : 32;
    TORCH_CHECK(q.x.sym_size(-1) % multiple == 0, "normtune.", q.op, ": the last dim of x (", sym_str(q.x.sym_size(-1)),
                ") must be a multiple of ", std::to_string(multiple),
                ragged ? " (fp8_block128: its last block of 128 may be partial)" : " (the format's blocks)");
  }
  if (q.quant == Quant::kBlock) {
    TORCH_CHECK(!(q.swizzled && q.block == Block::kFp8Block128), "normtune.", q.op,
                ": fp8_block128 scales have one layout (swizzled=False)");
    for (const auto& [amax, name] : {std::pair{q.global_amax, "global_amax"},
                                     std::pair{q.colwise_global_amax, "colwise_global_amax"}}) {
      if (amax == nullptr) continue;
      TORCH_CHECK(q.block == Block::kNvfp4, "normtune.", q.op, ": ", name, " belongs to the nvfp4 format");
      TORCH_CHECK(amax->scalar_type() == at::kFloat && amax->sym_numel() == 1, "normtune.", q.op, ": ", name,
                  " must be one fp32 value, got ", amax->scalar_type(), " of shape ", dims_str(amax->sym_sizes()));
    }
    TORCH_CHECK(!q.colwise || q.block == Block::kNvfp4, "normtune.", q.op,
                ": columnwise=True belongs to the nvfp4 format here (mxfp8: rms_norm_mxfp8(..., columnwise=True))");
    TORCH_CHECK(q.colwise || q.colwise_global_amax == nullptr, "normtune.", q.op,
                ": colwise_global_amax needs columnwise=True");
    if (q.colwise) {
      TORCH_CHECK(sym_rows(q.x) % 16 == 0, "normtune.", q.op, ": the rows of x (", sym_str(sym_rows(q.x)),
                  ") must be a multiple of 16 for the column-wise nvfp4 copy (16-row blocks)");
    }
  }
  if (q.residual != nullptr) {
    TORCH_CHECK(q.residual->sym_sizes() == q.x.sym_sizes() && q.residual->scalar_type() == q.x.scalar_type(),
                "normtune.", q.op, ": residual must have x's shape and dtype (", dims_str(q.x.sym_sizes()), ", ",
                q.x.scalar_type(), "), got ", dims_str(q.residual->sym_sizes()), ", ", q.residual->scalar_type());
  }
  if (q.bias != nullptr) {
    TORCH_CHECK(q.bias->sym_sizes() == q.weight.sym_sizes(), "normtune.", q.op, ": bias must have weight's shape ",
                dims_str(q.weight.sym_sizes()), ", got ", dims_str(q.bias->sym_sizes()));
  }
  if (q.scale != nullptr) {
    TORCH_CHECK(q.scale->scalar_type() == at::kFloat && q.scale->sym_numel() == 1, "normtune.", q.op,
                ": scale must be one fp32 value, got ", q.scale->scalar_type(), " of shape ",
                dims_str(q.scale->sym_sizes()));
  }
}

// [roundup(rows, 128), roundup(H / block, 4)]: the row-wise scales of a [rows, H] output with
// 1 x block blocks (MXFP8, MXFP4: 32; NVFP4: 16).
std::vector<c10::SymInt> row_scale_shape(const Tensor& x, int64_t block) {
  return {(sym_rows(x) + 127) / 128 * 128, (x.sym_size(-1) / block + 3) / 4 * 4};
}

// [roundup(ceil(rows / 32), 4), roundup(H, 128)]: the column-wise MXFP8 scales.
std::vector<c10::SymInt> mx_colwise_scale_shape(const Tensor& x) {
  return {((sym_rows(x) + 31) / 32 + 3) / 4 * 4, (x.sym_size(-1) + 127) / 128 * 128};
}

// The row-wise scales of a kBlock format for x.
std::vector<c10::SymInt> block_scale_shape(Block b, const Tensor& x) {
  if (b == Block::kFp8Block128) return {(x.sym_size(-1) + 127) / 128, (sym_rows(x) + 3) / 4 * 4};
  return row_scale_shape(x, block_size(b));
}

// The outputs of a quantized call, like x (on its device, or the meta device).
QuantOutputs quant_outputs(const QuantCall& q, const Tensor& x) {
  QuantOutputs o;
  if (q.quant == Quant::kBlock && block_fp4(q.block)) {
    std::vector<c10::SymInt> packed(x.sym_sizes().begin(), x.sym_sizes().end());
    packed.back() = packed.back() / 2;  // two e2m1 codes per byte
    o.y = at::empty_symint(packed, x.options().dtype(at::ScalarType::Float4_e2m1fn_x2));
  } else {
    o.y = at::empty_symint(x.sym_sizes(), x.options().dtype(q.out_dtype));
  }
  if (q.quant == Quant::kBlock) {
    // Zeroed: the kernel leaves the padding as TransformerEngine does.
    const at::ScalarType st = q.block == Block::kNvfp4   ? at::ScalarType::Float8_e4m3fn
                              : q.block == Block::kMxfp4 ? at::ScalarType::Float8_e8m0fnu
                                                         : at::kFloat;
    o.scales = st == at::kFloat ? at::zeros_symint(block_scale_shape(q.block, x), x.options().dtype(at::kFloat))
                                : at::zeros_symint(block_scale_shape(q.block, x), x.options().dtype(at::kByte)).view(st);
  }
  if (is_mx(q.quant)) {
    // Zeroed: the kernel leaves the padding as TransformerEngine does; zero there (e8m0 0 is
    // 2^-127, never NaN) keeps the output deterministic.
    o.scales = at::zeros_symint(row_scale_shape(x, 32), x.options().dtype(at::kByte)).view(at::ScalarType::Float8_e8m0fnu);
  }
  if (q.colwise) {  // NVFP4: the transpose, two codes per byte; its E4M3 scales (zeroed: padding)
    o.y_colwise = at::empty_symint({x.sym_size(-1), sym_rows(x) / 2}, x.options().dtype(at::ScalarType::Float4_e2m1fn_x2));
    o.colwise_scales = at::zeros_symint({(x.sym_size(-1) + 127) / 128 * 128, (sym_rows(x) / 16 + 3) / 4 * 4},
                                        x.options().dtype(at::kByte))
                           .view(at::ScalarType::Float8_e4m3fn);
  }
  if (q.quant == Quant::kMxfp8Colwise) {
    o.y_colwise = at::empty_symint(x.sym_sizes(), x.options().dtype(q.out_dtype));
    o.colwise_scales =
        at::zeros_symint(mx_colwise_scale_shape(x), x.options().dtype(at::kByte)).view(at::ScalarType::Float8_e8m0fnu);
  }
  if (q.norm == NormOp::kRmsAdd) o.residual_out = at::empty_like(x, at::MemoryFormat::Contiguous);
  if (q.norm == NormOp::kLayer) o.mu = stats_like(x);
  o.rsigma = stats_like(x);
  if (!is_mx(q.quant) && q.quant != Quant::kBlock) o.amax = at::zeros({1}, x.options().dtype(at::kFloat));
  if (q.quant == Quant::kFp8) o.scale_inv = at::empty({1}, x.options().dtype(at::kFloat));
  return o;
}

QuantOutputs norm_quant_cuda(const QuantCall& q) {
  const c10::DeviceGuard guard(q.x.device());
  Call c = make_call(q.op, q.x, q.weight);
  check_quant_args(q);
  for (const auto& [t, name] : {std::pair{q.residual, "residual"}, std::pair{q.bias, "bias"},
                                 std::pair{q.scale, "scale"}, std::pair{q.global_amax, "global_amax"},
                                 std::pair{q.colwise_global_amax, "colwise_global_amax"}}) {
    if (t != nullptr) check_same_device(q.op, name, *t, q.x);
  }
  const Tensor w = q.weight.contiguous();
  const Tensor b = q.bias != nullptr ? q.bias->contiguous() : Tensor();
  const Tensor r = q.residual != nullptr ? q.residual->contiguous() : Tensor();
  const Tensor sc = q.scale != nullptr ? q.scale->contiguous() : Tensor();
  QuantOutputs o = quant_outputs(q, c.x);
  const NVTEScalingMode mode = q.quant == Quant::kBlock ? block_mode(q.block)
                               : is_mx(q.quant)          ? NVTE_MXFP8_1D_SCALING
                                                         : NVTE_DELAYED_TENSOR_SCALING;
  Handle hz(o.y, dims2(c), mode);  // (e2m1 y: [rows, H] elements, H / 2 bytes a row)
  auto dims_of = [](const Tensor& t) -> Dims {
    return {{static_cast<size_t>(t.size(0)), static_cast<size_t>(t.size(1))}, 2};
  };
  const Tensor gamax = q.global_amax != nullptr ? q.global_amax->contiguous() : Tensor();
  const Tensor cgamax = q.colwise_global_amax != nullptr ? q.colwise_global_amax->contiguous() : Tensor();
  if (q.quant == Quant::kBlock) {
    hz.set(kNVTERowwiseScaleInv, o.scales, dims_of(o.scales));
    if (q.global_amax != nullptr) hz.set(kNVTEAmax, gamax, dims1(1));
    hz.set_swizzled(q.swizzled);
    if (q.colwise) {  // (e2m1: [H, rows] elements, rows / 2 bytes a row)
      hz.set(kNVTEColumnwiseData, o.y_colwise, {{static_cast<size_t>(c.hidden), static_cast<size_t>(c.rows)}, 2});
      hz.set(kNVTEColumnwiseScaleInv, o.colwise_scales, dims_of(o.colwise_scales));
      if (q.colwise_global_amax != nullptr) hz.set(kNVTEColumnwiseAmax, cgamax, dims1(1));
    }
  } else if (is_mx(q.quant)) {
    hz.set(kNVTERowwiseScaleInv, o.scales, dims_of(o.scales));
    if (q.quant == Quant::kMxfp8Colwise) {
      hz.set(kNVTEColumnwiseData, o.y_colwise, dims2(c));
      hz.set(kNVTEColumnwiseScaleInv, o.colwise_scales, dims_of(o.colwise_scales));
    }
  } else {
    if (q.quant == Quant::kFp8) hz.set(kNVTEScale, sc, dims1(1));
    hz.set(kNVTEAmax, o.amax, dims1(1));
    if (q.quant == Quant::kFp8) hz.set(kNVTERowwiseScaleInv, o.scale_inv, dims1(1));
  }
  if (c.rows == 0) {  // an empty batch: nothing to normalize; scale_inv still 1 / scale
    if (q.quant == Quant::kFp8) o.scale_inv.copy_(sc.reshape({1}).reciprocal());
    return o;
  }
  Handle hx(c.x, dims2(c)), hw(w, dims1(c.hidden)), hr(o.rsigma, dims1(c.rows));
  const int flags = int(q.zcg) | int(q.out_dtype) << 1 | int(q.quant) << 8 | int(q.block) << 11 | int(q.swizzled) << 13 |
                    int(q.colwise) << 14;
  const float eps = static_cast<float>(q.eps);
  if (q.norm == NormOp::kRms) {
    with_workspace(c, w, flags, [&](NVTETensor ws) {
      normtune_rmsnorm_fwd(hx, hw, eps, hz, hr, ws, 0, q.zcg, c.stream);
    });
  } else if (q.norm == NormOp::kLayer) {
    Handle hb(b, dims1(c.hidden)), hm(o.mu, dims1(c.rows));
    with_workspace(c, w, flags, [&](NVTETensor ws) {
      normtune_layernorm_fwd(hx, hw, hb, eps, hz, hm, hr, ws, 0, q.zcg, c.stream);
    });
  } else {
    Handle hres(r, dims2(c)), hro(o.residual_out, dims2(c));
    with_workspace(c, w, flags, [&](NVTETensor ws) {
      normtune_rmsnorm_add_fwd(hx, hres, hw, eps, hz, hro, hr, ws, 0, q.zcg, c.stream);
    });
  }
  return o;
}

template <bool kMeta>
QuantOutputs quant(const QuantCall& q) {
  if constexpr (kMeta) {
    check_quant_args(q);
    return quant_outputs(q, q.x);
  } else {
    return norm_quant_cuda(q);
  }
}

using T3 = std::tuple<Tensor, Tensor, Tensor>;
using T4 = std::tuple<Tensor, Tensor, Tensor, Tensor>;
using T5 = std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor>;
using T6 = std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor>;

template <bool kMeta>
T4 rms_norm_fp8(const Tensor& x, const Tensor& weight, double eps, const Tensor& scale, at::ScalarType out_dtype,
                bool zcg) {
  const QuantOutputs o =
      quant<kMeta>({"rms_norm_fp8", NormOp::kRms, Quant::kFp8, x, nullptr, weight, nullptr, &scale, eps, out_dtype, zcg});
  return {o.y, o.rsigma, o.amax, o.scale_inv};
}
template <bool kMeta>
T5 layer_norm_fp8(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& scale,
                  at::ScalarType out_dtype, bool zcg) {
  const QuantOutputs o = quant<kMeta>(
      {"layer_norm_fp8", NormOp::kLayer, Quant::kFp8, x, nullptr, weight, &bias, &scale, eps, out_dtype, zcg});
  return {o.y, o.mu, o.rsigma, o.amax, o.scale_inv};
}
template <bool kMeta>
T5 fused_add_rms_norm_fp8(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps,
                          const Tensor& scale, at::ScalarType out_dtype, bool zcg) {
  const QuantOutputs o = quant<kMeta>({"fused_add_rms_norm_fp8", NormOp::kRmsAdd, Quant::kFp8, x, &residual, weight,
                                       nullptr, &scale, eps, out_dtype, zcg});
  return {o.y, o.residual_out, o.rsigma, o.amax, o.scale_inv};
}
template <bool kMeta>
T3 rms_norm_mxfp8(const Tensor& x, const Tensor& weight, double eps, at::ScalarType out_dtype, bool zcg) {
  const QuantOutputs o = quant<kMeta>(
      {"rms_norm_mxfp8", NormOp::kRms, Quant::kMxfp8, x, nullptr, weight, nullptr, nullptr, eps, out_dtype, zcg});
  return {o.y, o.scales, o.rsigma};
}
template <bool kMeta>
T4 layer_norm_mxfp8(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, at::ScalarType out_dtype,
                    bool zcg) {
  const QuantOutputs o = quant<kMeta>(
      {"layer_norm_mxfp8", NormOp::kLayer, Quant::kMxfp8, x, nullptr, weight, &bias, nullptr, eps, out_dtype, zcg});
  return {o.y, o.scales, o.mu, o.rsigma};
}
template <bool kMeta>
T4 fused_add_rms_norm_mxfp8(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps,
                            at::ScalarType out_dtype, bool zcg) {
  const QuantOutputs o = quant<kMeta>({"fused_add_rms_norm_mxfp8", NormOp::kRmsAdd, Quant::kMxfp8, x, &residual,
                                       weight, nullptr, nullptr, eps, out_dtype, zcg});
  return {o.y, o.scales, o.residual_out, o.rsigma};
}
template <bool kMeta>
T5 rms_norm_mxfp8_colwise(const Tensor& x, const Tensor& weight, double eps, at::ScalarType out_dtype, bool zcg) {
  const QuantOutputs o = quant<kMeta>({"rms_norm_mxfp8_colwise", NormOp::kRms, Quant::kMxfp8Colwise, x, nullptr,
                                       weight, nullptr, nullptr, eps, out_dtype, zcg});
  return {o.y, o.scales, o.y_colwise, o.colwise_scales, o.rsigma};
}
template <bool kMeta>
T6 layer_norm_mxfp8_colwise(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                            at::ScalarType out_dtype, bool zcg) {
  const QuantOutputs o = quant<kMeta>({"layer_norm_mxfp8_colwise", NormOp::kLayer, Quant::kMxfp8Colwise, x, nullptr,
                                       weight, &bias, nullptr, eps, out_dtype, zcg});
  return {o.y, o.scales, o.y_colwise, o.colwise_scales, o.mu, o.rsigma};
}
template <bool kMeta>
T6 fused_add_rms_norm_mxfp8_colwise(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps,
                                    at::ScalarType out_dtype, bool zcg) {
  const QuantOutputs o = quant<kMeta>({"fused_add_rms_norm_mxfp8_colwise", NormOp::kRmsAdd, Quant::kMxfp8Colwise, x,
                                       &residual, weight, nullptr, nullptr, eps, out_dtype, zcg});
  return {o.y, o.scales, o.y_colwise, o.colwise_scales, o.residual_out, o.rsigma};
}
// The other row-wise block scalings (Quant::kBlock), by format name.
template <bool kMeta>
QuantOutputs quant_block(QuantCall q, c10::string_view format, const std::optional<Tensor>& global_amax,
                         bool swizzled) {
  q.block = block_format(q.op, format);
  q.global_amax = global_amax.has_value() ? &*global_amax : nullptr;
  q.swizzled = swizzled;
  return quant<kMeta>(q);
}
template <bool kMeta>
T3 rms_norm_block(const Tensor& x, const Tensor& weight, double eps, c10::string_view format,
                  std::optional<at::ScalarType> out_dtype, const std::optional<Tensor>& global_amax, bool swizzled,
                  bool zcg) {
  const QuantOutputs o = quant_block<kMeta>({"rms_norm_block", NormOp::kRms, Quant::kBlock, x, nullptr, weight,
                                             nullptr, nullptr, eps, out_dtype.value_or(at::ScalarType::Float8_e4m3fn),
                                             zcg},
                                            format, global_amax, swizzled);
  return {o.y, o.scales, o.rsigma};
}
template <bool kMeta>
T4 layer_norm_block(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, c10::string_view format,
                    std::optional<at::ScalarType> out_dtype, const std::optional<Tensor>& global_amax, bool swizzled,
                    bool zcg) {
  const QuantOutputs o = quant_block<kMeta>({"layer_norm_block", NormOp::kLayer, Quant::kBlock, x, nullptr, weight,
                                             &bias, nullptr, eps, out_dtype.value_or(at::ScalarType::Float8_e4m3fn),
                                             zcg},
                                            format, global_amax, swizzled);
  return {o.y, o.scales, o.mu, o.rsigma};
}
template <bool kMeta>
T4 fused_add_rms_norm_block(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps,
                            c10::string_view format, std::optional<at::ScalarType> out_dtype,
                            const std::optional<Tensor>& global_amax, bool swizzled, bool zcg) {
  const QuantOutputs o = quant_block<kMeta>({"fused_add_rms_norm_block", NormOp::kRmsAdd, Quant::kBlock, x, &residual,
                                             weight, nullptr, nullptr, eps,
                                             out_dtype.value_or(at::ScalarType::Float8_e4m3fn), zcg},
                                            format, global_amax, swizzled);
  return {o.y, o.scales, o.residual_out, o.rsigma};
}
// NVFP4 with the column-wise copy (QuantCall::colwise).
template <bool kMeta>
QuantOutputs quant_nvfp4_colwise(QuantCall q, const std::optional<Tensor>& global_amax,
                                 const std::optional<Tensor>& colwise_global_amax, bool swizzled) {
  q.block = Block::kNvfp4;
  q.global_amax = global_amax.has_value() ? &*global_amax : nullptr;
  q.colwise_global_amax = colwise_global_amax.has_value() ? &*colwise_global_amax : nullptr;
  q.swizzled = swizzled;
  q.colwise = true;
  return quant<kMeta>(q);
}
template <bool kMeta>
T5 rms_norm_nvfp4_colwise(const Tensor& x, const Tensor& weight, double eps, const std::optional<Tensor>& global_amax,
                          const std::optional<Tensor>& colwise_global_amax, bool swizzled, bool zcg) {
  const QuantOutputs o = quant_nvfp4_colwise<kMeta>(
      {"rms_norm_nvfp4_colwise", NormOp::kRms, Quant::kBlock, x, nullptr, weight, nullptr, nullptr, eps,
       at::ScalarType::Float4_e2m1fn_x2, zcg},
      global_amax, colwise_global_amax, swizzled);
  return {o.y, o.scales, o.y_colwise, o.colwise_scales, o.rsigma};
}
template <bool kMeta>
T6 layer_norm_nvfp4_colwise(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                            const std::optional<Tensor>& global_amax, const std::optional<Tensor>& colwise_global_amax,
                            bool swizzled, bool zcg) {
  const QuantOutputs o = quant_nvfp4_colwise<kMeta>(
      {"layer_norm_nvfp4_colwise", NormOp::kLayer, Quant::kBlock, x, nullptr, weight, &bias, nullptr, eps,
       at::ScalarType::Float4_e2m1fn_x2, zcg},
      global_amax, colwise_global_amax, swizzled);
  return {o.y, o.scales, o.y_colwise, o.colwise_scales, o.mu, o.rsigma};
}
template <bool kMeta>
T6 fused_add_rms_norm_nvfp4_colwise(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps,
                                    const std::optional<Tensor>& global_amax,
                                    const std::optional<Tensor>& colwise_global_amax, bool swizzled, bool zcg) {
  const QuantOutputs o = quant_nvfp4_colwise<kMeta>(
      {"fused_add_rms_norm_nvfp4_colwise", NormOp::kRmsAdd, Quant::kBlock, x, &residual, weight, nullptr, nullptr,
       eps, at::ScalarType::Float4_e2m1fn_x2, zcg},
      global_amax, colwise_global_amax, swizzled);
  return {o.y, o.scales, o.y_colwise, o.colwise_scales, o.residual_out, o.rsigma};
}
template <bool kMeta>
T3 rms_norm_amax(const Tensor& x, const Tensor& weight, double eps, bool zcg) {
  const QuantOutputs o = quant<kMeta>({"rms_norm_amax", NormOp::kRms, Quant::kAmax, x, nullptr, weight, nullptr,
                                       nullptr, eps, x.scalar_type(), zcg});
  return {o.y, o.rsigma, o.amax};
}
template <bool kMeta>
T4 layer_norm_amax(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, bool zcg) {
  const QuantOutputs o = quant<kMeta>({"layer_norm_amax", NormOp::kLayer, Quant::kAmax, x, nullptr, weight, &bias,
                                       nullptr, eps, x.scalar_type(), zcg});
  return {o.y, o.mu, o.rsigma, o.amax};
}
template <bool kMeta>
T4 fused_add_rms_norm_amax(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps, bool zcg) {
  const QuantOutputs o = quant<kMeta>({"fused_add_rms_norm_amax", NormOp::kRmsAdd, Quant::kAmax, x, &residual, weight,
                                       nullptr, nullptr, eps, x.scalar_type(), zcg});
  return {o.y, o.residual_out, o.rsigma, o.amax};
}

// The Autograd kernel of the quantized and amax ops (forward only: an FP8 output is not
// differentiable, and the amax ops serve the same recipes), so an
// input that requires grad (with grad mode on) is a clear error rather than a graph whose
// backward fails later; otherwise the call goes on below autograd.
void quant_autograd(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  if (at::GradMode::is_enabled()) {
    const std::vector<c10::Argument>& args = op.schema().arguments();
    for (size_t i = 0; i < args.size(); ++i) {
      const c10::IValue& v = (*stack)[stack->size() - args.size() + i];
      TORCH_CHECK(!(v.isTensor() && v.toTensor().requires_grad()), op.schema().name(), ": ", args[i].name(),
                  " requires grad, but the quantized and amax ops are forward only (a quantized output is not "
                  "differentiable); call it under torch.no_grad() or inside a torch.autograd.Function whose "
                  "backward calls normtune.rms_norm_bwd / layer_norm_bwd with the saved x and rsigma (as "
                  "TransformerEngine does)");
    }
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  op.redispatchBoxed(keys & c10::after_ADInplaceOrView_keyset, stack);
}

// ---- the differentiable ops -----------------------------------------------------------------
// The kernel ops through the dispatcher (so that FakeTensor and torch.compile see them),
// typed by their CUDA kernel's signature and looked up once per op.
template <auto kKernel>
const c10::TypedOperatorHandle<std::remove_pointer_t<decltype(kKernel)>>& kernel_op(const char* name) {
  static const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<std::remove_pointer_t<decltype(kKernel)>>();
  return op;
}
const auto& rms_fwd_op() { return kernel_op<&rms_norm_fwd_cuda>("normtune::rms_norm_fwd"); }
const auto& layer_fwd_op() { return kernel_op<&layer_norm_fwd_cuda>("normtune::layer_norm_fwd"); }
const auto& add_fwd_op() { return kernel_op<&fused_add_rms_norm_fwd_cuda>("normtune::fused_add_rms_norm_fwd"); }
const auto& rms_bwd_op() { return kernel_op<&rms_norm_bwd_cuda>("normtune::rms_norm_bwd"); }
const auto& rms_bwd_add_op() { return kernel_op<&rms_norm_bwd_add_cuda>("normtune::rms_norm_bwd_add"); }
const auto& layer_bwd_op() { return kernel_op<&layer_norm_bwd_cuda>("normtune::layer_norm_bwd"); }

Tensor rms_norm_plain(const Tensor& x, const Tensor& weight, double eps, bool zcg) {
  return std::get<0>(rms_fwd_op().call(x, weight, eps, zcg));
}
Tensor layer_norm_plain(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, bool zcg) {
  return std::get<0>(layer_fwd_op().call(x, weight, bias, eps, zcg));
}
std::tuple<Tensor, Tensor> fused_add_rms_norm_plain(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                                    double eps, bool zcg) {
  auto [y, residual_out, rsigma] = add_fwd_op().call(x, residual, weight, eps, zcg);
  return {y, residual_out};
}

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

class RmsNormFunction : public torch::autograd::Function<RmsNormFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& weight, double eps, bool zcg) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [y, rsigma] = rms_fwd_op().call(x, weight, eps, zcg);
    ctx->save_for_backward({x, weight, rsigma});
    ctx->saved_data["zcg"] = zcg;
    return y;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto [dx, dw] = rms_bwd_op().call(grads[0], saved[0], saved[2], saved[1], ctx->saved_data["zcg"].toBool());
    return {dx, dw, Tensor(), Tensor()};  // dx has x's shape
  }
};

class LayerNormFunction : public torch::autograd::Function<LayerNormFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                        bool zcg) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [y, mu, rsigma] = layer_fwd_op().call(x, weight, bias, eps, zcg);
    ctx->save_for_backward({x, weight, mu, rsigma});
    ctx->saved_data["zcg"] = zcg;
    return y;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto [dx, dw, db] =
        layer_bwd_op().call(grads[0], saved[0], saved[2], saved[3], saved[1], ctx->saved_data["zcg"].toBool());
    return {dx, dw, db, Tensor(), Tensor()};  // dx has x's shape
  }
};

// y = norm(x + residual), residual_out = x + residual; both outputs differentiable: the
// gradient of residual_out is added to the norm's dx (nvte_rmsnorm_bwd_add), and x and
// residual get the same gradient.
class FusedAddRmsNormFunction : public torch::autograd::Function<FusedAddRmsNormFunction> {
 public:
  static tensor_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& residual, const Tensor& weight,
                             double eps, bool zcg) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [y, residual_out, rsigma] = add_fwd_op().call(x, residual, weight, eps, zcg);
    ctx->save_for_backward({residual_out, weight, rsigma});
    ctx->saved_data["zcg"] = zcg;
    return {y, residual_out};
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor& sum = saved[0];
    const Tensor dy = grads[0].defined() ? grads[0] : at::zeros_like(sum);
    const Tensor dres = grads[1].defined() ? grads[1] : at::zeros_like(sum);
    auto [dx, dw] = rms_bwd_add_op().call(dy, sum, dres, saved[2], saved[1], ctx->saved_data["zcg"].toBool());
    return {dx, dx, dw, Tensor(), Tensor()};  // dx has the sum's shape
  }
};

// Without a gradient to compute (inference, torch.no_grad(), or no input that requires one)
// the forward kernel runs directly, without an autograd node: the eager path's overhead.
bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!at::GradMode::is_enabled()) return false;
  for (const Tensor* t : inputs) {
    if (t->requires_grad()) return true;
  }
  return false;
}

Tensor rms_norm_autograd(const Tensor& x, const Tensor& weight, double eps, bool zcg) {
  if (!needs_grad({&x, &weight})) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return rms_norm_plain(x, weight, eps, zcg);
  }
  return RmsNormFunction::apply(x, weight, eps, zcg);
}
Tensor layer_norm_autograd(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, bool zcg) {
  if (!needs_grad({&x, &weight, &bias})) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return layer_norm_plain(x, weight, bias, eps, zcg);
  }
  return LayerNormFunction::apply(x, weight, bias, eps, zcg);
}
std::tuple<Tensor, Tensor> fused_add_rms_norm_autograd(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                                       double eps, bool zcg) {
  if (!needs_grad({&x, &residual, &weight})) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return fused_add_rms_norm_plain(x, residual, weight, eps, zcg);
  }
  const tensor_list out = FusedAddRmsNormFunction::apply(x, residual, weight, eps, zcg);
  return {out[0], out[1]};
}

}  // namespace

TORCH_LIBRARY(normtune, m) {
  m.def("rms_norm_fwd(Tensor x, Tensor weight, float eps, bool zero_centered_gamma=False) -> (Tensor, Tensor)");
  m.def("fused_add_rms_norm_fwd(Tensor x, Tensor residual, Tensor weight, float eps, "
        "bool zero_centered_gamma=False) -> (Tensor, Tensor, Tensor)");
  m.def("layer_norm_fwd(Tensor x, Tensor weight, Tensor bias, float eps, bool zero_centered_gamma=False) -> "
        "(Tensor, Tensor, Tensor)");
  m.def("rms_norm_bwd(Tensor dy, Tensor x, Tensor rsigma, Tensor weight, bool zero_centered_gamma=False) -> "
        "(Tensor, Tensor)");
  m.def("rms_norm_bwd_add(Tensor dy, Tensor x, Tensor add, Tensor rsigma, Tensor weight, "
        "bool zero_centered_gamma=False) -> (Tensor, Tensor)");
  m.def("layer_norm_bwd(Tensor dy, Tensor x, Tensor mu, Tensor rsigma, Tensor weight, "
        "bool zero_centered_gamma=False) -> (Tensor, Tensor, Tensor)");
  m.def("rms_norm(Tensor x, Tensor weight, float eps, bool zero_centered_gamma=False) -> Tensor");
  m.def("layer_norm(Tensor x, Tensor weight, Tensor bias, float eps, bool zero_centered_gamma=False) -> Tensor");
  m.def("fused_add_rms_norm(Tensor x, Tensor residual, Tensor weight, float eps, "
        "bool zero_centered_gamma=False) -> (Tensor, Tensor)");
  // Quantized outputs (forward only).
  m.def("rms_norm_fp8(Tensor x, Tensor weight, float eps, Tensor scale, ScalarType out_dtype, "
        "bool zero_centered_gamma=False) -> (Tensor y, Tensor rsigma, Tensor amax, Tensor scale_inv)");
  m.def("layer_norm_fp8(Tensor x, Tensor weight, Tensor bias, float eps, Tensor scale, ScalarType out_dtype, "
        "bool zero_centered_gamma=False) -> (Tensor y, Tensor mu, Tensor rsigma, Tensor amax, Tensor scale_inv)");
  m.def("fused_add_rms_norm_fp8(Tensor x, Tensor residual, Tensor weight, float eps, Tensor scale, "
        "ScalarType out_dtype, bool zero_centered_gamma=False) -> "
        "(Tensor y, Tensor residual_out, Tensor rsigma, Tensor amax, Tensor scale_inv)");
  m.def("rms_norm_mxfp8(Tensor x, Tensor weight, float eps, ScalarType out_dtype, "
        "bool zero_centered_gamma=False) -> (Tensor y, Tensor scales, Tensor rsigma)");
  m.def("layer_norm_mxfp8(Tensor x, Tensor weight, Tensor bias, float eps, ScalarType out_dtype, "
        "bool zero_centered_gamma=False) -> (Tensor y, Tensor scales, Tensor mu, Tensor rsigma)");
  m.def("fused_add_rms_norm_mxfp8(Tensor x, Tensor residual, Tensor weight, float eps, ScalarType out_dtype, "
        "bool zero_centered_gamma=False) -> (Tensor y, Tensor scales, Tensor residual_out, Tensor rsigma)");
  // MXFP8 with the column-wise copy too (the backward GEMMs' operand), one pass.
  m.def("rms_norm_mxfp8_colwise(Tensor x, Tensor weight, float eps, ScalarType out_dtype, "
        "bool zero_centered_gamma=False) -> (Tensor y, Tensor scales, Tensor y_colwise, Tensor colwise_scales, "
        "Tensor rsigma)");
  m.def("layer_norm_mxfp8_colwise(Tensor x, Tensor weight, Tensor bias, float eps, ScalarType out_dtype, "
        "bool zero_centered_gamma=False) -> (Tensor y, Tensor scales, Tensor y_colwise, Tensor colwise_scales, "
        "Tensor mu, Tensor rsigma)");
  m.def("fused_add_rms_norm_mxfp8_colwise(Tensor x, Tensor residual, Tensor weight, float eps, ScalarType out_dtype, "
        "bool zero_centered_gamma=False) -> (Tensor y, Tensor scales, Tensor y_colwise, Tensor colwise_scales, "
        "Tensor residual_out, Tensor rsigma)");
  // NVFP4, MXFP4 and FP8 with 1x128 blocks (format 'nvfp4', 'mxfp4', 'fp8_block128'), row-wise.
  m.def("rms_norm_block(Tensor x, Tensor weight, float eps, str format, ScalarType? out_dtype=None, "
        "Tensor? global_amax=None, bool swizzled=False, bool zero_centered_gamma=False) -> "
        "(Tensor y, Tensor scales, Tensor rsigma)");
  m.def("layer_norm_block(Tensor x, Tensor weight, Tensor bias, float eps, str format, ScalarType? out_dtype=None, "
        "Tensor? global_amax=None, bool swizzled=False, bool zero_centered_gamma=False) -> "
        "(Tensor y, Tensor scales, Tensor mu, Tensor rsigma)");
  m.def("fused_add_rms_norm_block(Tensor x, Tensor residual, Tensor weight, float eps, str format, "
        "ScalarType? out_dtype=None, Tensor? global_amax=None, bool swizzled=False, "
        "bool zero_centered_gamma=False) -> (Tensor y, Tensor scales, Tensor residual_out, Tensor rsigma)");
  // NVFP4 with the column-wise copy too (TransformerEngine's transpose: [H, rows / 2] bytes,
  // E4M3 scales [roundup(H, 128), roundup(rows / 16, 4)]), one pass.
  m.def("rms_norm_nvfp4_colwise(Tensor x, Tensor weight, float eps, Tensor? global_amax=None, "
        "Tensor? colwise_global_amax=None, bool swizzled=False, bool zero_centered_gamma=False) -> "
        "(Tensor y, Tensor scales, Tensor y_colwise, Tensor colwise_scales, Tensor rsigma)");
  m.def("layer_norm_nvfp4_colwise(Tensor x, Tensor weight, Tensor bias, float eps, Tensor? global_amax=None, "
        "Tensor? colwise_global_amax=None, bool swizzled=False, bool zero_centered_gamma=False) -> "
        "(Tensor y, Tensor scales, Tensor y_colwise, Tensor colwise_scales, Tensor mu, Tensor rsigma)");
  m.def("fused_add_rms_norm_nvfp4_colwise(Tensor x, Tensor residual, Tensor weight, float eps, "
        "Tensor? global_amax=None, Tensor? colwise_global_amax=None, bool swizzled=False, "
        "bool zero_centered_gamma=False) -> (Tensor y, Tensor scales, Tensor y_colwise, Tensor colwise_scales, "
        "Tensor residual_out, Tensor rsigma)");
  // Norm + amax (of y as rounded to x's dtype; for current scaling), forward only.
  m.def("rms_norm_amax(Tensor x, Tensor weight, float eps, bool zero_centered_gamma=False) -> "
        "(Tensor y, Tensor rsigma, Tensor amax)");
  m.def("layer_norm_amax(Tensor x, Tensor weight, Tensor bias, float eps, bool zero_centered_gamma=False) -> "
        "(Tensor y, Tensor mu, Tensor rsigma, Tensor amax)");
  m.def("fused_add_rms_norm_amax(Tensor x, Tensor residual, Tensor weight, float eps, "
        "bool zero_centered_gamma=False) -> (Tensor y, Tensor residual_out, Tensor rsigma, Tensor amax)");
}

// CUDA tensors run the kernels; CPU tensors reach the same functions, whose first check says
// that x must be a CUDA tensor (rather than the dispatcher's list of backends).
#define NORMTUNE_DEVICE_IMPLS(m)                                  \
  m.impl("rms_norm_fwd", &rms_norm_fwd_cuda);                     \
  m.impl("fused_add_rms_norm_fwd", &fused_add_rms_norm_fwd_cuda); \
  m.impl("layer_norm_fwd", &layer_norm_fwd_cuda);                 \
  m.impl("rms_norm_bwd", &rms_norm_bwd_cuda);                     \
  m.impl("rms_norm_bwd_add", &rms_norm_bwd_add_cuda);             \
  m.impl("layer_norm_bwd", &layer_norm_bwd_cuda);                 \
  m.impl("rms_norm", &rms_norm_plain);                            \
  m.impl("layer_norm", &layer_norm_plain);                        \
  m.impl("fused_add_rms_norm", &fused_add_rms_norm_plain);            \
  NORMTUNE_QUANT_IMPLS(m, false)

#define NORMTUNE_QUANT_IMPLS(m, meta)                                     \
  m.impl("rms_norm_fp8", &rms_norm_fp8<meta>);                            \
  m.impl("layer_norm_fp8", &layer_norm_fp8<meta>);                        \
  m.impl("fused_add_rms_norm_fp8", &fused_add_rms_norm_fp8<meta>);        \
  m.impl("rms_norm_mxfp8", &rms_norm_mxfp8<meta>);                        \
  m.impl("layer_norm_mxfp8", &layer_norm_mxfp8<meta>);                    \
  m.impl("fused_add_rms_norm_mxfp8", &fused_add_rms_norm_mxfp8<meta>);                \
  m.impl("rms_norm_mxfp8_colwise", &rms_norm_mxfp8_colwise<meta>);                    \
  m.impl("layer_norm_mxfp8_colwise", &layer_norm_mxfp8_colwise<meta>);                \
  m.impl("fused_add_rms_norm_mxfp8_colwise", &fused_add_rms_norm_mxfp8_colwise<meta>);  \
  m.impl("rms_norm_block", &rms_norm_block<meta>);                        \
  m.impl("layer_norm_block", &layer_norm_block<meta>);                    \
  m.impl("fused_add_rms_norm_block", &fused_add_rms_norm_block<meta>);    \
  m.impl("rms_norm_nvfp4_colwise", &rms_norm_nvfp4_colwise<meta>);        \
  m.impl("layer_norm_nvfp4_colwise", &layer_norm_nvfp4_colwise<meta>);    \
  m.impl("fused_add_rms_norm_nvfp4_colwise", &fused_add_rms_norm_nvfp4_colwise<meta>); \
  m.impl("rms_norm_amax", &rms_norm_amax<meta>);                          \
  m.impl("layer_norm_amax", &layer_norm_amax<meta>);                      \
  m.impl("fused_add_rms_norm_amax", &fused_add_rms_norm_amax<meta>)

TORCH_LIBRARY_IMPL(normtune, CUDA, m) { NORMTUNE_DEVICE_IMPLS(m); }
TORCH_LIBRARY_IMPL(normtune, CPU, m) { NORMTUNE_DEVICE_IMPLS(m); }

TORCH_LIBRARY_IMPL(normtune, Meta, m) {
  m.impl("rms_norm_fwd", &rms_norm_fwd_meta);
  m.impl("fused_add_rms_norm_fwd", &fused_add_rms_norm_fwd_meta);
  m.impl("layer_norm_fwd", &layer_norm_fwd_meta);
  m.impl("rms_norm_bwd", &rms_norm_bwd_meta);
  m.impl("rms_norm_bwd_add", &rms_norm_bwd_add_meta);
  m.impl("layer_norm_bwd", &layer_norm_bwd_meta);
  m.impl("rms_norm", &rms_norm_plain);
  m.impl("layer_norm", &layer_norm_plain);
  m.impl("fused_add_rms_norm", &fused_add_rms_norm_plain);
  NORMTUNE_QUANT_IMPLS(m, true);
}

TORCH_LIBRARY_IMPL(normtune, Autograd, m) {
  for (const char* name : {"rms_norm_fp8", "layer_norm_fp8", "fused_add_rms_norm_fp8", "rms_norm_mxfp8",
                           "layer_norm_mxfp8", "fused_add_rms_norm_mxfp8", "rms_norm_mxfp8_colwise",
                           "layer_norm_mxfp8_colwise", "fused_add_rms_norm_mxfp8_colwise", "rms_norm_block",
                           "layer_norm_block", "fused_add_rms_norm_block", "rms_norm_nvfp4_colwise",
                           "layer_norm_nvfp4_colwise", "fused_add_rms_norm_nvfp4_colwise", "rms_norm_amax",
                           "layer_norm_amax", "fused_add_rms_norm_amax"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&quant_autograd>());
  }
  m.impl("rms_norm", &rms_norm_autograd);
  m.impl("layer_norm", &layer_norm_autograd);
  m.impl("fused_add_rms_norm", &fused_add_rms_norm_autograd);
}
