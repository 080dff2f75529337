// The per-matrix plan: upload, validate, analyse on the device, predict, convert, apply.
#include <aijpredict/gpu_matrix.hpp>

#include "cuda_check.hpp"
#include "device_buffer.hpp"
#include "analysis_jobs.hpp"
#include "async_ops.hpp"
#include "format_impl.hpp"
#include "spmv_timer.hpp"
#include "vector_ops.hpp"
#include "module_preload.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <future>
#include <limits>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include <sys/resource.h>

namespace aijp {

namespace {

using clock_type = std::chrono::steady_clock;
double ms_between(clock_type::time_point t0, clock_type::time_point t1)
{
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}
double ms_since(clock_type::time_point t0) { return ms_between(t0, clock_type::now()); }

// What disturbed the calling thread while a staged part ran: minor page faults (first touch of a code or data
// page) and involuntary context switches (another thread, e.g. the CUDA driver's, took the core). A part's
// label names them, so that host time a part's own work does not explain is attributed.
struct thread_disturbance {
  long faults = 0;
  long preempted = 0;
  static thread_disturbance now()
  {
    rusage u{};
    if (getrusage(RUSAGE_THREAD, &u) != 0) return {};
    return {u.ru_minflt + u.ru_majflt, u.ru_nivcsw};
  }
};

// cuSPARSE loads the kernels of its sliced-ELL SpMV at their first use in a process (lazy loading inside the
// library, out of reach of the context's preload, module_preload.hpp): a conversion to it is charged that
// (aijp::conversion_estimate_us) until the process has built one.
std::atomic<bool> cusparse_sell_built{false};

double conversion_estimate_us(format_id f, double layout_bytes, double csr_bytes, double stream_gbs)
{
  return aijp::conversion_estimate_us(f, layout_bytes, csr_bytes, stream_gbs, !cusparse_sell_built.load(std::memory_order_relaxed));
}

// Rows per part of a conversion split so that each part's device work (`work_us` for the whole fill, spread
// evenly over the rows) stays within `budget_us`, in at most 1024 parts; all rows when it fits in one or
// no budget is known. Staged steps (background_job::rows_per_part) and explorations converted in parts.
size_type rows_per_budget(size_type rows, double work_us, double budget_us)
{
  constexpr double max_parts = 1024;
  if (!(budget_us > 0) || !(work_us > budget_us)) return rows;
  const double parts = std::min(std::ceil(work_us / budget_us), max_parts);
  return static_cast<size_type>(std::ceil(rows / parts));
}

// The pacing of parts (plan_options::stage_duty): true while the host time they took beyond the products
// they overlap, `spent_us`, exceeds `duty` of the `elapsed_ms` since the work began (0: never paced).
bool over_duty(double spent_us, double duty, double elapsed_ms) { return duty > 0 && spent_us > duty * 1e3 * elapsed_ms; }

const char* piece_name(detail::piece_kind k)
{
  switch (k) {
    case detail::piece_kind::memset: return "memset";
    case detail::piece_kind::launch: return "kernel";
    case detail::piece_kind::copy: return "read-back";
    case detail::piece_kind::event: return "event";
  }
  return "?";
}

bool runs_on_csr_copy(format_id f)
{
  return f == format_id::cusparse_csr || f == format_id::csr_vector || f == format_id::csr_scalar;
}

// Our formats on the CSR copy: online::policy::free_band's candidates (cuSPARSE CSR, the baseline, is
// compared by its own rules).
bool free_candidate(format_id f)
{
  return runs_on_csr_copy(f) && f != format_id::cusparse_csr;
}

// plan_options::layout_reserve's bytes for a CSR copy of `csr_bytes`: none where no layout can be built (a
// forced format or candidates that run on the CSR copy) or where the device would keep less than half its
// memory free after the upload.
std::size_t layout_reserve_bytes(const plan_options& opts, std::size_t csr_bytes, size_type* free_before, bool* recent)
{
  *recent = false;
  if (!(opts.layout_reserve > 0) || csr_bytes == 0) return 0;
  if (!opts.forced_plan) {
    if (opts.forced && runs_on_csr_copy(*opts.forced)) return 0;
    if (!opts.forced && std::all_of(opts.candidates.begin(), opts.candidates.end(), runs_on_csr_copy)) return 0;
  }
  // The copy's bytes counted twice up to layout_reserve_small_bytes: a small matrix's solves are short, so a
  // cudaMalloc weighs most there, and its reserve must hold an exploration's layout beside the chosen one.
  const double basis = static_cast<double>(csr_bytes) + static_cast<double>(std::min(csr_bytes, layout_reserve_small_bytes));
  const std::size_t want = detail::layout_reserve::round_up(static_cast<std::size_t>(opts.layout_reserve * basis));
  size_type free_bytes = 0, total_bytes = 0;
  // A pooled upload reads a recent reading instead of asking the driver (22-37 us of a short solve's upload).
  if (opts.upload_pool && csr_bytes + want <= detail::block_pool::max_pooled_bytes &&
      recent_device_memory_info(opts.upload_reading_ms, &free_bytes, &total_bytes)) {
    *recent = true;
  } else {
    device_memory_info(&free_bytes, &total_bytes);
  }
  *free_before = free_bytes;
  const double after = static_cast<double>(free_bytes) - static_cast<double>(csr_bytes) - static_cast<double>(want);
  return after >= 0.5 * static_cast<double>(total_bytes) ? want : 0;
}

struct column_summary {
  unsigned long long bad_rows;       // row_ptr decreasing or a column outside [0, cols)
  unsigned long long unsorted_rows;  // columns not strictly increasing
  int max_step;                      // largest step between consecutive columns of a row
};

// Threads per row of the row-wise passes below: a power of two up to a warp, about the mean row length. One
// thread per row spent ~0.3-0.5 us per nonzero of the longest row in its serial loop: email-Eu-core's
// 334-nonzero row was most of the upload's 104-124 us "copies and column check" on the H100 (session 32).
int lanes_per_row(size_type rows, size_type nnz)
{
  const double mean = rows > 0 ? static_cast<double>(nnz) / static_cast<double>(rows) : 0.0;
  int lanes = 1;
  while (lanes < 32 && lanes < mean) lanes *= 2;
  return lanes;
}
unsigned row_groups_blocks(size_type rows, int lanes)
{
  return static_cast<unsigned>((rows * lanes + 255) / 256);
}

// Validates the pattern and measures what compressed-index layouts need (sell_delta16: sorted rows, steps
// below 2^16). `lanes` threads per row (lanes_per_row; it divides 32, so a row's group never straddles a
// warp, and every thread of the grid's warps takes part in the group's shuffles).
__global__ void inspect_columns(size_type rows, size_type cols, size_type nnz, int lanes, const index_type* __restrict__ row_ptr,
                                const index_type* __restrict__ col_idx, column_summary* out)
{
  const size_type t = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_type r = t / lanes;
  const int lane = static_cast<int>(t % lanes);
  int ok = 1, sorted = 1, step = 0;
  if (r < rows) {
    const index_type b = row_ptr[r], e = row_ptr[r + 1];
    ok = b >= 0 && b <= e && e <= nnz;  // a later row that decreases would leave e past the arrays
    if (ok) {
      for (index_type k = b + lane; k < e; k += lanes) {
        const index_type c = col_idx[k];
        ok = ok && c >= 0 && c < cols;
        if (k > b) {
          const index_type prev = col_idx[k - 1];
          sorted = sorted && c > prev;
          step = max(step, c - prev);
        }
      }
    }
  }
  for (int offset = lanes / 2; offset > 0; offset /= 2) {
    ok &= __shfl_xor_sync(0xffffffffu, ok, offset);
    sorted &= __shfl_xor_sync(0xffffffffu, sorted, offset);
    step = max(step, __shfl_xor_sync(0xffffffffu, step, offset));
  }
  if (r >= rows || lane != 0) return;
  if (!ok) atomicAdd(&out->bad_rows, 1ull);
  if (!sorted) atomicAdd(&out->unsorted_rows, 1ull);
  if (step > 0) atomicMax(&out->max_step, step);
}

// d[r] = sum of row r's entries in column r (duplicates of unassembled input add up, as in the products);
// `lanes` threads per row as in inspect_columns.
template <typename Value>
__global__ void extract_diagonal(size_type rows, int lanes, const index_type* __restrict__ row_ptr, const index_type* __restrict__ col_idx,
                                 const Value* __restrict__ values, Value* __restrict__ d)
{
  const size_type t = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_type r = t / lanes;
  const int lane = static_cast<int>(t % lanes);
  Value v = 0;
  if (r < rows) {
    for (index_type k = row_ptr[r] + lane; k < row_ptr[r + 1]; k += lanes) {
      if (col_idx[k] == r) v += values[k];
    }
  }
  for (int offset = lanes / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (r < rows && lane == 0) d[r] = v;
}

template <typename Value>
std::unique_ptr<detail::format_impl<Value>> build_format(format_id f, const detail::build_args<Value>& args)
{
  switch (f) {
    case format_id::cusparse_csr: return detail::make_cusparse_csr(args.a, args.handle());
    case format_id::sell_c_sigma: return detail::make_sell(args);
    case format_id::cusparse_csr_alg2: return detail::make_cusparse_csr_alg2(args);
    case format_id::cusparse_sell: return detail::make_cusparse_sell(args);
    case format_id::csr_scalar: return detail::make_csr_scalar(args);
    case format_id::csr_vector: return detail::make_csr_vector(args);
    case format_id::coo: return detail::make_coo(args);
    case format_id::ell: return detail::make_ell(args);
    case format_id::ellr: return detail::make_ellr(args);
    case format_id::pellr: return detail::make_pellr(args);
    case format_id::jad: return detail::make_jad(args);
    case format_id::hyb: return detail::make_hyb(args);
    case format_id::sell_sigma: return detail::make_sell_sigma(args);
    case format_id::sell_delta16: return detail::make_sell_delta16(args);
  }
  AIJP_THROW(error, "unknown format id");
}

// Index of format `f` in `estimates`, -1 when it is not a candidate.
int estimate_index(const std::vector<format_estimate>& estimates, format_id f)
{
  for (int i = 0; i < static_cast<int>(estimates.size()); ++i) {
    if (estimates[i].format == f) return i;
  }
  return -1;
}

// The prediction of every candidate format for the rows `in` describes (a whole matrix, or a block of a partition:
// block_prediction_input, planner.hpp): the placeholder's feasibility and estimate, replaced by the fitted model's
// floored prediction where it has one.
std::vector<format_estimate> estimate_formats(const context& ctx, const prediction_input& in, const std::vector<format_id>& candidates)
{
  const row_stats& block = in.stats;
  auto est = predict_bandwidth_model(in, ctx.model_params(), candidates);
  if (const model::performance_model* fitted = ctx.fitted_model()) {
    model::matrix_features feat;
    feat.stats = block;
    feat.value_bytes = in.value_bytes;
    feat.x_sectors_per_nnz = in.x_sectors_per_nnz;
    feat.sorted = in.sorted;
    for (auto& e : est) {
      if (const auto t = fitted->predict_us(e.format, feat, in.device); t && std::isfinite(*t) && *t > 0) {
        e.predicted_us = at_least_launches(e.format, block, in.value_bytes, ctx.model_params(), *t * ctx.model_scale(),
                                           &in.device);
        e.fitted = true;
      }
    }
  }
  return est;
}

}  // namespace

template <typename Value>
struct gpu_matrix<Value>::impl {
  explicit impl(std::shared_ptr<detail::device_csr<Value>> c) : csr_owner(std::move(c)), csr(*csr_owner) {}
  detail::cusparse_handle handle;  // created at first use, on the thread that builds the plan
  // The device CSR copy, shared with a plan being built in the background (start_background): its formats
  // keep pointers into it, so it stays where it is when the new plan is installed.
  std::shared_ptr<detail::device_csr<Value>> csr_owner;
  detail::device_csr<Value>& csr;
  std::unique_ptr<detail::format_impl<Value>> format;
  // cuSPARSE CSR's layout, set aside by gpu_matrix::host_bound_start while csr_vector runs: freed with the plan
  // (its SpMV buffer's cudaFree would wait for the device inside a product), or taken back by a conversion to
  // cuSPARSE CSR on this plan (take_csr).
  std::unique_ptr<detail::format_impl<Value>> parked_csr;
  std::unique_ptr<detail::cusparse_transpose<Value>> transpose;
  plan_report report;
  column_summary columns{};

  // Online refinement (plan_options::online): state of the running format's measurements.
  struct online_state {
    std::shared_ptr<online::corrections> corr;  // null: off
    online::policy policy;
    std::unique_ptr<detail::spmv_timer> timer;
    bool timing = true;                         // set_online_timing
    std::vector<double> raw_us;                 // per estimate: the model's uncorrected prediction
    std::vector<online::size_class> cls;        // per estimate
    online::matrix_key key = 0;                 // this pattern, for the per-matrix corrections
    long epoch = 0;                             // bumped at every format change; tags the timed pairs
    long calls = 0;                             // products since the epoch began
    int timed = 0;                              // this epoch's timed products of the running plan (begun)
    long next_first = 0;                        // the product (calls) the next of the first samples waits for
    // Host wall time between consecutive products (policy::host_bound_share), the last gap_window of
    // them; kept across plans and epochs (install_background carries it), since it is the solver's pace.
    struct product_pace {
      std::array<double, online::policy::gap_window> gaps{};
      std::size_t next = 0;  // where the next gap goes
      int count = 0;         // gaps known (at most gap_window)
      clock_type::time_point last_call{};
      void note(clock_type::time_point now)  // ~30 ns
      {
        if (last_call != clock_type::time_point{}) {
          gaps[next] = 1e3 * ms_between(last_call, now);
          next = (next + 1) % gaps.size();
          count = std::min(count + 1, online::policy::gap_window);
        }
        last_call = now;
      }
      // The median gap once gap_window are known, else 0.
      double median_us() const
      {
        if (count < online::policy::gap_window) return 0;
        auto g = gaps;
        std::nth_element(g.begin(), g.begin() + g.size() / 2, g.end());
        return g[g.size() / 2];
      }
    };
    product_pace pace;
    int interval = 8;                           // products per timed one now: policy.sample_every, doubled at each
                                                // observation of this epoch up to policy.sample_every_max (0: none)
    int running = -1;                           // estimate index of the running format
    int runner_up = -1;                         // estimate index exploration would try
    int then_runner = -1;                       // the second candidate, compared next: cuSPARSE CSR (ALG2 when it runs)
    int free_runner = -1;                       // the third: the best-predicted other format on the CSR copy (policy::free_band)
    bool may_explore = false;
    bool baseline_always = false;  // a split's verification: compare cuSPARSE CSR (then_runner) unconditionally
    // Observations in a row at which a margin reason held for `confirm_runner` (policy::explore_confirmations).
    int confirm_runner = -1;
    int confirmations = 0;
    // The analysis' input and constants (the placeholder model only), for ranking the formats again at a streaming
    // bandwidth fitted to the products measured here (rerank_by_stream_scale), once per analysis; the candidate it
    // chose (an estimate index) and its prediction at that bandwidth.
    std::optional<prediction_input> input;
    bandwidth_model_params params;
    bool reranked = false;
    int rerank_index = -1;
    double rerank_us = 0;
    // Amortization of an exploration, which converts inside a product: the expected products and the
    // streaming bandwidth of the analysis that set runner_up (0 products: not checked).
    double expected_mults = 0;
    double stream_gbs = 0;
    static constexpr std::size_t max_samples = 64;
    std::vector<double> samples;                // this epoch's times (the last max_samples)
    int sample_count = 0;                       // this epoch's times read back
    std::vector<double> window;                 // since the last observation
    std::vector<detail::spmv_timer::sample> scratch;
    cudaStream_t stream = nullptr;              // of the last timed product (exploration builds on it)
    std::unique_ptr<detail::format_impl<Value>> parked;  // the format kept while the runner-up is measured
    std::vector<double> parked_samples;
    int parked_count = 0;
    std::vector<double> parked_window;          // the parked plan's products interleaved with the runner-up's
    // Host time (us) of issuing each timed product (its apply, between the timing events), this epoch's
    // plan's and the parked plan's (before and interleaved): a split's verification adds it to the measured
    // time, since its extra blocks' launches cost the host what the events do not show.
    std::vector<double> host_us, parked_host_us;
    // Plans installed by a staged step (background_mode::staged) convert an exploration's candidate in parts
    // too, when it has a builder (make_format_builder): a part after each product (advance_exploration), paced
    // like the step (stage_fraction, stage_duty), while the running format keeps running; the exploration
    // begins when its last part is issued. Otherwise the candidate is built inside the product.
    bool stage_exploration = false;
    double stage_fraction = 0;
    double stage_duty = 0;
    std::unique_ptr<detail::format_builder<Value>> explore_builder;  // non-null: converting the candidate
    exploration_record explore_pending;         // its record, until the exploration begins
    std::uint64_t explore_values_version = 0;   // values_version when the conversion began
    clock_type::time_point explore_started{};
    double explore_spent_us = 0;                // host time of its parts so far
    int explore_parts = 0;
  } on;

  // The public steps (gpu_matrix::analyze, convert_deferred, plan_when_reused), on this plan: the running
  // one, or a copy being built on a background thread.
  // `gathered`: the statistics and locality samples, already read back by a staged step (else computed here).
  struct gathered_input {
    row_stats stats;
    locality_sample loc;
    size_type free_memory_bytes = 0;  // cudaMemGetInfo's, queried when the step started
    std::optional<std::vector<format_estimate>> estimates;  // the model's, where parts of their own made them
    // The online corrections' factor of each estimate, where a part of its own took them (online_state's
    // raw_us, cls and key, and the factors applied).
    struct online_factors {
      std::vector<double> raw_us;
      std::vector<online::size_class> cls;
      std::vector<double> factor;
      online::matrix_key key = 0;
      std::string source;  // context::online_source(), taken in the same part
    };
    std::optional<online_factors> factors;
    std::optional<prediction_input> input;  // what `estimates` were made from (analysis_input)
  };
  // Each estimate's online correction factor for this matrix (`xs`: its x_sectors_per_nnz), the decision
  // applies them (analyze) and a staged step takes them in a part of their own.
  typename gathered_input::online_factors online_factors_of(const online::corrections& corr, const std::vector<format_estimate>& estimates,
                                                            const row_stats& stats, double xs) const
  {
    typename gathered_input::online_factors f;
    f.key = online::key_of(stats, sizeof(Value), xs);
    for (const auto& e : estimates) add_online_factor(corr, e, f);
    return f;
  }
  // One estimate's factor into `f` (whose key is set): a staged step takes them in slices.
  void add_online_factor(const online::corrections& corr, const format_estimate& e, typename gathered_input::online_factors& f) const
  {
    const auto cls = online::classify(e.bytes, static_cast<double>(report.device.l2_bytes));
    f.raw_us.push_back(e.predicted_us);
    f.cls.push_back(cls);
    f.factor.push_back(corr.factor(e.format, cls, f.key));
  }
  // The models' input for this matrix from its statistics and locality samples.
  prediction_input analysis_input(const row_stats& stats, const locality_sample& loc, size_type free_memory) const;
  void analyze(const context& ctx, const plan_options& opts, cudaStream_t stream, const gathered_input* gathered = nullptr);
  // analyze in two halves, which a staged step runs in parts of their own (the whole decision took 13-22 us
  // of host time in one part of a one-CPU short solve on the H200, session 33): the choice among the
  // predictions (with the online corrections and the margins, and the decision line), then the rest (a
  // partition, the amortization, the online runners-up, the conversion or the staged choice).
  struct analysis_choice {
    prediction_input in;
    format_id choice = format_id::cusparse_csr;
    int best = -1;
    int csr_i = -1;
  };
  analysis_choice analyze_choose(const context& ctx, const plan_options& opts, cudaStream_t stream, const gathered_input* gathered);
  void analyze_finish(const context& ctx, const plan_options& opts, cudaStream_t stream, const analysis_choice& c);
  bool convert_deferred(double expected_mults, cudaStream_t stream);
  bool plan_when_reused(const context& ctx, const plan_options& opts, cudaStream_t stream);
  // Whether convert_deferred / plan_when_reused would act (their first tests, without side effects).
  bool deferred_pays(double expected_mults) const
  {
    return report.deferred && report.saving_us * expected_mults >= report.conversion_estimate_us;
  }
  bool may_plan_when_reused(const plan_options& opts, double launch_us) const;
  // A plan for a background step, copied into `c` (background_job::plan_of: the plan made with the spare job at
  // the upload, or a new one): the same device CSR, the report, the decision state and the online settings; no
  // layout, timer or parked plan (the step builds what it needs). In two calls, which a staged step makes in two
  // parts: the report (its strings and vectors), then the rest. Copied whole in one part into a plan allocated
  // there, it took 24 us of host time with one or two page faults inside a ~1 ms one-CPU short solve on the H200,
  // which read 2.7-4.6 % slower (bench/results/2026-11-28_h200_session33_short_solves_one_cpu.txt).
  // `values_version`: the running plan's, read on the products' thread (update_values changes it there while a
  // worker may be copying).
  void copy_report_into(impl& c) const { c.report = report; }
  void copy_state_into(impl& c, std::uint64_t values_version) const;
  // The analysis' passes issued after the upload (gpu_matrix::prefetch_analysis) and, once read back, what
  // a staged analysis decides from.
  struct prefetch_state {
    detail::row_stats_job stats;
    detail::locality_job loc;
    cudaStream_t side = nullptr;     // the passes' stream where it is not the products' (prefetch_analysis)
    detail::poll_event products_ready;  // where the side stream starts: the products' stream after the upload
    size_type free_memory = 0;
    std::optional<gathered_input> result;  // set once every read-back is in
  };
  std::unique_ptr<prefetch_state> prefetch;
  bool background = false;       // this plan is a copy being built by a background step
  bool step_running = false;     // a background step on this (running) plan has not been installed yet
  // A copy built by a staged step: convert_to records its choice here and the step converts in parts.
  bool staged = false;
  std::optional<format_id> staged_choice;
  // Staged steps plan a partition outside the step that needs it: try_partition, finding no plan for its
  // strips, records what it would plan (`planning_request`) and returns as if not planning; the step
  // (background_job) gathers the strips in a part of its own and runs the DP in slices, then runs the
  // analysis or plan_when_reused again, whose try_partition takes the result (`planning_memo`).
  struct planning_request_t {
    size_type strip_rows = 0;
    prediction_input in;
  };
  std::optional<planning_request_t> planning_request;
  std::optional<partition_plan> planning_memo;  // planning_ms: the strip pass and every slice of the DP
  // Where the whole matrix's columns rule out sell_delta16, a block's own may not (a stencil stacked on a
  // power-law block): one more strip pass gives each strip its column facts.
  static bool strips_need_columns(const prediction_input& in, const std::vector<format_id>& candidates)
  {
    return std::find(candidates.begin(), candidates.end(), format_id::sell_delta16) != candidates.end() && !sell_delta16_columns_fit(in);
  }
  // The strip summaries the DP of a partition with `strip_rows` rows per strip works on (device passes,
  // waits for them).
  std::vector<strip_summary> gather_strips(size_type strip_rows, const prediction_input& in, const std::vector<format_id>& candidates,
                                           cudaStream_t stream);
  // The DP's cost of a block: every candidate's prediction with the format's online correction.
  block_cost_fn partition_cost(const context& ctx, const prediction_input& in, const std::vector<format_id>& candidates) const;
  std::uint64_t values_version = 0;  // update_values calls so far
  // Free device memory after the upload, where a layout reserve was made (0: not known). A staged analysis
  // takes it instead of querying again (cudaMemGetInfo costs tens of us in a product of a short solve): a
  // layout that fits the reserve needs none, and one that does not and finds the memory gone falls back to
  // cuSPARSE CSR (device_out_of_memory) as always.
  size_type free_after_upload = 0;
  // cusparse_csr_us_above_launch at the upload (gpu_matrix::cusparse_csr_bound_us): made inside the product
  // that starts a staged step, that prediction took ~8-10 us of its host time (H100 machine).
  double csr_bound_us = 0;

