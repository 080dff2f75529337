// Online refinement: per-device corrections of a performance model learned from SpMV times measured while
// the application runs (issue 6, third part).
//
// A correction is a robust running mean of log(measured / predicted) — the model's multiplicative bias —
// kept per (format, size class) and per size class over all formats. A corrected prediction is
// `predicted × exp(c)`, where `c` blends the format's own correction with the class-wide one (the class
// correction covers formats never measured yet: a device constant that is off by a factor moves every
// format alike). Two size classes, split at the device's L2 size in bytes moved per SpMV, because a ratio
// learned on a launch-bound matrix must not rescale a DRAM-bound one (models.md: the fitted models split
// their byte terms at L2 for the same reason).
//
// Corrections are stored in the per-device cache as one more coefficient table, under the model name
// `online_model_name(model)` (model -> format -> name -> value), so a later process starts from what this
// one learned. Host-only: no CUDA, no PETSc.
#pragma once

#include <aijpredict/formats.hpp>
#include <aijpredict/stats.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace aijp::online {

/// Working set relative to the L2: `in_l2` = bytes moved per SpMV at most the L2 size (launch- or L2-bound),
/// `beyond_l2` otherwise (DRAM-bound).
enum class size_class : int { in_l2 = 0, beyond_l2 = 1 };
constexpr int size_class_count = 2;
const char* size_class_name(size_class c);
/// The class of a SpMV that moves `bytes` on a device with `l2_bytes` of L2 (l2_bytes <= 0: in_l2).
size_class classify(double bytes, double l2_bytes);

/// Identifies one matrix pattern across plans: a matrix reassembled with the same pattern has the same row
/// statistics and x-gather locality, hence the same key. 0 means "no particular matrix".
using matrix_key = std::uint64_t;
/// FNV-1a hash of every field of `stats`, the value size and the x-gather sample (never 0).
matrix_key key_of(const row_stats& stats, int value_bytes, double x_sectors_per_nnz);

/// One running correction.
struct correction {
  double log_ratio = 0;  ///< running mean of log(measured / predicted)
  double weight = 0;     ///< observations in the mean, capped at tuning::max_weight (the memory length)
  double count = 0;      ///< all observations ever (uncapped; decides merges)
};

/// Constants of the update rule (plain values with their reasons; the tests exercise them).
struct tuning {
  /// Memory length: the mean weighs the last ~20 observations once this many are in (an exponentially
  /// weighted mean with alpha = 1/20 from then on), so a changed machine is tracked within a few dozen.
  double max_weight = 20;
  /// Once `clip_after` observations are in, one observation moves the log ratio by at most `clip_log`
  /// (log 2): a single outlier (a preempted kernel, a clock dip) cannot double or halve a prediction, while
  /// a real shift is followed within a few observations. The first observations are taken as they are, so
  /// a mis-calibration by any factor is corrected by the first one.
  double clip_log = 0.6931471805599453;
  double clip_after = 3;
  /// Prior weight of the class-wide correction when blending it with a format's own: with w own
  /// observations the format's correction counts w / (w + prior_weight).
  double prior_weight = 0.5;
  /// The same blend one level down: a matrix's own observations (per format) against the format's
  /// correction, with a small prior because nothing predicts a matrix better than its own measurements
  /// (after one observation the matrix's own ratio counts 1 / 1.1).
  double matrix_prior_weight = 0.1;
  /// Matrices remembered per process (in memory only, never saved); beyond this the memory starts afresh.
  std::size_t max_matrices = 1024;
  /// Ratios outside [1/1000, 1000] are measurement errors (a wrong event pair), not model bias: ignored.
  double max_abs_log = 6.907755278982137;
};

/// Corrections of one base model on one device. Thread-safe: every member locks an internal mutex (the
/// plans of a process share one instance through their context).
class corrections {
 public:
  corrections() = default;
  explicit corrections(const tuning& t) : tuning_(t) {}
  corrections(const corrections& other);
  corrections& operator=(const corrections& other);

  /// The factor exp(c) that multiplies the model's prediction of format `f` in class `c` (for matrix `m`:
  /// blended with that matrix's own observations of `f`, if any).
  double factor(format_id f, size_class c, matrix_key m = 0) const;
  /// `predicted_us × factor(f, c, m)`.
  double corrected(format_id f, size_class c, double predicted_us, matrix_key m = 0) const
  {
    return predicted_us * factor(f, c, m);
  }

  /// Adds one observation: the model (uncorrected) predicted `predicted_us`, `measured_us` was measured
  /// (on matrix `m`, if not 0). Returns false (and changes nothing) for non-positive, non-finite or absurd
  /// ratios.
  bool observe(format_id f, size_class c, double predicted_us, double measured_us, matrix_key m = 0);
  /// Matrix `m`'s own correction of format `f` (zero weight if never observed).
  correction of_matrix(format_id f, matrix_key m) const;

  /// The correction of format `f` (resp. of the class over all formats).
  correction of(format_id f, size_class c) const;
  correction of_class(size_class c) const;
  /// Total observations over all cells (0: nothing learned).
  double observations() const;

