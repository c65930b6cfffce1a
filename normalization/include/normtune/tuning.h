// Plans: how a call lays rows over threads. One type per direction (FwdPlan, BwdPlan) is the
// planner's answer, the autotuner's search space, a tuned table line's config and the
// compile-time parameter of a tuned kernel, so the four cannot drift apart (QuACK's
// rmsnorm_config pattern). Each plan's fields are listed once, in a field table
// (kFwdPlanFields, kBwdPlanFields) that prints the `.def` config, the config string and the
// kernel-name tags; compile-time proofs below show the table names every member exactly once.
//
// The overrides at the end are tuning hooks for `normtune tune` and tests, not for
// production calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <normtune/registry/norm_key.h>
#include <normtune/registry/registry.h>

namespace normtune {

// Every kernel's launch bound: threads per CTA (128 registers per thread at most).
inline constexpr int kMaxCtaThreads = 512;
// CTAs that may share a row (a thread-block cluster): sm_90 allows 16 with the non-portable
// attribute (set on the kernels that may use it), 8 without.
inline constexpr int kMaxCtasPerRow = 16;
inline constexpr int kMaxPortableCtasPerRow = 8;
// Row groups of a pipelined backward CTA (BwdPlan::rows_per_cta): each reduces its rows on a
// named barrier of its own (ids 1..15 besides __syncthreads' 0).
inline constexpr int kMaxBwdRowGroups = 8;

// ---- forward ----------------------------------------------------------------------------
enum class FwdLayout : uint8_t {
  kRegisters = 0,  // each thread holds vecs_per_thread 16-byte vectors of its row: x read once
  kStreaming = 1,  // rows too long for registers: read twice, the second time from L2
  kStaged = 2,     // each CTA's slice of a row copied to shared memory (cp.async), x read once;
                   // one slice per CTA (never persistent), a row over a cluster of
                   // ctas_per_row CTAs exchanging partial sums through distributed shared memory
  kPipelined = 3,  // long rows: persistent CTAs (clusters of ctas_per_row), each holding its slice of
                   // a row in a two-stage shared-memory ring (the next row's copies in flight while
                   // this row reduces and stores) and its slice of gamma/beta in registers, loaded
                   // once; x read from HBM once, gamma once per CTA
};

struct FwdPlan {
  FwdLayout layout = FwdLayout::kRegisters;
  int vecs_per_thread = 1;  // registers, staged: 16-byte vectors each thread holds
  int threads_per_row = 1;  // threads sharing a row in a CTA (power of two below a warp, else whole warps)
  int ctas_per_row = 1;     // CTAs sharing a row (a thread-block cluster when > 1)
  int rows_per_cta = 1;     // rows a CTA holds at once
  bool persistent = true;   // registers, streaming: grid bounded by the resident CTAs (walks row
                            // tiles), or one tile per CTA (staged: never; pipelined: always)
  bool stage_weights = false;  // staged: gamma (and beta) copied to shared memory with x (else read
                               // after the reduction; staged anyway when the grid is one wave)
  bool dynamic_rows = false;   // pipelined on clusters (ctas_per_row > 1): each cluster draws its
                               // rows from a counter in the workspace (one CTA per row always
                               // does), else walks a fixed set; tuned lines only (the general
                               // entry answers no workspace)

  constexpr bool operator==(const FwdPlan&) const = default;
};

// ---- backward ---------------------------------------------------------------------------
enum class BwdLayout : uint8_t {
  kRegisters = 0,  // x and dz of a row held in registers, one persistent kernel
  kColumns = 1,    // long rows: the row terms streamed, then column tiles over row ranges
                   // (x and dz read twice)
  kPipelined = 2,  // long rows: persistent CTAs (clusters of ctas_per_row), each holding its slice
                   // of a row's x and dz in a shared-memory ring (the next rows' copies in flight),
                   // the row terms exchanged through distributed shared memory, its columns'
                   // dgamma partials in registers; x and dz read once
};

struct BwdPlan {
  BwdLayout layout = BwdLayout::kRegisters;
  int vecs_per_thread = 1;  // registers, pipelined: 16-byte vectors of x and of dz each thread holds
  int threads_per_row = 1;  // registers, pipelined: threads sharing a row (pipelined: the CTA)
  int rows_per_cta = 1;     // registers layout: rows a CTA holds at once; pipelined with one CTA per
                            // row and 2 vectors per thread: row groups of threads_per_row threads,
                            // each walking its own rows with its own ring, their partials summed
                            // into one partial row per CTA
  int ctas_per_row = 1;     // pipelined layout: CTAs sharing a row (a thread-block cluster when > 1)

