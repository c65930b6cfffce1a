// Measuring on the GPU, shared by `normtune bench` and `normtune tune`: device memory,
// NVTETensor handles, random inputs, CUDA-event timing with the L2 flushed, verification
// against the fp64 reference.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <normtune/common/dtype.h>
#include <normtune/common/platform.h>
#include <normtune/registry/op.h>
#include <normtune/transformer_engine.h>

namespace normtune::bench {

struct DeviceMem {
  void* ptr = nullptr;
  explicit DeviceMem(size_t bytes);
  ~DeviceMem();
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
};

struct Handle {
  NVTETensor h;
  Handle(void* p, std::vector<size_t> shape, DType t);
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  operator NVTETensor() const { return h; }
};

// A call's workspace by TransformerEngine's two-call protocol: the call is made once with a
// default (empty) workspace tensor, which only sets the size, then the workspace is
// allocated with exactly that shape (outside any timed region).
using CallWithWorkspace = std::function<void(NVTETensor workspace, cudaStream_t stream)>;
class Workspace {
 public:
  Workspace(const CallWithWorkspace& call, cudaStream_t stream);
  size_t bytes() const { return bytes_; }
  operator NVTETensor() const { return *handle_; }

 private:
  size_t bytes_ = 0;
  std::unique_ptr<DeviceMem> mem_;
  std::unique_ptr<Handle> handle_;
};

struct Timing {
  double median_us = 0, p10_us = 0, p90_us = 0;
};

class Timer {
 public:
  explicit Timer(size_t l2_bytes);
  ~Timer();
  cudaStream_t stream() const { return stream_; }
  // Median over reps of fn's time on the stream, with the L2 flushed (by writing a buffer
  // twice its size) before each repetition.
  Timing time(const std::function<void(cudaStream_t)>& fn, int warmup, int reps);
  // Per-call time of `calls` back-to-back calls captured in one CUDA graph (launch gaps
  // removed), median over reps of graph launches. Inputs stay in L2: this is latency.
  Timing time_graph(const std::function<void(cudaStream_t)>& fn, int calls, int reps);

 private:
  size_t flush_bytes_;
  DeviceMem flush_;
  cudaStream_t stream_{};
  cudaEvent_t start_{}, stop_{};
};

// Normal random values (mean, stddev) rounded to t; a 1M-element window repeated.
void fill_random(void* dev, DType t, size_t n, uint32_t seed, double mean, double stddev);

// Compares z and rsigma of a forward call with the fp64 reference: every row when
// rows x hidden <= 16M, else 64 sampled rows. Returns "ok (N rows)"; throws on a mismatch.
std::string verify(const OpInfo& op, DType t, size_t rows, size_t hidden, const void* x,
                   const void* residual, const void* gamma, const void* beta, const void* z,
                   const void* rsigma, float eps);

// Compares dx of a backward call with the fp64 reference (every row when rows x hidden <=
// 16M, then dgamma/dbeta too; else dx of 64 sampled rows). "ok (...)"; throws on a mismatch.
std::string verify_bwd(const OpInfo& op, DType t, size_t rows, size_t hidden, const void* dz,
                       const void* x, const void* add, const void* mu, const void* rsigma,
                       const void* gamma, const void* dx, const void* dgamma, const void* dbeta);

// Bandwidth of a 2 GiB device-to-device copy (read + write bytes), TB/s.
double copy_peak_tbps(Timer& timer, int reps);

}  // namespace normtune::bench