  void convert_to(format_id choice, cudaStream_t stream);
  // convert_to's build: `choice`, or cuSPARSE CSR (with a note in the decision) when it does not fit.
  format_id build_or_fall_back(format_id choice, cudaStream_t stream);
  // `choice` ran out of device memory (`out_of_memory`) or cannot hold this matrix: builds cuSPARSE CSR
  // instead and says why in the decision. Returns cuSPARSE CSR.
  format_id fall_back_to_csr(format_id choice, const std::string& why, bool out_of_memory, cudaStream_t stream);
  // The report and online state of a plan now running `choice` unpartitioned, converted in `ms`.
  void converted(format_id choice, double ms);
  double corrected_now(int i) const
  {
    if (i < 0) return 0;
    if (!on.corr) return report.estimates[i].predicted_us;
    return on.corr->corrected(report.estimates[i].format, on.cls[i], on.raw_us[i], on.key);
  }
  void begin_epoch(format_id f);
  void update_measured();
  void harvest(bool wait);
  void observe_window(bool allow_explore);
  // Appends `us` to `to` (a timed product's measured time or host issue time), keeping the last max_samples.
  static void keep_last(std::vector<double>& to, double us)
  {
    if (to.size() >= online_state::max_samples) to.erase(to.begin());
    to.push_back(us);
  }
  void explore_or_finish();
  // After the listed comparisons (the last `rec` finished): the formats ranked again at the streaming bandwidth that
  // explains the products measured here, and the best one not measured here made the runner-up (explore_or_finish).
  // A copy: it may reset report.exploration. True when it made a format the next candidate.
  bool rerank_by_stream_scale(exploration_record rec);
  // The prediction a comparison with the runner-up is judged against: the re-ranking's for its candidate, else the
  // analysis'.
  double runner_up_us() const
  {
    return on.runner_up >= 0 && on.runner_up == on.rerank_index ? on.rerank_us : report.estimates[on.runner_up].predicted_us;
  }
  // Products between two of the first samples: policy::sample_first_spacing where the product takes at
  // most policy::host_bound_share of the median gap between products, else 1 (also until gap_window gaps
  // are known).
  int first_spacing() const
  {
    if (on.policy.sample_first_spacing <= 1) return 1;
    const double gap_us = on.pace.median_us();
    const double product_us = !on.samples.empty() ? online::median(on.samples) : report.predicted_us;
    if (!(product_us > 0) || !(gap_us > 0)) return 1;
    return product_us <= on.policy.host_bound_share * gap_us ? on.policy.sample_first_spacing : 1;
  }
  // The matrix of this plan has online observations of its own of `f` (the per-matrix corrections).
  bool measured_here(format_id f) const { return on.corr && on.corr->of_matrix(f, on.key).weight > 0; }
  // Moves the next candidate (then_runner, then free_runner) into runner_up; false when none is left.
  bool next_candidate()
  {
    int& next = on.then_runner >= 0 ? on.then_runner : on.free_runner;
    if (next < 0) return false;
    on.runner_up = next;
    next = -1;
    return true;
  }
  // The exploration of `rec.to`, now built (`candidate`): parks the running format and runs the candidate.
  void begin_exploration(exploration_record rec, std::unique_ptr<detail::format_impl<Value>> candidate);
  // An exploration's conversion in parts: the next part on `stream`, if the pacing allows one now.
  void advance_exploration(cudaStream_t stream);
  void abandon_exploration(exploration_record rec, const std::string& why);

  // Bytes of the CSR copy (values, column indices, row pointers): what a conversion reads.
  double csr_bytes() const { return csr.nnz * (sizeof(Value) + sizeof(index_type)) + (csr.rows + 1.0) * sizeof(index_type); }

  // cuSPARSE CSR: the layout host_bound_start set aside, else a new one.
  std::unique_ptr<detail::format_impl<Value>> take_csr(cudaStream_t stream)
  {
    if (parked_csr) return std::move(parked_csr);
    return build(format_id::cusparse_csr, stream);
  }
  std::unique_ptr<detail::format_impl<Value>> build(format_id f, cudaStream_t stream)
  {
    auto built = build_format<Value>(f, detail::build_args<Value>{csr, report.stats, handle, stream});
    if (f == format_id::cusparse_sell) cusparse_sell_built.store(true, std::memory_order_relaxed);
    return built;
  }

  // Row-partitioned plans (planner.hpp): plans (or takes opts.forced_plan) and builds the partition when it
  // pays; false leaves the unpartitioned selection to the caller.
  // `late`: planning again after plan_when_reused (a split that would be deferred is not taken then: the
  // running format stays).
  bool try_partition(const context& ctx, const plan_options& opts, const prediction_input& in, cudaStream_t stream,
                     bool late = false);
  std::optional<prediction_input> plan_input;  // kept while report.partition_pending (plan_when_reused)
  // Builds `plan`; a block whose format is infeasible there (placeholder feasibility with the block's exact
  // statistics) or fails to build becomes cuSPARSE CSR. False when the blocks do not fit in memory
  // (the layout is then empty: the caller converts to a single format).
  // `verify`: a plan the runtime chose (not a forced one), which online refinement checks against the best
  // single format once it is measured (explore_or_finish).
  bool build_partition(const partition_plan& plan, const prediction_input& in, const bandwidth_model_params& params,
                       cudaStream_t stream, bool verify);

