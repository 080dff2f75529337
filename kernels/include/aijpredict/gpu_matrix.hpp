// The per-matrix plan: a sparse matrix resident on the GPU in the storage format the runtime chose.
//
// Built from a host CSR matrix: uploads it, computes the row statistics on the device, predicts every
// candidate format's SpMV time, converts on the device to the best one, and then applies y = alpha A x +
// beta y on device vectors. It owns everything derived from the matrix (converted arrays, cuSPARSE
// descriptors and buffers, statistics); it is bound to one matrix, not copyable. A value change with the
// same pattern refreshes the values in place (`update_values`); a pattern change needs a new object.
#pragma once

#include <aijpredict/csr.hpp>
#include <aijpredict/device.hpp>
#include <aijpredict/error.hpp>
#include <aijpredict/formats.hpp>
#include <aijpredict/online.hpp>
#include <aijpredict/planner.hpp>
#include <aijpredict/predict.hpp>
#include <aijpredict/stats.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace aijp {

/// Where the arrays of a csr_view live.
enum class memory_space { host, device };

/// plan_options::layout_reserve counts a CSR copy's bytes twice up to this many (64 MiB).
constexpr std::size_t layout_reserve_small_bytes = std::size_t{64} << 20;

struct plan_options {
  std::vector<format_id> candidates = all_formats();  ///< formats the selection may choose from
  std::optional<format_id> forced;                     ///< skip the selection (warm-up, tests, -mat_aijpredict_force)
  /// false: the constructor only uploads and runs cuSPARSE CSR; analyze() later decides (PETSc plugin:
  /// short solves never pay for an analysis).
  bool analyze = true;
  /// Amortization: when > 0, a format other than cuSPARSE CSR is converted to only if the predicted saving
  /// per SpMV times this many SpMVs exceeds the estimated conversion cost; otherwise the choice is kept as
  /// deferred (report().deferred) and convert_deferred() does it later. 0: convert whenever faster.
  double expected_mults = 0;
  /// Amortization's exception for the upload's solve: a choice whose estimated conversion cost is at most this
  /// (us) is converted at once, whatever expected_mults says, and a staged step builds it unpaced, in whole
  /// parts (no stage_duty, no stage_fraction), so that the conversion lands in the solve that holds the upload
  /// (every GPU matrix type's first solve pays its upload) rather than in parts over later solves, each of which
  /// such a part cost 2-6 % on the H100 (session 30). 0: off (the PETSc plugin sets it with
  /// -mat_aijpredict_first_solve_analysis, from -mat_aijpredict_first_solve_convert_us).
  double convert_at_once_us = 0;
  /// host_bound_start switches to csr_vector only where cuSPARSE CSR's predicted product takes at most this
  /// (us). What the switch saves is host time (~4-5 us per product); it pays where a product is that short
  /// and the solve waits on its host (bcsstk13's 2003 rows: 5-8 us). A longer product keeps the device busy
  /// while the host runs ahead, so the host time saved buys nothing, and the switch would follow the model's
  /// comparison of two device times alone, where csr_vector's p95 error is 12-19 %: 25 us is where that error
  /// reaches the host time saved. On four gated warm-ups (three H100, one H200), every matrix the
  /// rule switched with cuSPARSE CSR predicted at most 25 us measured csr_vector at most 0.90x cuSPARSE CSR;
  /// from 25 to 50 us 6-8 of 19-22 measured it slower, up to 1.15x
  /// (bench/results/2026-11-28_session38_host_bound_start_offline.txt). 0: never switch.
  double host_bound_start_us = 25;
  /// Online refinement when the context has it (context_options::online): sampled products are timed with
  /// CUDA events (read back later, never waited for in apply), fed to the context's corrections, and the
  /// runner-up is tried once when the running format measures worse than the runner-up's prediction
  /// (`online_policy`). No effect with a context without online refinement.
  bool online = true;
  online::policy online_policy;
  /// Row-partitioned plans (planner.hpp): the analysis also plans a contiguous partition of the rows with a
  /// format per block and runs it when its predicted time beats the best single format by
  /// `partition_margin` (a fraction; each block's prediction already includes its own launches). Never
  /// with `forced`.
  bool partition = true;
  double partition_margin = 0.03;
  /// A format other than cuSPARSE CSR (the baseline: no conversion, no extra memory) is chosen only when
  /// predicted faster than cuSPARSE CSR by more than this fraction, unless online refinement measured it on
  /// this matrix. Where every format is bound by the same traffic (random columns: the L2's sector rate) the
  /// predictions differ by less than the models' error; on an H100 the predicted-best then measured 9 % slower
  /// than cuSPARSE CSR on two 2M-row random-column matrices (bench/results/2026-11-23_h100_run9_accuracy.csv).
  /// 0: the smallest prediction wins.
  double baseline_margin = default_baseline_margin;
  /// Amortization of the planning itself (with expected_mults > 0): the DP's host time may be at most this
  /// share of the most a split could save over the expected products (half the best single format's
  /// predicted time per product). The strips are cut to what that budget buys at the measured rate
  /// (planning_us_per_estimate(), planner.hpp), up to planner.max_strips; when it buys fewer than
  /// planner.min_strips the partition is not planned yet (report().partition_pending; plan_when_reused plans
  /// later). A matrix whose best format runs in 8.4 us planned 63 strips in 5.1 ms of a 0.27 s solve on the
  /// H100 machine (bench/results/2026-11-23_h100_session9_e2e_summary.txt); with 0.25 and the plugin's
  /// checks at each doubling of the product count it plans 28 strips (~1.1 ms) at the 1024th product.
  /// 0: always plan, at planner.max_strips.
  double planning_share = 0.25;
  /// With expected_mults 0 (no use known: an analysis at the upload), the partition planning may take this
  /// share of the upload's measured time (report().upload_ms; at least a microsecond), the strips cut to what
  /// that buys as with planning_share's budget; too few and the partition is not planned yet
  /// (plan_when_reused plans it once the matrix is reused). The PETSc plugin passes -mat_aijpredict_upload_share:
  /// unbounded, a 2003-row matrix analysed at its upload planned 63 strips in 7.2 ms, 3-4x its first solve on
  /// the H100 (bench/results/2026-11-24_h100_session20_short_solves.txt). 0: no bound (planner.max_strips).
  double planning_upload_share = 0;
  planner_options planner;  ///< strips and block bounds of the DP
  /// Staged steps (background_mode::staged): each product's share of a conversion is at most this fraction
  /// of the running plan's predicted SpMV time (the parts' GPU work estimated from the bytes they move).
  double stage_fraction = 0.03;
  /// Staged steps: the most host time their parts may take beyond the product each one overlaps (the running
  /// plan's predicted product time above one launch), as a share of the wall time since the step began. A
  /// product issues the next part only while the parts so far stayed within it; the others skip (a few
  /// nanoseconds). Repeated short solves of a small matrix are host-bound (1.25 ms for 10 GMRES iterations on
  /// the H100 machine), and a part issued at every product put 40-180 us of host time into each of them.
  /// The device time of the parts that issue device passes counts too (an event pair around each, read back
  /// at later products without waiting): the passes run in the products' stream, where the solver waits
  /// for them. 0: a part at every product.
  double stage_duty = 0.01;
  /// Staged steps: the share of the running plan's predicted product time (beyond one launch) that a part's
  /// host time is taken to overlap, and so does not count against stage_duty. 1: the product keeps the device
  /// busy while the part runs (a device-bound solver); 0: every microsecond of a part counts (a solver whose
  /// host work between products is the critical path). Only where the running product is predicted to take
  /// at least 30 us: a smaller one leaves the solver host-bound, and every part counts whole.
  double stage_overlap = 0.0;
  /// Staged analyses: issue their device passes on a stream of their own (detail::analysis_stream(): lowest
  /// priority, after an event of the products' stream), which costs two parts more (the event, the wait).
  /// Off: on the H100 the solves paid the same for the passes on either stream (session 23), and each of
  /// those two parts cost a short solve ~25 us (session 24's attribution of solve time to parts).
  bool analysis_stream = false;
  /// Staged steps: run the stages that make no CUDA call on the process's step worker thread
  /// (detail::step_worker) instead of in parts on the products' thread: the decision (predictions, online
  /// corrections, choice) once its input is read back, the copy of a running plan that was never analysed
  /// (its products change nothing in it), and a conversion to a format that runs on the CSR copy (csr_vector,
  /// csr_scalar, the running cuSPARSE CSR). A part on the products' thread cost a short solve about 20 us
  /// plus 1.4x its host time whatever it did, where host time on another CPU cost it nothing measurable
  /// (H100, session 24-25: bench/results/2026-11-24_h100_session25_thread_steps.txt). The products' thread
  /// only hands the stages over and checks a flag. Needs a second CPU (the PETSc plugin sets it only then).
  bool host_worker = false;
  /// Staged steps: the step's first part may run at the first poll, whatever the start cost (the start's host
  /// time is not charged to the pacing). Meant for an analysis that starts from prefetched passes with
  /// host_worker, whose first part is the hand-over to the worker: started and handed over in the upload's
  /// solve, it installs there too instead of in a later solve (the PETSc plugin's
  /// -mat_aijpredict_first_solve_analysis). Later parts (a conversion that launches kernels) stay paced.
  bool first_part_unpaced = false;
  /// Staged steps with host_worker: a conversion made at once (convert_at_once_us) to a layout converted by a
  /// builder (sell_delta16, sell_sigma, sell) runs on the step worker too, on the worker's stream (after an
  /// event of the products' stream recorded at the hand-over), instead of in whole parts on the products'
  /// thread and stream. The products' thread then pays only the hand-over and the install: inside the upload's
  /// solve the parts cost the smallest matrices ~60 us of host time plus the conversion's device time, 3-10 %
  /// of a 1.6-2 ms GMRES(10) solve on the H100 (session 30). A builder that fails (a layout that cannot hold
  /// the matrix, out of memory) hands the fallback to cuSPARSE CSR back to the products' thread. Other
  /// formats convert on the products' thread as before. The PETSc plugin sets it with
  /// -mat_aijpredict_worker_convert.
  bool worker_converts = false;
  /// Staged steps: name in each part's label (plan_report::staged_poll_labels) the page faults and preemptions
  /// it met (getrusage before and after: two system calls per part inside a short solve). The PETSc plugin
  /// turns it on under -info, where the labels are printed.
  bool stage_diagnostics = false;
  /// Layout reserve: device memory set aside in the CSR copy's own allocation, this fraction of its bytes
  /// counted twice up to layout_reserve_small_bytes (so 2x the copy for a small matrix, whose reserve must
  /// also hold an exploration's layout: a sell layout of delaunay_n15 did not fit 1x and its cudaMalloc took
  /// 0.3 ms inside one product of a 1.2 ms solve), from which conversions take their layouts (no cudaMalloc,
  /// ~0.1-0.3 ms each, inside a product of a short solve; none to free either) until it is used up; regions
  /// are not reused. Only where the device keeps at
  /// least half its memory free after the upload, and not when the forced format or every candidate runs on
  /// the CSR copy. Held until the matrix goes: a matrix that is never converted holds it for nothing.
  /// 0: none.
  double layout_reserve = 1.0;
  /// Upload into a pooled block: the CSR copy and its reserve come from a process-wide pool that keeps a
  /// destroyed matrix's block for the next upload (1-4 us instead of a cudaMalloc of 100-140 us whatever its
  /// size on the H100, inside the upload's solve), at most 256 MiB of them unused, given back to the driver when
  /// one of our allocations runs out of memory; blocks up to 64 MiB (larger copies allocate as before). The
  /// layout reserve's free-memory query (22-37 us) then uses the last reading of this process if it is at most
  /// upload_reading_ms old, less what the process allocated from the driver since. The PETSc plugin sets it
  /// with -mat_aijpredict_upload_pool.
  bool upload_pool = true;
  double upload_reading_ms = 1000.0;
  /// Run this partition (parse_partition_plan("sell[0,1000)+coo[1000,1200)")) instead of selecting: tests,
  /// benchmarks, warm-up. Blocks must cover every row; a block's format that is infeasible there becomes
  /// cuSPARSE CSR. A one-block plan is the unpartitioned format. Takes precedence over `forced`.
  std::optional<partition_plan> forced_plan;
};

