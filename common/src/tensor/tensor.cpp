// NVTETensor handles and the nvte_* tensor functions of the C API.
//
// Handle table. Descriptors live in slots allocated in fixed-size chunks that are never
// moved or freed, so a lookup needs no lock: it finds the chunk through an atomic pointer and
// compares the slot's atomic tag. Creation and destruction take a mutex for the free list.
// A handle encodes, in 64 bits,
//   bits  0..23  slot index + 1   (never 0, so no handle is NULL)
//   bits 24..31  0x6E             (rejects small integers such as TE's own handles)
//   bits 32..63  the slot's tag   (odd while the slot is live)
// Creating bumps the slot's tag from even to odd and returns a handle with that tag;
// destroying bumps it back to even with a compare-exchange, so a handle that was destroyed
// (even if its slot was reused since: the tag moved on) or a second concurrent destroy is
// detected instead of touching another tensor. The table is never destroyed, so handles
// destroyed from static destructors of other libraries stay safe.
#include <normtune/internal/tensor.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include <normtune/common/error.h>

namespace normtune {

// ---- names and small types -------------------------------------------------------------

std::string_view tensor_param_name(int param) {
  switch (param) {
    case kNVTERowwiseData:
      return "kNVTERowwiseData";
    case kNVTEColumnwiseData:
      return "kNVTEColumnwiseData";
    case kNVTEScale:
      return "kNVTEScale";
    case kNVTEAmax:
      return "kNVTEAmax";
    case kNVTERowwiseScaleInv:
      return "kNVTERowwiseScaleInv";
    case kNVTEColumnwiseScaleInv:
      return "kNVTEColumnwiseScaleInv";
    case kNVTEColumnwiseAmax:
      return "kNVTEColumnwiseAmax";
    case kNVTEWithGEMMSwizzledScales:
      return "kNVTEWithGEMMSwizzledScales";
    case kNVTERowScaledNVFP4:
      return "kNVTERowScaledNVFP4";
    case kNVTENVFP4E4M3Max:
      return "kNVTENVFP4E4M3Max";
    default:
      return "unknown";
  }
}

std::string_view scaling_mode_name(int mode) {
  switch (mode) {
    case NVTE_DELAYED_TENSOR_SCALING:
      return "NVTE_DELAYED_TENSOR_SCALING";
    case NVTE_MXFP8_1D_SCALING:
      return "NVTE_MXFP8_1D_SCALING";
    case NVTE_BLOCK_SCALING_1D:
      return "NVTE_BLOCK_SCALING_1D";
    case NVTE_BLOCK_SCALING_2D:
      return "NVTE_BLOCK_SCALING_2D";
    case NVTE_NVFP4_1D_SCALING:
      return "NVTE_NVFP4_1D_SCALING";
    case NVTE_INVALID_SCALING:
      return "NVTE_INVALID_SCALING";
    case NVTE_NORMTUNE_MXFP4_1D_SCALING:
      return "NVTE_NORMTUNE_MXFP4_1D_SCALING";
    default:
      return "unknown";
  }
}

Shape::Shape(std::initializer_list<size_t> dims) {
  for (size_t d : dims) push_back(d);
}

Shape Shape::from_nvte(const NVTEShape& s) {
  Shape out;
  out.ndim_ = s.ndim;
  std::copy(s.data, s.data + s.ndim, out.dims_.begin());
  return out;
}

NVTEShape Shape::to_nvte() const {
  NVTEShape out{};
  std::copy(begin(), end(), out.data);
  out.ndim = ndim_;
  return out;
}

void Shape::push_back(size_t d) {
  NORMTUNE_CHECK(ndim_ < kMaxTensorDims, "shape ", str(), ": cannot add a dimension past ",
                 kMaxTensorDims);
  dims_[ndim_++] = d;
}

size_t Shape::numel() const {
  size_t n = 1;
  for (size_t d : *this) n *= d;
  return n;
}

bool Shape::operator==(const Shape& other) const {
  return ndim_ == other.ndim_ && std::equal(begin(), end(), other.begin());
}

std::string Shape::str() const {
  std::string out = "[";
  for (size_t i = 0; i < ndim_; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(dims_[i]);
  }
  return out + "]";
}

Dims2D flatten_2d(const Shape& shape) {
  if (shape.empty()) return {1, 1};
  size_t rows = 1;
  for (size_t i = 0; i + 1 < shape.ndim(); ++i) rows *= shape[i];
  return {rows, shape.back()};
}

BasicTensor BasicTensor::from_nvte(const NVTEBasicTensor& t) {
  BasicTensor out;
  out.dptr = t.data_ptr;
  out.dtype = to_dtype(t.dtype);
  out.shape = Shape::from_nvte(t.shape);
  return out;
}

NVTEBasicTensor BasicTensor::to_nvte() const {
  NVTEBasicTensor out{};
  out.data_ptr = dptr;
  out.dtype = to_nvte_dtype(dtype);
  out.shape = shape.to_nvte();
  return out;
}

Shape Tensor::shape() const {
  if (!columnwise_only()) return data.shape;
  if (scaling_mode == NVTE_MXFP8_1D_SCALING || scaling_mode == NVTE_NORMTUNE_MXFP4_1D_SCALING ||
      columnwise_data.shape.empty()) {
    return columnwise_data.shape;
  }
  // Column-wise data is the transpose: [K, M, N] holds a logical [M, N, K].
  Shape out;
  for (size_t i = 1; i < columnwise_data.shape.ndim(); ++i) out.push_back(columnwise_data.shape[i]);
  out.push_back(columnwise_data.shape[0]);
  return out;
}

BasicTensor* Tensor::buffer(NVTETensorParam param) {
  switch (param) {
    case kNVTERowwiseData:
      return &data;
    case kNVTEColumnwiseData:
      return &columnwise_data;
    case kNVTEScale:
      return &scale;
    case kNVTEAmax:
      return &amax;
    case kNVTERowwiseScaleInv:
      return &scale_inv;
    case kNVTEColumnwiseScaleInv:
      return &columnwise_scale_inv;
    case kNVTEColumnwiseAmax:
      return &columnwise_amax;
    default:
      return nullptr;
  }
}

const BasicTensor* Tensor::buffer(NVTETensorParam param) const {
  return const_cast<Tensor*>(this)->buffer(param);
}

// ---- errors located at the caller ------------------------------------------------------

namespace {

template <typename... Args>
[[noreturn]] void raise_at(const CallSite& where, Args&&... args) {
  detail::throw_error(detail::concat(std::forward<Args>(args)...), where.function, where.file,
                      where.line);
}

std::string hex(uint64_t v) { return detail::concat(detail::hex(v)); }

// ---- the handle table ------------------------------------------------------------------

constexpr uint64_t kIndexBits = 24;
constexpr uint64_t kIndexMask = (uint64_t{1} << kIndexBits) - 1;
constexpr uint64_t kMagic = 0x6E;
constexpr size_t kSlotsPerChunk = 256;
constexpr size_t kMaxChunks = 4096;
constexpr size_t kMaxSlots = kSlotsPerChunk * kMaxChunks;  // 1,048,576 live tensors
static_assert(kMaxSlots < kIndexMask, "slot index + 1 must fit in the handle's index bits");
static_assert(sizeof(uintptr_t) >= 8, "NVTETensor handles need 64-bit pointers");

struct Slot {
  std::atomic<uint32_t> tag{0};  // odd while live
  Tensor tensor;
};

enum class HandleState { kLive, kNull, kForeign, kDestroyed };

class HandleTable {
 public:
  static HandleTable& instance() {
    // Never destroyed: handles may be destroyed from other static destructors.
    static HandleTable* table = new HandleTable();
    return *table;
  }