  constexpr bool operator==(const BwdPlan&) const = default;
};

// ---- the field tables -------------------------------------------------------------------
// One named field of a plan. Values travel as int (enums as their underlying value, bools as
// 0/1); enum_name turns an enum value into its C++ spelling for the `.def` line and its short
// name for the config string and the kernel name.
template <typename Plan>
struct PlanField {
  const char* name;  // the `.def` designator and the config-string key: "vecs_per_thread"
  const char* tag;   // the kernel-name tag: "n" gives "_n4"; a bool gives "_p" when true
  int (*get)(const Plan&);
  void (*set)(Plan&, int);
  bool (*applies)(const Plan&);  // whether the field means anything in the plan's layout
  const char* (*enum_name)(int value, bool cpp);  // nullptr: an int or a bool field
  bool is_bool;
};

namespace detail {
constexpr bool fwd_holds_row(const FwdPlan& p) { return p.layout != FwdLayout::kStreaming; }
constexpr bool fwd_walks_rows(const FwdPlan& p) {
  return p.layout == FwdLayout::kRegisters || p.layout == FwdLayout::kStreaming;
}
constexpr bool fwd_staged(const FwdPlan& p) { return p.layout == FwdLayout::kStaged; }
constexpr bool fwd_pipelined_cluster(const FwdPlan& p) {
  return p.layout == FwdLayout::kPipelined && p.ctas_per_row > 1;
}
constexpr bool bwd_registers(const BwdPlan& p) { return p.layout == BwdLayout::kRegisters; }
constexpr bool bwd_pipelined(const BwdPlan& p) { return p.layout == BwdLayout::kPipelined; }
// rows_per_cta: the register layout's, and the pipelined layout's row groups where there are
// several (one group, the default, is left out of its lines and names).
constexpr bool bwd_row_groups(const BwdPlan& p) { return bwd_registers(p) || (bwd_pipelined(p) && p.rows_per_cta != 1); }
constexpr bool bwd_holds_row(const BwdPlan& p) { return p.layout != BwdLayout::kColumns; }
constexpr bool always(const FwdPlan&) { return true; }
constexpr const char* fwd_layout_name(int v, bool cpp) {
  switch (v) {
    case 0: return cpp ? "FwdLayout::kRegisters" : "registers";
    case 1: return cpp ? "FwdLayout::kStreaming" : "streaming";
    case 2: return cpp ? "FwdLayout::kStaged" : "staged";
    default: return cpp ? "FwdLayout::kPipelined" : "pipelined";
  }
}
constexpr const char* bwd_layout_name(int v, bool cpp) {
  switch (v) {
    case 0: return cpp ? "BwdLayout::kRegisters" : "registers";
    case 1: return cpp ? "BwdLayout::kColumns" : "columns";
    default: return cpp ? "BwdLayout::kPipelined" : "pipelined";
  }
}
}  // namespace detail

#define NORMTUNE_PLAN_INT(Plan, member, tag, applies)                                         \
  PlanField<Plan> {                                                                            \
    #member, tag, [](const Plan& p) { return static_cast<int>(p.member); },                    \
        [](Plan& p, int v) { p.member = static_cast<decltype(p.member)>(v); }, applies, nullptr, \
        false                                                                                  \
  }

inline constexpr PlanField<FwdPlan> kFwdPlanFields[] = {
    {"layout", "", [](const FwdPlan& p) { return static_cast<int>(p.layout); },
     [](FwdPlan& p, int v) { p.layout = static_cast<FwdLayout>(v); }, detail::always,
     detail::fwd_layout_name, false},
    NORMTUNE_PLAN_INT(FwdPlan, vecs_per_thread, "n", detail::fwd_holds_row),
    NORMTUNE_PLAN_INT(FwdPlan, threads_per_row, "g", detail::always),
    NORMTUNE_PLAN_INT(FwdPlan, ctas_per_row, "c", detail::always),
    NORMTUNE_PLAN_INT(FwdPlan, rows_per_cta, "r", detail::always),
    {"persistent", "p", [](const FwdPlan& p) { return static_cast<int>(p.persistent); },
     [](FwdPlan& p, int v) { p.persistent = v != 0; }, detail::fwd_walks_rows, nullptr, true},
    {"stage_weights", "w", [](const FwdPlan& p) { return static_cast<int>(p.stage_weights); },
     [](FwdPlan& p, int v) { p.stage_weights = v != 0; }, detail::fwd_staged, nullptr, true},
    {"dynamic_rows", "d", [](const FwdPlan& p) { return static_cast<int>(p.dynamic_rows); },
     [](FwdPlan& p, int v) { p.dynamic_rows = v != 0; }, detail::fwd_pipelined_cluster, nullptr,
     true},
};

inline constexpr PlanField<BwdPlan> kBwdPlanFields[] = {
    {"layout", "", [](const BwdPlan& p) { return static_cast<int>(p.layout); },
     [](BwdPlan& p, int v) { p.layout = static_cast<BwdLayout>(v); },
     [](const BwdPlan&) { return true; }, detail::bwd_layout_name, false},
    NORMTUNE_PLAN_INT(BwdPlan, vecs_per_thread, "n", detail::bwd_holds_row),
    NORMTUNE_PLAN_INT(BwdPlan, threads_per_row, "g", detail::bwd_holds_row),
    NORMTUNE_PLAN_INT(BwdPlan, rows_per_cta, "r", detail::bwd_row_groups),
    NORMTUNE_PLAN_INT(BwdPlan, ctas_per_row, "c", detail::bwd_pipelined),
};

#undef NORMTUNE_PLAN_INT

// The field table of a plan type.
template <typename Plan>
constexpr auto& plan_fields() {
  if constexpr (std::is_same_v<Plan, FwdPlan>) {
    return kFwdPlanFields;
  } else {
    return kBwdPlanFields;
  }
}

// The plan with every field that does not apply to its layout at its default: two plans
// that run the same kernel are then equal (a tuned line must be canonical).
template <typename Plan>
constexpr Plan canonical(Plan plan) {
  for (const PlanField<Plan>& f : plan_fields<Plan>()) {
    if (!f.applies(plan)) f.set(plan, f.get(Plan{}));
  }
  return plan;
}

// "(.layout = FwdLayout::kRegisters, .vecs_per_thread = 4, ...)": a tuned line's config;
// fields that do not apply to the layout are left out (their defaults stand).
std::string def_config(const FwdPlan& plan);
std::string def_config(const BwdPlan& plan);
// "layout=registers vecs_per_thread=4 threads_per_row=224 ...": for listings and messages.
std::string config_string(const FwdPlan& plan);
std::string config_string(const BwdPlan& plan);
// "_n4_g224_c1_r1_p" ("_streaming_g512_c1_r1_p", "_columns"): a tuned kernel's name suffix.
std::string name_tags(const FwdPlan& plan);
std::string name_tags(const BwdPlan& plan);
// "_decode" for a decode line's entry (RowClass::kDecode), else "": after "_h<hidden>".
std::string_view row_class_tag(RowClass rows);

// The complete `.def` line for a tuned entry (what `normtune tune` prints). The key must be
// an entry key without flags (a table line has no field for them), unscaled or row-wise
// block-scaled z (the NORMTUNE_TUNED_SCALED line: Mxfp8_1D, Block1D, Nvfp4_1D or Mxfp4_1D;
// other scaling modes are an error).
//   NORMTUNE_TUNED(RMSNorm, Forward, bf16, bf16, bf16, fp32, 1024, (<def_config>), (<provenance>))
//   NORMTUNE_TUNED_SCALED(RMSNorm, Forward, bf16, bf16, fp8e4m3, fp32, Mxfp8_1D, 4096, (...), (...))
// A key of row class kDecode (unscaled z) gives the decode line:
//   NORMTUNE_TUNED_DECODE(RMSNorm, Forward, bf16, bf16, bf16, fp32, 4096, (...), (...))
std::string tuned_table_line(const NormKey& key, const FwdPlan& plan, const Provenance& provenance);
std::string tuned_table_line(const NormKey& key, const BwdPlan& plan, const Provenance& provenance);
// The line naming another backend (cuDNN) for a key (unscaled, no flags, exact hidden size):
//   NORMTUNE_TUNED_CUDNN(LayerNorm, Forward, bf16, bf16, bf16, fp32, Decode, 4096, (<provenance>))
std::string tuned_backend_table_line(const NormKey& key, Backend backend, const Provenance& provenance);

// ---- the planner ------------------------------------------------------------------------
// Threads sharing a row of `nvec` vectors held `n` per thread: a power of two below the warp
// size, else whole warps (may exceed kMaxCtaThreads: the caller checks).
int threads_per_row_for(int nvec, int n, int warp_size);

// The built-in heuristics. vector_elements: elements per vector access (1 when the data is not
// vector-aligned). clusters: whether rows may be split over a thread-block cluster. stage
// (Forward or ForwardAdd): long rows are pipelined, with half the slice per CTA when the
// residual is staged too. norm: RMSNorm and LayerNorm take the same plans.
FwdPlan plan_forward(int hidden_size, int vector_elements, bool clusters, NormType norm = NormType::kRMSNorm,
                     Stage stage = Stage::kForward);
// Backward: rows up to 4 vectors per thread of one CTA in registers; longer rows pipelined over
// a cluster (clusters) of up to 16 CTAs, else (no clusters, or longer still) column tiles.
// smem_per_cta: the shared memory one CTA may have (the device's opt-in limit; 0: no limit):
// a pipelined plan needs two stages of its slices of x and dz (4 vectors x 512 threads: 128
// KiB), so that on parts with less (99 KiB) the longest rows take the column tiles instead.
BwdPlan plan_backward(int hidden_size, int vector_elements, bool clusters = false, size_t smem_per_cta = 0);
// Shared memory a pipelined backward plan needs at the least (two stages, and the kernel's
// static shared memory).
size_t pipelined_backward_min_smem(const BwdPlan& plan);

// The layout of a forward with a block-scaled z (MXFP8, MXFP4, NVFP4, FP8 1x128): staged,
// with the threads of a row a multiple of the lanes that hold one block (block_elements /
// vector_elements), and CTAs of whole warps. The general kernel's choice for block-scaled z
// (the autotuner's override may also force a pipelined layout, and table lines may be either).
FwdPlan plan_forward_block_scaled(int hidden_size, int vector_elements, bool clusters, int block_elements = 32);

// The streaming layout (any row; what the general kernel falls back to when a staged plan
// does not fit the device).
FwdPlan forward_streaming_plan();

// Whether a plan can run a row of `hidden_size` elements at that vector width.
bool plan_fits(const FwdPlan& plan, int hidden_size, int vector_elements, bool clusters);
bool plan_fits(const BwdPlan& plan, int hidden_size, int vector_elements, bool clusters = false);

// What `normtune tune` times for a hidden size (vector-aligned data): every layout the
// general kernel can take, all of which fit.
// Forward: registers and staged layouts of one CTA; max_cluster > 1 adds layouts that split a
// long row over a cluster of up to that many CTAs (registers or staged); rows of 256 vectors
// and more get the pipelined layouts (one CTA or a cluster per row); rows longer than 2048
// vectors also get the streaming layout.
std::vector<FwdPlan> forward_plan_candidates(int hidden_size, int vector_elements, int warp_size,
                                             int max_cluster = 1);
// Backward: the registers layouts, the column tiles, for rows of 1024 vectors and more the
// pipelined layouts on 1..max_cluster CTAs, and from 128 vectors the pipelined layout on one
// CTA with the threads the row needs.
std::vector<BwdPlan> backward_plan_candidates(int hidden_size, int vector_elements, int warp_size,
                                              int max_cluster = 1);

// ---- overrides (the autotuner) ----------------------------------------------------------
// Until cleared with nullptr, this thread's forward calls run the general kernel (never a
// tuned one) with `plan` as its layout when the plan fits the call (else the heuristic's).
// Returns the previous override.
const FwdPlan* set_forward_plan_override(const FwdPlan* plan);
const FwdPlan* forward_plan_override();
// The layout the general forward kernel would use (the heuristic, or the override).
FwdPlan forward_plan(int hidden_size, int vector_elements, bool clusters, NormType norm = NormType::kRMSNorm,
                     Stage stage = Stage::kForward);

// The same for backward calls.
const BwdPlan* set_backward_plan_override(const BwdPlan* plan);
const BwdPlan* backward_plan_override();
BwdPlan backward_plan(int hidden_size, int vector_elements, bool clusters = false, size_t smem_per_cta = 0);

// ---- compile-time proofs ----------------------------------------------------------------
namespace detail {

// Members of an aggregate: the largest N for which T{any, ...(N times)} compiles.
struct AnyField {
  template <typename T>
  constexpr operator T() const { return T{}; }
};
template <typename T, typename... A>
constexpr int aggregate_members() {
  if constexpr (requires { T{A{}..., AnyField{}}; }) {
    return aggregate_members<T, A..., AnyField>();
  } else {
    return static_cast<int>(sizeof...(A));
  }
}

// Each field's setter changes its own getter's value and no other field's: with as many
// fields as members, the table names every member exactly once.
template <typename Plan>
constexpr bool fields_are_members() {
  constexpr auto& fields = plan_fields<Plan>();
  constexpr int n = static_cast<int>(sizeof(fields) / sizeof(fields[0]));
  if (n != aggregate_members<Plan>()) return false;
  for (int i = 0; i < n; ++i) {
    Plan p{};
    const int before = fields[i].get(p);
    fields[i].set(p, before == 0 ? 1 : 0);
    if (fields[i].get(p) == before) return false;
    for (int j = 0; j < n; ++j) {
      if (j != i && fields[j].get(p) != fields[j].get(Plan{})) return false;
    }
    for (int j = 0; j < i; ++j) {
      if (std::string_view(fields[i].name) == fields[j].name) return false;
    }
  }
  return true;
}

}  // namespace detail

static_assert(detail::fields_are_members<FwdPlan>(),
              "kFwdPlanFields does not name every FwdPlan member exactly once");
static_assert(detail::fields_are_members<BwdPlan>(),
              "kBwdPlanFields does not name every BwdPlan member exactly once");

}  // namespace normtune