/// One bounded exploration (online refinement): the runner-up tried once, and which of the two was kept.
/// From a row-partitioned plan the runner-up is the best single format the planner compared it with.
struct exploration_record {
  format_id from = format_id::cusparse_csr;
  format_id to = format_id::cusparse_csr;
  bool from_partition = false;   ///< the running plan was row-partitioned (`from_plan` names its blocks)
  std::string from_plan;         ///< the running plan, as plan_report::plan
  double from_measured_us = 0;   ///< median of the running plan: of its products interleaved with the
                                 ///< runner-up's when there are at least 3 (else its median before)
  double from_before_us = 0;     ///< median of the running plan before the exploration began
  int interleaved = 0;           ///< products of the running plan timed in alternation with the runner-up's
  double to_predicted_us = 0;    ///< the runner-up's corrected prediction that triggered it
  double to_measured_us = 0;     ///< median of the runner-up (0 while it is being measured)
  /// A split's verification (from_partition): the median host time of one timed product's issue (apply) of
  /// each plan, added to its measured time for the comparison (online::policy::split_margin). 0 otherwise.
  double from_host_us = 0, to_host_us = 0;
  bool finished = false;
  bool kept_runner_up = false;
  std::string note;              ///< why it ended early (conversion failed), else empty
};

/// What one part of a staged step did, kept as static texts and numbers and formatted only when someone reads
/// it (-info, -mat_aijpredict_trace_buffer, a test). The parts run on the products' thread inside short solves,
/// where formatting is cold code: one snprintf of two numbers there took 10-27 us of host time while the part's
/// own work (a hand-over to the step worker) took 8-13 us (H100, session 29), and building each part's label
/// added 3-9 us to parts of 8-13 us.
struct staged_part_note {
  const char* from = "";       ///< the stage the part began in (a static name)
  const char* to = nullptr;    ///< the stage it moved on to; null: it stayed
  const char* subject = nullptr;  ///< what `what` is about, printed before it (a format's name)
  const char* what = nullptr;  ///< what it did: a static text, or a printf format whose conversions all take doubles (v)
  const char* piece = nullptr; ///< appended to `what` after ": " (a pass' call: "memset", "kernel", ...)
  double v[6] = {};            ///< the numbers `what` formats
  std::string text;            ///< what could not be kept unformatted (a partition builder's block), rarely set
  int allocations = 0;         ///< driver allocations the part made, and the sizes of the last ones (bytes, < 0: host)
  long long allocation_bytes[8] = {};
  long page_faults = -1, preemptions = -1;  ///< plan_options::stage_diagnostics: what disturbed the part's thread
  double work_us = -1, events_us = -1;      ///< a part issuing device work that took >= 10 us: its own work, its events
  /// The label: "a>b: what: piece [2 allocations: 128 KiB, 64 KiB host] [1 page fault] {work 10, events 0}".
  std::string label() const;
};