  // Looks up without locking; *slot is set only for kLive.
  HandleState find(NVTETensor handle, Slot** slot, size_t* index) const noexcept {
    const auto value = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
    if (value == 0) return HandleState::kNull;
    const uint64_t index_plus_one = value & kIndexMask;
    const uint64_t magic = (value >> kIndexBits) & 0xFF;
    const auto tag = static_cast<uint32_t>(value >> 32);
    if (magic != kMagic || index_plus_one == 0 || index_plus_one > kMaxSlots || tag % 2 == 0) {
      return HandleState::kForeign;
    }
    const size_t i = index_plus_one - 1;
    Slot* chunk = chunks_[i / kSlotsPerChunk].load(std::memory_order_acquire);
    if (chunk == nullptr) return HandleState::kForeign;
    Slot& s = chunk[i % kSlotsPerChunk];
    const uint32_t current = s.tag.load(std::memory_order_acquire);
    if (current == tag) {
      *slot = &s;
      *index = i;
      return HandleState::kLive;
    }
    // The slot's tag moved past the handle's: it was destroyed (and maybe reused).
    // A tag the slot never had is not one of our handles.
    return static_cast<int32_t>(current - tag) > 0 ? HandleState::kDestroyed
                                                   : HandleState::kForeign;
  }

  void create(NVTEScalingMode mode, NVTETensor* out, size_t count) {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t available = free_.size() + (kMaxSlots - used_);
    NORMTUNE_CHECK(count <= available, "cannot create ", count,
                   " NVTETensor(s): ", kMaxSlots - available, " of the ", kMaxSlots,
                   " possible are alive (tensors created and never destroyed?)");
    // Everything that can fail (allocation) happens before the first handle is handed out.
    const size_t fresh = count > free_.size() ? count - free_.size() : 0;
    const size_t used_after = used_ + fresh;
    for (size_t c = used_ / kSlotsPerChunk; c * kSlotsPerChunk < used_after; ++c) {
      if (chunks_[c].load(std::memory_order_relaxed) == nullptr) {
        chunks_[c].store(new Slot[kSlotsPerChunk], std::memory_order_release);
      }
    }
    free_.reserve(used_after);  // destroy() then never allocates
    for (size_t k = 0; k < count; ++k) {
      size_t i;
      if (!free_.empty()) {
        i = free_.back();
        free_.pop_back();
      } else {
        i = used_++;
      }
      Slot& s = slot(i);
      s.tensor = Tensor{};
      s.tensor.scaling_mode = mode;
      const uint32_t tag = s.tag.load(std::memory_order_relaxed) + 1;  // even -> odd
      s.tag.store(tag, std::memory_order_release);
      out[k] = encode(i, tag);
    }
    live_.fetch_add(count, std::memory_order_relaxed);
  }