  // A partition predicted best but not yet paid for (amortization), built by convert_deferred.
  struct deferred_partition {
    partition_plan plan;
    prediction_input in;
    bandwidth_model_params params;
  };
  std::optional<deferred_partition> deferred_plan;
  // A staged copy builds its partition in parts (background_job, stage::building_partition): build_partition
  // records it here and the step builds it with detail::make_partition_builder, then finish_partition.
  struct pending_partition_t {
    std::vector<detail::built_block> want;
    prediction_input in;
    bandwidth_model_params params;
    bool verify = false;
  };
  std::optional<pending_partition_t> pending_partition;
  // The feasibility check a block's format must pass (the whole matrix's column facts do not bind a block).
  static void check_block(format_id f, const prediction_input& in, const bandwidth_model_params& params, const row_stats& stats)
  {
    prediction_input block_in = in;
    block_in.stats = stats;
    // sell_delta16's builder checks the block's own columns and refuses the layout (not_supported: this
    // block falls back to cuSPARSE CSR).
    block_in.columns_sorted = true;
    block_in.max_column_step = 0;
    const auto est = predict_bandwidth_model(block_in, params, {f});
    if (!est.empty() && !est[0].feasible) AIJP_THROW(not_supported, est[0].reason);
  }
  // A block's format as make_partitioned and the partition builder build it: check_block, then build_format.
  // `in` and `params` must outlive the factory.
  static detail::format_factory<Value> block_factory(const prediction_input& in, const bandwidth_model_params& params)
  {
    return [&in, &params](format_id f, const detail::build_args<Value>& args) {
      check_block(f, in, params, args.stats);
      return build_format<Value>(f, args);
    };
  }
  // The report and online state of a plan now running the partition `built`, converted in `ms`.
  void finish_partition(const std::vector<detail::built_block>& built, double ms, bool verify);
};

template <typename Value>
gpu_matrix<Value>::gpu_matrix(const context& ctx, const csr_view<Value>& host, const plan_options& opts,
                              cudaStream_t stream)
    : gpu_matrix(ctx, host, memory_space::host, opts, stream)
{
}

template <typename Value>
gpu_matrix<Value>::gpu_matrix(const context& ctx, const csr_view<Value>& host, memory_space space,
                              const plan_options& opts, cudaStream_t stream)
    : impl_(std::make_unique<impl>(std::make_shared<detail::device_csr<Value>>()))
{
  constexpr auto index_max = std::numeric_limits<index_type>::max();
  AIJP_ENSURE(host.rows >= 0 && host.cols >= 0 && host.nnz >= 0, bad_input, "negative matrix dimensions");
  if (host.rows > index_max || host.cols > index_max || host.nnz > index_max) {
    AIJP_THROW(not_supported, "matrix of " + std::to_string(host.rows) + " x " + std::to_string(host.cols) + " with " +
                                  std::to_string(host.nnz) + " nonzeros exceeds 32-bit local indices");
  }
  AIJP_ENSURE(host.row_ptr != nullptr, bad_input, "row_ptr is null");
  index_type ends[2] = {0, 0};
  if (space == memory_space::host) {
    ends[0] = host.row_ptr[0];
    ends[1] = host.row_ptr[host.rows];
  } else {
    AIJP_CUDA_CHECK(cudaMemcpyAsync(&ends[0], host.row_ptr, sizeof(index_type), cudaMemcpyDeviceToHost, stream));
    AIJP_CUDA_CHECK(cudaMemcpyAsync(&ends[1], host.row_ptr + host.rows, sizeof(index_type), cudaMemcpyDeviceToHost, stream));
    detail::wait_stream(stream);
  }
  AIJP_ENSURE(ends[0] == 0 && ends[1] == host.nnz, bad_input,
              "row_ptr must start at 0 and end at nnz (" + std::to_string(host.nnz) + ")");
  const cudaMemcpyKind kind = space == memory_space::host ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToDevice;
  AIJP_ENSURE(host.nnz == 0 || (host.col_idx && host.values), bad_input, "column or value array is null");

  auto& m = *impl_;
  plan_report& rep = m.report;
  rep.device = ctx.device();
  rep.params_source = ctx.params_source();

  auto t0 = clock_type::now();
  auto& a = m.csr;
  a.rows = host.rows;
  a.cols = host.cols;
  a.nnz = host.nnz;
  // One allocation for the three arrays and the layout reserve (each cudaMalloc costs ~0.1 ms whatever its
  // size, layout_reserve.hpp).
  const auto aligned = [](std::size_t bytes) { return detail::layout_reserve::round_up(bytes); };
  const std::size_t row_ptr_bytes = aligned((host.rows + 1) * sizeof(index_type));
  const std::size_t col_bytes = aligned(host.nnz * sizeof(index_type));
  const std::size_t val_bytes = aligned(host.nnz * sizeof(Value));
  const std::size_t csr_bytes = row_ptr_bytes + col_bytes + val_bytes;
  size_type free_before = 0;  // 0: not queried
  std::size_t reserve_bytes = layout_reserve_bytes(opts, csr_bytes, &free_before, &rep.upload_recent_reading);
  const auto t_queried = clock_type::now();
  try {
    a.storage.allocate(csr_bytes + reserve_bytes, opts.upload_pool);
  } catch (const device_out_of_memory&) {
    if (reserve_bytes == 0) throw;
    reserve_bytes = 0;  // another process took the memory since it was queried: no reserve
    a.storage.allocate(csr_bytes, opts.upload_pool);
  }
  rep.upload_reused = a.storage.reused();
  const auto t_allocated = clock_type::now();
  unsigned char* base = a.storage.data();
  a.row_ptr = detail::device_buffer<index_type>::borrow(reinterpret_cast<index_type*>(base), host.rows + 1);
  a.col_idx = detail::device_buffer<index_type>::borrow(reinterpret_cast<index_type*>(base + row_ptr_bytes), host.nnz);
  a.values = detail::device_buffer<Value>::borrow(reinterpret_cast<Value*>(base + row_ptr_bytes + col_bytes), host.nnz);
  if (reserve_bytes > 0) {
    a.reserve = std::make_shared<detail::layout_reserve>(base + csr_bytes, reserve_bytes);
    m.free_after_upload = free_before - static_cast<size_type>(csr_bytes + reserve_bytes);
  }
  rep.reserve_bytes = static_cast<double>(reserve_bytes);
  m.csr_bound_us = cusparse_csr_us_above_launch(ctx.device(), ctx.model_params(), host.rows, host.cols, host.nnz, sizeof(Value));
  AIJP_CUDA_CHECK(cudaMemcpyAsync(a.row_ptr.data(), host.row_ptr, (host.rows + 1) * sizeof(index_type), kind, stream));
  if (host.nnz > 0) {
    AIJP_CUDA_CHECK(cudaMemcpyAsync(a.col_idx.data(), host.col_idx, host.nnz * sizeof(index_type), kind, stream));
    AIJP_CUDA_CHECK(cudaMemcpyAsync(a.values.data(), host.values, host.nnz * sizeof(Value), kind, stream));
  }
  // The copies are waited for with the column check below (one wait for the device, not two: a short solve's
  // upload pays each); without rows there is no check to wait for.
  if (host.rows == 0) detail::wait_stream(stream);
  rep.stats.rows = host.rows;
  rep.stats.cols = host.cols;
  rep.stats.nnz = host.nnz;

  column_summary& cs = m.columns;
  if (host.rows > 0) {
    detail::pool_buffer<column_summary, detail::pool_kind::device> d_cs(1);  // no cudaMalloc, no cudaFree
    AIJP_CUDA_CHECK(cudaMemsetAsync(d_cs.data(), 0, sizeof(column_summary), stream));
    const int lanes = lanes_per_row(host.rows, host.nnz);
    inspect_columns<<<row_groups_blocks(host.rows, lanes), 256, 0, stream>>>(host.rows, host.cols, host.nnz, lanes, a.row_ptr.data(),
                                                                       a.col_idx.data(), d_cs.data());
    AIJP_CHECK_LAUNCH();
    AIJP_CUDA_CHECK(cudaMemcpyAsync(&cs, d_cs.data(), sizeof(cs), cudaMemcpyDeviceToHost, stream));
    detail::wait_stream(stream);
    AIJP_ENSURE(cs.bad_rows == 0, bad_input,
                std::to_string(cs.bad_rows) + " rows have a decreasing row_ptr or a column index outside [0, " +
                    std::to_string(host.cols) + ")");
  }
  const auto t_copied = clock_type::now();
  rep.upload_ms = ms_between(t0, t_copied);
  if (space == memory_space::host) {
    rep.upload_split_us[0] = 1e3 * ms_between(t0, t_queried);
    rep.upload_split_us[1] = 1e3 * ms_between(t_queried, t_allocated);
    rep.upload_split_us[2] = 1e3 * ms_between(t_allocated, t_copied);
  }
  if (opts.analyze) {
    m.analyze(ctx, opts, stream);
  } else {
    m.format = m.build(format_id::cusparse_csr, stream);
    rep.chosen = format_id::cusparse_csr;
    rep.plan = format_name(rep.chosen);
    rep.decision = "not analysed yet: cuSPARSE CSR until the matrix is reused";
    make_spare_job();  // its analysis will be a step: the job's making is part of the upload
    if (space == memory_space::host) rep.upload_split_us[3] = 1e3 * ms_since(t_copied);
  }
}

template <typename Value>
void gpu_matrix<Value>::analyze(const context& ctx, const plan_options& opts, cudaStream_t stream)
{
  finish_background(stream);
  impl_->analyze(ctx, opts, stream);
}

template <typename Value>
prediction_input gpu_matrix<Value>::impl::analysis_input(const row_stats& stats, const locality_sample& loc,
                                                         size_type free_memory) const
{
  prediction_input in;
  in.x_sectors_per_nnz = loc.x_sectors_per_nnz;
  in.sorted = loc.sorted;
  in.x_mixture = loc.x_mixture;
  in.stats = stats;
  in.device = report.device;
  in.value_bytes = sizeof(Value);
  in.columns_sorted = columns.unsorted_rows == 0;
  in.max_column_step = columns.max_step;
  // What is left of the layout reserve is free for the layout too (cudaMemGetInfo counts it as used).
  in.free_memory_bytes = free_memory + (csr.reserve ? static_cast<size_type>(csr.reserve->left()) : 0);
  return in;
}

template <typename Value>
void gpu_matrix<Value>::impl::analyze(const context& ctx, const plan_options& opts, cudaStream_t stream,
                                     const gathered_input* gathered)
{
  analyze_finish(ctx, opts, stream, analyze_choose(ctx, opts, stream, gathered));
}

template <typename Value>
typename gpu_matrix<Value>::impl::analysis_choice gpu_matrix<Value>::impl::analyze_choose(const context& ctx, const plan_options& opts,
                                                                                         cudaStream_t stream, const gathered_input* gathered)
{
  auto& m = *this;
  plan_report& rep = m.report;
  const auto& a = m.csr;
  rep.model_source = ctx.model_source();
  rep.params_source = ctx.params_source();
  rep.deferred.reset();
  auto t0 = clock_type::now();
  locality_sample loc;
  size_type free_memory = 0;
  if (gathered) {
    rep.stats = gathered->stats;
    loc = gathered->loc;
    free_memory = gathered->free_memory_bytes;
  } else {
    rep.stats = compute_row_stats_device(a.rows, a.cols, a.row_ptr.data(), stream);
    loc = sample_locality(a.rows, a.cols, a.row_ptr.data(), a.col_idx.data(), sizeof(Value), stream);
    device_memory_info(&free_memory, nullptr);
  }
  rep.x_sectors_per_nnz = loc.x_sectors_per_nnz;
  rep.sorted = loc.sorted;
  rep.x_mixture = loc.x_mixture;
  analysis_choice result;
  // A staged step's prediction parts made `input` with the estimates: the same input, not built again.
  result.in = gathered && gathered->input ? *gathered->input : m.analysis_input(rep.stats, loc, free_memory);
  const prediction_input& in = result.in;
  const auto t_predict = clock_type::now();
  if (gathered && gathered->estimates) {
    rep.estimates = *gathered->estimates;  // a staged step's earlier part made them
  } else {
    rep.estimates = estimate_formats(ctx, in, opts.candidates);
  }
  const auto t_online = clock_type::now();
  rep.predict_us = 1e3 * ms_between(t_predict, t_online);
  m.on.parked.reset();
  m.on.explore_builder.reset();
  m.on.corr = opts.online ? ctx.online_corrections() : nullptr;
  m.on.policy = opts.online_policy;
  m.on.reranked = false;
  m.on.rerank_index = -1;
  if (m.on.corr && ctx.fitted_model() == nullptr) {
    m.on.input = in;
    m.on.params = ctx.model_params();
  } else {
    m.on.input.reset();
  }
  rep.online_factor.clear();
  rep.exploration.reset();
  rep.timer_us = 0;
  rep.factors_us = 0;
  const bool source_taken = gathered && gathered->factors && !gathered->factors->source.empty();
  rep.online_source = !m.on.corr ? std::string() : source_taken ? gathered->factors->source : ctx.online_source();
  if (m.on.corr) {
    if (!m.on.timer) {
      const auto t_timer = clock_type::now();
      m.on.timer = std::make_unique<detail::spmv_timer>();
      rep.timer_us = 1e3 * ms_since(t_timer);
    }
    const auto t_factors = clock_type::now();
    // A staged step's earlier part took them, from the same corrections (context::online_corrections).
    auto g = gathered && gathered->factors && gathered->factors->factor.size() == rep.estimates.size()
                 ? *gathered->factors
                 : m.online_factors_of(*m.on.corr, rep.estimates, rep.stats, rep.x_sectors_per_nnz);
    m.on.raw_us = std::move(g.raw_us);
    m.on.cls = std::move(g.cls);
    m.on.key = g.key;
    rep.online_factor = std::move(g.factor);
    for (std::size_t i = 0; i < rep.estimates.size(); ++i) rep.estimates[i].predicted_us *= rep.online_factor[i];
    rep.factors_us = 1e3 * ms_since(t_factors);
  }
  const auto t_choice = clock_type::now();
  rep.online_us = 1e3 * ms_between(t_online, t_choice);
  int best = select_best(rep.estimates);
  // Exploit before exploring: a format measured on this very matrix is kept over one never measured on it
  // unless the latter is predicted faster by more than the exploration margin; bounded exploration (at
  // run time) is the one way to try it otherwise. Without this, every reassembly would switch to whichever
  // unmeasured format the coarser corrections happen to favour.
  std::string kept_measured;
  if (m.on.corr && best >= 0 && !opts.forced) {
    const auto own = [&](int i) { return m.measured_here(rep.estimates[i].format); };
    int measured = -1;
    for (int i = 0; i < static_cast<int>(rep.estimates.size()); ++i) {
      if (rep.estimates[i].feasible && own(i) && (measured < 0 || rep.estimates[i].predicted_us < rep.estimates[measured].predicted_us)) {
        measured = i;
      }
    }
    if (measured >= 0 && measured != best && !own(best) &&
        rep.estimates[best].predicted_us * (1 + opts.online_policy.explore_margin) > rep.estimates[measured].predicted_us) {
      char line[200];
      std::snprintf(line, sizeof(line), "; online: kept %s (measured on this matrix) over %s (not measured, predicted %.2f us)",
                    format_name(rep.estimates[measured].format), format_name(rep.estimates[best].format),
                    rep.estimates[best].predicted_us);
      kept_measured = line;
      best = measured;
    }
  }
  // The baseline margin: a format never measured on this matrix must beat cuSPARSE CSR's prediction by it.
  const int csr_i = estimate_index(rep.estimates, format_id::cusparse_csr);
  std::string below_margin;
  if (best >= 0 && csr_i >= 0 && best != csr_i && !opts.forced && opts.baseline_margin > 0 && rep.estimates[csr_i].feasible &&
      !m.measured_here(rep.estimates[best].format) &&
      rep.estimates[best].predicted_us > (1 - opts.baseline_margin) * rep.estimates[csr_i].predicted_us) {
    char line[240];
    std::snprintf(line, sizeof(line), " (%s predicted %.2f us, %.1f %% faster: below the %.0f %% margin)",
                  format_name(rep.estimates[best].format), rep.estimates[best].predicted_us,
                  100.0 * (1.0 - rep.estimates[best].predicted_us / rep.estimates[csr_i].predicted_us), 100.0 * opts.baseline_margin);
    below_margin = line;
    best = csr_i;
  }
  format_id choice = format_id::cusparse_csr;
  if (opts.forced) {
    choice = *opts.forced;
    rep.decision = std::string("forced by the caller: ") + format_name(choice);
    for (const auto& e : rep.estimates) {
      if (e.format == choice && !e.feasible) {
        rep.decision += " is infeasible here (" + e.reason + "): cuSPARSE CSR";
        choice = format_id::cusparse_csr;
      }
    }
  } else if (best >= 0) {
    choice = rep.estimates[best].format;
    const double csr_us = csr_i >= 0 ? rep.estimates[csr_i].predicted_us : 0.0;
    // snprintf rather than a string stream: this runs inside a staged part (%g: a stream's default format).
    char line[160];
    const char* why = !below_margin.empty() ? "the baseline" : kept_measured.empty() ? "smallest predicted time" : "predicted time";
    if (csr_us > 0 && choice != format_id::cusparse_csr) {
      std::snprintf(line, sizeof(line), "%s: %s (%g us, %gx cuSPARSE CSR)", format_name(choice), why, rep.estimates[best].predicted_us,
                    csr_us / rep.estimates[best].predicted_us);
    } else {
      std::snprintf(line, sizeof(line), "%s: %s (%g us)", format_name(choice), why, rep.estimates[best].predicted_us);
    }
    rep.decision = line;
    rep.decision += below_margin;
    rep.decision += kept_measured;
  } else {
    rep.decision = "no candidate format is feasible: cuSPARSE CSR";
  }
  rep.analysis_ms = ms_since(t0);
  rep.choice_us = 1e3 * ms_since(t_choice);
  rep.analyzed = true;
  result.choice = choice;
  result.best = best;
  result.csr_i = csr_i;
  return result;
}

template <typename Value>
void gpu_matrix<Value>::impl::analyze_finish(const context& ctx, const plan_options& opts, cudaStream_t stream, const analysis_choice& c)
{
  auto& m = *this;
  plan_report& rep = m.report;
  const prediction_input& in = c.in;
  format_id choice = c.choice;
  const int best = c.best;
  const int csr_i = c.csr_i;
  bool interim = false;  // a format that pays now runs while the best-predicted one waits for its conversion to pay
  m.on.runner_up = -1;  // a partition sets its own (build_partition)
  m.on.may_explore = false;
  if (m.try_partition(ctx, opts, in, stream)) return;
  if (m.planning_request) return;  // a staged step plans first, then analyses again

  // Amortization: convert only if the predicted saving pays for the conversion within the expected use.
  if (choice != format_id::cusparse_csr && !opts.forced && opts.expected_mults > 0) {
    const int choice_i = estimate_index(rep.estimates, choice);
    const double t_csr = csr_i >= 0 ? rep.estimates[csr_i].predicted_us : 0.0;
    const double t_choice = choice_i >= 0 ? rep.estimates[choice_i].predicted_us : 0.0;
    const double bytes = choice_i >= 0 ? rep.estimates[choice_i].device_bytes : 0.0;
    rep.conversion_estimate_us = conversion_estimate_us(choice, bytes, m.csr_bytes(), ctx.model_params().stream_read_gbs);
    rep.saving_us = t_csr > 0 ? t_csr - t_choice : 0;
    const bool pays = rep.saving_us * opts.expected_mults >= rep.conversion_estimate_us;
    const bool at_once = opts.convert_at_once_us > 0 && rep.saving_us > 0 && rep.conversion_estimate_us <= opts.convert_at_once_us;
    if (!pays && at_once) {
      char line[160];
      std::snprintf(line, sizeof(line), "; converted at once: costs ~%.0f us, at most %.0f us (plan_options::convert_at_once_us)",
                    rep.conversion_estimate_us, opts.convert_at_once_us);
      rep.decision += line;
    } else if (!pays) {
      rep.deferred = choice;
      char line[200];
      std::snprintf(line, sizeof(line), "; conversion deferred: saves %.2f us per SpMV, costs ~%.0f us, pays after %.0f SpMVs",
                    rep.saving_us, rep.conversion_estimate_us, std::ceil(rep.conversion_estimate_us / std::max(rep.saving_us, 1e-9)));
      rep.decision += line;
      choice = format_id::cusparse_csr;
      // Another format may pay within the expected use where the best-predicted one does not (one on the CSR copy
      // converts for the price of its install): of the feasible formats predicted faster than cuSPARSE CSR by the
      // baseline margin (or measured on this matrix), the one that saves the most over the expected products net
      // of its conversion runs meanwhile, and the best-predicted one waits for its saving over that one to pay.
      // (zenios on two CPUs of an H200: cuSPARSE SELL predicted 1.96x faster than cuSPARSE CSR but its first use
      // costs ~12 ms, so the matrix ran cuSPARSE CSR through 160 solves where csr_vector, predicted 1.9x, converts
      // at once: session 35.)
      int alt = -1;
      double alt_net = 0, alt_cost = 0;
      for (int i = 0; i < static_cast<int>(rep.estimates.size()); ++i) {
        const auto& e = rep.estimates[i];
        if (!e.feasible || i == choice_i || e.format == format_id::cusparse_csr || t_csr <= 0) continue;
        if (!(e.predicted_us < (1 - opts.baseline_margin) * t_csr) && !m.measured_here(e.format)) continue;
        const double cost = conversion_estimate_us(e.format, e.device_bytes, m.csr_bytes(), ctx.model_params().stream_read_gbs);
        const double net = (t_csr - e.predicted_us) * opts.expected_mults - cost;
        if (net > alt_net) {
          alt = i;
          alt_net = net;
          alt_cost = cost;
        }
      }
      if (alt >= 0) {
        const auto& e = rep.estimates[alt];
        choice = e.format;
        interim = true;
        rep.saving_us = e.predicted_us - t_choice;  // what the deferred format saves over the one that runs
        std::snprintf(line, sizeof(line), "; meanwhile %s (%g us, saves %.2f us per SpMV, costs ~%.0f us: pays within %.0f SpMVs)",
                      format_name(choice), e.predicted_us, t_csr - e.predicted_us, alt_cost, opts.expected_mults);
        rep.decision += line;
        if (!(rep.saving_us > 0)) rep.deferred.reset();  // nothing left to wait for
      }
    }
  }
  m.on.runner_up = -1;
  m.on.then_runner = -1;
  m.on.free_runner = -1;
  m.on.baseline_always = false;
  m.on.expected_mults = opts.expected_mults;
  m.on.stream_gbs = ctx.model_params().stream_read_gbs;
  if (m.on.corr && !opts.forced && interim && csr_i >= 0 && rep.estimates[csr_i].feasible) {
    // The interim format is checked against the baseline alone (its bounded exploration tries cuSPARSE CSR where
    // it measures slower than predicted); the best-predicted format comes with its deferred conversion.
    m.on.runner_up = csr_i;
  } else if (m.on.corr && !opts.forced && !rep.deferred && best >= 0) {
    // cuSPARSE CSR, the baseline, is the second candidate: a matrix whose every prediction errs the same
    // way (random x gathers the models undercount) otherwise trades one mispredicted format of ours for
    // another and never meets the baseline it should at least match (explore_or_finish). When cuSPARSE CSR
    // runs, the second candidate is its other algorithm, ALG2 (no conversion): on the 4M-row circuit an
    // H200 ran ALG1 at 0.88x of ALG2, which no comparison ever measured
    // (bench/results/2026-11-23_h200_session4_alg2_partition_online.txt).
    const format_id second = choice == format_id::cusparse_csr ? format_id::cusparse_csr_alg2 : format_id::cusparse_csr;
    for (int i = 0; i < static_cast<int>(rep.estimates.size()); ++i) {
      const auto& e = rep.estimates[i];
      if (!e.feasible || e.format == choice) continue;
      if (m.on.runner_up < 0 || e.predicted_us < rep.estimates[m.on.runner_up].predicted_us) m.on.runner_up = i;
      if (e.format == second) m.on.then_runner = i;
    }
    if (m.on.then_runner == m.on.runner_up) m.on.then_runner = -1;
    // The third candidate: the best-predicted other format that runs on the CSR copy, tried at no conversion
    // cost where the products are short (online::policy::free_band).
    if (opts.online_policy.free_band > 0) {
      for (int i = 0; i < static_cast<int>(rep.estimates.size()); ++i) {
        const auto& e = rep.estimates[i];
        if (!e.feasible || e.format == choice || !free_candidate(e.format) || i == m.on.runner_up || i == m.on.then_runner) continue;
        if (m.measured_here(e.format)) continue;  // measured on this matrix: the margin rules
        if (m.on.free_runner < 0 || e.predicted_us < rep.estimates[m.on.free_runner].predicted_us) m.on.free_runner = i;
      }
    }
  }
  m.on.may_explore = m.on.runner_up >= 0 && opts.online_policy.explore;
  m.convert_to(choice, stream);
}

template <typename Value>
void gpu_matrix<Value>::impl::convert_to(format_id choice, cudaStream_t stream)
{
  if (staged) {
    staged_choice = choice;  // the staged step builds it in parts (gpu_matrix::background_job::advance)
    return;
  }
  const auto t0 = clock_type::now();
  choice = build_or_fall_back(choice, stream);
  detail::wait_stream(stream);
  converted(choice, ms_since(t0));
}

template <typename Value>
format_id gpu_matrix<Value>::impl::build_or_fall_back(format_id choice, cudaStream_t stream)
{
  format.reset();
  try {
    format = choice == format_id::cusparse_csr ? take_csr(stream) : build(choice, stream);
  } catch (const device_out_of_memory& e) {
    if (choice == format_id::cusparse_csr) throw;
    return fall_back_to_csr(choice, e.what(), true, stream);
  } catch (const not_supported& e) {
    if (choice == format_id::cusparse_csr) throw;
    return fall_back_to_csr(choice, e.what(), false, stream);
  }
  return choice;
}

template <typename Value>
format_id gpu_matrix<Value>::impl::fall_back_to_csr(format_id choice, const std::string& why, bool out_of_memory,
                                                    cudaStream_t stream)
{
  report.decision += out_of_memory ? "; out of device memory while converting (" + why + "), using cuSPARSE CSR"
                                   : std::string("; ") + format_name(choice) + " cannot hold this matrix (" + why +
                                         "), using cuSPARSE CSR";
  format = take_csr(stream);
  return format_id::cusparse_csr;
}

template <typename Value>
void gpu_matrix<Value>::impl::converted(format_id choice, double ms)
{
  plan_report& rep = report;
  rep.conversion_ms = ms;
  rep.chosen = choice;
  rep.partitioned = false;
  rep.plan = format_name(choice);
  begin_epoch(choice);
}

// Amortization of the planning itself (plan_options::planning_share): the most a split could save over
// the expected products, taken as half the best single format's predicted time per product, and never more
// than that time beyond two launches: a split runs at least two blocks, and every block's prediction is at
// least one launch (at_least_launches). On a launch-bound matrix (bcsstk13: ~8 us per product against a
// 3.7 us launch) half the product time bought a 63-strip DP of 1-2 ms of host time, spread over 100-170
// repeated short solves at +2-3 % each, that never found a split (H100, session 24).
double split_saving_bound_us(double single_us, double launch_us, const plan_options& opts)
{
  return std::max(0.0, std::min(0.5 * single_us, single_us - 2.0 * launch_us)) * opts.expected_mults;
}

// Strips the planning of a matrix of `rows` rows may use now (0: not yet), and the budget it was given.
struct planning_strips {
  int strips = 0;
  double budget_us = 0;
};
planning_strips strips_for_planning(double single_us, double launch_us, size_type rows, const plan_options& opts, double upload_ms)
{
  const int max_strips = opts.planner.max_strips;
  const bool by_use = opts.expected_mults > 0 && opts.planning_share > 0;
  const bool by_upload = opts.expected_mults <= 0 && opts.planning_upload_share > 0;
  if (!by_use && !by_upload) return {max_strips, 0};
  const double budget = by_use ? opts.planning_share * split_saving_bound_us(single_us, launch_us, opts)
                               : std::max(1.0, opts.planning_upload_share * 1e3 * upload_ms);
  const int n = strips_within(budget, planning_us_per_estimate(), static_cast<int>(opts.candidates.size()), max_strips);
  // A matrix of few rows has fewer strips (32 rows at least): its full resolution is enough.
  const size_type groups = (rows + stats_warp_size - 1) / stats_warp_size;
  const int needed = static_cast<int>(std::min<size_type>(std::min(opts.planner.min_strips, max_strips), groups));
  return {n >= std::max(needed, 2) ? n : 0, budget};
}

template <typename Value>
std::vector<strip_summary> gpu_matrix<Value>::impl::gather_strips(size_type strip_rows, const prediction_input& in,
                                                                  const std::vector<format_id>& candidates, cudaStream_t stream)
{
  auto strips = compute_strip_summaries_device(csr.rows, csr.row_ptr.data(), strip_rows, stream);
  if (strips.size() < 2) return strips;
  add_strip_locality(strips, csr.row_ptr.data(), csr.col_idx.data(), sizeof(Value), stream);
  if (strips_need_columns(in, candidates)) add_strip_columns(strips, csr.row_ptr.data(), csr.col_idx.data(), stream);
  return strips;
}

template <typename Value>
block_cost_fn gpu_matrix<Value>::impl::partition_cost(const context& ctx, const prediction_input& in,
                                                      const std::vector<format_id>& candidates) const
{
  const auto corr = on.corr;
  const double l2 = static_cast<double>(report.device.l2_bytes);
  return [&ctx, in, candidates, corr, l2](const block_facts& block, std::vector<double>& us) {
    const prediction_input block_in = block_prediction_input(in, block);
    const auto est = estimate_formats(ctx, block_in, candidates);
    // A block's size class counts what the rest of the matrix moves through the L2 beside it, as its prediction
    // does: a block that fits in the L2 alone runs beyond it in a larger matrix.
    const double shared = block_in.l2_shared_bytes;
    for (std::size_t k = 0; k < est.size(); ++k) {
      us[k] = est[k].feasible ? est[k].predicted_us : std::numeric_limits<double>::infinity();
      // The online corrections of the format (not of this matrix: a block is another pattern), so that
      // split and single-format predictions stay on one scale.
      if (corr && est[k].feasible) us[k] *= corr->factor(est[k].format, online::classify(est[k].bytes + shared, l2));
    }
  };
}

template <typename Value>
bool gpu_matrix<Value>::impl::try_partition(const context& ctx, const plan_options& opts, const prediction_input& in,
                                            cudaStream_t stream, bool late)
{
  plan_report& rep = report;
  // What the resets below clear, for a staged step's planning request (which leaves everything as it was).
  partition_plan saved_proposed = staged ? rep.proposed : partition_plan{};
  const bool saved_pending = rep.partition_pending;
  auto saved_plan_input = staged ? plan_input : std::nullopt;
  auto saved_deferred = staged ? deferred_plan : std::nullopt;
  rep.proposed = partition_plan{};
  rep.partition_pending = false;
  plan_input.reset();
  deferred_plan.reset();
  const std::string single_decision = rep.decision;
  if (opts.forced_plan) {
    const partition_plan& plan = *opts.forced_plan;
    for (std::size_t k = 0; k < plan.blocks.size(); ++k) {
      const auto& b = plan.blocks[k];
      AIJP_ENSURE(b.row_begin == (k ? plan.blocks[k - 1].row_end : 0) && b.row_end > b.row_begin &&
                      (k + 1 < plan.blocks.size() || b.row_end == csr.rows),
                  bad_input, "forced plan " + plan.to_string() + " does not cover rows [0, " + std::to_string(csr.rows) + ") in order");
    }
    AIJP_ENSURE(!plan.blocks.empty() || csr.rows == 0, bad_input, "forced plan without blocks");
    if (plan.blocks.empty()) return false;
    if (plan.blocks.size() == 1) {
      format_id f = plan.blocks[0].format;
      rep.decision = std::string("forced plan of one block: ") + format_name(f);
      for (const auto& e : rep.estimates) {
        if (e.format == f && !e.feasible) {
          rep.decision += " is infeasible here (" + e.reason + "): cuSPARSE CSR";
          f = format_id::cusparse_csr;
        }
      }
      convert_to(f, stream);
      return true;
    }
    rep.decision = "forced partition " + plan.to_string();
    if (!build_partition(plan, in, ctx.model_params(), stream, false)) {
      rep.decision += ": cuSPARSE CSR";
      convert_to(format_id::cusparse_csr, stream);
    }
    return true;
  }

  if (!opts.partition || opts.forced || csr.rows == 0) return false;
  // Every block's prediction is at least one launch (at_least_launches, and the placeholder adds its
  // launches), so no split can beat a single format predicted below two launches plus the margin.
  const int best = select_best(rep.estimates);
  if (best < 0 || (1 - opts.partition_margin) * rep.estimates[best].predicted_us <= 2 * ctx.model_params().launch_us) {
    return false;
  }
  // Amortization of the planning itself: with a known use, the DP gets the strips that a share of the
  // most a split could save over that use buys, and waits when that is too few.
  const planning_strips budget = strips_for_planning(rep.estimates[best].predicted_us, ctx.model_params().launch_us, csr.rows, opts, rep.upload_ms);
  if (budget.strips == 0) {
    char line[240];
    if (opts.expected_mults > 0) {
      std::snprintf(line, sizeof(line),
                    "; no partition planned yet: a split saves at most ~%.0f us over %.0f products, whose planning share (%.0f us) buys fewer than %d strips",
                    split_saving_bound_us(rep.estimates[best].predicted_us, ctx.model_params().launch_us, opts), opts.expected_mults, budget.budget_us,
                    std::min(opts.planner.min_strips, opts.planner.max_strips));
    } else {
      std::snprintf(line, sizeof(line), "; no partition planned yet: its planning budget at the upload (%.0f us) buys fewer than %d strips", budget.budget_us,
                    std::min(opts.planner.min_strips, opts.planner.max_strips));
    }
    rep.decision += line;
    rep.partition_pending = true;
    plan_input = in;
    return false;
  }
  const auto t0 = clock_type::now();
  const size_type strip_rows = strip_rows_for(csr.rows, budget.strips);
  partition_plan plan;
  if (planning_memo) {
    // Planned by the staged step for this very step (planning_ms: its parts). Not compared with strip_rows:
    // the DP's measured rate (planning_us_per_estimate) may have moved the budget's strips since.
    plan = std::move(*planning_memo);
    planning_memo.reset();
  } else if (staged) {
    // Planned in parts by the staged step, which then runs this step again: leave everything as it was.
    rep.proposed = std::move(saved_proposed);
    rep.partition_pending = saved_pending;
    plan_input = std::move(saved_plan_input);
    deferred_plan = std::move(saved_deferred);
    planning_request = planning_request_t{strip_rows, in};
    return false;
  } else {
    auto strips = gather_strips(strip_rows, in, opts.candidates, stream);
    if (strips.size() < 2) return false;
    plan = plan_partition(strips, csr.cols, opts.candidates, partition_cost(ctx, in, opts.candidates), opts.planner, &rep.stats,
                          rep.x_sectors_per_nnz);
    plan.planning_ms = ms_since(t0);  // the strip pass on the device included
  }
  if (plan.strips < 2) return false;
  rep.proposed = plan;
  if (!plan.split() || !(plan.predicted_us < (1 - opts.partition_margin) * plan.single_us)) return false;
  char line[320];
  std::snprintf(line, sizeof(line), "partition %s: predicted %.2f us vs %.2f us for %s alone (planned in %.3f ms)",
                plan.to_string().c_str(), plan.predicted_us, plan.single_us, format_name(plan.single_format), plan.planning_ms);
  rep.decision = line;
  if (opts.expected_mults > 0) {
    // As the single-format amortization (analyze()): the blocks' layouts cost about three passes over the
    // CSR bytes (their entries are borrowed from the CSR copy, not copied), plus the fixed cost per block.
    const int csr_i = estimate_index(rep.estimates, format_id::cusparse_csr);
    const double t_csr = csr_i >= 0 ? rep.estimates[csr_i].predicted_us : 0.0;
    rep.conversion_estimate_us = 150.0 * plan.blocks.size() + 3.0 * csr_bytes() / (ctx.model_params().stream_read_gbs * 1e3);
    rep.saving_us = t_csr - plan.predicted_us;
    if (late && rep.saving_us * opts.expected_mults < rep.conversion_estimate_us) return false;  // the caller says so
    if (rep.saving_us * opts.expected_mults < rep.conversion_estimate_us) {
      // Stay on cuSPARSE CSR until the partition pays (convert_deferred); report().deferred names the
      // format of its block with the most nonzeros (as format() will once it is built).
      std::snprintf(line, sizeof(line), "; conversion deferred: saves %.2f us per SpMV, costs ~%.0f us, pays after %.0f SpMVs",
                    rep.saving_us, rep.conversion_estimate_us, std::ceil(rep.conversion_estimate_us / std::max(rep.saving_us, 1e-9)));
      rep.decision += line;
      convert_to(format_id::cusparse_csr, stream);
      size_type most = -1;
      for (const auto& b : plan.blocks) {
        if (b.nnz > most) {
          most = b.nnz;
          rep.deferred = b.format;
        }
      }
      deferred_plan = deferred_partition{plan, in, ctx.model_params()};
      return true;
    }
  }
  if (build_partition(plan, in, ctx.model_params(), stream, true)) return true;
  rep.decision = single_decision + "; " + rep.decision.substr(rep.decision.find("; out of device memory") + 2);
  return false;
}

template <typename Value>
bool gpu_matrix<Value>::impl::build_partition(const partition_plan& plan, const prediction_input& in,
                                              const bandwidth_model_params& params, cudaStream_t stream, bool verify)
{
  plan_report& rep = report;
  const auto t0 = clock_type::now();
  std::vector<detail::built_block> want, built;
  for (const auto& b : plan.blocks) want.push_back({b.row_begin, b.row_end, b.format, {}});
  if (staged) {
    pending_partition = pending_partition_t{std::move(want), in, params, verify};
    return true;
  }
  const detail::format_factory<Value> factory = block_factory(in, params);
  format.reset();  // free the previous layout first, as convert_to does
  try {
    format = detail::make_partitioned<Value>(csr, want, factory, handle, stream, &built);
    detail::wait_stream(stream);
  } catch (const device_out_of_memory& e) {
    format.reset();
    rep.decision += std::string("; out of device memory building the partition (") + e.what() + ")";
    return false;
  }
  finish_partition(built, ms_since(t0), verify);
  return true;
}

template <typename Value>
void gpu_matrix<Value>::impl::finish_partition(const std::vector<detail::built_block>& built, double ms, bool verify)
{
  plan_report& rep = report;
  rep.conversion_ms = ms;
  rep.chosen = format->id();
  rep.partitioned = true;
  partition_plan actual;
  for (const auto& b : built) {
    actual.blocks.push_back({b.row_begin, b.row_end, b.format, 0.0, 0});
    if (!b.note.empty()) {
      rep.decision += "; block [" + std::to_string(b.row_begin) + "," + std::to_string(b.row_end) + "): " + b.note +
                      ", using cuSPARSE CSR";
    }
  }
  rep.plan = actual.to_string();
  begin_epoch(rep.chosen);
  // A split is taken on predictions alone, and the blocks' predictions are the least tested ones (a block's
  // rows may gather x very differently from the whole matrix's sample). Online refinement measures it and
  // then the single format it was compared with, once, and keeps the faster (explore_or_finish); when that
  // format is not cuSPARSE CSR, the plan kept is then compared with cuSPARSE CSR too (the baseline, always
  // feasible and converted at no cost), whatever the predictions say: the analysis that proposed the split
  // ranked the single formats by the same predictions, so a single format kept over the split has not been
  // shown to beat the baseline (a 2M-row circuit kept cuSPARSE ALG2, 0.934x of cuSPARSE CSR, because ALG2
  // measured below cuSPARSE CSR's prediction; bench/results/2026-11-23_h100_h2h9_formats.txt).
  on.runner_up = -1;
  on.then_runner = -1;
  on.free_runner = -1;
  on.may_explore = false;
  on.baseline_always = false;
  if (verify && on.corr && on.policy.explore) {
    for (int i = 0; i < static_cast<int>(rep.estimates.size()); ++i) {
      if (rep.estimates[i].format == rep.proposed.single_format && rep.estimates[i].feasible) on.runner_up = i;
      if (rep.estimates[i].format == format_id::cusparse_csr) on.then_runner = i;
    }
    if (on.runner_up < 0) std::swap(on.runner_up, on.then_runner);
    if (on.then_runner == on.runner_up) on.then_runner = -1;
    on.may_explore = on.runner_up >= 0;
    on.baseline_always = on.then_runner >= 0;
  }
}

template <typename Value>
void gpu_matrix<Value>::impl::begin_epoch(format_id f)
{
  ++on.epoch;
  on.calls = 0;
  on.confirmations = 0;
  on.confirm_runner = -1;
  on.timed = 0;
  on.next_first = 0;
  on.interval = std::max(0, on.policy.sample_every);
  on.samples.clear();
  on.sample_count = 0;
  on.window.clear();
  on.host_us.clear();
  on.running = -1;
  if (report.partitioned) {
    // Measured and reported, but no observation of one format (explore_or_finish compares it with the
    // single format once): the partition's time is the sum of its blocks' predictions.
    report.predicted_us = report.proposed.predicted_us;
  } else {
    for (int i = 0; i < static_cast<int>(report.estimates.size()); ++i) {
      if (report.estimates[i].format == f) on.running = i;
    }
    report.predicted_us = corrected_now(on.running);
  }
  report.measured_us = 0;
  report.measured_samples = 0;
  report.first_sample_spacing = 0;
  report.model_error = -1;
}

template <typename Value>
void gpu_matrix<Value>::impl::update_measured()
{
  report.measured_samples = on.sample_count;
  report.measured_us = online::median(on.samples);
  report.model_error = report.measured_us > 0 && report.predicted_us > 0 ? model::relative_error(report.predicted_us, report.measured_us) : -1;
}

// Reads back the finished timed products of this epoch (waiting for all of them only if `wait`) and feeds
// an observation to the corrections every policy.observe_every of them.
template <typename Value>
void gpu_matrix<Value>::impl::harvest(bool wait)
{
  on.scratch.clear();
  if (wait) {
    on.timer->drain(on.scratch);
  } else {
    on.timer->harvest(on.scratch);
  }
  bool fresh = false;
  for (const auto& smp : on.scratch) {
    if (smp.tag == -on.epoch) {  // the parked plan, interleaved with this epoch's runner-up (apply)
      if (on.parked) on.parked_window.push_back(smp.us);
      continue;
    }
    if (smp.tag != on.epoch) continue;  // a product of the format before the last change
    keep_last(on.samples, smp.us);
    on.window.push_back(smp.us);
    ++on.sample_count;
    fresh = true;
    if (static_cast<int>(on.window.size()) >= std::max(1, on.policy.observe_every)) observe_window(!wait);
  }
  if (fresh) update_measured();
}

template <typename Value>
void gpu_matrix<Value>::impl::observe_window(bool allow_explore)
{
  if (on.running >= 0 && !on.window.empty()) {
    on.corr->observe(report.estimates[on.running].format, on.cls[on.running], on.raw_us[on.running], online::median(on.window),
                     on.key);
  }
  on.window.clear();
  // Each observation of the same plan after its first sample_first products halves the rate of timed
  // products (a timed product costs ~7 us of host time: policy::sample_every_max); a format change
  // (begin_epoch) restores it.
  if (on.interval > 0 && on.timed > on.policy.sample_first) on.interval = std::min(std::max(on.policy.sample_every_max, on.policy.sample_every), 2 * on.interval);
  update_measured();
  if (allow_explore) explore_or_finish();
}

// Bounded exploration: at most two candidates per analysis (the runner-up, then cuSPARSE CSR, or its ALG2
// when cuSPARSE CSR runs), each measured as long as the running format was, and the faster kept. The
// running format stays built (`parked`) while a candidate is measured, so going back costs nothing.
template <typename Value>
void gpu_matrix<Value>::impl::explore_or_finish()
{
  if (step_running) return;  // a background step is building the next plan: explore that one
  if (on.explore_builder) return;  // the candidate is being converted (advance_exploration)
  if (!on.may_explore || on.sample_count < std::max(1, on.policy.explore_after)) return;
  char line[512];
  if (on.parked) {
    exploration_record& rec = *report.exploration;
    rec.to_measured_us = report.measured_us;
    const int to_count = on.sample_count;
    rec.interleaved = static_cast<int>(on.parked_window.size());
    if (rec.interleaved >= 3) rec.from_measured_us = online::median(on.parked_window);
    rec.finished = true;
    // A split stays only when it measured faster by policy::split_margin, each plan's host time of issuing
    // a product added to its measured time (its extra blocks' launches: after a host wait, the device
    // idles while they are issued, which the events of a product issued to an idle stream do not separate
    // from the product; on the H100 a circuit stack's split measured 3.1 % faster than cuSPARSE CSR by its
    // events and its GMRES solves 1.02-1.06x cuSPARSE CSR's in the same run, interleaved:
    // bench/results/2026-11-24_h100_session20_short_solves.txt).
    const double keep_split = rec.from_partition ? 1 - on.policy.split_margin : 1.0;
    if (rec.from_partition) {
      rec.from_host_us = online::median(on.parked_host_us);
      rec.to_host_us = online::median(on.host_us);
    }
    rec.kept_runner_up = rec.to_measured_us + rec.to_host_us < (rec.from_measured_us + rec.from_host_us) / keep_split;
    on.may_explore = false;
    if (rec.kept_runner_up) {
      on.parked.reset();
    } else {
      format = std::move(on.parked);
      report.chosen = rec.from;
      report.partitioned = rec.from_partition;
      report.plan = rec.from_partition ? rec.from_plan : std::string(format_name(rec.from));
      auto samples = std::move(on.parked_samples);
      const int count = on.parked_count + static_cast<int>(on.parked_window.size());
      samples.insert(samples.end(), on.parked_window.begin(), on.parked_window.end());
      if (samples.size() > online_state::max_samples) samples.erase(samples.begin(), samples.end() - online_state::max_samples);
      begin_epoch(rec.from);
      on.samples = std::move(samples);
      on.sample_count = count;
      on.timed = count;
      update_measured();
    }
    on.parked_window.clear();
    const std::string from = rec.from_partition ? "the partition " + rec.from_plan : std::string(format_name(rec.from));
    char interleaved[128] = "";
    if (rec.interleaved >= 3) {
      std::snprintf(interleaved, sizeof(interleaved), " (interleaved, %d and %d timed products; it measured %.2f us before)",
                    to_count, rec.interleaved, rec.from_before_us);
    }
    const bool margin_decided = rec.from_partition && rec.kept_runner_up && rec.to_measured_us >= rec.from_measured_us;
    char split_note[192] = "";
    if (rec.from_partition) {
      std::snprintf(split_note, sizeof(split_note), "; host issue of a product %.2f us for the split, %.2f us for %s%s", rec.from_host_us,
                    rec.to_host_us, format_name(rec.to), margin_decided ? ": a split stays only when faster by the margin, host issue included" : "");
    }
    std::snprintf(line, sizeof(line), "explored %s: measured %.2f us vs %.2f us of %s: kept %s%s%s", format_name(rec.to),
                  rec.to_measured_us, rec.from_measured_us, from.c_str(), report.plan.c_str(), interleaved, split_note);
    report.refinement.push_back(line);
    report.decision += std::string("; online: ") + line;
    // The two formats just compared may show the cached streaming bandwidth off: the best format at the bandwidth
    // that fits them is then the next candidate, before the baseline and a free candidate, which stay queued.
    // (Until session 49 this ran only once no candidate was queued, and after the runner-up's comparison the
    // baseline (cuSPARSE CSR, ALG2 where cuSPARSE CSR runs) is queued unless it was the runner-up, so a matrix the
    // cache mis-ranks was in practice never ranked again. Session 49's online run on the H100 did not reach this
    // point at all: aijp_online makes a new matrix per solve, and lap7 200^3's comparison did not finish within
    // one solve's 20 products.)
    if (rerank_by_stream_scale(rec)) return;
    // The next comparison (analysis, build_partition): the baseline, then a free candidate.
    while (next_candidate()) {
      if (report.partitioned || report.chosen != report.estimates[on.runner_up].format) {
        report.exploration.reset();  // the earlier comparisons stay in report.refinement
        on.may_explore = true;  // decided once the kept plan has explore_after samples of its own
        break;
      }
    }
    return;
  }
  if (report.exploration || on.runner_up < 0) return;
  // The runner-up's prediction as the analysis made it. Not its current corrected value: the class-wide
  // correction has meanwhile absorbed the running format's measurements, which would rescale the runner-up
  // by the running format's own bias and hide exactly the misranking exploration is there to find.
  // A single format is left when it measures slower than the runner-up's prediction by the exploration
  // margin. A split is always compared with the single format it was predicted to beat: a split's gain is
  // a few percent by construction while its blocks' predictions err by more (the format of a dense block,
  // its x gathers), and the single format's own prediction errs too, so no threshold on predictions tells
  // a split that pays from one that does not (bench/results/2026-11-23_h100_partition_online.txt).
  // A single format that does not qualify against the runner-up is checked against cuSPARSE CSR in the
  // same way (at most two comparisons per analysis either way, and one more where rerank_by_stream_scale
  // names a format).
  // A format that misses its own prediction by the margin is compared too (online::explore_reason_for).
  const auto reason = [&] {
    online::explore_case c;
    c.running = report.chosen;
    c.running_predicted_us = on.running >= 0 ? report.estimates[on.running].predicted_us : 0.0;
    c.measured_us = report.measured_us;
    c.candidate = report.estimates[on.runner_up].format;
    c.candidate_predicted_us = runner_up_us();
    c.margin = on.policy.explore_margin;
    c.partitioned = report.partitioned;
    c.baseline_always = on.baseline_always;
    c.candidate_free = free_candidate(c.candidate) && !measured_here(c.candidate);
    c.free_band = on.policy.free_band;
    c.free_max_us = on.policy.free_max_us;
    return online::explore_reason_for(c);
  };
  // A candidate that does not qualify now gives way to the next; the last one is asked again at the next
  // observation.
  auto why = reason();
  while (why == online::explore_reason::none) {
    if (!next_candidate()) {
      on.confirmations = 0;
      return;
    }
    if (report.chosen == report.estimates[on.runner_up].format) continue;
    why = reason();
  }
  // A margin reason must hold at policy::explore_confirmations observations in a row for this candidate.
  if (why == online::explore_reason::beats_candidate || why == online::explore_reason::own_miss) {
    if (on.confirm_runner != on.runner_up) on.confirmations = 0;
    on.confirm_runner = on.runner_up;
    if (++on.confirmations < on.policy.explore_confirmations) return;
  }
  on.confirmations = 0;
  on.confirm_runner = -1;
  const bool free_band = why == online::explore_reason::free_band;
  const bool after_split = why == online::explore_reason::after_split;
  const bool by_own_miss = why == online::explore_reason::own_miss;
  // An exploration converts inside a product, so it must pay like a conversion of the analysis: what the
  // candidate is predicted to save per product over the expected products, against its conversion estimate
  // (cuSPARSE SELL's first use in a process included). A split is always compared (its verification).
  if ((why == online::explore_reason::beats_candidate || by_own_miss) && on.expected_mults > 0 && on.stream_gbs > 0) {
    const auto& cand = report.estimates[on.runner_up];
    const double cost_us = conversion_estimate_us(cand.format, cand.device_bytes, csr_bytes(), on.stream_gbs);
    const double saving_us = report.measured_us - runner_up_us();
    if (saving_us * on.expected_mults < cost_us) {
      std::snprintf(line, sizeof(line), "%s measured %.2f us, %.2f us predicted for %s: not tried, it would save at most %.2f us per product over %.0f products and converting costs ~%.0f us",
                    format_name(report.chosen), report.measured_us, runner_up_us(), format_name(cand.format), std::max(saving_us, 0.0),
                    on.expected_mults, cost_us);
      report.refinement.push_back(line);
      if (!next_candidate()) on.may_explore = false;  // else the next candidate at the next observation
      return;
    }
  }
  if (on.then_runner < 0) on.baseline_always = false;  // consumed by the last comparison
  const double runner_us = runner_up_us();
  exploration_record rec;
  rec.from = report.chosen;
  rec.from_partition = report.partitioned;
  rec.from_plan = report.plan;
  rec.to = report.estimates[on.runner_up].format;
  if (rec.to == rec.from && !rec.from_partition) {  // the choice fell back (out of memory) to what was the runner-up
    on.may_explore = false;
    return;
  }
  rec.from_measured_us = report.measured_us;
  rec.from_before_us = report.measured_us;
  rec.to_predicted_us = runner_us;
  if (rec.from_partition) {
    std::snprintf(line, sizeof(line), "the partition %s measured %.2f us (%.2f us predicted for %s alone): comparing with it",
                  rec.from_plan.c_str(), rec.from_measured_us, runner_us, format_name(rec.to));
  } else if (after_split) {
    std::snprintf(line, sizeof(line), "%s, kept over the split, measured %.2f us (%.2f us predicted for %s): comparing with it",
                  format_name(rec.from), rec.from_measured_us, runner_us, format_name(rec.to));
  } else if (free_band) {
    std::snprintf(line, sizeof(line), "%s measured %.2f us, %.2f us predicted for %s, which runs on the CSR copy (within the %.0f %% free band of short products): trying it",
                  format_name(rec.from), rec.from_measured_us, runner_us, format_name(rec.to), 100 * on.policy.free_band);
  } else if (by_own_miss) {
    std::snprintf(line, sizeof(line), "%s measured %.2f us > %.2f us predicted for it (+%.0f %% margin; %.2f us predicted for %s): trying %s",
                  format_name(rec.from), rec.from_measured_us, report.estimates[on.running].predicted_us,
                  100 * on.policy.explore_margin, runner_us, format_name(rec.to), format_name(rec.to));
  } else {
    std::snprintf(line, sizeof(line), "%s measured %.2f us > %.2f us predicted for %s %s (+%.0f %% margin): trying it",
                  format_name(rec.from), rec.from_measured_us, runner_us,
                  rec.to == format_id::cusparse_csr ? "the baseline" : "the runner-up", format_name(rec.to),
                  100 * on.policy.explore_margin);
  }
  report.refinement.push_back(line);
  try {
    if (on.stage_exploration) {
      // Parts of at most stage_fraction of the running plan's measured product time (the bytes they move).
      const auto& cand = report.estimates[on.runner_up];
      const double budget_us = on.stage_fraction * report.measured_us;
      const double work_us = on.stream_gbs > 0 ? (cand.device_bytes + csr_bytes()) / (on.stream_gbs * 1e3) : 0.0;
      on.explore_builder = detail::make_format_builder<Value>(rec.to, csr, report.stats, rows_per_budget(csr.rows, work_us, budget_us));
      if (on.explore_builder) {
        on.explore_pending = std::move(rec);
        on.explore_values_version = values_version;
        on.explore_started = clock_type::now();
        on.explore_spent_us = 0;
        on.explore_parts = 0;
        return;  // the running format keeps running; advance_exploration after each product
      }
    }
    begin_exploration(rec, build(rec.to, on.stream));
  } catch (const error& e) {
    on.explore_builder.reset();
    abandon_exploration(rec, e.what());
  }
}

// The cached streaming bandwidth wrong: a per-format correction multiplies every format alike, so it cannot re-rank
// formats that the wrong constant ranks by another term (the bandwidth doubled, every format's L2 term became its
// largest and ranked ELLR first on lap7 200^3; H100, session 46). Once two formats are measured on the matrix (the
// last comparison's), the bandwidth that explains both (fit_stream_scale) is taken where it explains them within
// rerank_fit and the cached one misses them by twice that and rerank_miss at least, off by a factor of rerank_off or more; the formats
// are then predicted at it, and the best feasible one not measured here becomes the runner-up, compared under the
// margin rules as any other (docs/models.md, Session 47). Once per analysis; the placeholder model only.
template <typename Value>
bool gpu_matrix<Value>::impl::rerank_by_stream_scale(exploration_record rec)
{
  // The placeholder's own error on a matrix beyond the L2 is 5-10 % per format (docs/models.md), so two formats at the
  // right bandwidth fit within 12 % (rms of the log error); the cached one must miss them by twice that and 20 % at least.
  constexpr double rerank_fit = 0.12, rerank_miss = 0.2, rerank_off = 1.25;
  if (on.reranked || !on.input || !on.policy.explore || report.partitioned || rec.from_partition || rec.from == rec.to) return false;
  if (!(rec.from_measured_us > 0) || !(rec.to_measured_us > 0)) return false;
  on.reranked = true;
  const stream_scale_fit fit = fit_stream_scale(*on.input, on.params, {{rec.from, rec.from_measured_us}, {rec.to, rec.to_measured_us}});
  if (fit.formats < 2 || fit.rms_log_error > rerank_fit || fit.rms_log_error_at_1 < std::max(rerank_miss, 2 * fit.rms_log_error) ||
      std::abs(std::log(fit.scale)) < std::log(rerank_off)) {
    return false;
  }
  bandwidth_model_params at = on.params;
  at.stream_read_gbs = on.params.stream_read_gbs * fit.scale;
  int best = -1;
  double best_us = 0;
  for (int i = 0; i < static_cast<int>(report.estimates.size()); ++i) {
    const format_id f = report.estimates[i].format;
    if (!report.estimates[i].feasible || f == report.chosen || f == rec.from || f == rec.to || measured_here(f)) continue;
    const auto est = predict_bandwidth_model(*on.input, at, {f});
    if (est.empty() || !est[0].feasible || !(est[0].predicted_us > 0)) continue;
    if (best < 0 || est[0].predicted_us < best_us) {
      best = i;
      best_us = est[0].predicted_us;
    }
  }
  char line[320];
  std::snprintf(line, sizeof(line), "%s and %s measured on this matrix fit a streaming bandwidth of %.0f GB/s (cached %.0f GB/s: log error %.2f there, %.2f at the fit): formats ranked again at it, ",
                format_name(rec.from), format_name(rec.to), at.stream_read_gbs, on.params.stream_read_gbs, fit.rms_log_error_at_1,
                fit.rms_log_error);
  std::string text = line;
  if (best < 0) {
    report.refinement.push_back(text + "no other format left");
    return false;
  }
  std::snprintf(line, sizeof(line), "the best one not measured here is %s at %.2f us", format_name(report.estimates[best].format), best_us);
  report.refinement.push_back(text + line);
  on.runner_up = best;
  on.rerank_index = best;
  on.rerank_us = best_us;
  report.exploration.reset();  // the earlier comparisons stay in report.refinement
  on.may_explore = true;       // compared under the margin rules once the kept plan has explore_after samples
  return true;
}

template <typename Value>
void gpu_matrix<Value>::impl::abandon_exploration(exploration_record rec, const std::string& why)
{
  on.may_explore = false;
  rec.finished = true;
  rec.note = "conversion failed: " + why;
  report.refinement.push_back(std::string("exploration of ") + format_name(rec.to) + " abandoned: " + rec.note);
  report.exploration = std::move(rec);
}

template <typename Value>
void gpu_matrix<Value>::impl::begin_exploration(exploration_record rec, std::unique_ptr<detail::format_impl<Value>> candidate)
{
  on.parked_samples = on.samples;
  on.parked_count = on.sample_count;
  on.parked_window.clear();
  on.parked_host_us = on.host_us;
  on.parked = std::move(format);
  format = std::move(candidate);
  report.exploration = std::move(rec);
  report.chosen = report.exploration->to;
  report.partitioned = false;
  report.plan = format_name(report.chosen);
  begin_epoch(report.chosen);
}

template <typename Value>
void gpu_matrix<Value>::impl::advance_exploration(cudaStream_t stream)
{
  const auto t0 = clock_type::now();
  // Pacing as a staged step's: the parts' host time stays within stage_duty of the wall time since the
  // conversion began (the first part always goes).
  if (on.explore_parts > 0 && over_duty(on.explore_spent_us, on.stage_duty, ms_between(on.explore_started, t0))) {
    return;
  }
  try {
    const bool done = on.explore_builder->advance(stream);
    ++on.explore_parts;
    if (done) {
      auto candidate = on.explore_builder->take();
      on.explore_builder.reset();
      // Values written by update_values meanwhile may be missing from the rows filled before them.
      if (values_version != on.explore_values_version) candidate->refresh_values(csr, stream);
      exploration_record rec = std::move(on.explore_pending);
      rec.note.clear();
      begin_exploration(std::move(rec), std::move(candidate));
      char line[160];
      std::snprintf(line, sizeof(line), "%s converted in %d parts after the products (%.3f ms of host time)",
                    format_name(report.chosen), on.explore_parts, 1e-3 * (on.explore_spent_us + 1e3 * ms_since(t0)));
      report.refinement.push_back(line);
    }
  } catch (const error& e) {
    on.explore_builder.reset();
    abandon_exploration(std::move(on.explore_pending), e.what());
  }
  on.explore_spent_us += 1e3 * ms_since(t0);
}

template <typename Value>
bool gpu_matrix<Value>::convert_deferred(double expected_mults, cudaStream_t stream)
{
  finish_background(stream);
  return impl_->convert_deferred(expected_mults, stream);
}

template <typename Value>
bool gpu_matrix<Value>::impl::convert_deferred(double expected_mults, cudaStream_t stream)
{
  plan_report& rep = report;
  if (!deferred_pays(expected_mults)) return false;
  const format_id f = *rep.deferred;
  rep.deferred.reset();
  if (auto d = std::move(deferred_plan)) {
    deferred_plan.reset();
    rep.decision += "; partition built after the matrix proved reused";
    if (build_partition(d->plan, d->in, d->params, stream, true)) return true;
    rep.decision += ": cuSPARSE CSR";
    convert_to(format_id::cusparse_csr, stream);
    return true;
  }
  rep.decision += std::string("; converted to ") + format_name(f) + " after the matrix proved reused";
  convert_to(f, stream);
  return true;
}

template <typename Value>
bool gpu_matrix<Value>::plan_when_reused(const context& ctx, const plan_options& opts, cudaStream_t stream)
{
  finish_background(stream);
  return impl_->plan_when_reused(ctx, opts, stream);
}

template <typename Value>
bool gpu_matrix<Value>::impl::plan_when_reused(const context& ctx, const plan_options& opts, cudaStream_t stream)
{
  auto& m = *this;
  plan_report& rep = m.report;
  if (!may_plan_when_reused(opts, ctx.model_params().launch_us)) return false;
  const prediction_input in = *m.plan_input;
  const auto t0 = clock_type::now();
  const std::string decision_before = rep.decision;
  // What try_partition rewrites, kept for when no split is taken: the running (or deferred) single format
  // stays with its decision, its amortization and its exploration.
  const std::string decision = rep.decision.substr(0, rep.decision.find("; no partition planned yet"));
  const auto deferred = rep.deferred;
  const double saving_us = rep.saving_us, conversion_estimate_us = rep.conversion_estimate_us;
  auto explored = std::move(rep.exploration);  // a split starts its own (its comparison with the single format)
  rep.exploration.reset();
  rep.decision = decision;
  if (m.try_partition(ctx, opts, in, stream, true)) {
    rep.deferred.reset();  // the split replaces a single format still waiting for its conversion to pay
    rep.decision += "; planned after the matrix proved reused";
    return true;
  }
  if (m.planning_request) {  // a staged step plans first, then runs this again: leave everything as it was
    rep.decision = decision_before;
    rep.exploration = std::move(explored);
    return false;
  }
  const std::string out_of_memory = rep.decision.find("; out of device memory") != std::string::npos ? rep.decision.substr(decision.size()) : "";
  rep.decision = decision;
  rep.deferred = deferred;
  rep.saving_us = saving_us;
  rep.conversion_estimate_us = conversion_estimate_us;
  rep.exploration = std::move(explored);
  // The split's blocks did not fit: the layout was freed (a background copy has none: the running
  // plan stays).
  if (!m.format && !m.background) m.convert_to(rep.chosen, stream);
  const partition_plan& p = rep.proposed;
  const bool beats = p.split() && p.predicted_us < (1 - opts.partition_margin) * p.single_us;
  char line[200];
  std::snprintf(line, sizeof(line), "; planned after the matrix proved reused (%.3f ms): %s", ms_since(t0),
                !beats ? "no split taken" : out_of_memory.empty() ? "the split does not pay for its conversion yet" : "the split did not fit");
  rep.decision += line;
  if (beats) rep.decision += " (" + p.to_string() + ")" + out_of_memory;
  return false;
}

template <typename Value>
bool gpu_matrix<Value>::impl::may_plan_when_reused(const plan_options& opts, double launch_us) const
{
  const plan_report& rep = report;
  if (!rep.partition_pending || !plan_input || on.parked) return false;
  // The single format the analysis chose (running, or deferred while cuSPARSE CSR runs).
  const format_id single = rep.deferred ? *rep.deferred : rep.chosen;
  int best = -1;
  for (int i = 0; i < static_cast<int>(rep.estimates.size()); ++i) {
    if (rep.estimates[i].format == single) best = i;
  }
  return best >= 0 && strips_for_planning(rep.estimates[best].predicted_us, launch_us, csr.rows, opts, report.upload_ms).strips > 0;
}

template <typename Value>
void gpu_matrix<Value>::impl::copy_state_into(impl& c, std::uint64_t version) const
{
  c.background = true;
  c.columns = columns;
  c.plan_input = plan_input;
  c.deferred_plan = deferred_plan;
  c.values_version = version;
  c.free_after_upload = free_after_upload;
  c.csr_bound_us = csr_bound_us;
  c.on.corr = on.corr;
  c.on.policy = on.policy;
  c.on.timing = on.timing;
  c.on.raw_us = on.raw_us;
  c.on.cls = on.cls;
  c.on.key = on.key;
  c.on.epoch = on.epoch;
  c.on.running = on.running;
  c.on.runner_up = on.runner_up;
  c.on.then_runner = on.then_runner;
  c.on.free_runner = on.free_runner;
  c.on.may_explore = on.may_explore;
  c.on.baseline_always = on.baseline_always;
  c.on.input = on.input;
  c.on.params = on.params;
  c.on.reranked = on.reranked;
  c.on.rerank_index = on.rerank_index;
  c.on.rerank_us = on.rerank_us;
}

namespace detail {

void preload_analysis_kernels()
{
  // A 256-row tridiagonal matrix: every kernel below is launched once, so that lazy loading (CUDA 12's
  // default) loads its module here rather than in the product whose analysis first needs it.
  constexpr size_type n = 256;
  std::vector<index_type> row_ptr(n + 1, 0), col;
  for (size_type r = 0; r < n; ++r) {
    for (size_type c = r > 0 ? r - 1 : 0; c <= std::min(n - 1, r + 1); ++c) col.push_back(static_cast<index_type>(c));
    row_ptr[r + 1] = static_cast<index_type>(col.size());
  }
  const std::vector<double> val(col.size(), 1.0), x(n, 1.0);
  device_csr<double> a;
  a.rows = a.cols = n;
  a.nnz = col.size();
  a.row_ptr.resize(row_ptr.size());
  a.col_idx.resize(col.size());
  a.values.resize(val.size());
  device_buffer<double> dx(n), dy(n);
  AIJP_CUDA_CHECK(cudaMemcpy(a.row_ptr.data(), row_ptr.data(), row_ptr.size() * sizeof(index_type), cudaMemcpyHostToDevice));
  AIJP_CUDA_CHECK(cudaMemcpy(a.col_idx.data(), col.data(), col.size() * sizeof(index_type), cudaMemcpyHostToDevice));
  AIJP_CUDA_CHECK(cudaMemcpy(a.values.data(), val.data(), val.size() * sizeof(double), cudaMemcpyHostToDevice));
  AIJP_CUDA_CHECK(cudaMemcpy(dx.data(), x.data(), n * sizeof(double), cudaMemcpyHostToDevice));
  const cudaStream_t s = nullptr;
  const row_stats st = compute_row_stats_device(n, n, a.row_ptr.data(), s);
  (void)sample_locality(n, n, a.row_ptr.data(), a.col_idx.data(), sizeof(double), s);
  (void)sample_locality(n, n, a.row_ptr.data(), a.col_idx.data(), sizeof(float), s);
  auto strips = compute_strip_summaries_device(n, a.row_ptr.data(), 64, s);
  add_strip_locality(strips, a.row_ptr.data(), a.col_idx.data(), sizeof(double), s);
  // The layout staged steps split (sell_delta16): its conversion, value refresh and both products.
  const cusparse_handle none;  // never created: sell_delta16 does not use cuSPARSE
  auto f = make_sell_delta16<double>(build_args<double>{a, st, none, s});
  f->apply(1.0, dx.data(), 0.0, dy.data(), s);
  f->apply(1.0, dx.data(), 1.0, dy.data(), s);
  f->refresh_values(a, s);
  // csr_vector's resident-block count, queried once per device by its first conversion: made here rather
  // than in the staged part that converts the process's first matrix (17-19 us of host time there on the
  // H200, session 33). Double only: the PETSc plugin's type; a float matrix queries at its first conversion.
  auto v = make_csr_vector<double>(build_args<double>{a, st, none, s});
  v->apply(1.0, dx.data(), 0.0, dy.data(), s);
  detail::wait_stream(s);
}

}  // namespace detail

const char* background_step_name(background_step s)
{
  switch (s) {
    case background_step::analyze: return "analysis";
    case background_step::convert_deferred: return "deferred conversion";
    case background_step::plan_when_reused: return "partition planning";
  }
  return "step";
}

// A step of the analysis beside the running plan (start_background). background_mode::thread: `plan` is
// built on a worker thread's stream, which first waits for what the products' stream held at the start
// (`ready`). background_mode::staged: advance() builds it in parts on the products' stream at each poll.
template <typename Value>
struct gpu_matrix<Value>::background_job {
  background_step step = background_step::analyze;
  background_mode mode = background_mode::thread;
  std::unique_ptr<impl> plan;
  // Staged mode: the running plan `plan` is copied from, in the step's first part rather than in the product
  // that starts it (the copy took 7-20 us of host time; that product carries the reuse check already). The
  // running plan outlives the job (install_background replaces it only when the job ends).
  const impl* source = nullptr;
  std::uint64_t source_values_version = 0;  // the running plan's, read when the step started
  double start_us = 0;
  std::shared_ptr<const context> ctx;
  plan_options opts;
  detail::poll_event ready;    // thread mode: where the products' stream stood at the start (a pooled event)
  std::future<void> finished;  // thread mode: set by detail::step_worker once run() returned
  std::atomic<bool> done{false};
  int caller_cpu = -1;  // the products' thread's CPU at the start (thread mode) or the hand-over (host_worker)
  int worker_cpu = -1;  // the worker's at the end (thread mode), or where it woke for the hand-over
  // Written by the worker before `done` is set, read after it is seen set.
  bool changed = false;
  std::exception_ptr error;
  double wall_ms = 0;