/// What the analysis found and decided; printed by -mat_aijpredict_view.
struct plan_report {
  device_properties device;
  row_stats stats;
  double x_sectors_per_nnz = 0.0;  ///< sampled locality of the x gathers (see sample_locality)
  sorted_locality sorted;          ///< the same in the length-sorted order (see sample_locality)
  gather_mixture x_mixture;        ///< the same per window at evenly spaced nonzeros (see sample_locality)
  std::vector<format_estimate> estimates;
  format_id chosen = format_id::cusparse_csr;
  std::string decision;        ///< one line: why this format
  std::string params_source;   ///< where the device constants came from
  std::string model_source;    ///< which model ranked the formats
  double upload_ms = 0.0;      ///< host -> device copy of the CSR arrays and their column check
  /// Where the upload's host time went (us): the free-memory query of the layout reserve, the allocation, the
  /// copies with the column check (one wait for the device), the first layout (cuSPARSE CSR) with the job a
  /// later step reuses. Upload only; zero for a copy made from device memory.
  double upload_split_us[4] = {0, 0, 0, 0};
  double reserve_bytes = 0.0;  ///< the layout reserve beside the CSR copy (plan_options::layout_reserve)
  /// The upload's allocation came from the pool (plan_options::upload_pool: a destroyed matrix's block), and
  /// its free-memory reading was a recent one, not a query.
  bool upload_reused = false, upload_recent_reading = false;
  double reserve_used_bytes = 0.0;  ///< of it, taken by the layouts built so far
  double analysis_ms = 0.0;    ///< statistics + prediction
  /// The analysis' host time after its statistics (us): the predictions, the online corrections, the choice.
  double predict_us = 0.0, online_us = 0.0, choice_us = 0.0;
  double timer_us = 0.0;  ///< of online_us, taking the timing events (online refinement's ring) from the pool
  double factors_us = 0.0;  ///< of online_us, the matrix key and each estimate's correction factor
  double conversion_ms = 0.0;  ///< building the chosen layout
  /// Wall time of the last step that ran in the background (gpu_matrix::start_background), from its start
  /// to its end on the worker thread; the products ran the previous plan meanwhile. 0: none did.
  double background_ms = 0.0;
  double staged_start_us = 0.0;  ///< host time of starting the last staged step (in the product that began it)
  /// Thread mode: the CPU the thread that started the step ran on, which the worker was kept off where the
  /// process may run on another, and the CPU the worker ended the step on. A staged step with host_worker: the
  /// products' thread's CPU at the hand-over and the CPU the worker woke on (-1: not known, or staged alone).
  int background_caller_cpu = -1, background_worker_cpu = -1;
  std::string background_what;  ///< which step that was (background_step_name)
  /// A staged step (background_mode::staged): the host time of each poll that issued or checked its work,
  /// one per product it was spread over, in order. Empty: it ran on a thread.
  std::vector<double> staged_poll_us;
  /// What each of those polls did, unformatted (staged_part_note); staged_poll_labels() formats them.
  std::vector<staged_part_note> staged_poll_notes;
  /// The stage each of those polls began in ("start", "gathering", "strips", "gathering strips", "dp", "replay",
  /// "convert", "converting", "building partition"; "a>b" when the poll moved on to b), and what the part did
  /// where a stage does several things (": histogram", ": decision"), formatted now.
  std::vector<std::string> staged_poll_labels() const;
  /// The product each of those polls ran after, counted from the one that started the step (0).
  std::vector<int> staged_poll_product;
  int staged_polls() const { return static_cast<int>(staged_poll_us.size()); }
  /// Products at which the step's part waited for its host-time share (plan_options::stage_duty).
  int staged_skipped = 0;
  /// A staged step: the device time of its parts' passes read back by its end (event pairs around each part
  /// that issues device work; what finished after the last poll is not in it), counted in its pacing.
  double staged_device_us = 0;
  /// A staged step with plan_options::host_worker: the host time its stages took on the step worker (not in
  /// the products' thread), and which stages ran there ("copy", "deciding", "convert").
  double staged_worker_ms = 0;
  std::string staged_worker_stages;
  /// A staged analysis that started from the read-backs of gpu_matrix::prefetch_analysis (its statistics,
  /// locality samples and free memory, gathered in the products after the upload) instead of its own passes.
  bool staged_prefetched = false;
  double staged_host_ms() const;      ///< those polls' host time together
  double staged_max_poll_ms() const;  ///< the longest of them
  double install_ms = 0.0;      ///< host time of its install (poll_background): the swap and freeing the old layout
  bool analyzed = false;       ///< statistics and predictions exist (false: uploaded only, cuSPARSE CSR)
  std::optional<format_id> deferred;  ///< predicted faster but not yet paid for (amortization)
  /// Predicted saving per SpMV of `deferred` over the format that runs meanwhile: cuSPARSE CSR, or the interim
  /// format that pays within the expected products ("; meanwhile <format>" in the decision).
  double saving_us = 0.0;
  double conversion_estimate_us = 0.0;///< estimated cost of converting to `deferred`
  // Online refinement (all zero / empty without it).
  std::string online_source;          ///< which corrections the analysis applied (context::online_source)
  std::vector<double> online_factor;  ///< per estimate: the correction factor applied to its prediction
  double predicted_us = 0.0;  ///< corrected prediction of the running format, made before it was measured
  double measured_us = 0.0;   ///< median of the event-timed products of the running format (0: none yet)
  int measured_samples = 0;   ///< timed products of the running format read back so far
  /// The running format's first samples are taken every this many products (online::policy::
  /// sample_first_spacing where the solve is bound by the host; 1: every product; 0: none taken yet).
  int first_sample_spacing = 0;
  double model_error = -1.0;  ///< |predicted_us - measured_us| / measured_us; negative until measured
  /// The last exploration (a split is compared with its single format, then possibly with cuSPARSE CSR: the
  /// first comparison is then in `refinement` only).
  std::optional<exploration_record> exploration;
  std::vector<std::string> refinement;  ///< what online refinement did, one line each
  /// The DP's proposal (blocks, predicted time, best single format, planning time) when the analysis
  /// planned a partition (opts.partition, no forced format); empty blocks otherwise.
  partition_plan proposed;
  /// Planning was skipped because the expected use could not pay for it; plan_when_reused plans later.
  bool partition_pending = false;
  /// The plan runs row-partitioned: `plan` describes the blocks actually built (after fallbacks) and
  /// `chosen` is the format of the block holding the most nonzeros.
  bool partitioned = false;
  std::string plan;  ///< "sell_delta16[0,262144)+coo[262144,300000)", or the single format's name
  std::string to_string() const;
};