  // Precondition: find(handle) returned kLive for slot s at index i.
  void destroy(NVTETensor handle, Slot& s, size_t i, const char* arg_name, const CallSite& where) {
    uint32_t expected = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(handle) >> 32);
    if (!s.tag.compare_exchange_strong(expected, expected + 1, std::memory_order_acq_rel)) {
      raise_at(where, "argument '", arg_name, "': expected a valid NVTETensor handle, got ",
               hex(reinterpret_cast<uintptr_t>(handle)),
               " (destroyed by another thread during this call)");
    }
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(static_cast<uint32_t>(i));
    live_.fetch_sub(1, std::memory_order_relaxed);
  }

  size_t live() const noexcept { return live_.load(std::memory_order_relaxed); }

 private:
  HandleTable() = default;

  Slot& slot(size_t i) const {
    return chunks_[i / kSlotsPerChunk].load(std::memory_order_relaxed)[i % kSlotsPerChunk];
  }

  static NVTETensor encode(size_t i, uint32_t tag) {
    const uint64_t value = (uint64_t{tag} << 32) | (kMagic << kIndexBits) | (i + 1);
    return reinterpret_cast<NVTETensor>(static_cast<uintptr_t>(value));
  }

  std::array<std::atomic<Slot*>, kMaxChunks> chunks_{};
  std::mutex mutex_;
  std::vector<uint32_t> free_;  // guarded by mutex_
  size_t used_ = 0;             // slots ever handed out; guarded by mutex_
  std::atomic<size_t> live_{0};
};

// The live slot of a handle, or an error naming the argument. A NULL handle returns
// nullptr when allow_null.
Slot* checked_slot(NVTETensor handle, const char* arg_name, bool allow_null, const CallSite& where,
                   size_t* index = nullptr) {
  Slot* slot = nullptr;
  size_t i = 0;
  switch (HandleTable::instance().find(handle, &slot, &i)) {
    case HandleState::kLive:
      if (index != nullptr) *index = i;
      return slot;
    case HandleState::kNull:
      if (allow_null) return nullptr;
      raise_at(where, "argument '", arg_name, "': expected a valid NVTETensor handle, got NULL");
    case HandleState::kDestroyed:
      raise_at(where, "argument '", arg_name, "': expected a valid NVTETensor handle, got ",
               hex(reinterpret_cast<uintptr_t>(handle)), " (already destroyed)");
    case HandleState::kForeign:
      break;
  }
  raise_at(where, "argument '", arg_name, "': expected a valid NVTETensor handle, got ",
           hex(reinterpret_cast<uintptr_t>(handle)), " (not created by nvte_create_tensor)");
}

// The tensor of a getter's argument; a NULL handle reads an empty tensor (TE's behavior).
const Tensor& tensor_or_empty(NVTETensor handle, const CallSite& where) {
  static const Tensor kEmpty{};
  const Slot* slot = checked_slot(handle, "tensor", /*allow_null=*/true, where);
  return slot != nullptr ? slot->tensor : kEmpty;
}

// ---- parameters ------------------------------------------------------------------------

bool is_valid_param(int param) {
  return param >= 0 && param < kNVTENumTensorParams;
}
bool is_buffer_param(int param) {
  return param >= kNVTERowwiseData && param <= kNVTEColumnwiseAmax;
}

size_t param_size(NVTETensorParam param) {
  if (is_buffer_param(param)) return sizeof(NVTEBasicTensor);
  if (param == kNVTENVFP4E4M3Max) return sizeof(int);
  return sizeof(uint8_t);  // the two flags
}

const char* param_type_name(NVTETensorParam param) {
  if (is_buffer_param(param)) return "an NVTEBasicTensor";
  if (param == kNVTENVFP4E4M3Max) return "an int";
  return "a uint8_t";
}

void check_param(int param, const char* arg_name, const CallSite& where) {
  if (!is_valid_param(param)) {
    raise_at(where, "argument '", arg_name, "': expected an NVTETensorParam in [0, ",
             static_cast<int>(kNVTENumTensorParams), "), got ", param);
  }
}

// A param_name of the deprecated buffer-only getter/setter: valid and a buffer; `hint` says
// where the other params go.
void check_buffer_param(NVTETensorParam param_name, const CallSite& where, const char* hint) {
  check_param(param_name, "param_name", where);
  if (!is_buffer_param(param_name)) {
    raise_at(where, "argument 'param_name': expected a buffer parameter (kNVTERowwiseData .. "
             "kNVTEColumnwiseAmax), got ", tensor_param_name(param_name), " (", hint, ")");
  }
}

// Validates a buffer given through the C API and converts it. `what` names it in messages,
// e.g. "buf (kNVTERowwiseData)".
BasicTensor checked_buffer(const NVTEBasicTensor& t, const std::string& what,
                           const CallSite& where) {
  // Read as int: a C caller may store any int there, outside the C++ enum's value range.
  int dtype;
  static_assert(sizeof(dtype) == sizeof(t.dtype));
  std::memcpy(&dtype, &t.dtype, sizeof(dtype));
  if (!is_valid_dtype(dtype)) {
    raise_at(where, "argument '", what, ".dtype': expected an NVTEDType in [0, ", kNumDTypes - 1,
             "] (kNVTEByte .. kNVTEFloat4E2M1), got ", dtype);
  }
  if (t.shape.ndim > kMaxTensorDims) {
    raise_at(where, "argument '", what, ".shape.ndim': expected at most ", kMaxTensorDims, ", got ",
             t.shape.ndim);
  }
  size_t numel = 1;
  for (size_t i = 0; i < t.shape.ndim; ++i) {
    if (__builtin_mul_overflow(numel, t.shape.data[i], &numel)) {
      raise_at(where, "argument '", what,
               ".shape': expected an element count that fits in size_t, got shape ",
               Shape::from_nvte(t.shape).str());
    }
  }
  return BasicTensor::from_nvte(t);
}

std::string param_label(const char* arg_name, NVTETensorParam param) {
  return detail::concat(arg_name, " (", tensor_param_name(param), ")");
}

void check_scaling_mode(NVTEScalingMode mode, const CallSite& where) {
  const int m = static_cast<int>(mode);
  if (!is_valid_scaling_mode(m)) {
    raise_at(where,
             "argument 'scaling_mode': expected an NVTEScalingMode in [0, 4] "
             "(NVTE_DELAYED_TENSOR_SCALING .. NVTE_NVFP4_1D_SCALING) or NVTE_NORMTUNE_MXFP4_1D_SCALING (200), got ",
             m, " (", scaling_mode_name(m), ")");
  }
}

// The amax/scale getters: the buffer's pointer, which must hold fp32 values.
float* fp32_scalar_ptr(NVTETensor tensor, BasicTensor Tensor::*buffer, const char* name,
                       const CallSite& where) {
  const BasicTensor& b = tensor_or_empty(tensor, where).*buffer;
  if (b.dtype != DType::kFloat32) {
    raise_at(where, "argument 'tensor': expected ", name, " of dtype fp32, got ", dtype_name(b.dtype));
  }
  return static_cast<float*>(b.dptr);
}

}  // namespace

