// TransformerEngine 2.18's two-call workspace protocol, driven the way its PyTorch binding
// drives an entry point (extensions/normalization.cpp): a call with a default workspace tensor
// (the size query: it answers [bytes] of dtype byte and runs nothing), then a new tensor of
// exactly that shape and dtype, and the real call. For a FwdProblem or a BwdProblem.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <exception>
#include <string>
#include <thread>

#include "gpu_test_util.h"

namespace normtune::test {

// Runs fn on a new thread and returns the last kernel that thread ran through the registry
// (last_kernel() is per thread and starts empty): a name "" when fn launched nothing.
// Exceptions come back to the caller.
template <typename Fn>
KernelChoice kernel_run_by(Fn&& fn) {
  KernelChoice ran;
  std::exception_ptr error;
  std::thread thread([&] {
    try {
      fn();
      ran = last_kernel();
    } catch (...) {
      error = std::current_exception();
    }
  });
  thread.join();
  if (error) std::rethrow_exception(error);
  return ran;
}

// The whole sequence for one problem; returns the real call's outputs, checked against the
// reference.
template <typename Problem>
auto check_workspace_protocol(const Problem& p) {
  using ::testing::HasSubstr;
  using ::testing::ThrowsMessage;
  const std::string what = p.params().describe();
  SCOPED_TRACE(what);
  EXPECT_TRUE(p.untouched()) << "outputs poisoned before the query";

  // 1. The query, with a default tensor (shape [0]): [bytes >= 1] of dtype byte, no pointer,
  //    no kernel, no output written.
  TensorHandle query;
  EXPECT_EQ(nvte_tensor_numel(query), 0u);
  EXPECT_EQ(kernel_run_by([&] { p.call(query.get()); }).name, "") << "the size query ran a kernel";
  const size_t bytes = answered_workspace_bytes(query);
  EXPECT_EQ(nvte_tensor_data(query), nullptr) << "the size query allocates nothing";
  EXPECT_TRUE(p.untouched()) << "after the size query";

  // 3. Repeated queries give the same answer and run nothing: another default tensor, a
  //    workspace reset to shape [0] dtype byte with a null pointer, and any tensor with no
  //    elements (numel() == 0 is the query, whatever the dtype).
  {
    TensorHandle again;
    EXPECT_EQ(kernel_run_by([&] { p.call(again.get()); }).name, "") << "a repeated query ran a kernel";
    EXPECT_EQ(answered_workspace_bytes(again), bytes);
    DeviceBuffer previous(bytes + 16);
    TensorHandle reset(previous.get(), {bytes}, DType::kByte);
    reset.set(nullptr, {0}, DType::kByte);
    EXPECT_EQ(kernel_run_by([&] { p.call(reset.get()); }).name, "") << "a query with a reset workspace ran a kernel";
    EXPECT_EQ(answered_workspace_bytes(reset), bytes);
    TensorHandle no_floats(nullptr, {0}, DType::kFloat32);
    EXPECT_EQ(kernel_run_by([&] { p.call(no_floats.get()); }).name, "") << "a query with a [0] fp32 workspace ran a kernel";
    EXPECT_EQ(answered_workspace_bytes(no_floats), bytes);
    EXPECT_TRUE(p.untouched()) << "after the repeated queries";
  }
  if (bytes == 0) return p.outputs();  // the answer was malformed (recorded above)

  // 5. Any other workspace must be exactly the answer: an error naming 'workspace', before
  //    anything is written.
  {
    DeviceBuffer mem(4 * bytes + 64);
    const std::string expected = detail::concat("argument 'workspace': expected the shape [", bytes,
                                                "] and dtype byte given by the size query");
    TensorHandle one_more(mem.get(), {bytes + 1}, DType::kByte);
    EXPECT_THAT([&] { p.call(one_more.get()); },
                ThrowsMessage<Error>(HasSubstr(detail::concat(expected, ", got shape [", bytes + 1, "] dtype byte"))));
    if (bytes > 1) {
      TensorHandle one_less(mem.get(), {bytes - 1}, DType::kByte);
      EXPECT_THAT([&] { p.call(one_less.get()); }, ThrowsMessage<Error>(HasSubstr(expected)));
    }
    TensorHandle as_float(mem.get(), {bytes}, DType::kFloat32);
    EXPECT_THAT([&] { p.call(as_float.get()); },
                ThrowsMessage<Error>(HasSubstr(detail::concat(expected, ", got shape [", bytes, "] dtype fp32"))));
    TensorHandle float_words(mem.get(), {(bytes + 3) / 4}, DType::kFloat32);
    EXPECT_THAT([&] { p.call(float_words.get()); }, ThrowsMessage<Error>(HasSubstr(expected)));
    TensorHandle two_d(mem.get(), {1, bytes}, DType::kByte);
    EXPECT_THAT([&] { p.call(two_d.get()); }, ThrowsMessage<Error>(HasSubstr(expected)));
    TensorHandle no_memory(nullptr, {bytes}, DType::kByte);
    EXPECT_THAT([&] { p.call(no_memory.get()); },
                ThrowsMessage<Error>(HasSubstr("argument 'workspace': expected a device pointer")));
    TensorHandle misaligned(mem.get() + 8, {bytes}, DType::kByte);
    EXPECT_THAT([&] { p.call(misaligned.get()); },
                ThrowsMessage<Error>(HasSubstr("argument 'workspace': expected a pointer aligned to 16 bytes")));
    EXPECT_TRUE(p.untouched()) << "after the rejected workspaces";
  }

  // 2. The real call: a new tensor of exactly the answered shape and dtype over exactly that
  //    many bytes (NaN-poisoned: nothing may be read before it is written); the results
  //    match the reference.
  DeviceBuffer mem(bytes);
  NORMTUNE_CUDA_CHECK(cudaMemset(mem.get(), 0xFF, bytes));
  TensorHandle ws(mem.get(), {bytes}, static_cast<DType>(nvte_tensor_type(query)));
  const KernelChoice ran = kernel_run_by([&] { p.call(ws.get()); });
  EXPECT_NE(ran.name, "") << "the real call ran no kernel";
  auto result = p.outputs();
  result.kernel = ran;  // the kernel of the call above (last_kernel() is per thread)
  p.check(result);
  return result;
}

}  // namespace normtune::test