/// A step of the analysis that gpu_matrix::start_background can run on a worker thread.
enum class background_step {
  analyze,           ///< gpu_matrix::analyze
  convert_deferred,  ///< gpu_matrix::convert_deferred (plan_options::expected_mults is the expected count)
  plan_when_reused,  ///< gpu_matrix::plan_when_reused
};
const char* background_step_name(background_step s);

/// How gpu_matrix::start_background runs a step.
enum class background_mode {
  /// On a worker thread with its own low-priority stream: neither the step's read-backs nor its host work
  /// hold up the thread issuing the products; its GPU work runs beside theirs.
  thread,
  /// On the products' thread, in parts: each poll_background does one part and never waits for the device;
  /// read-backs land in pinned memory and are polled through events at later calls; the parts are paced by
  /// plan_options::stage_duty. An analysis part issues one CUDA call (~5-9 us of host time inside a short
  /// solve), its passes on the products' stream (or, with plan_options::analysis_stream, on
  /// detail::analysis_stream after an event of the products' stream). The parts of an analysis: the running
  /// plan copied (its report, then the rest, into a plan made at the upload); with the analysis stream, the event and the wait that order it; the free memory queried (unless the upload made a layout reserve); each pass's memset,
  /// kernel(s), read-back and event (statistics, locality samples, then the histogram); the read-backs found
  /// done; the predictions' input, the predictions in slices of ~5 us, the online timer, the online factors in
  /// slices (host); the decision in two parts, the choice and the rest (host). A partition
  /// the decision would plan: the strip summaries (one part, waiting for their device passes), the DP in
  /// slices (partition_planner), then the decision again with that plan. A conversion to sell_delta16 is
  /// split into its slice offsets, one allocation per array, and fills of at most
  /// plan_options::stage_fraction of the running plan's predicted product time each, then its column check.
  /// Run whole in one part: a conversion to any other format (csr_vector and csr_scalar run on the CSR copy;
  /// the rest are chosen mostly for matrices whose conversion is short), a row partition's building, and the
  /// refresh of values changed meanwhile. A plan installed this way converts a bounded exploration's
  /// candidate with a builder (sell_delta16, sell_sigma, sell) in parts too: one after a product (apply),
  /// paced the same way, the running format serving the products until the last part is issued.
  staged,
};