// ---- handle lookup for the rest of the library -----------------------------------------

Tensor& tensor_from_handle(NVTETensor handle, const char* arg_name, CallSite where) {
  return checked_slot(handle, arg_name, /*allow_null=*/false, where)->tensor;
}

const Tensor& const_tensor_from_handle(NVTETensor handle, const char* arg_name, CallSite where) {
  return checked_slot(handle, arg_name, /*allow_null=*/false, where)->tensor;
}

Tensor* tensor_from_handle_or_null(NVTETensor handle, const char* arg_name, CallSite where) {
  Slot* slot = checked_slot(handle, arg_name, /*allow_null=*/true, where);
  return slot != nullptr ? &slot->tensor : nullptr;
}

bool is_valid_tensor_handle(NVTETensor handle) noexcept {
  Slot* slot = nullptr;
  size_t index = 0;
  return HandleTable::instance().find(handle, &slot, &index) == HandleState::kLive;
}

size_t live_tensor_count() noexcept {
  return HandleTable::instance().live();
}

size_t max_live_tensors() noexcept {
  return kMaxSlots;
}

}  // namespace normtune

// ---- the C API -------------------------------------------------------------------------

using normtune::BasicTensor;
using normtune::CallSite;
using normtune::DType;
using normtune::Tensor;