  /// Cache representation: format name -> {log_ratio_<class>, weight_<class>, count_<class>} and the
  /// class-wide cells under the pseudo format "all". Cells without observations are left out.
  std::map<std::string, std::map<std::string, double>> to_table() const;
  /// Restores from `to_table` output; unknown formats and names are ignored, bad values (non-finite,
  /// negative weights) skip that cell.
  static corrections from_table(const std::map<std::string, std::map<std::string, double>>& table, const tuning& t = {});
  /// Cell by cell, keeps the one with more observations (`count`); on a tie keeps this one. Used when saving:
  /// another process may have written the cache since this one loaded it.
  void merge(const corrections& other);

  /// One line per cell with observations, e.g. "sell/in_l2: x0.52 (12 obs)".
  std::string to_string() const;

 private:
  using cells = std::array<correction, size_class_count>;
  tuning tuning_;
  std::array<cells, format_count> by_format_{};
  cells all_{};
  std::map<matrix_key, std::array<correction, format_count>> by_matrix_;  // not saved
  mutable std::mutex mutex_;

  static void update(correction& k, double r, const tuning& t);
};

/// When and how a plan measures itself and explores (gpu_matrix; plan_options::online_policy).
struct policy {
  /// Time every product for the first `sample_first` after a plan or format change, then every
  /// `sample_every`-th, and every later observation of the same plan (`observe_every` samples) doubles
  /// that interval up to `sample_every_max`. A timed product costs ~7 us of host time (its two event records,
  /// the capture check, the read-back): one in eight added 0.9-1.1 us to every 9 us cuSPARSE CSR product of
  /// a 4096-row matrix on the H100 machine, 3-5 % of a synchronised iteration (aijp_host_cost,
  /// bench/results/2026-11-24_h100_session19_host_cost.txt). Exploration and a format change begin again at
  /// `sample_every`. 0 as `sample_every`: none after the first.
  int sample_first = 16;
  int sample_every = 8;
  int sample_every_max = 256;
  /// A plan whose product takes at most `host_bound_share` of the host wall time between products (the
  /// median of the last `gap_window` gaps: the rest is the solver's own kernels, its synchronisations and
  /// host work) runs in a solve bound by the host. There a timed product's host time is a large share of the
  /// solve and the model's error on the product a small one (a 20 % error on 15 % of the time is 3 %), so
  /// the first `sample_first` samples are taken every `sample_first_spacing`-th product instead of every
  /// one. GMRES(10) on bcsstk13 issues a ~9 us product about every 100 us (H100 machine): ten timed products
  /// in one solve added 3-6 % to it (bench/results/2026-11-25_h100_session26_prefetch_worker_short_solves.txt).
  /// A product followed by a synchronisation (aijp_online, the tests) has a gap of 1.5-4 times its own
  /// time and keeps every product. 1: every product.
  double host_bound_share = 0.15;
  int sample_first_spacing = 8;
  static constexpr int gap_window = 8;
  /// With spacing (sample_first_spacing > 1), take no first sample before the last `gap_window` gaps are known
  /// (the spacing rule needs them; without them every product was timed). A plan installed in the upload's
  /// solve (the PETSc plugin's -mat_aijpredict_first_solve_analysis, about the 4th product) otherwise timed
  /// the next 4-8 products of that solve. Off: the first samples start at once (a plan installed after the
  /// pace is known, or products followed by a synchronisation, where every product is a sample anyway).
  bool first_samples_wait_for_pace = false;
  /// One observation (median of this many new samples) is fed to the corrections.
  int observe_every = 8;
  /// Bounded exploration: once the running format has `explore_after` samples and its measured median
  /// exceeds the runner-up's (corrected) prediction of the analysis by more than `explore_margin` (10 %: above the
  /// run-to-run spread of small-matrix times between runs on one GPU, docs/models.md), the plan converts
  /// to the runner-up once, measures it as long, and keeps the faster.
  int explore_after = 8;
  double explore_margin = 0.10;
  /// A margin reason (the runner-up's prediction beaten, or the running format's own missed) starts an
  /// exploration only when it holds at this many observations of the running plan in a row for the same
  /// candidate: one slow stretch of the machine is not a misranking. On the H100 (session 46) csr_vector on
  /// bcsstk16 measured within 1 % of its prediction for 180 products, then one observation read 9.95 us
  /// against 8.81 predicted: cuSPARSE SELL was tried and ran 1.31x slower for the rest of the run
  /// (bench/results/2026-12-07_h100_session46_call1_online.txt). Splits, the baseline after a split and
  /// free candidates are compared at once. 1: at the first observation that qualifies.
  int explore_confirmations = 2;
  bool explore = true;
  /// While the runner-up is measured, products alternate in runs of `interleave_block` between it and the
  /// running plan (which stays built), and the products of each run but its first (which refills the L2
  /// with that plan's arrays) are timed: the comparison is made on products milliseconds apart, as the
  /// benchmark's interleaved rounds make it, so a disturbance of the machine during the exploration (a
  /// clock dip, another process) slows both sides alike. Measured one after the other, cuSPARSE CSR read
  /// 96.6 us in its window against 50.8 us in the head to head, and a losing split was kept
  /// (bench/results/2026-11-23_h100_session6_final_partition_online.txt). 0: the runner-up alone.
  int interleave_block = 4;
  /// Free candidates: our formats that run on the CSR copy every plan keeps (csr_vector, csr_scalar) cost no
  /// conversion to try, so where the running plan's products are short (measured at most `free_max_us`: a
  /// few launches' time, where a solve is bound by the host and a few slower products do not show) such a
  /// candidate never measured on this matrix is tried when predicted within `free_band` (15 %) of what the
  /// running format measured, not only when predicted faster by the margin: on such matrices the formats
  /// differ by less than the models' error (their p95 on 4-9 us products is 12-36 %, docs/models.md) and
  /// the online run of session 17 kept sell_sigma at 1.17-1.21x of csr_vector on two of them (bcspwr10,
  /// delaunay_n15), never tried. The best-predicted free format is a third candidate after the runner-up
  /// and the baseline. Once measured on the matrix its prediction carries the matrix's own correction, and
  /// only the margin rules apply to it (a format measured slower inside the band is not tried again at
  /// every analysis). 0: free candidates are tried as any other.
  double free_band = 0.15;
  double free_max_us = 20.0;
  /// A split is kept over the single format it is compared with only when it measures at least this much
  /// faster: its blocks add launches whose host time the event timing of the product does not see (after
  /// a host wait the device idles until the last block is issued), and on the H100 a circuit stack's split,
  /// 5-6 % faster than cuSPARSE CSR back to back and 0.2 % faster in its online comparison, gave its GMRES
  /// solves 1.04-1.05x aijcusparse's time against 1.01-1.02x with cuSPARSE CSR forced
  /// (bench/results/2026-11-24_h100_session18_*). So each plan's median host time of issuing a timed
  /// product (its apply) is added to its measured time for this comparison: in session 20 the split
  /// measured 3.1 % faster by its events alone, was kept, and its solves read 1.02-1.06x cuSPARSE CSR's
  /// against 0.99-1.01x without partitions, interleaved in the same run
  /// (bench/results/2026-11-24_h100_session20_short_solves.txt). 0: the faster measured is kept.
  double split_margin = 0.03;
};

