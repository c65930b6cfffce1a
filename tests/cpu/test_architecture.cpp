// The tables the library is built from, checked against each other (no GPU needed):
//   - the op table (kOps) and its lookups;
//   - plans as text (def_config, config_string, name_tags, tuned_table_line) from the plan
//     field tables, and the planner (every heuristic plan and every tuner candidate fits);
//   - the type lists (supported_types) against the general registry entries they generate;
//   - every tuned entry against its op, its type list, its plan and its line in the tuned
//     table (registry/tuned/<arch>.def), which tuned_table_line reproduces;
//   - zero-centered gamma (a run-time flag) selecting the entry of the plain key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <normtune/common/dtype.h>
#include <normtune/common/error.h>
#include <normtune/normtune.h>
#include <normtune/registry/norm_key.h>
#include <normtune/registry/op.h>
#include <normtune/registry/registry.h>
#include <normtune/tuning.h>

#include "normalization/src/kernels/norm_bwd_args.h"
#include "normalization/src/kernels/norm_fwd_args.h"
#include "plan_text.h"

#ifndef NORMTUNE_SOURCE_DIR
#error "tests/CMakeLists.txt defines NORMTUNE_SOURCE_DIR (the tuned tables are read from the source tree)"
#endif

namespace normtune {
namespace {

using test::parse_config;

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// ---- the op table -----------------------------------------------------------------------
TEST(OpTable, LookupsByNameAndByNormAndStageAgree) {
  EXPECT_EQ(kNumOps, 6u);
  for (const OpInfo& op : kOps) {
    EXPECT_EQ(find_op(op.name), &op) << op.name;
    EXPECT_EQ(&op_of(op.norm, op.stage), &op) << op.name;
    // Kernel names start with the op's kernel name; the C function is a real entry point name.
    EXPECT_THAT(std::string(op.c_function), ::testing::AnyOf(::testing::StartsWith("nvte_"),
                                                             ::testing::StartsWith("normtune_")));
    EXPECT_THAT(std::string(op.kernel_name), ::testing::StartsWith(op.norm == NormType::kRMSNorm ? "rmsnorm" : "layernorm"));
  }
  EXPECT_EQ(find_op("nope"), nullptr);
  EXPECT_EQ(find_op(""), nullptr);
  EXPECT_EQ(find_op("rmsnorm_"), nullptr);  // whole names only
  EXPECT_EQ(find_op("rmsnorm_bwd_add")->stage, Stage::kBackwardAdd);
  EXPECT_EQ(find_op("layernorm")->norm, NormType::kLayerNorm);
}

TEST(OpTable, OpOfAnUncomputedPairIsAnError) {
  EXPECT_THAT([] { (void)op_of(NormType::kLayerNorm, Stage::kForwardAdd); },
              ThrowsMessage<Error>(HasSubstr("no op computes LayerNorm ForwardAdd")));
  EXPECT_THAT([] { (void)op_of(NormType::kLayerNorm, Stage::kBackwardAdd); },
              ThrowsMessage<Error>(HasSubstr("no op computes LayerNorm BackwardAdd")));
}

TEST(OpTable, Names) {
  EXPECT_EQ(op_names(true, false), "rmsnorm, layernorm, rmsnorm_add");
  EXPECT_EQ(op_names(false, true), "rmsnorm_bwd, layernorm_bwd, rmsnorm_bwd_add");
  EXPECT_EQ(op_names(true, true), "rmsnorm, layernorm, rmsnorm_add, rmsnorm_bwd, layernorm_bwd, rmsnorm_bwd_add");
  EXPECT_EQ(op_names(false, false), "");
}

// ---- plans as text ----------------------------------------------------------------------
TEST(PlanText, ForwardRegisters) {
  const FwdPlan plan{.vecs_per_thread = 4, .threads_per_row = 224};
  EXPECT_EQ(def_config(plan),
            "(.layout = FwdLayout::kRegisters, .vecs_per_thread = 4, .threads_per_row = 224, .ctas_per_row = 1, "
            ".rows_per_cta = 1, .persistent = true)");
  EXPECT_EQ(config_string(plan),
            "layout=registers vecs_per_thread=4 threads_per_row=224 ctas_per_row=1 rows_per_cta=1 persistent=true");
  EXPECT_EQ(name_tags(plan), "_n4_g224_c1_r1_p");

  const FwdPlan grid{.vecs_per_thread = 2, .threads_per_row = 16, .ctas_per_row = 1, .rows_per_cta = 8,
                     .persistent = false};
  EXPECT_EQ(def_config(grid),
            "(.layout = FwdLayout::kRegisters, .vecs_per_thread = 2, .threads_per_row = 16, .ctas_per_row = 1, "
            ".rows_per_cta = 8, .persistent = false)");
  EXPECT_EQ(config_string(grid),
            "layout=registers vecs_per_thread=2 threads_per_row=16 ctas_per_row=1 rows_per_cta=8 persistent=false");
  EXPECT_EQ(name_tags(grid), "_n2_g16_c1_r8");  // no "_p": not persistent

  const FwdPlan cluster{.vecs_per_thread = 4, .threads_per_row = 256, .ctas_per_row = 4};
  EXPECT_EQ(name_tags(cluster), "_n4_g256_c4_r1_p");
}

TEST(PlanText, ForwardStreamingLeavesOutVecsPerThread) {
  const FwdPlan plan{.layout = FwdLayout::kStreaming, .threads_per_row = 512};
  EXPECT_EQ(def_config(plan),
            "(.layout = FwdLayout::kStreaming, .threads_per_row = 512, .ctas_per_row = 1, .rows_per_cta = 1, "
            ".persistent = true)");
  EXPECT_EQ(config_string(plan), "layout=streaming threads_per_row=512 ctas_per_row=1 rows_per_cta=1 persistent=true");
  EXPECT_EQ(name_tags(plan), "_streaming_g512_c1_r1_p");
}

TEST(PlanText, Backward) {
  const BwdPlan plan{.vecs_per_thread = 2, .threads_per_row = 64, .rows_per_cta = 2};
  EXPECT_EQ(def_config(plan),
            "(.layout = BwdLayout::kRegisters, .vecs_per_thread = 2, .threads_per_row = 64, .rows_per_cta = 2)");
  EXPECT_EQ(config_string(plan), "layout=registers vecs_per_thread=2 threads_per_row=64 rows_per_cta=2");
  EXPECT_EQ(name_tags(plan), "_n2_g64_r2");

  const BwdPlan columns{.layout = BwdLayout::kColumns};
  EXPECT_EQ(def_config(columns), "(.layout = BwdLayout::kColumns)");
  EXPECT_EQ(config_string(columns), "layout=columns");
  EXPECT_EQ(name_tags(columns), "_columns");

  const BwdPlan pipelined{.layout = BwdLayout::kPipelined, .vecs_per_thread = 2, .threads_per_row = 512, .ctas_per_row = 4};
  EXPECT_EQ(def_config(pipelined),
            "(.layout = BwdLayout::kPipelined, .vecs_per_thread = 2, .threads_per_row = 512, .ctas_per_row = 4)");
  EXPECT_EQ(config_string(pipelined), "layout=pipelined vecs_per_thread=2 threads_per_row=512 ctas_per_row=4");
  EXPECT_EQ(name_tags(pipelined), "_pipelined_n2_g512_c4");
  // A registers plan never names a cluster (canonical: the field does not apply).
  EXPECT_EQ(canonical(BwdPlan{.vecs_per_thread = 2, .threads_per_row = 64, .ctas_per_row = 3}),
            (BwdPlan{.vecs_per_thread = 2, .threads_per_row = 64}));

  // Row groups of a one-CTA pipelined plan are named where there are several; one group (the
  // default) leaves the text as before.
  const BwdPlan groups{.layout = BwdLayout::kPipelined, .vecs_per_thread = 2, .threads_per_row = 256,
                       .rows_per_cta = 2, .ctas_per_row = 1};
  EXPECT_EQ(def_config(groups),
            "(.layout = BwdLayout::kPipelined, .vecs_per_thread = 2, .threads_per_row = 256, .rows_per_cta = 2, "
            ".ctas_per_row = 1)");
  EXPECT_EQ(config_string(groups), "layout=pipelined vecs_per_thread=2 threads_per_row=256 rows_per_cta=2 ctas_per_row=1");
  EXPECT_EQ(name_tags(groups), "_pipelined_n2_g256_r2_c1");
  EXPECT_EQ(canonical(groups), groups);
  BwdPlan one = groups;
  one.rows_per_cta = 1;
  EXPECT_EQ(name_tags(one), "_pipelined_n2_g256_c1");
  EXPECT_EQ(config_string(one), "layout=pipelined vecs_per_thread=2 threads_per_row=256 ctas_per_row=1");
}

TEST(PlanText, TunedTableLine) {
  const Provenance pv{.device = "NVIDIA H200", .date = "2026-11-30", .time_us = 12.34, .tool = "normtune tune 0.1.0"};
  EXPECT_EQ(tuned_table_line(make_key(NormType::kRMSNorm, Stage::kForward, DType::kBFloat16, DType::kBFloat16,
                                      DType::kBFloat16, 7168),
                             FwdPlan{.vecs_per_thread = 4, .threads_per_row = 224}, pv),
            "NORMTUNE_TUNED(RMSNorm, Forward, bf16, bf16, bf16, fp32, 7168, (.layout = FwdLayout::kRegisters, "
            ".vecs_per_thread = 4, .threads_per_row = 224, .ctas_per_row = 1, .rows_per_cta = 1, .persistent = true), "
            "(.device = \"NVIDIA H200\", .date = \"2026-11-30\", .time_us = 12.34, .tool = \"normtune tune 0.1.0\"))");
  EXPECT_EQ(tuned_table_line(make_key(NormType::kLayerNorm, Stage::kBackward, DType::kFloat32, DType::kFloat16,
                                      DType::kFloat16, 65536),
                             BwdPlan{.layout = BwdLayout::kColumns}, pv),
            "NORMTUNE_TUNED(LayerNorm, Backward, fp32, fp16, fp16, fp32, 65536, (.layout = BwdLayout::kColumns), "
            "(.device = \"NVIDIA H200\", .date = \"2026-11-30\", .time_us = 12.34, .tool = \"normtune tune 0.1.0\"))");
  EXPECT_EQ(tuned_table_line(make_key(NormType::kRMSNorm, Stage::kBackwardAdd, DType::kBFloat16, DType::kBFloat16,
                                      DType::kBFloat16, 2048),
                             BwdPlan{.vecs_per_thread = 2, .threads_per_row = 128, .rows_per_cta = 1},
                             Provenance{.device = "", .date = "2026-11-30", .time_us = 0, .tool = "t"}),
            "NORMTUNE_TUNED(RMSNorm, BackwardAdd, bf16, bf16, bf16, fp32, 2048, (.layout = BwdLayout::kRegisters, "
            ".vecs_per_thread = 2, .threads_per_row = 128, .rows_per_cta = 1), "
            "(.device = \"\", .date = \"2026-11-30\", .time_us = 0.00, .tool = \"t\"))");
  // MXFP8 z: the scaled line, the mode as ScalingMode's enumerator without its k.
  FwdPlan staged{.layout = FwdLayout::kStaged, .vecs_per_thread = 4, .threads_per_row = 128};
  EXPECT_EQ(tuned_table_line(make_key(NormType::kRMSNorm, Stage::kForward, DType::kBFloat16, DType::kBFloat16,
                                      DType::kFloat8E4M3, 4096, ScalingMode::kMxfp8_1D),
                             canonical(staged), pv),
            "NORMTUNE_TUNED_SCALED(RMSNorm, Forward, bf16, bf16, fp8e4m3, fp32, Mxfp8_1D, 4096, "
            "(.layout = FwdLayout::kStaged, .vecs_per_thread = 4, .threads_per_row = 128, .ctas_per_row = 1, "
            ".rows_per_cta = 1, .stage_weights = false), "
            "(.device = \"NVIDIA H200\", .date = \"2026-11-30\", .time_us = 12.34, .tool = \"normtune tune 0.1.0\"))");
  // The other row-wise block scalings likewise (NVFP4: an e2m1 z).
  EXPECT_THAT(tuned_table_line(make_key(NormType::kRMSNorm, Stage::kForward, DType::kBFloat16, DType::kBFloat16,
                                        DType::kFloat4E2M1, 4096, ScalingMode::kNvfp4_1D),
                               canonical(staged), pv),
              ::testing::StartsWith("NORMTUNE_TUNED_SCALED(RMSNorm, Forward, bf16, bf16, fp4e2m1, fp32, Nvfp4_1D, 4096, "));
  EXPECT_THAT(tuned_table_line(make_key(NormType::kLayerNorm, Stage::kForward, DType::kFloat16, DType::kFloat16,
                                        DType::kFloat4E2M1, 2048, ScalingMode::kMxfp4_1D),
                               canonical(staged), pv),
              ::testing::StartsWith("NORMTUNE_TUNED_SCALED(LayerNorm, Forward, fp16, fp16, fp4e2m1, fp32, Mxfp4_1D, 2048, "));
  EXPECT_THAT(tuned_table_line(make_key(NormType::kRMSNorm, Stage::kForwardAdd, DType::kBFloat16, DType::kBFloat16,
                                        DType::kFloat8E4M3, 7168, ScalingMode::kBlock1D),
                               canonical(staged), pv),
              ::testing::StartsWith("NORMTUNE_TUNED_SCALED(RMSNorm, ForwardAdd, bf16, bf16, fp8e4m3, fp32, Block1D, 7168, "));
  // 2-D blocks, flags and the any-size key have no line.
  EXPECT_THROW(tuned_table_line(make_key(NormType::kRMSNorm, Stage::kForward, DType::kBFloat16, DType::kBFloat16,
                                         DType::kFloat8E4M3, 4096, ScalingMode::kBlock2D),
                                canonical(staged), pv),
               Error);
}

// A decode line (calls of at most 128 rows) and a line naming cuDNN.
TEST(PlanText, DecodeAndCudnnLines) {
  const Provenance pv{.device = "NVIDIA H200", .date = "2026-12-01", .time_us = 3.5, .tool = "normtune tune 0.1.0"};
  NormKey ln = make_key(NormType::kLayerNorm, Stage::kForward, DType::kBFloat16, DType::kBFloat16, DType::kBFloat16, 4096);
  ln.rows = RowClass::kDecode;
  EXPECT_EQ(tuned_table_line(ln, FwdPlan{.vecs_per_thread = 4, .threads_per_row = 128}, pv),
            "NORMTUNE_TUNED_DECODE(LayerNorm, Forward, bf16, bf16, bf16, fp32, 4096, (.layout = FwdLayout::kRegisters, "
            ".vecs_per_thread = 4, .threads_per_row = 128, .ctas_per_row = 1, .rows_per_cta = 1, .persistent = true), "
            "(.device = \"NVIDIA H200\", .date = \"2026-12-01\", .time_us = 3.50, .tool = \"normtune tune 0.1.0\"))");
  EXPECT_EQ(tuned_backend_table_line(ln, Backend::kCudnn, pv),
            "NORMTUNE_TUNED_CUDNN(LayerNorm, Forward, bf16, bf16, bf16, fp32, Decode, 4096, "
            "(.device = \"NVIDIA H200\", .date = \"2026-12-01\", .time_us = 3.50, .tool = \"normtune tune 0.1.0\"))");
  const NormKey bwd = make_key(NormType::kRMSNorm, Stage::kBackward, DType::kBFloat16, DType::kBFloat16, DType::kBFloat16, 65536);
  EXPECT_THAT(tuned_backend_table_line(bwd, Backend::kCudnn, pv),
              ::testing::StartsWith("NORMTUNE_TUNED_CUDNN(RMSNorm, Backward, bf16, bf16, bf16, fp32, Any, 65536, "));
  // No line: a decode key with block-scaled z, cuDNN for a general key or with a flag, the
  // native backend.
  NormKey mx = make_key(NormType::kRMSNorm, Stage::kForward, DType::kBFloat16, DType::kBFloat16, DType::kFloat8E4M3,
                        4096, ScalingMode::kMxfp8_1D);
  mx.rows = RowClass::kDecode;
  EXPECT_THROW(tuned_table_line(mx, canonical(FwdPlan{.layout = FwdLayout::kStaged}), pv), Error);
  EXPECT_THROW(tuned_backend_table_line(ln.general(), Backend::kCudnn, pv), Error);
  EXPECT_THROW(tuned_backend_table_line(make_key(NormType::kRMSNorm, Stage::kBackward, DType::kBFloat16, DType::kBFloat16,
                                                 DType::kBFloat16, 4096, ScalingMode::kNone, true),
                                        Backend::kCudnn, pv),
               Error);
  EXPECT_THROW(tuned_backend_table_line(bwd, Backend::kNative, pv), Error);
  EXPECT_EQ(row_class_tag(RowClass::kDecode), "_decode");
  EXPECT_EQ(row_class_tag(RowClass::kAny), "");
}

TEST(PlanText, ConfigStringsRoundTripThroughTheFieldTables) {
  for (int hidden : {128, 1000, 4096, 7168, 16384}) {
    for (const FwdPlan& plan : forward_plan_candidates(hidden, 8, 32)) {
      FwdPlan back;
      ASSERT_TRUE(parse_config(config_string(plan), &back));
      EXPECT_EQ(back, plan) << config_string(plan);
    }
    for (const BwdPlan& plan : backward_plan_candidates(hidden, 8, 32, kMaxCtasPerRow)) {
      BwdPlan back;
      ASSERT_TRUE(parse_config(config_string(plan), &back));
      EXPECT_EQ(back, plan) << config_string(plan);
    }
  }
  FwdPlan streaming;
  ASSERT_TRUE(parse_config("layout=streaming threads_per_row=512 ctas_per_row=2 rows_per_cta=1 persistent=false", &streaming));
  EXPECT_EQ(streaming, (FwdPlan{.layout = FwdLayout::kStreaming, .threads_per_row = 512, .ctas_per_row = 2, .persistent = false}));
}

// ---- the planner ------------------------------------------------------------------------
TEST(Planner, ThreadsPerRow) {
  EXPECT_EQ(threads_per_row_for(16, 4, 32), 4);    // a power of two below the warp
  EXPECT_EQ(threads_per_row_for(17, 4, 32), 8);
  EXPECT_EQ(threads_per_row_for(1, 4, 32), 1);
  EXPECT_EQ(threads_per_row_for(896, 4, 32), 224);  // whole warps
  EXPECT_EQ(threads_per_row_for(897, 4, 32), 256);
  EXPECT_EQ(threads_per_row_for(897, 4, 64), 256);
  EXPECT_EQ(threads_per_row_for(900, 4, 64), 256);
  EXPECT_EQ(threads_per_row_for(1000, 4, 64), 256);
  EXPECT_EQ(threads_per_row_for(1100, 4, 64), 320);
}

TEST(Planner, EveryCandidateFits) {
  for (int vec : {8, 4}) {
    for (int hidden = 128; hidden <= 16384; ++hidden) {
      const std::vector<FwdPlan> fwd = forward_plan_candidates(hidden, vec, 32);
      ASSERT_FALSE(fwd.empty()) << "hidden " << hidden << " vec " << vec;
      for (size_t i = 0; i < fwd.size(); ++i) {
        const FwdPlan& p = fwd[i];
        ASSERT_TRUE(plan_fits(p, hidden, vec, false)) << hidden << " vec " << vec << ": " << config_string(p);
        ASSERT_TRUE(plan_fits(p, hidden, vec, true)) << hidden << " vec " << vec << ": " << config_string(p);
        ASSERT_LE(p.threads_per_row * p.rows_per_cta * p.ctas_per_row, kMaxCtaThreads * kMaxCtasPerRow);
        ASSERT_EQ(std::count(fwd.begin(), fwd.end(), p), 1) << "duplicate candidate " << config_string(p);
      }
      const std::vector<BwdPlan> bwd = backward_plan_candidates(hidden, vec, 32);
      ASSERT_FALSE(bwd.empty());
      EXPECT_EQ(bwd.front(), BwdPlan{.layout = BwdLayout::kColumns});
      for (const BwdPlan& p : bwd) {
        ASSERT_TRUE(plan_fits(p, hidden, vec)) << hidden << " vec " << vec << ": " << config_string(p);
        ASSERT_EQ(std::count(bwd.begin(), bwd.end(), p), 1) << "duplicate candidate " << config_string(p);
      }
    }
  }
}

TEST(Planner, TheHeuristicIsOneOfTheCandidates) {
  // What `normtune tune` times includes the built-in choice, so tuning never loses to it.
  for (int hidden = 128; hidden <= 16384; hidden += 8) {
    const FwdPlan fwd = plan_forward(hidden, 8, false);
    if (fwd.layout == FwdLayout::kRegisters) {
      const auto c = forward_plan_candidates(hidden, 8, 32);
      EXPECT_NE(std::find(c.begin(), c.end(), fwd), c.end()) << "hidden " << hidden << ": " << config_string(fwd);
    }
    const BwdPlan bwd = plan_backward(hidden, 8);
    const auto c = backward_plan_candidates(hidden, 8, 32);
    EXPECT_NE(std::find(c.begin(), c.end(), bwd), c.end()) << "hidden " << hidden << ": " << config_string(bwd);
  }
}

TEST(Planner, TheTunerTimesThePipelinedBackwardOnOneCtaFromMidRows) {
  // From 128 vectors per row up, one CTA with the threads the row needs (2 or 4 vectors each);
  // not below (the register layouts' ground).
  auto has = [](int hidden, int vec, int g, int n) {
    const auto c = backward_plan_candidates(hidden, vec, 32, kMaxCtasPerRow);
    return std::find(c.begin(), c.end(),
                     BwdPlan{.layout = BwdLayout::kPipelined, .vecs_per_thread = n, .threads_per_row = g,
                             .ctas_per_row = 1}) != c.end();
  };
  EXPECT_TRUE(has(4096, 8, 256, 2));
  EXPECT_TRUE(has(4096, 8, 128, 4));
  EXPECT_TRUE(has(7168, 8, 448, 2));
  EXPECT_TRUE(has(7168, 8, 224, 4));
  EXPECT_TRUE(has(1032, 8, 96, 2));    // 129 vectors: three warps
  EXPECT_TRUE(has(4096, 4, 256, 4));   // fp32
  EXPECT_TRUE(has(8192, 4, 512, 4));
  EXPECT_TRUE(has(16384, 8, 512, 4));
  EXPECT_FALSE(has(16384, 8, 1024, 2));  // more threads than a CTA has (kMaxCtaThreads)
  EXPECT_FALSE(has(16384, 4, 1024, 4));
  for (int g : {32, 64, 128}) {
    EXPECT_FALSE(has(1000, 8, g, 2)) << g;  // 125 vectors
  }
  // And in row groups of 2..4 (one partial row per CTA), within a CTA's threads.
  auto has_groups = [](int hidden, int g, int n, int r) {
    const auto c = backward_plan_candidates(hidden, 8, 32, kMaxCtasPerRow);
    return std::find(c.begin(), c.end(),
                     BwdPlan{.layout = BwdLayout::kPipelined, .vecs_per_thread = n, .threads_per_row = g,
                             .rows_per_cta = r, .ctas_per_row = 1}) != c.end();
  };
  EXPECT_TRUE(has_groups(4096, 256, 2, 2));
  EXPECT_TRUE(has_groups(2048, 128, 2, 4));
  EXPECT_TRUE(has_groups(1536, 96, 2, 4));
  EXPECT_FALSE(has_groups(4096, 128, 4, 4));  // 4 vectors per thread: one group
  EXPECT_FALSE(has_groups(4096, 256, 2, 3));  // 768 threads
  // The heuristic is unchanged by it: the register layouts at these sizes.
  EXPECT_EQ(plan_backward(4096, 8).layout, BwdLayout::kRegisters);
  EXPECT_EQ(plan_backward(7168, 8).layout, BwdLayout::kRegisters);
}

TEST(Planner, LongRowsArePipelinedOnAClusterAndTheTunerTimesTheAlternatives) {
  for (int hidden = 16392; hidden <= 262144; hidden += 4104) {
    const int nvec = (hidden + 7) / 8;
    const FwdPlan p = plan_forward(hidden, 8, true);
    EXPECT_EQ(p.layout, FwdLayout::kPipelined) << hidden;
    EXPECT_EQ(p.rows_per_cta, 1) << hidden;
    // The fewest CTAs that keep each slice within 4096 vectors (512 threads; 2048 with the
    // fused add), 4 vectors per thread when that suffices.
    const int slice = p.vecs_per_thread * p.threads_per_row;
    EXPECT_GE(slice * p.ctas_per_row, nvec) << hidden;
    EXPECT_EQ(p.threads_per_row, 512) << hidden;
    EXPECT_EQ(p.vecs_per_thread, (nvec + p.ctas_per_row - 1) / p.ctas_per_row <= 2048 ? 4 : 8) << hidden;
    if (p.ctas_per_row > 1) {
      EXPECT_GT(nvec, 4096 * (p.ctas_per_row / 2)) << hidden;  // half as many would not do
    }
    const FwdPlan add = plan_forward(hidden, 8, true, NormType::kRMSNorm, Stage::kForwardAdd);
    EXPECT_EQ(add.layout, FwdLayout::kPipelined) << hidden;
    EXPECT_EQ(add.vecs_per_thread * add.threads_per_row, 2048) << hidden;
    // LayerNorm's long rows take the same plan (its pipelined kernel holds beta in shared memory).
    EXPECT_EQ(plan_forward(hidden, 8, true, NormType::kLayerNorm), p) << hidden;
    const auto c = forward_plan_candidates(hidden, 8, 32, kMaxCtasPerRow);
    EXPECT_NE(std::find(c.begin(), c.end(), p), c.end()) << hidden << ": " << config_string(p);
    EXPECT_NE(std::find(c.begin(), c.end(), forward_streaming_plan()), c.end()) << hidden;
    // The staged alternative (one slice per CTA) is still timed.
    EXPECT_NE(std::find_if(c.begin(), c.end(), [](const FwdPlan& q) { return q.layout == FwdLayout::kStaged && q.ctas_per_row > 1; }),
              c.end()) << hidden;
    for (const FwdPlan& q : c) ASSERT_TRUE(plan_fits(q, hidden, 8, true)) << hidden << ": " << config_string(q);
  }
  EXPECT_EQ(plan_forward(32768, 8, true), (FwdPlan{.layout = FwdLayout::kPipelined, .vecs_per_thread = 8,
                                                   .threads_per_row = 512, .ctas_per_row = 1}));
  EXPECT_EQ(plan_forward(32768, 8, true, NormType::kRMSNorm, Stage::kForwardAdd),
            (FwdPlan{.layout = FwdLayout::kPipelined, .vecs_per_thread = 4, .threads_per_row = 512, .ctas_per_row = 2}));
  EXPECT_EQ(plan_forward(32768, 8, true, NormType::kLayerNorm),
            (FwdPlan{.layout = FwdLayout::kPipelined, .vecs_per_thread = 8, .threads_per_row = 512, .ctas_per_row = 1}));
  // 262144 bf16: 8 CTAs of 512 threads, 8 vectors each; 16 CTAs past that; past 16 x 4096
  // vectors the staged layout (up to 32 per thread), then streaming.
  EXPECT_EQ(plan_forward(262144, 8, true), (FwdPlan{.layout = FwdLayout::kPipelined, .vecs_per_thread = 8,
                                                    .threads_per_row = 512, .ctas_per_row = 8}));
  EXPECT_EQ(plan_forward(524288, 8, true), (FwdPlan{.layout = FwdLayout::kPipelined, .vecs_per_thread = 8,
                                                    .threads_per_row = 512, .ctas_per_row = 16}));
  EXPECT_EQ(plan_forward(524296, 8, true), (FwdPlan{.layout = FwdLayout::kStaged, .vecs_per_thread = 9,
                                                    .threads_per_row = 512, .ctas_per_row = 16}));
  // MXFP8 z keeps the staged layout (its block loop lives there).
  EXPECT_EQ(plan_forward_block_scaled(262144, 8, true), (FwdPlan{.layout = FwdLayout::kStaged, .vecs_per_thread = 8,
                                                                 .threads_per_row = 256, .ctas_per_row = 16}));
  // Without clusters one CTA stages rows up to 4096 vectors; longer ones stream. Unaligned
  // data (scalar accesses) streams.
  EXPECT_EQ(plan_forward(32768, 8, false), (FwdPlan{.layout = FwdLayout::kStaged, .vecs_per_thread = 8,
                                                    .threads_per_row = 512}));
  EXPECT_EQ(plan_forward(32776, 8, false).layout, FwdLayout::kStreaming);
  EXPECT_EQ(plan_forward(32768, 1, true).layout, FwdLayout::kStreaming);
  EXPECT_EQ(plan_forward(1 << 24, 8, true).layout, FwdLayout::kStreaming);  // 32 vectors per thread at most
}

TEST(Planner, PipelinedPlansNeedVectorsWholeWarpsAndOneRowPerCta) {
  const FwdPlan p{.layout = FwdLayout::kPipelined, .vecs_per_thread = 4, .threads_per_row = 256, .ctas_per_row = 4};
  EXPECT_TRUE(plan_fits(p, 32768, 8, true));
  EXPECT_FALSE(plan_fits(p, 32768, 8, false));  // clusters
  EXPECT_FALSE(plan_fits(p, 32768, 1, true));   // scalar data
  EXPECT_FALSE(plan_fits(p, 32776, 8, true));   // does not cover the row
  FwdPlan q = p;
  q.rows_per_cta = 2;
  EXPECT_FALSE(plan_fits(q, 32768, 8, true));
  q = p;
  q.vecs_per_thread = 3;  // the general kernel has 2, 4 and 8
  q.ctas_per_row = 16;
  EXPECT_FALSE(plan_fits(q, 32768, 8, true));
  q = p;
  q.threads_per_row = 48;  // whole warps
  q.ctas_per_row = 16;
  EXPECT_FALSE(plan_fits(q, 24576, 8, true));
  q = p;
  q.ctas_per_row = 1;
  q.vecs_per_thread = 8;
  q.threads_per_row = 512;
  EXPECT_TRUE(plan_fits(q, 32768, 8, false));  // one CTA per row needs no cluster
  // Persistent by construction: neither `persistent` nor `stage_weights` is a field of it.
  // dynamic_rows is, on clusters: the schedule of a cluster line (one CTA per row always draws
  // its rows from the counter).
  EXPECT_EQ(name_tags(p), "_pipelined_n4_g256_c4_r1");
  EXPECT_EQ(def_config(p),
            "(.layout = FwdLayout::kPipelined, .vecs_per_thread = 4, .threads_per_row = 256, "
            ".ctas_per_row = 4, .rows_per_cta = 1, .dynamic_rows = false)");
  FwdPlan other = p;
  other.persistent = false;
  other.stage_weights = true;
  EXPECT_EQ(canonical(other), p);
  FwdPlan dynamic = p;
  dynamic.dynamic_rows = true;
  EXPECT_EQ(canonical(dynamic), dynamic);
  EXPECT_EQ(name_tags(dynamic), "_pipelined_n4_g256_c4_r1_d");
  EXPECT_EQ(config_string(dynamic),
            "layout=pipelined vecs_per_thread=4 threads_per_row=256 ctas_per_row=4 rows_per_cta=1 "
            "dynamic_rows=true");
  FwdPlan one_cta = dynamic;
  one_cta.ctas_per_row = 1;
  EXPECT_FALSE(canonical(one_cta).dynamic_rows);
  EXPECT_EQ(def_config(one_cta),
            "(.layout = FwdLayout::kPipelined, .vecs_per_thread = 4, .threads_per_row = 256, "
            ".ctas_per_row = 1, .rows_per_cta = 1)");
  FwdPlan staged = dynamic;
  staged.layout = FwdLayout::kStaged;
  EXPECT_FALSE(canonical(staged).dynamic_rows);
}

TEST(Planner, StagedPlansNeedVectorsAndAThreadPerPeer) {
  const FwdPlan p{.layout = FwdLayout::kStaged, .vecs_per_thread = 8, .threads_per_row = 256, .ctas_per_row = 4};
  EXPECT_TRUE(plan_fits(p, 65536, 8, true));
  EXPECT_FALSE(plan_fits(p, 65536, 8, false));  // clusters
  EXPECT_FALSE(plan_fits(p, 65536, 1, true));   // scalar data
  EXPECT_FALSE(plan_fits(p, 65544, 8, true));   // does not cover the row
  FwdPlan two_rows = p;
  two_rows.rows_per_cta = 2;
  EXPECT_FALSE(plan_fits(two_rows, 65536, 8, true));  // one row per CTA in a cluster
  EXPECT_EQ(name_tags(p), "_staged_n8_g256_c4_r1");
  EXPECT_EQ(def_config(p),
            "(.layout = FwdLayout::kStaged, .vecs_per_thread = 8, .threads_per_row = 256, .ctas_per_row = 4, "
            ".rows_per_cta = 1, .stage_weights = false)");
  FwdPlan weights = p;
  weights.stage_weights = true;
  EXPECT_EQ(name_tags(weights), "_staged_n8_g256_c4_r1_w");
  EXPECT_EQ(canonical(FwdPlan{.persistent = true, .stage_weights = true}), FwdPlan{});  // registers: no weights field
}

// Hidden sizes 1..300000: every one up to 20000, then a stride, plus the layout boundaries.
std::vector<int> sample_hidden_sizes() {
  std::vector<int> out;
  for (int h = 1; h <= 20000; ++h) out.push_back(h);
  for (int h = 20001; h <= 300000; h += 97) out.push_back(h);
  for (int edge : {4 * kMaxCtaThreads, 8 * kMaxCtaThreads, 16 * kMaxCtaThreads, 32 * kMaxCtaThreads, 65536, 131072,
                   262144, 300000}) {
    for (int d : {-1, 0, 1}) out.push_back(edge + d);
  }
  return out;
}

TEST(Planner, HeuristicPlansFit) {
  for (int h : sample_hidden_sizes()) {
    for (int vec : {1, 2, 4, 8}) {
      for (bool clusters : {false, true}) {
        const FwdPlan p = plan_forward(h, vec, clusters);
        ASSERT_TRUE(plan_fits(p, h, vec, clusters)) << "hidden " << h << " vec " << vec << ": " << config_string(p);
        ASSERT_LE(p.threads_per_row * p.rows_per_cta, kMaxCtaThreads) << h;
        if (vec == 1 && p.layout == FwdLayout::kRegisters) {
          // The general kernel's only scalar registers variant (norm_fwd_launch.cuh).
          ASSERT_EQ(p.vecs_per_thread, 8) << h;
        }
      }
      const BwdPlan b = plan_backward(h, vec);
      ASSERT_TRUE(plan_fits(b, h, vec)) << "hidden " << h << " vec " << vec << ": " << config_string(b);
      // With clusters: the pipelined layout (2 or 4 vectors, 512 threads) where it fits, the
      // same plan as without clusters elsewhere.
      const BwdPlan bc = plan_backward(h, vec, true);
      ASSERT_TRUE(plan_fits(bc, h, vec, true)) << "hidden " << h << " vec " << vec << ": " << config_string(bc);
      if (bc.layout == BwdLayout::kPipelined) {
        ASSERT_EQ(b.layout, BwdLayout::kColumns) << h;
        ASSERT_GT(vec, 1) << h;
        ASSERT_EQ(bc.threads_per_row, kMaxCtaThreads) << h;
        ASSERT_TRUE(bc.vecs_per_thread == 2 || bc.vecs_per_thread == 4) << h;
        ASSERT_LE(bc.ctas_per_row, kMaxCtasPerRow) << h;
        // The fewest CTAs: one fewer would not cover the row.
        ASSERT_LT(bc.vecs_per_thread * bc.threads_per_row * (bc.ctas_per_row - 1), (h + vec - 1) / vec) << h;
      } else {
        ASSERT_EQ(bc, b) << h;
      }
      if (b.layout == BwdLayout::kRegisters) {
        ASSERT_LE(b.threads_per_row * b.rows_per_cta, kMaxCtaThreads) << h;
        // The general kernel's variants (norm_bwd_launch.cuh): 1, 2, 4 vectors, or 8 scalars.
        if (vec == 1) {
          ASSERT_EQ(b.vecs_per_thread, 8) << h;
        } else {
          ASSERT_TRUE(b.vecs_per_thread == 1 || b.vecs_per_thread == 2 || b.vecs_per_thread == 4) << h;
        }
      }
    }
  }
}

TEST(Planner, FitRejectsPlansThatCannotRun) {
  // Does not cover the row.
  EXPECT_FALSE(plan_fits(FwdPlan{.vecs_per_thread = 1, .threads_per_row = 32}, 4096, 8, false));
  // Too many threads per CTA.
  EXPECT_FALSE(plan_fits(FwdPlan{.vecs_per_thread = 4, .threads_per_row = 512, .rows_per_cta = 2}, 4096, 8, false));
  // Not a power of two below the warp, not whole warps.
  EXPECT_FALSE(plan_fits(FwdPlan{.vecs_per_thread = 4, .threads_per_row = 48}, 1024, 8, false));
  // A cluster without cluster support.
  const FwdPlan cluster{.vecs_per_thread = 4, .threads_per_row = 256, .ctas_per_row = 4};
  EXPECT_FALSE(plan_fits(cluster, 32768, 8, false));
  EXPECT_TRUE(plan_fits(cluster, 32768, 8, true));
  // Scalar (unaligned) rows need 8 elements per thread.
  EXPECT_FALSE(plan_fits(FwdPlan{.vecs_per_thread = 4, .threads_per_row = 512}, 1024, 1, false));
  EXPECT_FALSE(plan_fits(BwdPlan{.vecs_per_thread = 1, .threads_per_row = 32}, 4096, 8));
  EXPECT_FALSE(plan_fits(BwdPlan{.vecs_per_thread = 4, .threads_per_row = 128}, 4096, 1));
  EXPECT_TRUE(plan_fits(BwdPlan{.layout = BwdLayout::kColumns}, 1000000, 1));
  // Pipelined: a cluster needs cluster support; 2 or 4 vectors; 16-byte vectors; whole warps;
  // at most kMaxCtasPerRow CTAs; covering the row. A registers plan has one CTA per row.
  const BwdPlan pipelined{.layout = BwdLayout::kPipelined, .vecs_per_thread = 2, .threads_per_row = 512, .ctas_per_row = 4};
  EXPECT_TRUE(plan_fits(pipelined, 32768, 8, true));
  EXPECT_FALSE(plan_fits(pipelined, 32768, 8, false));
  EXPECT_FALSE(plan_fits(pipelined, 32776, 8, true));
  EXPECT_FALSE(plan_fits(pipelined, 32768, 1, true));
  BwdPlan bad = pipelined;
  bad.vecs_per_thread = 8;
  EXPECT_FALSE(plan_fits(bad, 32768, 8, true));
  bad = pipelined;
  bad.threads_per_row = 500;
  EXPECT_FALSE(plan_fits(bad, 32768, 8, true));
  bad = pipelined;
  bad.ctas_per_row = 17;
  bad.threads_per_row = 256;
  EXPECT_FALSE(plan_fits(bad, 32768, 8, true));
  EXPECT_TRUE(plan_fits(BwdPlan{.layout = BwdLayout::kPipelined, .vecs_per_thread = 4, .threads_per_row = 512},
                        16384, 8, false));  // one CTA: no cluster needed
  EXPECT_FALSE(plan_fits(BwdPlan{.vecs_per_thread = 2, .threads_per_row = 512, .ctas_per_row = 2}, 8192, 8, true));
}

TEST(Planner, BackwardLongRowsArePipelinedOverAClusterWhereTheDeviceHasClusters) {
  auto pipelined = [](int n, int c) {
    return BwdPlan{.layout = BwdLayout::kPipelined, .vecs_per_thread = n, .threads_per_row = 512, .ctas_per_row = c};
  };
  EXPECT_EQ(plan_backward(32768, 8, true), pipelined(4, 2));
  EXPECT_EQ(plan_backward(65536, 8, true), pipelined(4, 4));
  EXPECT_EQ(plan_backward(131072, 8, true), pipelined(4, 8));
  EXPECT_EQ(plan_backward(131080, 8, true), pipelined(4, 9));
  EXPECT_EQ(plan_backward(262144, 8, true), pipelined(4, 16));
  EXPECT_EQ(plan_backward(20000, 8, true), pipelined(4, 2));
  EXPECT_EQ(plan_backward(32768, 4, true), pipelined(4, 4));  // fp32: 4-element vectors
  // Longer than 16 CTAs hold, no clusters, or unaligned data: the column tiles.
  EXPECT_EQ(plan_backward(262152, 8, true).layout, BwdLayout::kColumns);
  EXPECT_EQ(plan_backward(32768, 8, false).layout, BwdLayout::kColumns);
  EXPECT_EQ(plan_backward(32768, 1, true).layout, BwdLayout::kColumns);
  // Rows one CTA holds in registers are unchanged.
  EXPECT_EQ(plan_backward(16384, 8, true), plan_backward(16384, 8, false));
  EXPECT_EQ(plan_backward(16384, 8, true).layout, BwdLayout::kRegisters);
}

TEST(Planner, BackwardPipelinedRowGroupsNeedOneCtaPerRowAndFitACta) {
  const BwdPlan p{.layout = BwdLayout::kPipelined, .vecs_per_thread = 2, .threads_per_row = 256, .rows_per_cta = 2,
                  .ctas_per_row = 1};
  EXPECT_TRUE(plan_fits(p, 4096, 8, false));
  BwdPlan q = p;
  q.ctas_per_row = 2;  // a row over a cluster: one row group
  EXPECT_FALSE(plan_fits(q, 8192, 8, true));
  q = p;
  q.rows_per_cta = 3;  // 768 threads
  EXPECT_FALSE(plan_fits(q, 4096, 8, false));
  q = p;
  q.vecs_per_thread = 4;  // 4 vectors per thread: one group
  q.threads_per_row = 128;
  EXPECT_FALSE(plan_fits(q, 4096, 8, false));
  q = BwdPlan{.layout = BwdLayout::kPipelined, .vecs_per_thread = 2, .threads_per_row = 32, .rows_per_cta = 9,
              .ctas_per_row = 1};
  EXPECT_TRUE(plan_fits(BwdPlan{q.layout, 2, 32, kMaxBwdRowGroups, 1}, 512, 8, false));
  EXPECT_FALSE(plan_fits(q, 512, 8, false));  // a named barrier per group: at most kMaxBwdRowGroups
  q.rows_per_cta = 0;
  EXPECT_FALSE(plan_fits(q, 512, 8, false));
  // Two stages per group.
  BwdPlan single = p;
  single.rows_per_cta = 1;
  EXPECT_EQ(pipelined_backward_min_smem(p) - 2048, 2 * (pipelined_backward_min_smem(single) - 2048));
}

TEST(Planner, BackwardPipelinedPlansFitTheDevicesSharedMemory) {
  const size_t h200 = 227 * 1024;     // sm_90's opt-in shared memory per CTA
  const size_t consumer = 99 * 1024;  // sm_120's (clusters, but less shared memory)
  // Two stages of 4 vectors x 512 threads of x and dz: 128 KiB, and the static slots.
  const BwdPlan longest = plan_backward(262144, 8, true, h200);
  EXPECT_EQ(longest.layout, BwdLayout::kPipelined);
  EXPECT_EQ(longest.vecs_per_thread, 4);
  EXPECT_EQ(longest, plan_backward(262144, 8, true)) << "no limit given: the same plan";
  EXPECT_GT(pipelined_backward_min_smem(longest), size_t{128} * 1024);
  EXPECT_EQ(plan_backward(262144, 8, true, consumer).layout, BwdLayout::kColumns);
  // 4 vectors where two stages of them fit, else 2 x 512 threads (64 KiB in two stages).
  EXPECT_EQ(plan_backward(32768, 8, true, h200).vecs_per_thread, 4);
  EXPECT_EQ(plan_backward(32768, 8, true, consumer).vecs_per_thread, 2);
  EXPECT_EQ(plan_backward(32768, 8, true, consumer).ctas_per_row, 4);
  EXPECT_EQ(plan_backward(131072, 8, true, consumer).vecs_per_thread, 2);
  EXPECT_EQ(plan_backward(131072, 8, true, consumer).ctas_per_row, 16);
  for (int hidden = 16392; hidden <= 262144; hidden += 4104) {
    for (const size_t smem : {h200, consumer}) {
      const BwdPlan p = plan_backward(hidden, 8, true, smem);
      if (p.layout == BwdLayout::kPipelined) {
        EXPECT_LE(pipelined_backward_min_smem(p), smem) << hidden << ": " << config_string(p);
      }
    }
  }
  // The tuner's override is taken as given (a candidate the device cannot launch is skipped).
  const BwdPlan wide = plan_backward(262144, 8, true);
  ASSERT_EQ(set_backward_plan_override(&wide), nullptr);
  EXPECT_EQ(backward_plan(262144, 8, true, consumer), wide);
  set_backward_plan_override(nullptr);
  EXPECT_EQ(backward_plan(262144, 8, true, consumer).layout, BwdLayout::kColumns);
}

TEST(Planner, BackwardClusterCandidatesFitAndIncludeTheHeuristic) {
  for (int hidden : {8192, 20000, 32768, 65536, 131072, 262144}) {
    const std::vector<BwdPlan> c = backward_plan_candidates(hidden, 8, 32, kMaxCtasPerRow);
    for (const BwdPlan& p : c) {
      ASSERT_TRUE(plan_fits(p, hidden, 8, true)) << hidden << ": " << config_string(p);
      ASSERT_EQ(std::count(c.begin(), c.end(), p), 1) << "duplicate candidate " << config_string(p);
    }
    const BwdPlan h = plan_backward(hidden, 8, true);
    EXPECT_NE(std::find(c.begin(), c.end(), h), c.end()) << hidden << ": " << config_string(h);
    // Without clusters, only one-CTA pipelined plans.
    for (const BwdPlan& p : backward_plan_candidates(hidden, 8, 32)) EXPECT_EQ(p.ctas_per_row, 1) << config_string(p);
  }
}

TEST(Planner, OverridesApplyOnlyWhenThePlanFits) {
  const FwdPlan wide{.vecs_per_thread = 4, .threads_per_row = 256, .ctas_per_row = 4};
  ASSERT_EQ(set_forward_plan_override(&wide), nullptr);
  EXPECT_EQ(forward_plan_override(), &wide);
  EXPECT_EQ(forward_plan(32768, 8, true), wide);
  EXPECT_EQ(forward_plan(32768, 8, false), plan_forward(32768, 8, false));  // no clusters: the heuristic
  EXPECT_EQ(set_forward_plan_override(nullptr), &wide);
  EXPECT_EQ(forward_plan(32768, 8, true), plan_forward(32768, 8, true));

  const BwdPlan columns{.layout = BwdLayout::kColumns};
  ASSERT_EQ(set_backward_plan_override(&columns), nullptr);
  EXPECT_EQ(backward_plan(1024, 8), columns);
  EXPECT_EQ(set_backward_plan_override(nullptr), &columns);
  EXPECT_EQ(backward_plan(1024, 8), plan_backward(1024, 8));
}

// ---- type lists and the general entries ---------------------------------------------------
bool combo_listed(Stage stage, DType w, DType i, DType o, ScalingMode scaling = ScalingMode::kNone) {
  for (const TypeCombo& c : supported_types(stage)) {
    if (c.wtype == w && c.itype == i && c.otype == o && c.scaling == scaling) return true;
  }
  return false;
}

// The kernel name's tag of a block-scaled z.
std::string scaling_tag(ScalingMode m) {
  switch (m) {
    case ScalingMode::kNone: return "";
    case ScalingMode::kMxfp8_1D: return "_mxfp8";
    case ScalingMode::kBlock1D: return "_block1d";
    case ScalingMode::kNvfp4_1D: return "_nvfp4";
    case ScalingMode::kMxfp4_1D: return "_mxfp4";
    default: return "_?";
  }
}

std::string types_of(const NormKey& k) {
  std::string s = detail::concat(dtype_name(k.wtype), "_", dtype_name(k.itype));
  if (!is_backward(k.stage)) s += detail::concat("_", dtype_name(k.otype));
  return s;
}

TEST(TypeLists, ConsistentPerStage) {
  for (Stage s : {Stage::kForward, Stage::kForwardAdd, Stage::kBackward, Stage::kBackwardAdd}) {
    const auto list = supported_types(s);
    ASSERT_FALSE(list.empty());
    for (size_t i = 0; i < list.size(); ++i) {
      const TypeCombo& c = list[i];
      if (is_backward(s)) {
        EXPECT_EQ(c.otype, c.itype) << "a backward's dx has x's type";
      }
      EXPECT_NO_THROW((void)make_key(NormType::kRMSNorm, s, c.wtype, c.itype, c.otype, 4096));
      for (size_t j = 0; j < i; ++j) {
        EXPECT_FALSE(list[j].wtype == c.wtype && list[j].itype == c.itype && list[j].otype == c.otype &&
                     list[j].scaling == c.scaling)
            << "combination listed twice: " << dtype_name(c.wtype) << " " << dtype_name(c.itype) << " "
            << dtype_name(c.otype) << " " << scaling_mode_name(c.scaling);
      }
      // e2m1 z exactly with NVFP4 or MXFP4; a block-scaled z of FP8 or e2m1 codes, from x of
      // gamma's dtype; no backward scaling.
      EXPECT_EQ(c.otype == DType::kFloat4E2M1,
                c.scaling == ScalingMode::kNvfp4_1D || c.scaling == ScalingMode::kMxfp4_1D);
      if (c.scaling != ScalingMode::kNone) {
        EXPECT_FALSE(is_backward(s));
        EXPECT_TRUE(is_fp8(c.otype) || c.otype == DType::kFloat4E2M1);
        EXPECT_EQ(c.wtype, c.itype);
        EXPECT_NE(c.scaling, ScalingMode::kBlock2D);
      }
    }
  }
  // Both forward ops share the forward list, the backward ops the backward list.
  EXPECT_EQ(supported_types(Stage::kForward).data(), supported_types(Stage::kForwardAdd).data());
  EXPECT_EQ(supported_types(Stage::kBackward).data(), supported_types(Stage::kBackwardAdd).data());
  // What the API documents (normalization.h): bf16 -> bf16 and fp32 -> bf16 among them.
  EXPECT_TRUE(combo_listed(Stage::kForward, DType::kBFloat16, DType::kBFloat16, DType::kBFloat16));
  EXPECT_TRUE(combo_listed(Stage::kForward, DType::kFloat32, DType::kFloat32, DType::kBFloat16));
  EXPECT_TRUE(combo_listed(Stage::kBackward, DType::kFloat32, DType::kBFloat16, DType::kBFloat16));
}

TEST(TypeLists, EveryOpHasExactlyOneGeneralEntryPerListedCombination) {
  const Registry& registry = kernel_registry();
  size_t generals = 0;
  for (const KernelEntry* e : registry.entries()) {
    if (!e->is_general() || e->backend != Backend::kNative) continue;  // (other backends: their own suites)
    ++generals;
    // General kernels take any alignment; this also makes select(..., nullptr) safe below.
    ASSERT_EQ(e->can_implement, nullptr) << e->name;
    EXPECT_EQ(e->arch, ArchFamily::kAny) << e->name;
    EXPECT_EQ(e->key, e->key.general()) << e->name;
    EXPECT_TRUE(combo_listed(e->key.stage, e->key.wtype, e->key.itype, e->key.otype, e->key.scaling))
        << "unlisted general entry " << e->name;
    EXPECT_EQ(e->key.ctype, DType::kFloat32) << e->name;
  }
  size_t expected = 0;
  for (const OpInfo& op : kOps) {
    for (const TypeCombo& c : supported_types(op.stage)) {
      ++expected;
      const NormKey key = make_key(op.norm, op.stage, c.wtype, c.itype, c.otype, kAnyHiddenSize, c.scaling);
      const Selection sel = registry.select(key, ArchFamily::kAny, nullptr);
      ASSERT_NE(sel.entry, nullptr) << op.name << ": no general entry for " << to_string(key);
      EXPECT_FALSE(sel.tuned);
      EXPECT_EQ(sel.entry->key.general(), key.general()) << op.name;
      EXPECT_EQ(sel.entry->name, detail::concat(op.kernel_name, "_", types_of(key), scaling_tag(c.scaling), "_general"));
      // Any hidden size, with or without zero-centered gamma (and for a block-scaled z either
      // scale layout: run-time arguments), on an architecture without tuned entries: that
      // general entry.
      for (bool zc : {false, true}) {
        NormKey call = make_key(op.norm, op.stage, c.wtype, c.itype, c.otype, 1024, c.scaling, zc);
        EXPECT_EQ(registry.select(call, ArchFamily::kAny, nullptr).entry, sel.entry) << to_string(call);
        if (c.scaling == ScalingMode::kNone) continue;
        call.flags |= kFlagSwizzledScales;
        EXPECT_EQ(registry.select(call, ArchFamily::kAny, nullptr).entry, sel.entry) << to_string(call);
      }
    }
  }
  EXPECT_EQ(generals, expected) << "general entries that no op's type list names";
}

// ---- tuned entries and the tuned tables ---------------------------------------------------
// "sm_90" -> registry/tuned/sm90.def
std::string table_path(ArchFamily arch) {
  std::string name(arch_family_name(arch));
  name.erase(std::remove(name.begin(), name.end(), '_'), name.end());
  return std::string(NORMTUNE_SOURCE_DIR) + "/registry/tuned/" + name + ".def";
}

// The `.time_us = <number>` of a line printed as tuned_table_line prints it ("%.2f"), so that
// a hand-written "0" and a printed "0.00" compare equal.
std::string normalize_time(std::string line) {
  const std::string tag = ".time_us = ";
  const size_t at = line.find(tag);
  if (at == std::string::npos) return line;
  const size_t start = at + tag.size();
  const char* begin = line.c_str() + start;
  char* end = nullptr;
  const double t = std::strtod(begin, &end);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", t);
  return line.substr(0, start) + buf + line.substr(start + static_cast<size_t>(end - begin));
}

std::vector<std::string> table_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("NORMTUNE_TUNED(", 0) == 0 || line.rfind("NORMTUNE_TUNED_SCALED(", 0) == 0 ||
        line.rfind("NORMTUNE_TUNED_DECODE(", 0) == 0 || line.rfind("NORMTUNE_TUNED_CUDNN(", 0) == 0) {
      out.push_back(normalize_time(line));
    }
  }
  return out;
}