  // Staged mode.
  enum class stage { copy, copy_state, start, sampling, gathering, deciding, plan_strips, gathering_strips, plan_dp, replay, convert, converting, building_partition, finished };
  clock_type::time_point started;
  format_id running_format = format_id::cusparse_csr;  // the running plan's: the parts' budget is its product time
  // The running plan holds cuSPARSE CSR's layout: it runs it, unpartitioned, or keeps it aside (host_bound_start).
  bool running_has_csr = false;
  detail::row_stats_job stats_job;
  detail::locality_job locality;
  size_type free_memory = 0;
  // Partition planning in parts (impl::planning_request): the strips, then the DP in slices.
  std::unique_ptr<partition_planner> planner;
  detail::strip_job strips_job;  // the strip passes, polled
  double strips_ms = 0;          // host time of the parts that issued and read them
  // The analysis' read-backs, kept to run the analysis again once the partition is planned.
  std::optional<typename impl::gathered_input> gathered;
  bool prefetched = false;  // `gathered` came from gpu_matrix::prefetch_analysis: the analysis starts deciding

  // plan_options::host_worker: the stages that make no CUDA call run on detail::step_worker. While they do,
  // `worker_busy` is set and the products' thread touches nothing of the job but that flag (and `finished`,
  // the task's future, when it must wait); the worker's writes are published by clearing it (release).
  std::atomic<bool> worker_busy{false};
  bool worker_copy = false;  // the running plan was never analysed: its products change nothing the copy reads
  double worker_ms = 0;      // host time of the stages the worker ran
  std::string worker_stages;
  bool on_worker(stage st) const
  {
    if (!opts.host_worker) return false;
    switch (st) {
      case stage::copy:
      case stage::copy_state: return worker_copy;
      case stage::deciding: return gathered.has_value();
      case stage::plan_dp: return planner != nullptr;
      case stage::replay: return step == background_step::analyze && gathered.has_value();
      case stage::convert: {
        // What runs on the CSR copy or keeps the running layout; with worker_conversion(), a builder's layout too
        // (on the worker's stream). Every other conversion launches kernels on the products' stream.
        if (!plan || plan->pending_partition) return false;
        if (!plan->staged_choice) return true;
        const format_id f = *plan->staged_choice;
        if (f == format_id::csr_vector || f == format_id::csr_scalar || (f == format_id::cusparse_csr && running_has_csr)) return true;
        return detail::has_format_builder(f) && worker_conversion();
      }
      case stage::converting: return worker_converting && !worker_fallback;
      default: return false;
    }
  }
  // plan_options::worker_converts, for this step: a conversion made at once, with the worker's stream known.
  bool worker_conversion() const { return opts.host_worker && opts.worker_converts && unpaced() && !worker_without_stream; }
  // The worker runs the conversion (stage::converting on its stream): set by the worker when it makes the
  // builder, read by on_worker on either thread (the products' thread only while the worker is not busy).
  bool worker_converting = false;
  bool worker_without_stream = false;  // the worker had no stream: the conversion stays on the products' thread
  bool worker_waits_ready = false;     // the worker's stream waits for `ready` (recorded at the hand-over)
  bool in_worker = false;              // advance_once runs on the worker (its builder's failures go back)
  // A builder failed on the worker (what, out of memory): the products' thread falls back to cuSPARSE CSR,
  // whose layout and cuSPARSE handle belong to the products' stream.
  std::optional<std::pair<std::string, bool>> worker_fallback;
  // Runs `task` on detail::step_worker, kept off the calling thread's CPU where it may; `finished` is ready
  // once it returned (the job's destructor and install wait for it). Returns the calling thread's CPU.
  int submit_to_worker(std::function<void(cudaStream_t)> task)
  {
    auto done_promise = std::make_shared<std::promise<void>>();
    finished = done_promise->get_future();
    const int cpu = detail::current_cpu();
    detail::step_worker::instance().submit(
        [task = std::move(task), done_promise](cudaStream_t s) {
          task(s);
          done_promise->set_value();  // the promise is the worker's own: the job may be gone after this
        },
        cpu);
    return cpu;
  }
  // Hands the stages from `at` on that on_worker allows to the step worker; the products' thread returns.
  void hand_to_worker(cudaStream_t stream)
  {
    // A conversion the worker may make reads the CSR copy on the worker's stream: after what the products'
    // stream holds now (one event record, ~1 us).
    if (worker_conversion() && !worker_converting) ready.record(stream);
    worker_busy.store(true, std::memory_order_relaxed);
    caller_cpu = submit_to_worker([this, stream](cudaStream_t worker_stream) {
      worker_cpu = detail::current_cpu();  // where it woke (plan_report::background_worker_cpu)
      const auto w0 = clock_type::now();
      in_worker = true;
      try {
        while (on_worker(at)) {
          // The builder's conversion (worker_conversion): on the worker's stream, which waits for `ready` first.
          const bool converts = at == stage::converting || (at == stage::convert && plan->staged_choice && detail::has_format_builder(*plan->staged_choice));
          if (converts && !worker_waits_ready) {
            if (worker_stream == nullptr) {  // back to the products' thread, which converts in whole parts
              worker_without_stream = true;
              break;
            }
            if (ready.get() != nullptr) AIJP_CUDA_CHECK(cudaStreamWaitEvent(worker_stream, ready.get(), 0));
            worker_waits_ready = true;
          }
          if (converts) worker_converting = true;
          const std::string name = stage_name(at);
          if (worker_stages.size() < name.size() || worker_stages.compare(worker_stages.size() - name.size(), name.size(), name) != 0) {
            if (!worker_stages.empty()) worker_stages += ", ";
            worker_stages += name;  // once per run of slices (the DP's)
          }
          // Blocking advances: the decision in one call (no slices), the DP's slices back to back; none of those
          // issues device work. A builder's conversion waits for its read-backs by polling and sleeping
          // (detail::wait_event on the worker).
          if (advance_once(converts ? worker_stream : stream, true)) {
            at = stage::finished;
            break;
          }
        }
      } catch (...) {
        error = std::current_exception();
        at = stage::finished;
      }
      in_worker = false;
      worker_ms += ms_since(w0);
      worker_busy.store(false, std::memory_order_release);
    });
  }
  // The plan this step builds, to copy `source` into: the one made with the spare job at the upload
  // (make_spare_job) where it is of the same CSR copy, else a new one.
  impl& plan_of(const impl& source)
  {
    if (!plan || plan->csr_owner != source.csr_owner) plan = std::make_unique<impl>(source.csr_owner);
    return *plan;
  }
  void reserve_parts(std::size_t n)
  {
    poll_us.reserve(n);
    poll_product.reserve(n);
    poll_notes.reserve(n);
    partial_estimates.reserve(format_count);
  }
  // Books a part the products' thread ran: its host time `us`, the product it ran after, what it did
  // (unformatted), and its host time beyond the overlap against the pacing.
  void record_part(double us, staged_part_note&& what)
  {
    poll_us.push_back(us);
    poll_product.push_back(static_cast<int>(polls));
    poll_notes.push_back(std::move(what));
    spent_us += std::max(0.0, us - overlap_us);
  }
  // The step's next stage once it has run (again): plan first when it asked for a partition.
  stage after_step()
  {
    if (plan->planning_request) return stage::plan_strips;
    return stage::convert;
  }
  std::unique_ptr<detail::format_builder<Value>> builder;
  const std::vector<detail::built_block>* partition_built = nullptr;  // the partition builder's blocks
  format_id building = format_id::cusparse_csr;
  double conversion_host_ms = 0;
  std::vector<double> poll_us;  // host time of each advance that did work
  std::vector<int> poll_product;  // the product each of them ran after (1: the first after the start; `polls`)
  std::vector<staged_part_note> poll_notes;  // what each of them did (the stage it began in, ">next" ...)
  staged_part_note part;                     // what the running part did, where the stage does several things
  // Sets what the running part did: `fmt` a static text or a format whose conversions all take doubles.
  void note_part(const char* fmt, double a = 0, double b = 0, double c = 0, double d = 0, double e = 0, double f = 0)
  {
    part.what = fmt;
    part.piece = nullptr;
    part.subject = nullptr;
    part.v[0] = a, part.v[1] = b, part.v[2] = c, part.v[3] = d, part.v[4] = e, part.v[5] = f;
  }
  static const char* stage_name(stage st)
  {
    switch (st) {
      case stage::copy: return "copy";
      case stage::copy_state: return "copy state";
      case stage::start: return "start";
      case stage::sampling: return "sampling";
      case stage::gathering: return "gathering";
      case stage::deciding: return "deciding";
      case stage::plan_strips: return "strips";
      case stage::gathering_strips: return "gathering strips";
      case stage::plan_dp: return "dp";
      case stage::replay: return "replay";
      case stage::convert: return "convert";
      case stage::converting: return "converting";
      case stage::building_partition: return "building partition";
      case stage::finished: return "finished";
    }
    return "?";
  }
  // Pacing (opts.stage_duty): a part runs right after a product was queued, and its host time up to that
  // product's device time (`slack_us`, the running plan's predicted product time beyond one launch; the
  // share opts.stage_overlap of it) overlaps it; what a part takes beyond that (`spent_us`, summed) is what
  // the solver waits for.
  double slack_us = 0;
  // What of a part's host time is taken to overlap the product: opts.stage_overlap of slack_us where the
  // product is predicted to take at least timed_passes_min_us, else none. A smaller product leaves the
  // solver host-bound, where a part's host time adds to the solve whole: credited with the overlap, parts of
  // 8-25 us (the analysis in pieces) landed three or four to a 1.1 ms solve of bcsstk13 and raised it 3-9 %,
  // against 0-3 % with one fifth of the duty (bench/results/2026-11-24_h100_session21_short_solves.txt).
  double overlap_us = 0;
  // The device time of the parts that issue device passes (statistics, locality samples, histogram, strips,
  // fills), measured with an event pair around each such part and read back at later polls without
  // waiting: it lands in the products' stream, where the solver waits for it at its next dot product, so it
  // counts against stage_duty as host time beyond the overlap does. (The analysis' locality samplers took
  // 27-82 us of device time on the H100 after session 20's changes, 52-180 before; all of a staged analysis'
  // passes went into one or two products when only host time was paced:
  // bench/results/2026-11-24_h100_session20_analysis_cost.txt.)
  // The event pair costs 5-14 us of host time per part on the H100 machine (session 21), as much as the
  // part's own launches on a small matrix, where a pass takes about one product of device time anyway
  // (15-27 us against 13 us, _session20_analysis_cost.txt). So the passes are timed only where the running
  // product is predicted to take at least timed_passes_min_us; elsewhere a part that issues device work
  // counts one predicted product (`untimed_pass_us`) instead of a measurement.
  static constexpr double timed_passes_min_us = 30.0;
  static constexpr double dp_slice_us = 20.0;  // host time of a slice of the partition planner's DP
  static constexpr double prediction_slice_us = 5.0;  // host time of a slice of the candidates' predictions
  bool free_queried = false;                           // the analysis' cudaMemGetInfo is done
  // The analysis' passes run on detail::analysis_stream() (`side`), once it waits for the products' stream
  // (an event recorded there, then the wait: a part each); what the passes read back, later parts poll.
  cudaStream_t side = nullptr;
  detail::poll_event products_ready;
  bool ready_recorded = false;
  bool side_waits = false;
  cudaStream_t pass_stream(stage st, cudaStream_t products) const
  {
    const bool analysis = st == stage::start || st == stage::sampling || st == stage::gathering || st == stage::plan_strips ||
                          st == stage::gathering_strips;
    return side_waits && analysis ? side : products;
  }
  std::vector<format_estimate> partial_estimates;      // the predictions made so far (stage::deciding)
  std::optional<prediction_input> prediction_in;       // what they are made from, built by the first slice
  std::size_t predicted = 0;                           // candidates predicted so far
  std::optional<typename impl::analysis_choice> chosen;  // the decision's first half, made in a part of its own
  std::optional<typename impl::gathered_input::online_factors> partial_factors;  // the online factors taken so far
  std::unique_ptr<detail::spmv_timer> pass_timer;
  std::vector<detail::spmv_timer::sample> pass_samples;
  double untimed_pass_us = 0;
  double device_us = 0;         // summed, for the report (measured, or counted where untimed)
  // The stages whose every part launches a pass (a poll's part does where it sets polled_pass: the histogram,
  // the sorted sampler); an untimed one counts untimed_pass_us.
  static bool issues_pass(stage st)
  {
    return st == stage::start || st == stage::sampling || st == stage::plan_strips || st == stage::converting ||
           st == stage::building_partition;
  }
  bool polled_pass = false;
  // The part said itself whether it launched a kernel (polled_pass): the analysis' parts of one call each.
  bool pass_known = false;
  // A part that issued one call of a pass (`pass`: "statistics", "samples", "histogram"): its label and
  // whether it launched a kernel.
  void piece_part(const char* pass, detail::piece_kind k)
  {
    note_part(pass);
    part.piece = piece_name(k);
    pass_known = true;
    polled_pass = k == detail::piece_kind::launch;
  }
  static bool issues_device_work(stage st)
  {
    return st == stage::start || st == stage::sampling || st == stage::gathering || st == stage::plan_strips ||
           st == stage::gathering_strips || st == stage::converting || st == stage::building_partition;
  }
  // The wall time the pacing shares out (opts.stage_duty): the time since the step began, with each gap
  // between two polls (one per product) counted at most gap_cap times the median of the last gaps. Between
  // two solves the products stop while the application does other work (with aijp_solve_ab -interleave,
  // a cuSPARSE CSR solve): counted whole, that time let a 1.1 ms GMRES solve of bcsstk13 carry 2-3 % of
  // parts instead of the duty's 1 % (H100, session 23).
  static constexpr double gap_cap = 3.0;
  static constexpr std::size_t recent_gaps = 15;
  // The cap follows the median of the last gaps: a selection over 15 values took ~0.2 us, and with the rest of
  // a poll (the job's fields spread over a dozen cache lines, cold after the solver's work) it made each
  // product of a step 0.5 us slower than before it, ~0.4 % of a one-CPU GMRES(10) solve of bcsstk13
  // (H200, session 37, bench/results/2026-11-28_h200_session37_step_cycle.txt). So it is recomputed while the
  // ring fills and then every cap_refresh polls, and a poll's fields sit together below.
  static constexpr std::size_t cap_refresh = 8;
  // What every product's poll reads and writes (due, active_ms, held_back), together.
  stage at = stage::copy;  // staged mode: the running plan is copied in the first part
  clock_type::time_point last_poll{};
  double active = 0;  // ms
  double spent_us = 0;
  double duty = 0;    // opts.stage_duty, 0 where unpaced (set by start_background)
  double cap_ms = std::numeric_limits<double>::infinity();  // gap_cap times the median of the last gaps
  std::size_t polls = 0;
  int skipped = 0;  // advances that waited for the host-time share (opts.stage_duty)
  std::array<double, recent_gaps> gaps{};  // the last min(polls, recent_gaps) gaps (ms), a ring
  double active_ms(clock_type::time_point now)  // every product while the step runs: no allocation
  {
    const double gap = ms_between(last_poll == clock_type::time_point{} ? started : last_poll, now);
    last_poll = now;
    const double counted = std::min(gap, cap_ms);  // uncapped until three gaps are known
    gaps[polls++ % recent_gaps] = gap;
    if (polls >= 3 && (polls <= recent_gaps || polls % cap_refresh == 0)) {
      const std::size_t known = std::min(polls, recent_gaps);
      std::array<double, recent_gaps> sorted = gaps;
      std::nth_element(sorted.begin(), sorted.begin() + known / 2, sorted.begin() + known);
      cap_ms = gap_cap * sorted[known / 2];
    }
    active += counted;
    return active;
  }
  // Adds the device time of the passes whose events completed; never waits.
  void harvest_passes()
  {
    if (!pass_timer || pass_timer->pending() == 0) return;
    pass_samples.clear();
    pass_timer->harvest(pass_samples);
    for (const auto& p : pass_samples) {
      spent_us += p.us;
      device_us += p.us;
    }
  }
  // The staged analysis kept cuSPARSE CSR, which runs now: the install moves the running layout over
  // instead of building another (a cuSPARSE handle costs milliseconds to create).
  bool keep_running_layout = false;