template <typename Value>
class gpu_matrix {
 public:
  /// `host` must point to host memory with 32-bit indices, row_ptr[0] == 0 and column indices in [0, cols).
  gpu_matrix(const context& ctx, const csr_view<Value>& host, const plan_options& opts, cudaStream_t stream);
  /// The same from arrays in `space` (device arrays are copied; the caller keeps ownership).
  gpu_matrix(const context& ctx, const csr_view<Value>& csr, memory_space space, const plan_options& opts,
             cudaStream_t stream);
  ~gpu_matrix();
  gpu_matrix(const gpu_matrix&) = delete;
  gpu_matrix& operator=(const gpu_matrix&) = delete;

  /// Statistics, prediction, selection and conversion on the resident CSR copy (after a constructor with
  /// opts.analyze == false, or again with other options).
  void analyze(const context& ctx, const plan_options& opts, cudaStream_t stream);

  /// Converts to report().deferred if it pays for `expected_mults` more SpMVs; returns whether it converted.
  bool convert_deferred(double expected_mults, cudaStream_t stream);

  /// When the analysis skipped planning a row partition because its expected use could not pay for it
  /// (report().partition_pending), plans now if `opts.expected_mults` does, and builds the split if it is
  /// taken and pays for its conversion; otherwise the running format stays. Returns whether the plan changed.
  /// `opts` as for the analysis (candidates, margin, planner, online policy).
  bool plan_when_reused(const context& ctx, const plan_options& opts, cudaStream_t stream);