NVTETensor nvte_create_tensor(NVTEScalingMode scaling_mode) {
  const auto where = CallSite::current();
  normtune::check_scaling_mode(scaling_mode, where);
  NVTETensor handle = nullptr;
  normtune::HandleTable::instance().create(scaling_mode, &handle, 1);
  return handle;
}

void nvte_create_tensors(NVTEScalingMode scaling_mode, NVTETensor* tensors, size_t N) {
  const auto where = CallSite::current();
  normtune::check_scaling_mode(scaling_mode, where);
  if (N == 0) return;
  if (tensors == nullptr) {
    normtune::raise_at(where, "argument 'tensors': expected an array of N = ", N,
                       " handles, got NULL");
  }
  normtune::HandleTable::instance().create(scaling_mode, tensors, N);
}

void nvte_destroy_tensor(NVTETensor tensor) {
  const auto where = CallSite::current();
  size_t index = 0;
  normtune::Slot* slot =
      normtune::checked_slot(tensor, "tensor", /*allow_null=*/true, where, &index);
  if (slot == nullptr) return;  // NULL: no-op, as in TE
  normtune::HandleTable::instance().destroy(tensor, *slot, index, "tensor", where);
}

void nvte_destroy_tensors(NVTETensor* tensors, size_t N) {
  const auto where = CallSite::current();
  if (N == 0) return;
  if (tensors == nullptr) {
    normtune::raise_at(where, "argument 'tensors': expected an array of N = ", N,
                       " handles, got NULL");
  }
  // Check everything before destroying anything.
  std::vector<uintptr_t> seen;
  seen.reserve(N);
  for (size_t i = 0; i < N; ++i) {
    if (tensors[i] == nullptr) continue;
    const std::string name = normtune::detail::concat("tensors[", i, "]");
    normtune::checked_slot(tensors[i], name.c_str(), /*allow_null=*/false, where);
    seen.push_back(reinterpret_cast<uintptr_t>(tensors[i]));
  }
  std::sort(seen.begin(), seen.end());
  const auto dup = std::adjacent_find(seen.begin(), seen.end());
  if (dup != seen.end()) {
    normtune::raise_at(where, "argument 'tensors': expected distinct handles, got ",
                       normtune::hex(*dup), " more than once");
  }
  for (size_t i = 0; i < N; ++i) {
    if (tensors[i] == nullptr) continue;
    const std::string name = normtune::detail::concat("tensors[", i, "]");
    size_t index = 0;
    normtune::Slot* slot =
        normtune::checked_slot(tensors[i], name.c_str(), /*allow_null=*/false, where, &index);
    normtune::HandleTable::instance().destroy(tensors[i], *slot, index, name.c_str(), where);
  }
}

