// Probe (session 35, run on the H200; built by hand, not by CMake): execute RMSNorm bwd + add
// epilogue graph with real buffers.
#include <cuda_runtime.h>
#include <cudnn_frontend.h>
#include <dlfcn.h>
#include <cstdio>
namespace fe = cudnn_frontend;
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}
static std::shared_ptr<fe::graph::Tensor_attributes> T(fe::graph::Graph& g, const char* n,
                                                       int64_t uid, int64_t r, int64_t c,
                                                       fe::DataType_t t) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(n)
                      .set_uid(uid)
                      .set_dim({r, c, 1, 1})
                      .set_stride({c, 1, c, c})
                      .set_data_type(t));
}
int main(int argc, char** argv) {
  void* lib = dlopen(argc > 1 ? argv[1] : "libcudnn.so.9", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    printf("dlopen: %s\n", dlerror());
    return 1;
  }
  fe::cudnn_dlhandle = lib;
  cudaFree(0);
  cudnnHandle_t h;
  if (fe::detail::create_handle(&h) != CUDNN_STATUS_SUCCESS) {
    printf("handle failed\n");
    return 1;
  }
  const auto BF = fe::DataType_t::BFLOAT16, F = fe::DataType_t::FLOAT;
  for (int variant = 0; variant < 4; ++variant) {
    const int64_t rows = 4096, hid = 4096;
    fe::graph::Graph g;
    g.set_io_data_type(BF).set_intermediate_data_type(F).set_compute_data_type(F);
    auto dz = T(g, "dz", 1, rows, hid, BF), x = T(g, "x", 2, rows, hid, BF),
         gamma = T(g, "gamma", 3, 1, hid, BF);
    auto rs = T(g, "rsigma", 4, rows, 1, F), add = T(g, "add", 5, rows, hid, BF);
    auto r = g.rmsnorm_backward(
        dz, x, gamma, rs,
        fe::graph::Rmsnorm_backward_attributes().has_dbias(false).set_compute_data_type(F));
    auto dx = r[0], dgamma = r[1];
    dgamma->set_output(true).set_uid(6).set_data_type(BF);
    // variant 0: virtual dx (bf16) + add; 1: virtual dx with no data type set; 2: dx output too
    // (uid 8); 3: add first operand
    if (variant == 0 || variant == 2) dx->set_data_type(BF);
    if (variant == 2) dx->set_output(true).set_uid(8);
    auto sum = variant == 3 ? g.pointwise(add, dx,
                                          fe::graph::Pointwise_attributes()
                                              .set_mode(fe::PointwiseMode_t::ADD)
                                              .set_compute_data_type(F))
                            : g.pointwise(dx, add,
                                          fe::graph::Pointwise_attributes()
                                              .set_mode(fe::PointwiseMode_t::ADD)
                                              .set_compute_data_type(F));
    if (variant == 3) dx->set_data_type(BF);
    sum->set_output(true).set_uid(7).set_data_type(BF);
    auto st = g.validate();
    if (st.is_good()) st = g.build_operation_graph(h);
    if (st.is_good()) st = g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
    if (st.is_good()) st = g.check_support(h);
    if (st.is_good()) st = g.build_plans(h);
    if (!st.is_good()) {
      printf("variant %d build: %s\n", variant, st.get_message().c_str());
      continue;
    }
    int64_t ws = 0;
    (void)g.get_workspace_size(ws);
    void* p[9] = {};
    void* wsp = nullptr;
    for (int i = 1; i <= 8; ++i) cudaMalloc(&p[i], rows * hid * 4 + 256);
    cudaMalloc(&wsp, ws + 256);
    std::unordered_map<int64_t, void*> pack{{1, p[1]}, {2, p[2]}, {3, p[3]}, {4, p[4]},
                                            {5, p[5]}, {6, p[6]}, {7, p[7]}};
    if (variant == 2) pack[8] = p[8];
    st = g.execute(h, pack, wsp);
    cudaError_t e = cudaDeviceSynchronize();
    printf("variant %d: workspace %lld, execute: %s %s; cuda: %s\n", variant, (long long)ws,
           st.is_good() ? "OK" : "FAILED", st.get_message().c_str(), cudaGetErrorString(e));
    std::string json;
    (void)json;
    for (int i = 1; i <= 8; ++i) cudaFree(p[i]);
    cudaFree(wsp);
  }
  return 0;
}