  /// Background analysis: runs `step` (analyze, convert_deferred or plan_when_reused, with `opts`) on a
  /// worker thread, on its own CUDA stream (non-blocking, the device's lowest priority) and its own cuSPARSE
  /// handle, building the new plan beside the running one; the products keep running the current plan
  /// (cuSPARSE CSR before the first analysis) until poll_background or finish_background installs the new
  /// one. So the statistics' read-backs, the prediction and the conversion neither drain `stream` nor hold
  /// up the thread issuing the products; only their GPU work shares the device. `stream` is the products'
  /// stream: the step's device work starts after what `stream` holds now (values copied there before are the
  /// ones converted); values changed by update_values while it runs are refreshed at the install. The job
  /// keeps `ctx` alive. Returns false and starts nothing while a step is running or an exploration is in
  /// progress, and for convert_deferred / plan_when_reused when their cheap test says the step would not
  /// convert or plan (as their synchronous forms decide). Exploration waits while a step runs.
  /// With background_mode::staged the step runs instead in parts at each poll_background on the products'
  /// stream, and no thread is started.
  bool start_background(std::shared_ptr<const context> ctx, background_step step, const plan_options& opts,
                        cudaStream_t stream, background_mode mode = background_mode::thread);
  /// Without waiting (a staged step: issues its next part first): when the step started by start_background has finished, installs its plan (the
  /// running plan is freed; values changed meanwhile are refreshed on `stream`) and returns true, with
  /// `*changed` (if not null) telling whether the plan changed (a convert_deferred or plan_when_reused that
  /// found nothing to do leaves the plan and updates the report's decision). Returns false while it runs,
  /// or when none was started. Rethrows an error the step raised (the running plan stays).
  bool poll_background(cudaStream_t stream, bool* changed = nullptr);
  /// Whether poll_background has anything to do at this product, without touching the device: false while
  /// a staged step's parts are ahead of plan_options::stage_duty (or its worker runs a stage), or a thread
  /// step runs; true when the next poll_background would run a part or install. Counts the product for the
  /// pacing, which that poll_background then does not count again; a caller that skips the poll on false
  /// (most products of a step) saves its stream query and log events. Calling poll_background without it
  /// is the same, at the cost of those.
  bool background_poll_due();
  /// Waits for the step started by start_background, if any, and installs it as poll_background does.
  bool finish_background(cudaStream_t stream, bool* changed = nullptr);
  /// A step started by start_background has not been installed yet.
  bool background_running() const;
  /// Host time (us) the caller spent on starting the running staged step outside start_background (its own
  /// checks in the product that started it): the step's parts wait for it as for their own
  /// (plan_options::stage_duty), so that they land in later products rather than in the same solve.
  void charge_background(double host_us);
  /// cuSPARSE CSR's predicted time above one launch for this matrix (the context's constants at the upload):
  /// the most any format can save per product, which gates an analysis (and a staged step's first budget).
  double cusparse_csr_bound_us() const;