void* nvte_tensor_data(const NVTETensor tensor) {
  return normtune::tensor_or_empty(tensor, CallSite::current()).data.dptr;
}

void* nvte_tensor_columnwise_data(const NVTETensor tensor) {
  return normtune::tensor_or_empty(tensor, CallSite::current()).columnwise_data.dptr;
}

NVTEShape nvte_make_shape(const size_t* data, size_t ndim) {
  const auto where = CallSite::current();
  if (ndim > normtune::kMaxTensorDims) {
    normtune::raise_at(where, "argument 'ndim': expected at most ", normtune::kMaxTensorDims,
                       ", got ", ndim);
  }
  NVTEShape shape{};
  if (data != nullptr) std::copy(data, data + ndim, shape.data);
  shape.ndim = ndim;
  return shape;
}

NVTEShape nvte_tensor_shape(const NVTETensor tensor) {
  return normtune::const_tensor_from_handle(tensor, "tensor").shape().to_nvte();
}

NVTEShape nvte_tensor_columnwise_shape(const NVTETensor tensor) {
  return normtune::const_tensor_from_handle(tensor, "tensor").columnwise_data.shape.to_nvte();
}

size_t nvte_tensor_ndims(const NVTETensor tensor) {
  return normtune::const_tensor_from_handle(tensor, "tensor").ndim();
}

size_t nvte_tensor_size(const NVTETensor tensor, const size_t dim) {
  const auto where = CallSite::current();
  const normtune::Shape shape = normtune::const_tensor_from_handle(tensor, "tensor").shape();
  if (dim >= shape.ndim()) {
    normtune::raise_at(where, "argument 'dim': expected less than the tensor's ndim ", shape.ndim(),
                       " (shape ", shape.str(), "), got ", dim);
  }
  return shape[dim];
}