template <typename Plan>
void check_tuned_entry(const KernelEntry& e, std::map<std::string, int>& lines) {
  const NormKey& k = e.key;
  Plan plan;
  ASSERT_TRUE(parse_config(e.config, &plan)) << e.name;
  EXPECT_EQ(config_string(plan), e.config) << e.name;
  const OpInfo& op = op_of(k.norm, k.stage);
  EXPECT_EQ(e.name, detail::concat(op.kernel_name, "_", types_of(k), scaling_tag(k.scaling),
                                   "_h", k.hidden_size, row_class_tag(k.rows), name_tags(plan)));
  const int vec = 16 / static_cast<int>(dtype_storage_bytes(k.itype, 1));
  EXPECT_EQ(k.hidden_size % vec, 0u) << e.name << ": a tuned hidden size is a multiple of the vector";
  EXPECT_TRUE(plan_fits(plan, static_cast<int>(k.hidden_size), vec, true)) << e.name;  // (sm_90 has clusters)
  const std::string line = normalize_time(tuned_table_line(k, plan, e.provenance));
  auto it = lines.find(line);
  if (it == lines.end()) {
    ADD_FAILURE() << e.name << ": tuned_table_line does not reproduce a line of " << table_path(e.arch) << ":\n  " << line;
  } else {
    it->second -= 1;
  }
}