  /// Issues the analysis' device passes now, on `stream`, without waiting: the row statistics, the locality
  /// samples and (queried here unless the upload made a layout reserve) the free device memory; their
  /// read-backs land in pooled page-locked memory. advance_prefetch, called after later products, polls them
  /// (the histogram's calls are issued by the poll that finds the statistics' first pass done). A staged
  /// analysis started once they are all read back begins at its decision: none of its parts then issues a
  /// device pass. Meant for the upload's product, whose solve pays for the upload anyway, so that the
  /// repeated short solves that follow carry none of the passes. Does nothing for an empty matrix, an
  /// analysed plan, or when passes are already in flight or read back. Structure changes make a new
  /// gpu_matrix, so the read-backs always describe this matrix.
  /// `side_stream`: the passes go to detail::analysis_stream() (per device and process, lowest priority,
  /// non-blocking) after an event of `stream`, so that the products queued after them do not wait for their
  /// device time (two more calls here: the event and the wait).
  void prefetch_analysis(cudaStream_t stream, bool side_stream = false);
  /// Polls the passes prefetch_analysis issued (never waits; may issue the histogram's calls on `stream`,
  /// or on the side stream where the passes went there); true once they are all read back or none are in
  /// flight.
  bool advance_prefetch(cudaStream_t stream);
  /// prefetch_analysis issued passes not yet read back.
  bool prefetch_pending() const;
  /// The passes prefetch_analysis issued are read back: a staged analysis started now begins at its decision.
  bool prefetch_ready() const;
  /// Before any analysis, once the prefetched passes are read back: runs csr_vector on the CSR copy instead of
  /// cuSPARSE CSR where the model, from those statistics, predicts it no slower on the device (both feasible,
  /// csr_vector among opts.candidates, nothing forced, no step running). No conversion: csr_vector runs on the
  /// CSR copy, and building it launches nothing. What it saves is host time: a cusparseSpMV call costs the
  /// products' thread ~4-5 us more than our kernel's launch, 4 % of a host-bound 1 ms GMRES(10) solve of a small
  /// matrix on the H200 (bench/results/2026-11-28_h200_session37_step_cycle.txt). cuSPARSE CSR's layout is kept
  /// aside (freed with the plan, not inside a product) and an analysis that keeps cuSPARSE CSR on this plan takes
  /// it back. The analysis later decides as usual. Only where cuSPARSE CSR's prediction is at most
  /// opts.host_bound_start_us. True where it switched. (PETSc plugin: -mat_aijpredict_host_bound_start, on by
  /// default.)
  bool host_bound_start(const context& ctx, const plan_options& opts, cudaStream_t stream);
  /// A staged step not installed yet: its last part's stage, as plan_report::staged_poll_labels names it; an
  /// exploration's candidate being converted in parts: which and its part (empty otherwise). For a report of
  /// a slow product. A staged part's label ends with its recorded host time ("[part 12.3 us]").
  std::string staged_last_part() const;

  /// Same sparsity pattern, new values (host array of nnz entries in the CSR order given at construction).
  void update_values(const Value* host_values, cudaStream_t stream);