size_t nvte_tensor_size_bytes(const NVTETensor tensor) {
  if (tensor == nullptr) return 0;
  const Tensor& t = normtune::const_tensor_from_handle(tensor, "tensor");
  return normtune::dtype_storage_bytes(t.dtype(), t.numel());
}

size_t nvte_tensor_numel(const NVTETensor tensor) {
  return normtune::const_tensor_from_handle(tensor, "tensor").numel();
}

size_t nvte_tensor_element_size(const NVTETensor tensor) {
  const auto where = CallSite::current();
  const DType dtype = normtune::tensor_or_empty(tensor, where).dtype();
  if (normtune::is_fp4(dtype)) {
    normtune::raise_at(where,
                       "argument 'tensor': expected a dtype of whole bytes, got fp4e2m1 "
                       "(4 bits: use nvte_tensor_element_size_bits)");
  }
  return static_cast<size_t>(normtune::dtype_bits(dtype)) / 8;
}

size_t nvte_tensor_element_size_bits(const NVTETensor tensor) {
  const DType dtype = normtune::tensor_or_empty(tensor, CallSite::current()).dtype();
  return static_cast<size_t>(normtune::dtype_bits(dtype));
}

NVTEDType nvte_tensor_type(const NVTETensor tensor) {
  return normtune::to_nvte_dtype(normtune::tensor_or_empty(tensor, CallSite::current()).dtype());
}

float* nvte_tensor_amax(const NVTETensor tensor) {
  return normtune::fp32_scalar_ptr(tensor, &Tensor::amax, "amax", CallSite::current());
}

float* nvte_tensor_scale(const NVTETensor tensor) {
  return normtune::fp32_scalar_ptr(tensor, &Tensor::scale, "scale", CallSite::current());
}

float* nvte_tensor_scale_inv(const NVTETensor tensor) {
  return static_cast<float*>(normtune::tensor_or_empty(tensor, CallSite::current()).scale_inv.dptr);
}

NVTEShape nvte_tensor_scale_inv_shape(const NVTETensor tensor) {
  return normtune::tensor_or_empty(tensor, CallSite::current()).scale_inv.shape.to_nvte();
}

void nvte_zero_tensor(const NVTETensor tensor, cudaStream_t stream) {
  if (tensor == nullptr) return;
  const Tensor& t = normtune::const_tensor_from_handle(tensor, "tensor");
  for (const BasicTensor* b : {&t.data, &t.amax}) {
    const size_t bytes = b->size_bytes();
    if (b->dptr != nullptr && bytes > 0) {
      NORMTUNE_CUDA_CHECK(cudaMemsetAsync(b->dptr, 0, bytes, stream));
    }
  }
}

void nvte_set_tensor_param(NVTETensor* tensor, NVTETensorParam param_name,
                           const NVTEBasicTensor* param) {
  const auto where = CallSite::current();
  if (tensor == nullptr) {
    normtune::raise_at(where, "argument 'tensor': expected a pointer to an NVTETensor, got NULL");
  }
  Tensor& t = normtune::tensor_from_handle(*tensor, "*tensor", where);
  normtune::check_buffer_param(param_name, where, "set it with nvte_set_tensor_param_v2");
  if (param == nullptr) {
    normtune::raise_at(where,
                       "argument 'param': expected a pointer to an NVTEBasicTensor, got NULL");
  }
  *t.buffer(param_name) =
      normtune::checked_buffer(*param, normtune::param_label("param", param_name), where);
}

NVTEBasicTensor nvte_get_tensor_param(const NVTETensor tensor, NVTETensorParam param_name) {
  const auto where = CallSite::current();
  const Tensor& t = normtune::tensor_or_empty(tensor, where);
  normtune::check_buffer_param(param_name, where, "read it with nvte_get_tensor_param_v2");
  return t.buffer(param_name)->to_nvte();
}