TEST(TunedEntries, MatchTheirOpTypeListPlanAndTableLine) {
  std::map<ArchFamily, std::map<std::string, int>> tables;  // per family: line -> unmatched count
  size_t tuned = 0;
  for (const KernelEntry* e : kernel_registry().entries()) {
    if (e->is_general()) continue;
    ++tuned;
    SCOPED_TRACE(e->name);
    const NormKey& k = e->key;
    EXPECT_NE(e->arch, ArchFamily::kAny);
    EXPECT_EQ(k, k.entry_key());
    EXPECT_EQ(k.ctype, DType::kFloat32);
    // Unscaled (or per-tensor FP8) lines, and row-wise block-scaled ones: forward, staged or
    // pipelined.
    EXPECT_TRUE(k.scaling == ScalingMode::kNone ||
                (!is_backward(k.stage) && (e->config.rfind("layout=staged", 0) == 0 ||
                                           e->config.rfind("layout=pipelined", 0) == 0)))
        << scaling_mode_name(k.scaling);
    EXPECT_TRUE(combo_listed(k.stage, k.wtype, k.itype, k.otype, k.scaling)) << "types outside the op's type list";
    EXPECT_THAT(e->name, HasSubstr(detail::concat("_h", k.hidden_size)));
    EXPECT_THAT(e->config, ::testing::StartsWith("layout="));
    EXPECT_NE(e->can_implement, nullptr) << "tuned kernels need aligned data";
    if (tables.find(e->arch) == tables.end()) {
      auto& t = tables[e->arch];
      const std::vector<std::string> lines = table_lines(table_path(e->arch));
      EXPECT_FALSE(lines.empty()) << "cannot read " << table_path(e->arch);
      for (const std::string& l : lines) t[l] += 1;
    }
    if (is_backward(k.stage)) {
      check_tuned_entry<BwdPlan>(*e, tables[e->arch]);
    } else {
      check_tuned_entry<FwdPlan>(*e, tables[e->arch]);
    }
  }
  EXPECT_GT(tuned, 0u);
  // The lines naming cuDNN: a key of an op and types cuDNN runs (RMSNorm / LayerNorm forward
  // with z of x's dtype, or their backward), each beside a native line for the same key.
  for (const TunedBackendLine* l : kernel_registry().tuned_backend_lines()) {
    SCOPED_TRACE(l->name);
    const NormKey& k = l->key;
    EXPECT_EQ(l->backend, Backend::kCudnn);
    EXPECT_TRUE(k.stage == Stage::kForward || k.stage == Stage::kBackward);
    EXPECT_EQ(k.otype, k.itype);
    EXPECT_EQ(k.scaling, ScalingMode::kNone);
    EXPECT_TRUE(combo_listed(k.stage, k.wtype, k.itype, k.otype, k.scaling));
    const OpInfo& op = op_of(k.norm, k.stage);
    EXPECT_EQ(l->name, detail::concat(op.kernel_name, "_", types_of(k), "_h", k.hidden_size, row_class_tag(k.rows), "_cudnn"));
    const auto all = kernel_registry().entries();  // (select() would need a call's arguments)
    EXPECT_TRUE(std::any_of(all.begin(), all.end(), [&](const KernelEntry* e) { return e->key == k && e->arch == l->arch; }))
        << "no native line beside it for " << to_string(k);
    auto& lines = tables[l->arch];
    const std::string line = normalize_time(tuned_backend_table_line(k, l->backend, l->provenance));
    auto it = lines.find(line);
    if (it == lines.end()) {
      ADD_FAILURE() << l->name << ": tuned_backend_table_line does not reproduce a line of " << table_path(l->arch)
                    << ":\n  " << line;
    } else {
      it->second -= 1;
    }
  }
  // Every table line became exactly one entry.
  for (const auto& [arch, lines] : tables) {
    for (const auto& [line, unmatched] : lines) {
      EXPECT_EQ(unmatched, 0) << table_path(arch) << ": no entry (or several) for\n  " << line;
    }
  }
}

