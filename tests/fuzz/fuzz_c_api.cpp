// libFuzzer target for the C API's argument handling: a byte string becomes a few tensor
// handles (random shapes, dtypes, scaling modes, null/aligned/misaligned fake pointers, some
// destroyed, some not handles at all) and a call of one of the normalization entry points
// (TE's nvte_* and normtune_rmsnorm_add_fwd) or of the tensor API. Every call must either
// return or raise normtune::Error (a std::runtime_error); anything else (a crash, another
// exception, an AddressSanitizer or UndefinedBehaviorSanitizer report) is a finding.
// The pointers are fake and never dereferenced on the host; without a GPU a well-formed call
// stops at the device query, so the fuzzer explores every check before it.
// Build and run: tools/fuzz.sh [seconds].
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <normtune/normalization.h>
#include <normtune/transformer_engine.h>

namespace {

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | byte();
    return v;
  }
  // Mostly small sizes, sometimes 0, 1, odd or huge ones.
  size_t dim() {
    switch (byte() % 8) {
      case 0: return 0;
      case 1: return 1;
      case 2: return byte() + 1;
      case 3: return size_t{1} << (byte() % 40);
      case 4: return u64();
      default: return (size_t{byte()} << 4) + byte() % 16;
    }
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

void* fake_pointer(Input& in) {
  switch (in.byte() % 4) {
    case 0: return nullptr;
    case 1: return reinterpret_cast<void*>(uintptr_t{0x10000000} + (uintptr_t{in.byte()} << 20));
    case 2: return reinterpret_cast<void*>(uintptr_t{0x10000000} + (uintptr_t{in.byte()} << 20) + in.byte() % 16);
    default: return reinterpret_cast<void*>(uintptr_t{in.u64()} & ~uintptr_t{0xF});
  }
}

NVTETensor make_tensor(Input& in, std::vector<NVTETensor>& owned) {
  const uint8_t kind = in.byte() % 16;
  if (kind == 0) return nullptr;
  if (kind == 1) return reinterpret_cast<NVTETensor>(uintptr_t{in.u64()} | 1);  // not a handle
  // TE's modes 0-4, an invalid 5, normtune's MXFP4 (200); mostly unquantized.
  const int mode = in.byte() % 8 == 0 ? in.byte() % 7 : 0;
  NVTETensor t = nvte_create_tensor(static_cast<NVTEScalingMode>(mode == 6 ? NVTE_NORMTUNE_MXFP4_1D_SCALING : mode));
  if (kind == 2) {
    nvte_destroy_tensor(t);  // a destroyed handle
    return t;
  }
  owned.push_back(t);
  if (kind == 3) return t;  // a default (empty) tensor
  NVTEBasicTensor b{};
  b.data_ptr = fake_pointer(in);
  const uint8_t dt = in.byte();
  b.dtype = static_cast<NVTEDType>(dt % 16 == 0 ? dt : dt % 11);  // (10: e2m1)
  b.shape.ndim = in.byte() % 5;
  if (in.byte() % 32 == 0) b.shape.ndim = in.byte();  // out of range
  for (size_t i = 0; i < b.shape.ndim && i < 15; ++i) b.shape.data[i] = in.dim();
  try {
    nvte_set_tensor_param_v2(t, static_cast<NVTETensorParam>(in.byte() % 8 == 0 ? in.byte() % 12 : 0), &b,
                             in.byte() % 16 == 0 ? in.byte() : sizeof(b));
  } catch (const std::runtime_error&) {
  }
  // Further buffers (scale, amax, scale_inv, column-wise data, ...), so that the checks of
  // quantized outputs (per-tensor FP8, MXFP8, NVFP4, MXFP4, 1x128 blocks) are reached.
  for (int extras = in.byte() % 5; extras > 0; --extras) {  // (byte() is 0 past the input's end)
    NVTEBasicTensor extra{};
    extra.data_ptr = fake_pointer(in);
    extra.dtype = static_cast<NVTEDType>(in.byte() % 11);
    extra.shape.ndim = in.byte() % 3;
    for (size_t i = 0; i < extra.shape.ndim; ++i) extra.shape.data[i] = in.byte() % 3 == 0 ? in.dim() : 1 + in.byte();
    try {
      nvte_set_tensor_param_v2(t, static_cast<NVTETensorParam>(1 + in.byte() % 6), &extra, sizeof(extra));
    } catch (const std::runtime_error&) {
    }
  }
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  std::vector<NVTETensor> owned;
  NVTETensor t[10];
  for (NVTETensor& h : t) {
    try {
      h = make_tensor(in, owned);
    } catch (const std::runtime_error&) {
      h = nullptr;  // nvte_create_tensor rejected the scaling mode
    }
  }
  const float eps = in.byte() % 8 == 0 ? -1.f : 1e-5f;
  const int sms = in.byte() % 8 == 0 ? -static_cast<int>(in.byte()) : in.byte();
  const bool zc = in.byte() & 1;
  try {
    switch (in.byte() % 8) {
      case 0: nvte_rmsnorm_fwd(t[0], t[1], eps, t[2], t[3], t[4], sms, zc, nullptr); break;
      case 1: nvte_layernorm_fwd(t[0], t[1], t[5], eps, t[2], t[6], t[3], t[4], sms, zc, nullptr); break;
      case 2: normtune_rmsnorm_add_fwd(t[0], t[7], t[1], eps, t[2], t[8], t[3], t[4], sms, zc, nullptr); break;
      case 3: nvte_rmsnorm_bwd(t[0], t[1], t[3], t[5], t[2], t[6], t[4], sms, zc, nullptr); break;
      case 4: nvte_rmsnorm_bwd_add(t[0], t[1], t[7], t[3], t[5], t[2], t[6], t[4], sms, zc, nullptr); break;
      case 5: nvte_layernorm_bwd(t[0], t[1], t[8], t[3], t[5], t[2], t[6], t[9], t[4], sms, zc, nullptr); break;
      case 6: {
        NVTEBasicTensor b{};
        size_t written = 0;
        nvte_get_tensor_param_v2(t[0], static_cast<NVTETensorParam>(in.byte() % 12), &b, in.byte() % 2 ? sizeof(b) : in.byte(),
                                 in.byte() % 2 ? &written : nullptr);
        break;
      }
      default: {
        (void)nvte_tensor_shape(t[0]);
        (void)nvte_tensor_numel(t[0]);
        (void)nvte_tensor_size_bytes(t[0]);
        (void)nvte_tensor_size(t[0], in.byte() % 4);
        break;
      }
    }
  } catch (const std::runtime_error&) {
    // normtune::Error: a rejected call. Any other exception escapes and is a finding.
  }
  for (NVTETensor h : owned) nvte_destroy_tensor(h);
  return 0;
}