  ~background_job()
  {
    if (finished.valid()) finished.wait();
  }

  // Thread mode, on detail::step_worker: `s` is the worker's stream for the device (null if it could not be
  // made).
  void run(cudaStream_t s)
  {
    const auto t0 = clock_type::now();
    try {
      AIJP_ENSURE(s != nullptr, device_error, "the background worker has no CUDA stream for this device");
      AIJP_CUDA_CHECK(cudaStreamWaitEvent(s, ready.get(), 0));
      switch (step) {
        case background_step::analyze:
          plan->analyze(*ctx, opts, s);
          changed = true;
          break;
        case background_step::convert_deferred: changed = plan->convert_deferred(opts.expected_mults, s); break;
        case background_step::plan_when_reused: changed = plan->plan_when_reused(*ctx, opts, s); break;
      }
      detail::wait_stream(s);
    } catch (...) {
      error = std::current_exception();
    }
    worker_cpu = detail::current_cpu();
    wall_ms = ms_since(t0);
    done.store(true, std::memory_order_release);
  }

  // A step converting at once (plan_options::convert_at_once_us): no pacing, conversions in whole parts.
  bool unpaced() const { return opts.convert_at_once_us > 0; }

  // Rows per part of a staged conversion to `f`: its fill moves the CSR copy's bytes and the layout's once,
  // at the calibrated streaming bandwidth; a part gets opts.stage_fraction of the running plan's predicted
  // product time (all rows for an unpaced step).
  size_type rows_per_part(format_id f) const
  {
    if (unpaced()) return plan->csr.rows;
    const auto& est = plan->report.estimates;
    int run_i = estimate_index(est, running_format);
    if (run_i < 0) run_i = estimate_index(est, format_id::cusparse_csr);
    const int f_i = estimate_index(est, f);
    const double budget_us = run_i >= 0 ? opts.stage_fraction * est[run_i].predicted_us : 0.0;
    const double csr_bytes = plan->csr_bytes();
    const double work_us = ((f_i >= 0 ? est[f_i].device_bytes : csr_bytes) + csr_bytes) / (ctx->model_params().stream_read_gbs * 1e3);
    return rows_per_budget(plan->csr.rows, work_us, budget_us);
  }

