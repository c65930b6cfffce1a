// Probe (session 35, run on the H200; built by hand, not by CMake): does cuDNN on this GPU build
//  (a) RMSNorm / LayerNorm backward with dx followed by a pointwise ADD of another tensor,
//  (b) RMSNorm forward with MXFP8 block_scale_quantize (row, row+col).
#include <cudnn_frontend.h>
#include <dlfcn.h>
#include <cstdio>
namespace fe = cudnn_frontend;
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}
static const char* run(fe::graph::Graph& g, cudnnHandle_t h) {
  static std::string msg;
  auto st = g.validate();
  if (!st.is_good()) {
    msg = "validate: " + st.get_message();
    return msg.c_str();
  }
  st = g.build_operation_graph(h);
  if (!st.is_good()) {
    msg = "opgraph: " + st.get_message();
    return msg.c_str();
  }
  st = g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
  if (!st.is_good()) {
    msg = "plans: " + st.get_message();
    return msg.c_str();
  }
  st = g.check_support(h);
  if (!st.is_good()) {
    msg = "support: " + st.get_message();
    return msg.c_str();
  }
  st = g.build_plans(h);
  if (!st.is_good()) {
    msg = "build: " + st.get_message();
    return msg.c_str();
  }
  return "OK";
}
static std::shared_ptr<fe::graph::Tensor_attributes> T(fe::graph::Graph& g, const char* n,
                                                       int64_t r, int64_t c, fe::DataType_t t) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(n)
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
  printf("cudnn backend version %lld\n", (long long)fe::detail::get_backend_version());
  cudnnHandle_t h;
  if (fe::detail::create_handle(&h) != CUDNN_STATUS_SUCCESS) {
    printf("handle failed\n");
    return 1;
  }
  const auto BF = fe::DataType_t::BFLOAT16, F = fe::DataType_t::FLOAT;
  for (int io = 0; io < 2; ++io)
    for (int64_t rows : {128, 4096})
      for (int64_t hid : {4096})
        for (int norm = 0; norm < 2; ++norm)
          for (int where = 0; where < 2; ++where) {
            const auto IO = io ? F : BF;
            fe::graph::Graph g;
            g.set_io_data_type(IO).set_intermediate_data_type(F).set_compute_data_type(F);
            auto dz = T(g, "dz", rows, hid, IO), x = T(g, "x", rows, hid, IO),
                 gamma = T(g, "gamma", 1, hid, IO);
            auto rs = T(g, "rsigma", rows, 1, F), add = T(g, "add", rows, hid, IO);
            std::shared_ptr<fe::graph::Tensor_attributes> dx, dgamma, dbeta;
            if (norm == 0) {
              auto r = g.rmsnorm_backward(
                  dz, x, gamma, rs,
                  fe::graph::Rmsnorm_backward_attributes().has_dbias(false).set_compute_data_type(
                      F));
              dx = r[0];
              dgamma = r[1];
            } else {
              auto mu = T(g, "mu", rows, 1, F);
              auto r = g.layernorm_backward(dz, x, gamma,
                                            fe::graph::Layernorm_backward_attributes()
                                                .set_saved_mean_and_inv_variance(mu, rs)
                                                .set_compute_data_type(F));
              dx = r[0];
              dgamma = r[1];
              dbeta = r[2];
              dbeta->set_output(true).set_data_type(BF);
            }
            dgamma->set_output(true).set_data_type(IO);
            if (where == 0) {  // dx virtual (x's type), dx + add out
              dx->set_data_type(IO);
              auto sum = g.pointwise(dx, add,
                                     fe::graph::Pointwise_attributes()
                                         .set_mode(fe::PointwiseMode_t::ADD)
                                         .set_compute_data_type(F));
              sum->set_output(true).set_data_type(IO);
            } else {
              dx->set_output(true).set_data_type(IO);
            }
            printf("io %s bwd %s rows %lld hidden %lld %s: %s\n", io ? "fp32" : "bf16",
                   norm ? "LN " : "RMS", (long long)rows, (long long)hid,
                   where == 0 ? "dx+add epilogue" : "plain (control)", run(g, h));
          }
  for (int col = 0; col < 2; ++col)
    for (int64_t rows : {128, 4096}) {
      const int64_t hid = 4096;
      fe::graph::Graph g;
      g.set_io_data_type(BF).set_intermediate_data_type(F).set_compute_data_type(F);
      auto x = T(g, "x", rows, hid, BF), gamma = T(g, "gamma", 1, hid, BF);
      auto eps = g.tensor(fe::graph::Tensor_attributes()
                              .set_name("eps")
                              .set_dim({1, 1, 1, 1})
                              .set_stride({1, 1, 1, 1})
                              .set_is_pass_by_value(true)
                              .set_data_type(F));
      auto r = g.rmsnorm(x, gamma,
                         fe::graph::Rmsnorm_attributes()
                             .set_forward_phase(fe::NormFwdPhase_t::TRAINING)
                             .set_epsilon(eps)
                             .set_compute_data_type(F));
      auto z = r[0];
      r[1]->set_output(true).set_data_type(F);
      z->set_data_type(F);
      auto z2 = g.reshape(z, fe::graph::Reshape_attributes());
      z2->set_dim({rows, hid});
      auto q = g.block_scale_quantize(
          z2,
          fe::graph::Block_scale_quantize_attributes().set_block_size(32).set_axis(1).set_transpose(
              false));
      q[0]->set_output(true).set_data_type(fe::DataType_t::FP8_E4M3);
      q[1]->set_output(true).set_data_type(fe::DataType_t::FP8_E8M0);
      if (col) {
        auto c = g.block_scale_quantize(z2, fe::graph::Block_scale_quantize_attributes()
                                                .set_block_size(32)
                                                .set_axis(0)
                                                .set_transpose(false));
        c[0]->set_output(true).set_data_type(fe::DataType_t::FP8_E4M3);
        c[1]->set_output(true).set_data_type(fe::DataType_t::FP8_E8M0);
      }
      printf("fwd RMS mxfp8 %s rows %lld hidden %lld: %s\n", col ? "row+col" : "row",
             (long long)rows, (long long)hid, run(g, h));
    }
  return 0;
}
