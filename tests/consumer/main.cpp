// Uses the installed headers and library the way an outside project would.
#include <cstdio>

#include <normtune/normtune.h>
#include <normtune/normtune_api.h>
#include <normtune/transformer_engine.h>

int main() {
  const normtune::NormKey key =
      normtune::make_key(normtune::NormType::kRMSNorm, normtune::Stage::kForward, normtune::DType::kBFloat16,
                         normtune::DType::kBFloat16, normtune::DType::kBFloat16, 4096);
  if (normtune::unpack(normtune::pack(key)) != key) return 1;

  NVTETensor t = nvte_create_tensor(NVTE_DELAYED_TENSOR_SCALING);
  const size_t dims[2] = {8, 4096};
  NVTEBasicTensor data{nullptr, kNVTEBFloat16, nvte_make_shape(dims, 2)};
  nvte_set_tensor_param_v2(t, kNVTERowwiseData, &data, sizeof(data));
  const size_t numel = nvte_tensor_numel(t);
  nvte_destroy_tensor(t);
  if (numel != 8 * 4096) return 1;

  // The same through the normtune_ names (for a process that links TransformerEngine too).
  NVTETensor u = normtune_create_tensor(NVTE_DELAYED_TENSOR_SCALING);
  normtune_set_tensor_param_v2(u, kNVTERowwiseData, &data, sizeof(data));
  const size_t numel_by_normtune_name = normtune_tensor_numel(u);
  normtune_destroy_tensor(u);
  if (numel_by_normtune_name != 8 * 4096) return 1;

  std::printf("consumer: normtune %s linked, %s, %zu registered kernels\n", normtune::version(),
              normtune::to_string(key).c_str(), normtune::kernel_registry().size());
  return 0;
}