  // Staged mode, before advance at a product: whether this product's poll has anything to do. False while
  // the worker runs a stage, or while the parts are ahead of opts.stage_duty with the device time of their
  // passes read back so far: that is a lower bound of what they spent, so reading back the rest (event
  // queries) could only hold the next part back further. Most products of a step are such polls; this
  // check reads the clock and nothing of the device (the caller skips the stream and its log events too).
  // Records the product's gap for the pacing either way; the advance that follows a true does not again.
  bool due(clock_type::time_point now)
  {
    if (worker_busy.load(std::memory_order_acquire)) {
      active_ms(now);  // the pacing's product count and wall time (the worker touches neither)
      return false;
    }
    if (at == stage::finished) return true;
    const double active_now = active_ms(now);
    if (held_back(active_now)) return false;
    paced_active = active_now;
    return true;
  }
  std::optional<double> paced_active;  // due()'s wall time, for the advance that follows it
  // Pacing: the parts' host time beyond the product they overlap, and their device time, stay within
  // opts.stage_duty of the `active` wall time since the step began; a product held back counts as skipped.
  bool held_back(double active)
  {
    if (!over_duty(spent_us, duty, active)) return false;
    ++skipped;
    return true;
  }

  // Staged mode: issues the next part on `stream` (with `block`, every part, waiting for the read-backs);
  // true once the plan is built (or the step failed: `error`).
  bool advance(cudaStream_t stream, bool block)
  {
    const std::optional<double> checked = std::exchange(paced_active, std::nullopt);
    if (worker_busy.load(std::memory_order_acquire)) {
      if (!block) {
        active_ms(clock_type::now());  // the pacing's product count and wall time (the worker touches neither)
        return false;                  // not a part: the products' thread did nothing else
      }
      finished.wait();  // set after the worker's last write: its writes are visible here
    }
    if (at == stage::finished) {  // the worker ran the last stage (or failed)
      wall_ms = ms_since(started);
      return true;
    }
    const auto t0 = clock_type::now();
    harvest_passes();
    if (!block && held_back(checked ? *checked : active_ms(t0))) return false;
    const stage from = at;
    if (!block && on_worker(from)) {
      // One part on the products' thread: the hand-over (a queued task and a wake-up). The stages run on the
      // worker; later products check its flag until it is done.
      const auto t_hand = clock_type::now();  // the read-backs (and the pacing's check) before it
      hand_to_worker(stream);  // `at` and the plan are the worker's now
      const auto t_end = clock_type::now();
      staged_part_note what;
      what.from = stage_name(from);
      what.what = "handed to the worker (read-backs %.1f us, hand-over %.1f us)";
      what.v[0] = 1e3 * ms_between(t0, t_hand);
      what.v[1] = 1e3 * ms_between(t_hand, t_end);
      record_part(1e3 * ms_between(t0, t_end), std::move(what));
      return false;
    }
    part = staged_part_note{};
    polled_pass = false;
    pass_known = false;
    const long allocations = detail::driver_allocations().count.load(std::memory_order_relaxed);
    // getrusage twice per part: two system calls inside a short solve, only where someone reads the labels.
    const auto disturbed = opts.stage_diagnostics ? thread_disturbance::now() : thread_disturbance{};
    double work_us = 0, events_us = 0;
    try {
      bool finished = false;
      do {
        // An event pair around a part that issues device work (not while waiting for everything: block).
        const auto e0 = clock_type::now();
        const cudaStream_t timed_stream = pass_stream(at, stream);
        const bool timed = !block && opts.stage_duty > 0 && issues_device_work(at) && pass_timer && pass_timer->begin(timed_stream, 0);
        const auto w0 = clock_type::now();
        finished = advance_once(stream, block);
        const auto w1 = clock_type::now();
        if (timed) {
          pass_timer->end(timed_stream);
        } else if (!block && opts.stage_duty > 0 && !pass_timer && (pass_known ? polled_pass : issues_pass(from) || polled_pass) &&
                   !(side_waits && pass_stream(from, stream) == side)) {
          // A kernel in the products' stream: it delays the next product by about one product. (On the passes'
          // stream it runs beside them on a device the short products leave mostly idle, and counts nothing.)
          spent_us += untimed_pass_us;
          device_us += untimed_pass_us;
        }
        work_us += 1e3 * ms_between(w0, w1);
        events_us += 1e3 * (ms_between(e0, w0) + ms_since(w1));
      } while (block && !finished);
      if (finished) at = stage::finished;
    } catch (...) {
      error = std::current_exception();
      at = stage::finished;
    }
    const double us = 1e3 * ms_since(t0);
    // Numbers only: the label is formatted when someone reads it (staged_part_note).
    part.from = stage_name(from);
    part.to = from == at ? nullptr : stage_name(at);
    const long allocated = detail::driver_allocations().count.load(std::memory_order_relaxed);
    if (allocated > allocations) {
      part.allocations = static_cast<int>(allocated - allocations);
      detail::driver_allocations().last(allocations, part.allocation_bytes);
    }
    if (opts.stage_diagnostics) {
      const auto now = thread_disturbance::now();
      part.page_faults = now.faults - disturbed.faults;
      part.preemptions = now.preempted - disturbed.preempted;
    }
    if (issues_device_work(from) && us >= 10) {  // where a part's host time went: its own work, its event pair
      part.work_us = work_us;
      part.events_us = events_us;
    }
    record_part(us, std::move(part));
    if (at == stage::finished) {
      wall_ms = ms_since(started);
      return true;
    }
    return false;
  }