/// Why bounded exploration compares a candidate with the running plan (gpu_matrix's explore_or_finish).
enum class explore_reason {
  none,             ///< not compared
  split,            ///< the running plan is a split: always compared with the single format it was predicted to beat
  after_split,      ///< a single format kept over a split: always compared with the baseline
  beats_candidate,  ///< the running plan measured above the candidate's prediction by the margin
  free_band,        ///< the candidate needs no conversion and is predicted within the free band of the
                    ///< running plan's short products (policy::free_band)
  own_miss,         ///< the running format measured above its own prediction by the margin, and the candidate is
                    ///< cuSPARSE CSR's other algorithm or predicted below what the running format measured
};

/// The numbers the decision reads: the running plan's measured median, the predictions of the analysis.
struct explore_case {
  format_id running = format_id::cusparse_csr;
  double running_predicted_us = 0;  ///< 0: unknown (a split)
  double measured_us = 0;
  format_id candidate = format_id::cusparse_csr;
  double candidate_predicted_us = 0;
  double margin = 0.10;
  bool partitioned = false;
  bool baseline_always = false;  ///< the running single format was kept over a split
  bool candidate_free = false;   ///< the candidate runs on the CSR copy (no conversion)
  double free_band = 0;          ///< policy::free_band
  double free_max_us = 0;        ///< policy::free_max_us
};

/// The reason to compare `c.candidate` with the running plan, or explore_reason::none.
/// A format measured above its own prediction was ranked on a wrong number. cuSPARSE CSR's two algorithms
/// share the CSR arrays and the model has no term that ranks them on such a matrix, so the other is tried
/// whatever its prediction says (its prediction carries the class-wide correction, learned mostly from
/// ALG1 on other matrices: on the H200 4M-row circuit ALG2 was predicted 289-297 us, measured 264 us, ALG1
/// 300.6 us). Any other candidate is tried when predicted below what the running format measured (on tiny
/// matrices with a few long rows cuSPARSE CSR ran 12 % above its prediction while COO, predicted 8 % slower,
/// measured 9 % faster: hangGlider_2, adder_dcop_05, H100). A candidate that needs no conversion is also
/// tried within policy::free_band of short products (explore_reason::free_band).
explore_reason explore_reason_for(const explore_case& c);

/// Median of `v` (mean of the middle two for an even size; 0 for an empty vector).
double median(std::vector<double> v);

/// Cache key under which the corrections of base model `model` ("placeholder", "aijp", ...) are stored.
std::string online_model_name(const std::string& model);

}  // namespace aijp::online