// The workspace a tuned forward entry answers: none (the size query's one byte), but for the
// pipelined entries of one CTA per row and those of clusters with dynamic_rows, which answer
// the counter of their dynamic row schedule (16 bytes, launch/norm_fwd_launch.cuh) whatever the
// call's rows, so that the answer depends on the key alone; the entry uses it from 16 rows per
// CTA (cluster) on.
TEST(TunedEntries, ForwardWorkspaceIsTheRowCounterOfPipelinedLinesThatDrawRows) {
  size_t counters = 0, cluster_counters = 0;
  for (const KernelEntry* e : kernel_registry().entries()) {
    if (e->is_general() || is_backward(e->key.stage) || e->backend != Backend::kNative) continue;
    SCOPED_TRACE(e->name);
    FwdPlan plan;
    ASSERT_TRUE(parse_config(e->config, &plan));
    const bool counted =
        plan.layout == FwdLayout::kPipelined && (plan.ctas_per_row == 1 || plan.dynamic_rows);
    if (!counted) {
      EXPECT_EQ(e->workspace_bytes, nullptr);
      continue;
    }
    ++counters;
    if (plan.ctas_per_row > 1) ++cluster_counters;
    ASSERT_NE(e->workspace_bytes, nullptr);
    for (int64_t rows : {int64_t{1}, int64_t{37}, int64_t{1} << 20}) {
      FwdArgs fwd;
      fwd.params.rows = rows;
      fwd.params.hidden = static_cast<int>(e->key.hidden_size);
      fwd.sm_bound = 132;
      EXPECT_EQ(e->workspace_bytes(&fwd), 16u) << rows << " rows";
    }
  }
  EXPECT_GT(counters, cluster_counters)
      << "sm90.def has pipelined lines of one CTA per row (RMSNorm, LayerNorm bf16 32768)";
  EXPECT_GT(cluster_counters, 0u)
      << "sm90.def has cluster lines with dynamic_rows (RMSNorm bf16 65536, 262144)";
}