  bool advance_once(cudaStream_t stream, bool block)
  {
    if (at == stage::copy) {  // the first two parts: the copy of the running plan this step builds on
      // Into the plan made with the spare job at the upload (make_spare_job), where it is of this CSR copy.
      source->copy_report_into(plan_of(*source));
      plan->report.staged_start_us = start_us;
      at = stage::copy_state;
      return false;
    }
    if (at == stage::copy_state) {
      source->copy_state_into(*plan, source_values_version);
      plan->staged = true;
      // With the passes read back after the upload (prefetch_analysis), the analysis starts at its decision.
      at = prefetched && step == background_step::analyze ? stage::deciding : stage::start;
      return false;
    }
    impl& m = *plan;
    switch (at) {
      case stage::copy:
      case stage::copy_state: break;  // above
      case stage::start:
        switch (step) {
          case background_step::analyze:
            if (side && !ready_recorded) {  // where the passes' stream starts: after the products queued so far
              products_ready.record(stream);
              ready_recorded = true;
              note_part("passes' stream: event");
              pass_known = true;
              if (!block) return false;
            }
            if (side && !side_waits) {
              AIJP_CUDA_CHECK(cudaStreamWaitEvent(side, products_ready.get(), 0));
              side_waits = true;
              note_part("passes' stream: wait");
              pass_known = true;
              if (!block) return false;
            }
            // Free memory (cudaMemGetInfo, tens of us) in this first part rather than in a poll of its own;
            // not queried again where the upload made a layout reserve (free_after_upload).
            // On the circuit stack (rows of 50000 entries) the poll after the histogram costs 0.3-0.66 ms on
            // the H100 whatever it holds: the free-memory query there, the decision once the query moved here
            // (bench/results/2026-11-24_h100_session15_staged_parts.txt, _session15_short_solves_final.txt).
            if (m.free_after_upload > 0) {  // set where the upload made a reserve
              free_memory = m.free_after_upload;
            } else if (!free_queried) {
              // The query in a part of its own: it costs more than any one call of the passes.
              device_memory_info(&free_memory, nullptr);
              free_queried = true;
              note_part("free memory");
              pass_known = true;
              if (!block) return false;
            }
            // The statistics' first call here (a memset), the locality samples' first in the next part, then one
            // call per part (piece_queue): inside a short solve each costs ~5-9 us of host time.
            stats_job.start(m.csr.rows, m.csr.cols, m.csr.row_ptr.data(), pass_stream(stage::start, stream), true);
            piece_part("statistics", stats_job.last_piece());
            at = stage::sampling;
            return false;
          case background_step::convert_deferred: changed = m.convert_deferred(opts.expected_mults, stream); break;
          case background_step::plan_when_reused: changed = m.plan_when_reused(*ctx, opts, stream); break;
        }
        at = after_step();
        return false;
      case stage::sampling:
        locality.start(m.csr.rows, m.csr.cols, m.csr.row_ptr.data(), m.csr.col_idx.data(), sizeof(Value), pass_stream(stage::sampling, stream),
                       2048, true);
        piece_part("samples", locality.last_piece());
        at = stage::gathering;
        return false;
      case stage::gathering: {
        // One CUDA call per part: what the passes left pending first, then the polls (the histogram's first
        // call issued by the poll that finds the first pass done, its other calls by the next parts).
        pass_known = true;
        if (!block) {
          if (stats_job.issue_pending()) {
            piece_part(stats_job.phase() == 1 ? "statistics" : "histogram", stats_job.last_piece());
            return false;
          }
          if (locality.issue_pending()) {
            piece_part("samples", locality.last_piece());
            return false;
          }
        }
        const auto t0 = clock_type::now();
        const int stats_phase = stats_job.phase();
        const cudaStream_t passes = pass_stream(stage::gathering, stream);
        const bool stats_done = stats_job.poll(passes);
        if (stats_job.phase() != stats_phase) {
          piece_part("histogram", stats_job.last_piece());
          if (!block) return false;
        }
        const bool locality_done = locality.poll();
        const double gathered_us = 1e3 * ms_since(t0);
        if (!stats_done || !locality_done) {
          if (block) {
            if (!stats_done) stats_job.wait(passes);
            if (!locality_done) locality.wait();
          }
          return false;
        }
        gathered = typename impl::gathered_input{stats_job.result(), locality.result(), free_memory};
        note_part("read back in %.0f us", gathered_us);
        // The decision in a part of its own: with the read-backs it took 46-100 us of host time in one part
        // on the H100 machine (session 21).
        at = stage::deciding;
        return false;
      }
      case stage::deciding: {
        if (!block && !gathered->estimates) {
          // The models' predictions in parts of their own, a slice of the candidates each (all of them took
          // 12-21 us in one part on the H100 machine, session 21): candidates until prediction_slice_us has
          // passed, at least one.
          const auto t1 = clock_type::now();
          if (!prediction_in) {  // in a part of its own: with the first candidate's prediction it took 8-12 us (H200, session 33)
            prediction_in = m.analysis_input(gathered->stats, gathered->loc, gathered->free_memory_bytes);
            note_part("prediction input (%.0f us)", 1e3 * ms_since(t1));
            return false;
          }
          const std::size_t first = predicted;
          while (predicted < opts.candidates.size()) {
            auto e = estimate_formats(*ctx, *prediction_in, {opts.candidates[predicted]});
            partial_estimates.insert(partial_estimates.end(), e.begin(), e.end());
            ++predicted;
            if (1e3 * ms_since(t1) >= prediction_slice_us) break;
          }
          note_part("predictions %.0f-%.0f of %.0f (%.0f us)", static_cast<double>(first + 1), static_cast<double>(predicted),
                    static_cast<double>(opts.candidates.size()), 1e3 * ms_since(t1));
          if (predicted == opts.candidates.size()) {
            gathered->estimates = std::move(partial_estimates);
            gathered->input = std::move(prediction_in);  // the predictions are done with it
          }
          return false;
        }
        if (!block && opts.online && ctx->online_corrections() && !m.on.timer) {
          // The online refinement's timing events, taken from the pool, in a part of their own.
          const auto t1 = clock_type::now();
          m.on.timer = std::make_unique<detail::spmv_timer>();
          note_part("online timer (%.0f us)", 1e3 * ms_since(t1));
          return false;
        }
        if (!block && opts.online && !gathered->factors) {
          if (const auto corr = ctx->online_corrections()) {
            // The online corrections' factors in parts of their own (6-12 us of the 26-31 us decision part on
            // the H100 machine, session 21), in slices like the predictions: all of them took 8-13 us in one
            // part of a one-CPU short solve on the H200 (session 34).
            const auto t1 = clock_type::now();
            const auto& est = *gathered->estimates;
            if (!partial_factors) {
              partial_factors.emplace();
              partial_factors->key = online::key_of(gathered->stats, sizeof(Value), gathered->loc.x_sectors_per_nnz);
              partial_factors->raw_us.reserve(est.size());
              partial_factors->cls.reserve(est.size());
              partial_factors->factor.reserve(est.size());
            }
            const std::size_t first = partial_factors->factor.size();
            while (partial_factors->factor.size() < est.size()) {
              m.add_online_factor(*corr, est[partial_factors->factor.size()], *partial_factors);
              if (1e3 * ms_since(t1) >= prediction_slice_us) break;
            }
            if (partial_factors->factor.size() == est.size()) {
              partial_factors->source = ctx->online_source();  // a string built from the corrections' count
              gathered->factors = std::move(partial_factors);
              partial_factors.reset();
            }
            note_part("online factors %.0f-%.0f of %.0f (%.0f us)", static_cast<double>(first + 1),
                      static_cast<double>(gathered->factors ? est.size() : partial_factors->factor.size()), static_cast<double>(est.size()),
                      1e3 * ms_since(t1));
            return false;
          }
        }
        const auto t1 = clock_type::now();
        if (!block && !chosen) {  // the decision's first half in a part of its own (impl::analyze_choose)
          chosen = m.analyze_choose(*ctx, opts, stream, &*gathered);
          note_part("choice (%.0f us: predictions %.0f, online %.0f (timer %.0f, factors %.0f), choice %.0f)", 1e3 * ms_since(t1),
                    m.report.predict_us, m.report.online_us, m.report.timer_us, m.report.factors_us, m.report.choice_us);
          return false;
        }
        if (chosen) {
          m.analyze_finish(*ctx, opts, stream, *chosen);
          chosen.reset();
          note_part("decision (%.0f us)", 1e3 * ms_since(t1));
        } else {
          m.analyze(*ctx, opts, stream, &*gathered);
          note_part("decision (%.0f us: predictions %.0f, online %.0f (timer %.0f, factors %.0f), choice %.0f)", 1e3 * ms_since(t1),
                    m.report.predict_us, m.report.online_us, m.report.timer_us, m.report.factors_us, m.report.choice_us);
        }
        changed = true;
        at = after_step();
        return false;
      }
      case stage::plan_strips: {
        // The passes gather_strips makes, issued one per part and read back without waiting.
        const auto t0 = clock_type::now();
        const auto& req = *m.planning_request;
        strips_job.start(m.csr.rows, m.csr.row_ptr.data(), m.csr.col_idx.data(), req.strip_rows, sizeof(Value),
                         m.strips_need_columns(req.in, opts.candidates), pass_stream(stage::plan_strips, stream));
        strips_ms = ms_since(t0);
        at = stage::gathering_strips;
        return false;
      }
      case stage::gathering_strips: {
        const auto t0 = clock_type::now();
        const cudaStream_t passes = pass_stream(stage::gathering_strips, stream);
        const bool done = block ? (strips_job.wait(passes), true) : strips_job.poll(passes);
        strips_ms += ms_since(t0);
        if (!done) return false;
        const auto& req = *m.planning_request;
        planner = std::make_unique<partition_planner>(std::move(strips_job.result()), m.csr.cols, opts.candidates,
                                                      m.partition_cost(*ctx, req.in, opts.candidates), opts.planner, &m.report.stats,
                                                      m.report.x_sectors_per_nnz);
        at = stage::plan_dp;
        return false;
      }
      case stage::plan_dp: {
        // A slice of ~20 us of host time (paced by opts.stage_duty); it was the product's predicted time beyond a
        // launch, at least 20 us, which gave the circuit stack 54 us slices that raised its solves 6-8 % (session 21).
        if (!planner->advance(dp_slice_us)) return false;
        partition_plan p = planner->result();
        p.planning_ms += strips_ms;
        m.planning_memo = std::move(p);
        m.planning_request.reset();
        planner.reset();
        at = stage::replay;
        return false;
      }
      case stage::replay:
        // The step again, now with its partition planned (try_partition takes planning_memo).
        switch (step) {
          case background_step::analyze: m.analyze(*ctx, opts, stream, &*gathered); break;
          case background_step::plan_when_reused: changed = m.plan_when_reused(*ctx, opts, stream); break;
          case background_step::convert_deferred: break;  // plans nothing
        }
        m.planning_memo.reset();
        if (m.planning_request) {  // cannot happen (the memo matches the request): do not loop
          m.planning_request.reset();
          AIJP_THROW(aijp::error, "staged partition planning asked for strips again");
        }
        at = stage::convert;
        return false;
      case stage::convert: {
        if (m.pending_partition) {  // a partition, built in parts (make_partition_builder)
          const auto t0 = clock_type::now();
          const auto& pp = *m.pending_partition;
          const detail::format_check<Value> check = [&pp](format_id f, const detail::build_args<Value>& args) {
            impl::check_block(f, pp.in, pp.params, args.stats);
          };
          builder = detail::make_partition_builder<Value>(m.csr, pp.want, impl::block_factory(pp.in, pp.params), check, m.handle, rows_per_part(format_id::sell_delta16),
                                                          &partition_built);
          at = stage::building_partition;
          conversion_host_ms += ms_since(t0);
          if (!block) return false;  // its first pieces in the next part
          return advance_once(stream, block);
        }
        if (!m.staged_choice) return true;  // nothing to convert (no change)
        building = *m.staged_choice;
        if (building == format_id::cusparse_csr && running_has_csr) {
          // The install moves the running cuSPARSE CSR (or the one host_bound_start set aside) and its handle over.
          keep_running_layout = true;
          m.converted(building, 0.0);
          return true;
        }
        const auto t0 = clock_type::now();
        builder = detail::make_format_builder<Value>(building, m.csr, m.report.stats, rows_per_part(building));
        if (builder) {  // sell_delta16, sell_sigma, sell: in parts
          at = stage::converting;
          conversion_host_ms += ms_since(t0);
          // Its first fill in the next part: the builder and its first fill took 93-131 us of host time in
          // one part for lap7 16^3 (session 21).
          if (!block) {
            note_part("builder made in %.0f us", 1e3 * ms_since(t0));
            part.subject = format_name(building);
            return false;
          }
          return advance_once(stream, block);
        }
        // The other formats run on the CSR copy (csr_scalar, csr_vector, cuSPARSE CSR) or convert whole.
        building = m.build_or_fall_back(building, stream);
        const double build_ms = ms_since(t0);
        conversion_host_ms += build_ms;
        m.converted(building, conversion_host_ms);
        note_part("built whole in %.0f us", 1e3 * build_ms);
        part.subject = format_name(building);
        return true;
      }
      case stage::converting: {
        const auto t0 = clock_type::now();
        bool built = false;
        // A builder that failed (what, out of memory): here or, handed back by the worker, in an earlier part.
        std::optional<std::pair<std::string, bool>> failed = std::move(worker_fallback);
        worker_fallback.reset();
        if (!failed) {
          try {
            built = builder->advance(stream);
            if (!built && block) builder->wait();
          } catch (const device_out_of_memory& e) {  // cuSPARSE CSR, as convert_to would have fallen back
            failed.emplace(e.what(), true);
          } catch (const not_supported& e) {
            failed.emplace(e.what(), false);
          }
        }
        if (failed) {
          builder.reset();
          if (in_worker) {  // cuSPARSE CSR's layout and handle belong to the products' thread and stream
            worker_fallback = std::move(failed);
            conversion_host_ms += ms_since(t0);
            return false;
          }
          building = m.fall_back_to_csr(building, failed->first, failed->second, stream);
          built = true;
        }
        conversion_host_ms += ms_since(t0);
        if (!built) return false;
        if (builder) {  // kept until the job ends: freeing its pinned read-back memory synchronises
          m.format = builder->take();
          char line[120];
          std::snprintf(line, sizeof(line), "; converted in %d parts", builder->parts_issued());
          m.report.decision += line;
        }
        m.converted(building, conversion_host_ms);
        return true;
      }
      case stage::building_partition: {
        const auto t0 = clock_type::now();
        bool built = false;
        try {
          built = builder->advance(stream);
          part.text = builder->last_part();
          if (!built && block) builder->wait();
        } catch (const device_out_of_memory& e) {  // as build_partition's caller would, on cuSPARSE CSR
          builder.reset();
          m.pending_partition.reset();
          building = m.fall_back_to_csr(format_id::cusparse_csr, std::string("building the partition: ") + e.what(), true, stream);
          conversion_host_ms += ms_since(t0);
          m.converted(building, conversion_host_ms);
          return true;
        }
        conversion_host_ms += ms_since(t0);
        if (!built) return false;
        m.format = builder->take();
        const bool verify = m.pending_partition->verify;
        m.finish_partition(*partition_built, conversion_host_ms, verify);
        m.pending_partition.reset();
        char line[120];
        std::snprintf(line, sizeof(line), "; built in %d parts", builder->parts_issued());
        m.report.decision += line;
        return true;
      }
      case stage::finished: return true;
    }
    return true;
  }
};

template <typename Value>
bool gpu_matrix<Value>::start_background(std::shared_ptr<const context> ctx, background_step step, const plan_options& opts,
                                         cudaStream_t stream, background_mode mode)
{
  AIJP_ENSURE(ctx != nullptr, bad_input, "start_background needs a context");
  auto& m = *impl_;
  if (job_ || m.on.parked || m.on.explore_builder) return false;
  if (step == background_step::convert_deferred && !m.deferred_pays(opts.expected_mults)) return false;
  if (step == background_step::plan_when_reused && !m.may_plan_when_reused(opts, ctx->model_params().launch_us)) return false;
  const auto t_start = clock_type::now();
  auto job = spare_job_ ? std::move(spare_job_) : std::make_unique<background_job>();
  job->step = step;
  job->mode = mode;
  job->ctx = std::move(ctx);
  job->opts = opts;
  job->duty = job->unpaced() ? 0.0 : opts.stage_duty;
  if (mode == background_mode::staged) {
    job->source = &m;  // copied in the first part
    job->source_values_version = m.values_version;
    // A plan never analysed runs its products without online state: nothing the copy reads changes meanwhile.
    job->worker_copy = step == background_step::analyze && !m.report.analyzed && !m.on.corr;
    if (step == background_step::analyze && m.prefetch && m.prefetch->result) {
      job->gathered = *m.prefetch->result;  // a copy: a later analysis of this plan may take it again
      job->prefetched = true;
    }
    job->started = clock_type::now();
    if (step == background_step::analyze && opts.analysis_stream) job->side = detail::analysis_stream();
    const auto& params = job->ctx->model_params();
    job->slack_us = m.report.analyzed && m.report.predicted_us > 0
                        ? std::max(0.0, m.report.predicted_us - params.launch_us)
                        : m.csr_bound_us;  // not analysed yet
    job->running_format = m.report.chosen;
    job->running_has_csr = m.parked_csr != nullptr || (!m.report.partitioned && m.format && m.format->id() == format_id::cusparse_csr);
    const double product_us = job->slack_us + params.launch_us;
    if (product_us >= background_job::timed_passes_min_us) {
      if (opts.stage_duty > 0) job->pass_timer = std::make_unique<detail::spmv_timer>(4);
      job->overlap_us = opts.stage_overlap * job->slack_us;
    } else {
      job->untimed_pass_us = product_us;
    }
    // Starting the step is host time in this product too: the first part waits for its share of it (unless
    // the caller wants the first part at once: plan_options::first_part_unpaced).
    job->start_us = 1e3 * ms_since(t_start);
    job->spent_us = opts.first_part_unpaced ? 0.0 : job->start_us;
    job_ = std::move(job);
    m.step_running = true;
    return true;
  }
  m.copy_report_into(job->plan_of(m));
  m.copy_state_into(*job->plan, m.values_version);
  job->ready.record(stream);
  // The process's worker thread (started by the context), kept off this thread's CPU where it may.
  background_job* j = job.get();
  job->caller_cpu = job->submit_to_worker([j](cudaStream_t s) { j->run(s); });
  job_ = std::move(job);
  m.step_running = true;
  return true;
}

template <typename Value>
void gpu_matrix<Value>::make_spare_job()
{
  spare_job_ = std::make_unique<background_job>();
  // What a staged analysis's parts would otherwise allocate inside short solves: the plan it copies the
  // running one into (its first part took 24 us with page faults on the H200, session 33), its parts' notes
  // (record_part), the predictions.
  spare_job_->plan = std::make_unique<impl>(impl_->csr_owner);
  spare_job_->reserve_parts(64);
}

template <typename Value>
void gpu_matrix<Value>::install_background(cudaStream_t stream, bool* changed)
{
  const auto t0 = clock_type::now();
  std::unique_ptr<background_job> job = std::move(job_);
  if (job->finished.valid()) job->finished.wait();
  impl& running = *impl_;
  running.step_running = false;
  if (changed) *changed = false;
  if (job->error) std::rethrow_exception(job->error);
  impl& built = *job->plan;
  if (!job->changed) {
    // Nothing converted: the running plan stays, with what the step decided (a plan_when_reused that took no
    // split: the planner's proposal and the decision line; it is not planned again).
    running.report.decision = built.report.decision;
    running.report.proposed = built.report.proposed;
    running.report.partition_pending = built.report.partition_pending;
    running.plan_input = built.plan_input;
  } else {
    // Values written by update_values while the step ran may be missing from the new layout.
    if (built.values_version != running.values_version && built.format) built.format->refresh_values(built.csr, stream);
    built.values_version = running.values_version;
    built.background = false;
    built.staged = false;
    built.staged_choice.reset();
    if (job->keep_running_layout) {  // its handle moves below
      built.format = running.parked_csr ? std::move(running.parked_csr) : std::move(running.format);
    }
    built.on.timing = running.on.timing;
    built.on.pace = running.on.pace;  // the solver's pace, not the plan's (first_spacing)
    if (built.on.corr && !built.on.timer) built.on.timer = std::make_unique<detail::spmv_timer>();
    built.report.refinement = running.report.refinement;  // what online refinement did before the step
    // No format of the new plan needed cuSPARSE, or it runs the running plan's cuSPARSE CSR: it takes over
    // the running plan's handle (and the transpose product made with it) rather than creating one.
    if (job->keep_running_layout || !built.handle.created()) {
      built.handle.swap(running.handle);
      built.transpose = std::move(running.transpose);
    }
    // The running plan's layout is freed now (cudaFree waits for the products already queued on it), or
    // kept aside where it holds at most retire_max_bytes (a step on a short solve: cuSPARSE CSR, whose layout
    // is the CSR copy itself) and freed at the next install or with the matrix: a free inside the product
    // waits for the device.
    std::unique_ptr<impl> old = std::move(impl_);
    impl_ = std::move(job->plan);
    constexpr size_type retire_max_bytes = size_type(16) << 20;
    if (!old->format || old->format->device_bytes() <= retire_max_bytes) {
      std::swap(old, retired_);  // the plan retired before, if any, goes now
    }
  }
  plan_report& rep = impl_->report;  // the plan now running, new or not
  if (job->mode == background_mode::staged) {  // its explorations convert in parts too
    impl_->on.stage_exploration = true;
    impl_->on.stage_fraction = job->opts.stage_fraction;
    impl_->on.stage_duty = job->opts.stage_duty;
  }
  rep.background_ms = job->wall_ms;
  rep.background_what = background_step_name(job->step);
  rep.background_caller_cpu = job->caller_cpu;  // -1 for a staged step without host_worker
  rep.background_worker_cpu = job->worker_cpu;
  rep.staged_poll_us = std::move(job->poll_us);  // empty for a thread
  rep.staged_poll_notes = std::move(job->poll_notes);
  rep.staged_poll_product = std::move(job->poll_product);
  rep.staged_skipped = job->skipped;
  rep.staged_device_us = job->device_us;
  rep.staged_worker_ms = job->worker_ms;
  rep.staged_worker_stages = job->worker_stages;
  rep.staged_prefetched = job->prefetched;
  if (changed) *changed = job->changed;
  job.reset();  // its pinned blocks, events and temporaries go back to their pools: part of the install
  rep.install_ms = ms_since(t0);
}

template <typename Value>
void gpu_matrix<Value>::charge_background(double host_us)
{
  if (job_ && job_->mode == background_mode::staged && host_us > 0) {
    job_->start_us += host_us;
    job_->spent_us += host_us;
  }
}

template <typename Value>
double gpu_matrix<Value>::cusparse_csr_bound_us() const
{
  return impl_->csr_bound_us;
}

template <typename Value>
bool gpu_matrix<Value>::poll_background(cudaStream_t stream, bool* changed)
{
  if (!job_) return false;
  if (job_->mode == background_mode::staged) {
    if (!job_->advance(stream, false)) return false;
  } else if (!job_->done.load(std::memory_order_acquire)) {
    return false;
  }
  install_background(stream, changed);
  return true;
}

template <typename Value>
bool gpu_matrix<Value>::background_poll_due()
{
  if (!job_) return false;
  if (job_->mode == background_mode::staged) return job_->due(clock_type::now());
  return job_->done.load(std::memory_order_acquire);
}

template <typename Value>
bool gpu_matrix<Value>::finish_background(cudaStream_t stream, bool* changed)
{
  if (!job_) return false;
  if (job_->mode == background_mode::staged) job_->advance(stream, true);
  install_background(stream, changed);
  return true;
}

template <typename Value>
bool gpu_matrix<Value>::background_running() const
{
  return job_ != nullptr;
}

template <typename Value>
void gpu_matrix<Value>::prefetch_analysis(cudaStream_t stream, bool side_stream)
{
  auto& m = *impl_;
  if (m.prefetch || m.report.analyzed || m.csr.rows == 0 || m.csr.cols == 0) return;
  auto p = std::make_unique<typename impl::prefetch_state>();
  if (m.free_after_upload > 0) {
    p->free_memory = m.free_after_upload;
  } else {
    device_memory_info(&p->free_memory, nullptr);
  }
  cudaStream_t passes = stream;
  if (side_stream) {  // after the upload queued on the products' stream
    p->side = detail::analysis_stream();
    p->products_ready.record(stream);
    AIJP_CUDA_CHECK(cudaStreamWaitEvent(p->side, p->products_ready.get(), 0));
    passes = p->side;
  }
  // Every call now (no pieces): this product's solve carries the upload already.
  p->stats.start(m.csr.rows, m.csr.cols, m.csr.row_ptr.data(), passes, false);
  p->loc.start(m.csr.rows, m.csr.cols, m.csr.row_ptr.data(), m.csr.col_idx.data(), sizeof(Value), passes, 2048, false);
  m.prefetch = std::move(p);
}

template <typename Value>
bool gpu_matrix<Value>::advance_prefetch(cudaStream_t stream)
{
  auto& m = *impl_;
  if (!m.prefetch || m.prefetch->result) return true;
  auto& p = *m.prefetch;
  // The statistics' poll issues the histogram's calls (all at once) when it finds the first pass done.
  const bool stats_done = p.stats.poll(p.side != nullptr ? p.side : stream);
  const bool loc_done = p.loc.poll();
  if (!stats_done || !loc_done) return false;
  p.result = typename impl::gathered_input{p.stats.result(), p.loc.result(), p.free_memory};
  return true;
}

template <typename Value>
bool gpu_matrix<Value>::host_bound_start(const context& ctx, const plan_options& opts, cudaStream_t stream)
{
  auto& m = *impl_;
  if (job_ || m.report.analyzed || opts.forced || !m.prefetch || !m.prefetch->result) return false;
  if (!m.format || m.format->id() != format_id::cusparse_csr) return false;  // also: switched already
  if (std::find(opts.candidates.begin(), opts.candidates.end(), format_id::csr_vector) == opts.candidates.end()) return false;
  const auto t0 = clock_type::now();
  const auto& g = *m.prefetch->result;
  const prediction_input in = m.analysis_input(g.stats, g.loc, g.free_memory_bytes);
  const auto est = estimate_formats(ctx, in, {format_id::cusparse_csr, format_id::csr_vector});
  const int csr_i = estimate_index(est, format_id::cusparse_csr), vec_i = estimate_index(est, format_id::csr_vector);
  if (csr_i < 0 || vec_i < 0 || !est[csr_i].feasible || !est[vec_i].feasible || !(est[vec_i].predicted_us <= est[csr_i].predicted_us) ||
      !(est[csr_i].predicted_us <= opts.host_bound_start_us)) {
    return false;
  }
  std::unique_ptr<detail::format_impl<Value>> vec;
  try {
    vec = build_format<Value>(format_id::csr_vector, detail::build_args<Value>{m.csr, g.stats, m.handle, stream});
  } catch (const not_supported&) {
    return false;
  }
  m.parked_csr = std::move(m.format);
  m.format = std::move(vec);
  plan_report& rep = m.report;
  rep.chosen = format_id::csr_vector;
  rep.plan = format_name(rep.chosen);
  char line[240];
  std::snprintf(line, sizeof(line),
                "not analysed yet: csr_vector until the matrix is reused (host-bound start: predicted %.2f us against cuSPARSE CSR's %.2f us, "
                "on the CSR copy; decided in %.0f us)",
                est[vec_i].predicted_us, est[csr_i].predicted_us, 1e3 * ms_since(t0));
  rep.decision = line;
  return true;
}

template <typename Value>
bool gpu_matrix<Value>::prefetch_pending() const
{
  return impl_->prefetch && !impl_->prefetch->result;
}

template <typename Value>
bool gpu_matrix<Value>::prefetch_ready() const
{
  return impl_->prefetch && impl_->prefetch->result;
}

template <typename Value>
std::string gpu_matrix<Value>::staged_last_part() const
{
  const auto& on = impl_->on;
  if (on.explore_builder) {
    const std::string part = on.explore_builder->last_part();
    return "converting " + std::string(format_name(on.explore_pending.to)) + " to explore it, part " + std::to_string(on.explore_parts) +
           (part.empty() ? "" : ": " + part);
  }
  if (!job_ || job_->poll_notes.empty()) return {};
  // With its recorded host time: a trace compares it with the time the caller saw the poll take.
  char us[40];
  std::snprintf(us, sizeof us, " [part %.1f us]", job_->poll_us.empty() ? 0.0 : job_->poll_us.back());
  return job_->poll_notes.back().label() + us;
}

template <typename Value>
gpu_matrix<Value>::~gpu_matrix() = default;

template <typename Value>
void gpu_matrix<Value>::update_values(const Value* host_values, cudaStream_t stream)
{
  auto& a = impl_->csr;
  if (a.nnz == 0) return;
  AIJP_CUDA_CHECK(cudaMemcpyAsync(a.values.data(), host_values, a.nnz * sizeof(Value), cudaMemcpyHostToDevice, stream));
  ++impl_->values_version;
  impl_->format->refresh_values(a, stream);
  if (impl_->on.parked) impl_->on.parked->refresh_values(a, stream);
}

template <typename Value>
void gpu_matrix<Value>::apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream)
{
  const auto& a = impl_->csr;
  if (a.rows == 0) return;
  if (a.nnz == 0 || a.cols == 0 || alpha == Value(0)) {
    detail::scale_or_zero(a.rows, beta, y, stream);
    return;
  }
  auto& on = impl_->on;
  on.pace.note(clock_type::now());
  if (!on.corr || !on.timing) {
    impl_->format->apply(alpha, x, beta, y, stream);
    return;
  }
  on.stream = stream;
  if (on.timer->pending() > 0) impl_->harvest(false);  // may switch the format (exploration)
  const long k = on.calls++;
  if (on.parked && on.policy.interleave_block > 1) {
    // Exploring: runs of interleave_block products alternate between the runner-up (format) and the parked
    // (running) plan; every product of a run but the first is timed, the parked plan's with the negated
    // epoch (harvest). Both plans compute the same product. The runner-up's epoch began when it was built,
    // so `k` counts the exploration's products.
    const long b = on.policy.interleave_block;
    const bool parked = (k / b) % 2 == 1;
    auto& run = parked ? *on.parked : *impl_->format;
    if (k % b != 0 && on.timer->begin(stream, parked ? -on.epoch : on.epoch)) {
      const auto t0 = clock_type::now();
      run.apply(alpha, x, beta, y, stream);
      impl_->keep_last(parked ? on.parked_host_us : on.host_us, 1e3 * ms_since(t0));
      on.timer->end(stream);
      if (!parked) ++on.timed;
    } else {
      run.apply(alpha, x, beta, y, stream);
    }
    return;
  }
  // The first sample_first products of a plan are timed (those of an exploration included; every
  // sample_first_spacing-th where the solve is bound by the host: first_spacing), then one in on.interval
  // (sample_every, doubling at each observation up to sample_every_max).
  const bool first = on.timed < on.policy.sample_first;
  // The spacing of the first samples needs the solver's pace (online::policy::first_samples_wait_for_pace).
  const bool pace_unknown = first && on.policy.first_samples_wait_for_pace && on.policy.sample_first_spacing > 1 &&
                            on.pace.count < online::policy::gap_window;
  const bool sample = first ? !pace_unknown && k >= on.next_first : (on.interval > 0 && k % on.interval == 0);
  if (sample && on.timer->begin(stream, on.epoch)) {
    const auto t0 = clock_type::now();
    impl_->format->apply(alpha, x, beta, y, stream);
    impl_->keep_last(on.host_us, 1e3 * ms_since(t0));
    on.timer->end(stream);
    ++on.timed;
    if (first) {
      const int s = impl_->first_spacing();
      on.next_first = k + s;
      impl_->report.first_sample_spacing = s;
    }
  } else {
    impl_->format->apply(alpha, x, beta, y, stream);
  }
  if (on.explore_builder) impl_->advance_exploration(stream);  // after the product: its host time overlaps it
}

template <typename Value>
void gpu_matrix<Value>::online_sync()
{
  auto& on = impl_->on;
  if (!on.corr || !on.timer) return;
  impl_->harvest(true);
  // A short run's last few samples still count (at least 3, so that one odd product is not an observation).
  if (on.window.size() >= 3) impl_->observe_window(false);
}

template <typename Value>
void gpu_matrix<Value>::set_online_timing(bool on)
{
  impl_->on.timing = on;
}

template <typename Value>
bool gpu_matrix<Value>::online_timing() const
{
  return impl_->on.timing;
}

template <typename Value>
void gpu_matrix<Value>::apply_transpose(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream)
{
  auto& m = *impl_;
  if (m.csr.cols == 0) return;
  if (m.csr.nnz == 0 || m.csr.rows == 0 || alpha == Value(0)) {
    detail::scale_or_zero(m.csr.cols, beta, y, stream);
    return;
  }
  if (!m.transpose) m.transpose = std::make_unique<detail::cusparse_transpose<Value>>(m.csr, m.handle.get());
  m.transpose->apply(alpha, x, beta, y, stream);
}

template <typename Value>
void gpu_matrix<Value>::diagonal(Value* d, cudaStream_t stream) const
{
  const auto& a = impl_->csr;
  if (a.rows == 0) return;
  const int lanes = lanes_per_row(a.rows, a.nnz);
  extract_diagonal<<<row_groups_blocks(a.rows, lanes), 256, 0, stream>>>(a.rows, lanes, a.row_ptr.data(), a.col_idx.data(),
                                                                       a.values.data(), d);
  AIJP_CHECK_LAUNCH();
}

template <typename Value>
format_id gpu_matrix<Value>::format() const
{
  return impl_->report.chosen;
}
template <typename Value>
const plan_report& gpu_matrix<Value>::report() const
{
  // Written only when it changed: a step worker may be copying this report (background_job::worker_copy).
  if (impl_->csr.reserve) {
    const double used = static_cast<double>(impl_->csr.reserve->used());
    if (impl_->report.reserve_used_bytes != used) impl_->report.reserve_used_bytes = used;
  }
  return impl_->report;
}
template <typename Value>
size_type gpu_matrix<Value>::rows() const
{
  return impl_->csr.rows;
}
template <typename Value>
size_type gpu_matrix<Value>::cols() const
{
  return impl_->csr.cols;
}
template <typename Value>
size_type gpu_matrix<Value>::nnz() const
{
  return impl_->csr.nnz;
}

std::string staged_part_note::label() const
{
  std::string s = from;
  if (to) s += std::string(">") + to;
  if (what) {
    char line[256];
    std::snprintf(line, sizeof line, what, v[0], v[1], v[2], v[3], v[4], v[5]);  // conversions take doubles only
    s += ": ";
    if (subject) s += std::string(subject) + " ";
    s += line;
    if (piece) s += std::string(": ") + piece;
  }
  if (!text.empty()) s += ": " + text;
  if (allocations > 0) {
    s += " [" + std::to_string(allocations) + (allocations == 1 ? " allocation:" : " allocations:");
    const int shown = std::min(allocations, 8);
    for (int k = 0; k < shown; ++k) {
      const long long b = allocation_bytes[k];
      s += (k > 0 ? ", " : " ") + std::to_string((b < 0 ? -b : b) >> 10) + (b < 0 ? " KiB host" : " KiB");
    }
    s += "]";
  }
  if (page_faults > 0 || preemptions > 0) {
    s += " [";
    if (page_faults > 0) s += std::to_string(page_faults) + (page_faults == 1 ? " page fault" : " page faults");
    if (preemptions > 0) s += (page_faults > 0 ? ", " : "") + std::to_string(preemptions) + (preemptions == 1 ? " preemption" : " preemptions");
    s += "]";
  }
  if (work_us >= 0) {
    char split[80];
    std::snprintf(split, sizeof split, " {work %.0f, events %.0f}", work_us, events_us);
    s += split;
  }
  return s;
}

std::vector<std::string> plan_report::staged_poll_labels() const
{
  std::vector<std::string> out;
  out.reserve(staged_poll_notes.size());
  for (const auto& n : staged_poll_notes) out.push_back(n.label());
  return out;
}

double plan_report::staged_host_ms() const
{
  double us = 0;
  for (double t : staged_poll_us) us += t;
  return 1e-3 * us;
}

double plan_report::staged_max_poll_ms() const
{
  return staged_poll_us.empty() ? 0.0 : 1e-3 * *std::max_element(staged_poll_us.begin(), staged_poll_us.end());
}

std::string plan_report::to_string() const
{
  std::ostringstream os;
  os << "aijpredict: " << stats.rows << " x " << stats.cols << " matrix, " << stats.nnz << " nonzeros, on "
     << device.to_string() << "\n";
  if (!analyzed) {
    os << "  " << decision << "\n";
    return os.str();
  }
  os << "  statistics (on the GPU): " << stats.to_string() << "\n";
  {
    char loc[200];
    std::snprintf(loc, sizeof(loc), "  locality (sampled): x %.3f sectors/nonzero in row order, %.3f length-sorted; y %.3f sectors/row length-sorted\n",
                  x_sectors_per_nnz, sorted.x_sectors_per_nnz, sorted.y_sectors_per_row);
    os << loc;
  }
  if (device.sm_count > 0) {
    const auto thread_row = strips_for_lanes(device, 1, stats.rows);
    const auto warp_row = strips_for_lanes(device, device.warp_size, stats.rows);
    const auto coo = strips_for_coo(device, stats.nnz);
    os << "  strips: thread per row " << thread_row.strips << " x " << thread_row.rows_per_strip
       << " rows; warp per row " << warp_row.strips << " x " << warp_row.rows_per_strip << " rows; COO "
       << coo.strips << " x " << coo.rows_per_strip << " nonzeros\n";
  }
  os << "  model: " << model_source << "; device constants: " << params_source << "\n";
  if (!online_source.empty()) os << "  " << online_source << "\n";
  const bool online = online_factor.size() == estimates.size() && !online_factor.empty();
  char line[320];
  std::snprintf(line, sizeof(line), "  %-18s %-9s %14s %14s%s\n", "format", "feasible", "bytes/SpMV", "predicted us",
                online ? "   online x" : "");
  os << line;
  for (std::size_t i = 0; i < estimates.size(); ++i) {
    const auto& e = estimates[i];
    char factor[32] = "";
    if (online) std::snprintf(factor, sizeof(factor), " %10.3f", online_factor[i]);
    std::snprintf(line, sizeof(line), "  %-18s %-9s %14.0f %14.2f%s%s%s%s\n", format_name(e.format), e.feasible ? "yes" : "no",
                  e.bytes, e.predicted_us, factor, e.fitted ? "" : " (placeholder)", e.reason.empty() ? "" : "  ", e.reason.c_str());
    os << line;
  }
  if (!proposed.blocks.empty()) {
    std::snprintf(line, sizeof(line), "  partition planner: %d strips of %lld rows, %.3f ms; best split %.2f us vs %.2f us for %s alone: ",
                  proposed.strips, static_cast<long long>(proposed.strip_rows), proposed.planning_ms, proposed.predicted_us,
                  proposed.single_us, format_name(proposed.single_format));
    os << line << proposed.to_string() << "\n";
  }
  std::snprintf(line, sizeof(line), "  upload %.3f ms, analysis %.3f ms, conversion %.3f ms\n", upload_ms, analysis_ms,
                conversion_ms);
  os << "  choice: " << decision << "\n";
  if (partitioned) os << "  plan: " << plan << "\n";
  os << line;
  if (reserve_bytes > 0) {
    char reserve[160];
    std::snprintf(reserve, sizeof(reserve), "  layout reserve beside the CSR copy: %.1f MiB, %.1f MiB of it taken by layouts\n",
                  reserve_bytes / 1048576.0, reserve_used_bytes / 1048576.0);
    os << reserve;
  }
  if (background_ms > 0 && staged_polls() > 0) {
    std::snprintf(line, sizeof(line), "  %s ran staged in %d parts over %d products (%.3f ms of host time in them, at most %.3f ms in one; %.3f ms of device time read back; %.3f ms from start to end), while they ran the previous plan; installed in %.3f ms\n",
                  background_what.c_str(), staged_polls(), staged_polls() + staged_skipped, staged_host_ms(), staged_max_poll_ms(), 1e-3 * staged_device_us, background_ms, install_ms);
    os << line;
  } else if (background_ms > 0) {
    std::snprintf(line, sizeof(line), "  %s ran in the background in %.3f ms, while the products ran the previous plan; installed in %.3f ms\n",
                  background_what.c_str(), background_ms, install_ms);
    os << line;
  }
  if (measured_samples > 0) {
    char spacing[64] = "";
    if (first_sample_spacing > 1) std::snprintf(spacing, sizeof(spacing), "; the first one in %d", first_sample_spacing);
    std::snprintf(line, sizeof(line), "  running %s: measured %.2f us (median of %d timed products%s), predicted %.2f us, model error %.1f %%\n",
                  plan.c_str(), measured_us, measured_samples, spacing, predicted_us, 100 * model_error);
    os << line;
  } else if (!online_source.empty()) {
    os << "  running " << plan << ": not measured yet\n";
  }
  for (const auto& r : refinement) os << "  online: " << r << "\n";
  return os.str();
}

template class gpu_matrix<double>;
template class gpu_matrix<float>;

}  // namespace aijp

// The module of this unit is loaded at context creation (module_preload.hpp).
AIJP_MODULE_ANCHOR("gpu_matrix.cu", 0)