  /// y = alpha A x + beta y with device pointers (x: cols entries, y: rows entries). With beta == 0, y is
  /// not read (NaN or garbage in y does not propagate). Asynchronous on `stream`.
  void apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream);

  /// y = alpha A^T x + beta y (through cuSPARSE CSR), device pointers, x: rows entries, y: cols entries.
  void apply_transpose(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream);

  /// Online refinement: waits for the pending timed products, reads them back and feeds the corrections,
  /// so that report() is current (end of a solve, -mat_aijpredict_view). Synchronises those events: not
  /// for the hot path. No effect without online refinement.
  void online_sync();
  /// Pauses (false) or resumes online timing, e.g. while a tool times the plan itself (aijp::time_spmv).
  void set_online_timing(bool on);
  bool online_timing() const;

  /// d[r] = A(r, r) for r < rows (0 where the diagonal entry is not stored), device pointer. Asynchronous.
  void diagonal(Value* d, cudaStream_t stream) const;

  /// The format (of the largest block, for a partitioned plan: see report().partitioned and report().plan).
  format_id format() const;
  const plan_report& report() const;
  size_type rows() const;
  size_type cols() const;
  size_type nnz() const;

 private:
  struct impl;
  struct background_job;
  std::unique_ptr<impl> impl_;
  // The plan a staged step's install replaced, when its layout is small: freeing it then would synchronise
  // the device inside a product (cudaFree); it goes at the next install or with the matrix.
  std::unique_ptr<impl> retired_;
  std::unique_ptr<background_job> job_;  // destroyed first: joins the worker before the plan it shares goes
  // A step's job made at the upload of a matrix not analysed there, taken by its first start_background:
  // made inside that product, it cost 5-34 us of its host time (H100 machine, bcsstk13's GMRES(10) solves).
  std::unique_ptr<background_job> spare_job_;
  void make_spare_job();
  void install_background(cudaStream_t stream, bool* changed);
};

extern template class gpu_matrix<double>;
extern template class gpu_matrix<float>;

/// Row statistics computed on the device from a device CSR row_ptr (rows + 1 entries).
row_stats compute_row_stats_device(size_type rows, size_type cols, const index_type* d_row_ptr, cudaStream_t stream);

/// Strip summaries (planner.hpp) computed on the device in one pass over a device row_ptr (rows + 1
/// entries), strips of `rows_per_strip` rows (a multiple of 32). Only the summaries come to the host.
std::vector<strip_summary> compute_strip_summaries_device(size_type rows, const index_type* d_row_ptr,
                                                          size_type rows_per_strip, cudaStream_t stream);

/// Sets strips[i].x_sectors_per_nnz from up to strip_locality_groups sampled groups of 32 rows per strip
/// (planner.hpp; add_strip_locality_host is the host reference, same groups, same counts), one kernel and one
/// synchronisation. `strips` as compute_strip_summaries_device gives them, over the device CSR arrays.
void add_strip_locality(std::vector<strip_summary>& strips, const index_type* d_row_ptr, const index_type* d_col_idx,
                        int value_bytes, cudaStream_t stream);

/// Sets strips[i].max_column_step and unsorted_steps (planner.hpp; add_strip_columns_host is the host
/// reference) in one pass over the device column indices, a thread per 8 nonzeros, one synchronisation. `strips` as
/// compute_strip_summaries_device gives them (equal strips but the last).
void add_strip_columns(std::vector<strip_summary>& strips, const index_type* d_row_ptr, const index_type* d_col_idx,
                       cudaStream_t stream);

/// Locality of the vector accesses, sampled on the device (two kernels, one synchronisation).
struct locality_sample {
  /// x gathers in row order: over up to `max_groups` evenly spaced groups of 32 consecutive rows, the number
  /// of distinct 32-byte sectors of x the group touches divided by the group's nonzeros (1: every entry in
  /// its own sector; 1/4 for doubles read contiguously).
  double x_sectors_per_nnz = 0.0;
  /// The layouts that sort rows by length (jad, pellr, sell_sigma: stable sorts): a group is the first 32
  /// rows of one length at or after a row drawn in each sampled group of 32 (within 8192 rows), as one warp
  /// of the sorted order holds them. x: distinct 32-byte sectors of x per nonzero (as above); y: distinct
  /// 32-byte sectors of y the group writes per row (1/4 for doubles written contiguously, 1 when every row
  /// writes its own sector).
  sorted_locality sorted;
  /// The same ratio per window placed at evenly spaced nonzeros (one window per sampled group), binned: how
  /// the gathers' locality spreads over the nonzeros (aijp::gather_mixture).
  gather_mixture x_mixture;
};
/// Zeros for an empty matrix.
locality_sample sample_locality(size_type rows, size_type cols, const index_type* d_row_ptr, const index_type* d_col_idx,
                                int value_bytes, cudaStream_t stream, int max_groups = 2048);

}  // namespace aijp