void nvte_set_tensor_param_v2(NVTETensor tensor, NVTETensorParam param, const void* buf,
                              size_t size_in_bytes) {
  const auto where = CallSite::current();
  Tensor& t = normtune::tensor_from_handle(tensor, "tensor", where);
  normtune::check_param(param, "param", where);
  const size_t needed = normtune::param_size(param);
  if (buf == nullptr) {
    normtune::raise_at(where, "argument 'buf': expected a pointer to ",
                       normtune::param_type_name(param), " for ",
                       normtune::tensor_param_name(param), ", got NULL");
  }
  if (size_in_bytes < needed) {
    normtune::raise_at(where, "argument 'size_in_bytes': expected at least ", needed, " bytes for ",
                       normtune::tensor_param_name(param), " (", normtune::param_type_name(param),
                       "), got ", size_in_bytes);
  }
  if (normtune::is_buffer_param(param)) {
    NVTEBasicTensor value;
    std::memcpy(&value, buf, sizeof(value));  // buf need not be aligned
    *t.buffer(param) = normtune::checked_buffer(value, normtune::param_label("buf", param), where);
    return;
  }
  switch (param) {
    case kNVTEWithGEMMSwizzledScales:
      t.with_gemm_swizzled_scales = *static_cast<const uint8_t*>(buf) != 0;
      return;
    case kNVTERowScaledNVFP4:
      t.row_scaled_nvfp4 = *static_cast<const uint8_t*>(buf) != 0;
      return;
    case kNVTENVFP4E4M3Max: {
      int value = 0;
      std::memcpy(&value, buf, sizeof(value));
      if (value != 448 && value != 256) {
        normtune::raise_at(where, "argument 'buf (kNVTENVFP4E4M3Max)': expected 448 or 256, got ",
                           value);
      }
      t.nvfp4_e4m3_max = value;
      return;
    }
    default:
      break;  // unreachable: check_param accepted it and it is not a buffer
  }
  normtune::raise_at(where, "internal error: unhandled tensor parameter ", static_cast<int>(param));
}

void nvte_get_tensor_param_v2(const NVTETensor tensor, NVTETensorParam param, void* buf,
                              size_t size_in_bytes, size_t* size_written) {
  const auto where = CallSite::current();
  const Tensor& t = normtune::tensor_or_empty(tensor, where);
  normtune::check_param(param, "param", where);
  const size_t needed = normtune::param_size(param);
  if (buf != nullptr && size_in_bytes < needed) {
    normtune::raise_at(where, "argument 'size_in_bytes': expected at least ", needed, " bytes for ",
                       normtune::tensor_param_name(param), " (", normtune::param_type_name(param),
                       "), got ", size_in_bytes);
  }
  if (size_written != nullptr) *size_written = needed;
  if (buf == nullptr) return;
  if (normtune::is_buffer_param(param)) {
    const NVTEBasicTensor value = t.buffer(param)->to_nvte();
    std::memcpy(buf, &value, sizeof(value));
    return;
  }
  switch (param) {
    case kNVTEWithGEMMSwizzledScales:
      *static_cast<uint8_t*>(buf) = t.with_gemm_swizzled_scales ? 1 : 0;
      return;
    case kNVTERowScaledNVFP4:
      *static_cast<uint8_t*>(buf) = t.row_scaled_nvfp4 ? 1 : 0;
      return;
    case kNVTENVFP4E4M3Max:
      std::memcpy(buf, &t.nvfp4_e4m3_max, sizeof(t.nvfp4_e4m3_max));
      return;
    default:
      break;
  }
  normtune::raise_at(where, "internal error: unhandled tensor parameter ", static_cast<int>(param));
}

NVTEScalingMode nvte_tensor_scaling_mode(const NVTETensor tensor) {
  return normtune::tensor_or_empty(tensor, CallSite::current()).scaling_mode;
}