// Zero-centered gamma is a run-time argument: a call with it runs the entry of the plain key.
TEST(TunedEntries, ZeroCenteredGammaSelectsTheSameEntry) {
  const Registry& registry = kernel_registry();
  size_t checked = 0;
  for (const KernelEntry* e : registry.entries()) {
    if (e->is_general()) continue;
    NormKey zc = e->key;
    zc.flags |= kFlagZeroCenteredGamma;
    // Null pointers count as aligned; clusters allowed: every tuned entry can run this call.
    FwdArgs fwd;
    fwd.params.rows = 8;
    fwd.params.hidden = static_cast<int>(e->key.hidden_size);
    fwd.params.zero_centered_gamma = true;
    fwd.sm_bound = 132;
    fwd.clusters = true;
    BwdArgs bwd;
    bwd.params.rows = 8;
    bwd.params.hidden = static_cast<int>(e->key.hidden_size);
    bwd.params.zero_centered_gamma = true;
    bwd.sm_bound = 132;
    bwd.clusters = true;
    const void* args = is_backward(e->key.stage) ? static_cast<const void*>(&bwd) : static_cast<const void*>(&fwd);
    const Selection plain = registry.select(e->key, e->arch, args);
    const Selection with_flag = registry.select(zc, e->arch, args);
    EXPECT_TRUE(plain.tuned) << e->name;
    EXPECT_EQ(plain.entry, e) << e->name;
    EXPECT_TRUE(with_flag.tuned) << e->name;
    EXPECT_EQ(with_flag.entry, e) << e->name << " with zero-centered gamma";
    // The general entry behind it, the same for both.
    EXPECT_EQ(with_flag.general_candidate, nullptr);  // the tuned entry matched first
    EXPECT_EQ(registry.select(zc.general(), ArchFamily::kAny, nullptr).entry,
              registry.select(e->key.general(), ArchFamily::kAny, nullptr).entry);
    ++checked;
  }
  EXPECT_GT(checked, 0u);
}

}  // namespace
}  // namespace normtune
