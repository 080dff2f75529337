// Predicting each candidate format's SpMV time and choosing one.
//
// PLACEHOLDER MODEL (walking skeleton): time = launch overhead + bytes moved / streaming bandwidth, with the
// bytes of each layout derived from the row statistics. The strip-based models of the papers and our own
// fitted model (issue "Performance models...") replace `predict_bandwidth_model`; the selection below stays.
#pragma once

#include <aijpredict/device_geometry.hpp>
#include <aijpredict/formats.hpp>
#include <aijpredict/stats.hpp>

#include <array>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace aijp {

/// An array with one value per format.
constexpr std::array<double, format_count> per_format(double v)
{
  std::array<double, format_count> a{};
  for (int i = 0; i < format_count; ++i) a[i] = v;
  return a;
}

/// Device constants the placeholder model reads. Measured on the device (kernels/ calibrate) and kept in
/// the per-device cache; the defaults are the H100 numbers of DESIGN.md section 7 (2026-11-22).
struct bandwidth_model_params {
  double stream_read_gbs = 3100.0;  ///< measured streaming read bandwidth
  double launch_us = 4.3;           ///< one kernel launch back to back (empty kernel)
  /// cuSPARSE CSR ALG1 costs ~9.5 us on small matrices where one launch costs 4.3 us: it runs more than
  /// one kernel per SpMV. DESIGN.md section 7, H100, 2026-11-22.
  double cusparse_csr_overhead_us = 9.5;
  /// Fraction of streaming bandwidth cuSPARSE CSR ALG1 reaches. Measured per device by calibrate_device (a
  /// banded matrix of 4 x L2) and kept in the cache; this default, for cache files written before that, is
  /// the 72 % of the 3D 7-point Laplacian (8M rows) without cusparseSpMV_preprocess (DESIGN.md section 7).
  /// Our SELL reaches the streaming rate itself, so its factor is 1.
  double cusparse_csr_efficiency = 0.72;
  /// The same two constants for cuSPARSE CSR ALG2 (calibrate_device; defaults for older cache files: ALG1's
  /// fixed cost, and the 0.85 the placeholder assumed before ALG2 was measured). The placeholder uses the
  /// fixed cost only: it streams ALG2 at ALG1's efficiency, because what ALG2 costs beyond ALG1 does not grow
  /// with the bytes (H100: +2-24 us on matrices of 12M-58M nonzeros, where the efficiency, measured on one
  /// 1.8M-row band, put it 12 % above ALG1; predict.cpp). The efficiency stays in the cache as measured.
  double cusparse_csr_alg2_overhead_us = 9.5;
  double cusparse_csr_alg2_efficiency = 0.85;
  /// A thread-per-row kernel cannot finish before its longest row, whose entries are a chain of dependent
  /// x gathers: ~90 ns per entry when the matrix sits in L2 (ego-Facebook: 1045-entry row, 89 us; mbeacxc:
  /// 484, 44 us) and ~270 ns from DRAM (circuit-like rows of 200000: 54 ms). H200,
  /// bench/results/2026-11-22_h200_bench_first.txt.
  double serial_entry_l2_ns = 90.0;
  double serial_entry_dram_ns = 270.0;
  /// L2 size of the device (device_properties::l2_bytes, set by the context): a working set beyond it streams
  /// the excess from DRAM at no more than stream_read_gbs. 0 = unknown (no bandwidth floor).
  double l2_bytes = 0.0;
  /// Fraction of the streaming bandwidth at which the placeholder moves the part of sorted_scatter_bytes that
  /// misses the L2 (the share of the working set beyond it). 0.6 matches jad and pellr against sell_sigma on
  /// the 4M-row circuit body (+108 / +113 us) and on normal / uniform rows (+46 / +28 us) on an H100
  /// (bench/results/2026-11-23_h100_sorted_layouts.txt).
  double scatter_efficiency = 0.6;
  /// Rate at which the L2 passes an SpMV's traffic to the SMs when the x gathers are scattered: every byte
  /// the SpMV moves crosses the L2, the gathers at the granularity of a 32-byte sector, so a matrix with
  /// random columns (one sector per nonzero) is bound by this rate, not by DRAM. Measured per device by
  /// calibrate_device (cuSPARSE CSR on a random-column matrix whose x fits in the L2). This default, for cache
  /// files written before it, is the median of the H100 warm-up's random-column samples (4.2-5.0 TB/s over
  /// the formats, bench/results/2026-11-23_h100_run7_warmup_samples.jsonl.xz). 0: no such bound.
  double l2_gather_gbs = 4700.0;
  /// The same for cuSPARSE CSR ALG2 (calibrate_device, same matrix). The two cuSPARSE kernels reach 4600
  /// and 4400 GB/s on the H100 warm-up's random-column samples; with one rate for both, the bound tied
  /// them and their fixed costs (within a microsecond, measured anew each run) picked the slower ALG2 for
  /// power-law blocks (H100, bench/results/2026-11-23_h100_session4_csrvector_partition_online.txt).
  /// 0 (older cache files): l2_gather_gbs. Kept in the cache as measured, no longer used by the placeholder:
  /// on the large random-column held-out matrices it put ALG2 17-28 % above the measurement, ALG1's rate 5-14 %;
  /// the two kernels now differ by their fitted fixed costs (ALG2 +4.6 us on the H100 warm-up), which no
  /// longer tie.
  double l2_gather_alg2_gbs = 0.0;
  /// What each format costs beyond the terms above when fixed costs dominate (indexed by format_id, in
  /// microseconds; may be negative): the median of measured minus predicted over the warm-up's samples whose
  /// traffic and chain terms are below one launch (fit_format_corrections). calibrate_device takes the launch
  /// time and the two cuSPARSE CSR overheads as the fastest of 9 rounds on a 1024-row identity, while the
  /// samples are medians of batches on real matrices, and our formats' own fixed costs were not measured at
  /// all; on the H100 warm-up's small matrices cuSPARSE
  /// CSR measured 2.6 us above the placeholder, ALG2 6.7 us, COO and HYB ~2.2 us, csr_vector 1.3 us, and the
  /// placeholder's 1.5 us for cuSPARSE SELL was 1.0 us too high
  /// (bench/results/2026-11-23_h100_session4_alg2_warmup_samples.jsonl.xz). 0 for cache files written before.
  std::array<double, format_count> format_fixed_us{};
  /// What a product of each format costs at least, however little it moves (indexed by format_id, in
  /// microseconds; 0 = not fitted, as in cache files written before it): the median measured time of the
  /// warm-up's samples whose traffic and chain terms are below a quarter of a launch. Back-to-back products
  /// are bound by the slower of the host, which issues each at a rate of its own (cuSPARSE's host-side calls
  /// more than one launch), and the GPU's fixed costs plus the work: the work of a small matrix hides under
  /// the host's rate. On the H100 warm-up cuSPARSE CSR measured a flat ~9.8 us up to ~1 us of traffic and
  /// csr_vector ~4.6 us up to ~1.5 us, while the sum of fixed cost and traffic, its fixed cost fitted on the
  /// same samples, put the held-out matrices of 10K-300K nonzeros 8-17 % below the measurement
  /// (bench/results/2026-11-24_h100_session13_accuracy.csv). The prediction is
  /// max(launch, floor, fixed + variable terms); cache key "floor_us.<format>".
  std::array<double, format_count> format_floor_us{};
  /// cuSPARSE CSR's floor grows with the rows: its floor is format_floor_us + this x log2(rows) (0: flat, the
  /// cache files written before it). Measured, not confirmed in cuSPARSE: a nonzero-balanced split whose blocks
  /// find their first row by a binary search of the row offsets would cost log2(rows) dependent loads. Fitted by least
  /// squares on the same samples as the floor (fit_format_corrections); on the four H100 gated warm-ups
  /// 0.09-0.10 us per doubling. Cache key "floor_us_per_doubling.cusparse_csr".
  double cusparse_csr_floor_us_per_doubling = 0.0;
  /// cuSPARSE CSR's floor grows with the rows per nonzero too: + this x min(1, rows / nnz) (0: none, the cache
  /// files written before it). Its fixed-size products cost more the shorter the rows: on the H100 gated warm-ups
  /// the 1000-row floors measured ~7.2 us with rows of 4, ~6.9 us with rows of 12 and 40, and the held-out small
  /// matrices of short rows (Pd, rows of 1.6: 8.3 us; bcspwr10, power, PGPgiantcompo: 7.6-8.1 us) sat 7-15 % over
  /// the log2(rows) line (docs/models.md, Session 42). Fitted with the per-doubling term by least squares on the
  /// floor samples (fit_format_corrections), where both come out non-negative and the samples' rows per nonzero
  /// span at least 0.1 (with log2(rows) where that slope is not negative, else alone). On the six H100 gated
  /// warm-ups of sessions 41-42 it came out at 2.23-2.40 us, the per-doubling term beside it at 0-0.002 us.
  /// Cache key "floor_us_per_row_share.cusparse_csr".
  double cusparse_csr_floor_us_per_row_share = 0.0;
  /// Per format (indexed by format_id): the floor of products whose y fits in small_y_bytes (rows x value
  /// bytes; microseconds; 0 = none, as in cache files written before it: format_floor_us then holds for every
  /// size). cuSPARSE CSR's adds its per-doubling term as format_floor_us does. COO clears y with a
  /// cudaMemsetAsync before its product and steps up by ~0.6 us where y passes 4 KiB: on the H100 (gated,
  /// session 42, rows of 25) it measured 5.2-5.8 us for 128-512 rows and 6.4-6.6 us for 576-2048
  /// (bench/results/2026-12-07_h100_session42_diag.txt). Fitted like the floor, on the floor samples with y of
  /// at most small_y_bytes, for the formats whose floor is fitted and that have at least min_samples of them
  /// (the warm-up times its small-y points for COO only). Cache key "floor_small_y_us.<format>".
  std::array<double, format_count> format_floor_small_y_us{};
  /// Per format (indexed by format_id): 1 where the floor is what a product costs that moves nothing and the
  /// product's L2 traffic term adds to it (layout in the L2: max(launch, floor + l2 traffic, fixed + variable
  /// terms)), 0 where the floor only bounds the prediction from below (as in cache files written before it).
  /// Set by fit_format_corrections for the formats whose product is several kernels in sequence (cuSPARSE
  /// CSR ALG1 and ALG2, COO: y = beta y, then the products; floor_adds_l2 in predict.cpp), whose floor is
  /// then fitted on the measured time less the L2 term. Those products' data-moving kernel runs after the
  /// others, so its traffic does not hide under their fixed cost: on the H100 session-30 gated warm-up
  /// cuSPARSE CSR's small random-column matrices measured their floor plus 0.9-1.3x their L2 term (32000
  /// rows of 4 random columns: 8.36 us, floor 7.13, L2 term 1.41 us), where max(floor, fixed + variable)
  /// put them 12-15 % under (docs/models.md, Session 32). Cache key "floor_adds_l2.<format>".
  std::array<double, format_count> format_floor_adds_l2 = per_format(0.0);
  /// Fraction of the streaming bandwidth our COO kernel reaches on its streamed bytes
  /// (entries with row indices, x once, y written and read-modify-written by the atomics). 0.7 for cache files
  /// written before it was fitted. Fitted per device (fit_format_corrections) as the median over the warm-up's
  /// COO samples that stream from DRAM (bytes beyond the L2, streaming bound at the full rate) of bytes /
  /// (bandwidth x (measured - fixed costs)), the x re-reads of coo_x_reread_bytes included: on the five H100
  /// gated warm-ups 0.935-0.946 (13 samples each: bands and windowed rows of 7-40 entries, 0.90-0.96 one by
  /// one), on the H200 warm-up 0.919, where the constant split the held-out bands (+32 %) from the stencils
  /// beyond the L2 (docs/models.md, Session 26). HYB's COO part keeps its own rate (predict.cpp,
  /// hyb_coo_efficiency). Cache key "stream_efficiency.coo".
  double coo_efficiency = 0.7;
  /// What a HYB without an ELL part (K = 0: fewer rows than the Bell-Garland threshold, every entry in the
  /// COO part) costs beyond HYB's fixed cost (format_fixed_us), in microseconds (0: the same, as in cache files
  /// written before it). Fitted like the fixed costs (fit_format_corrections) on those HYBs alone, where at
  /// least `min_samples` of them and of the other HYBs are dominated by fixed costs. Cache key
  /// "fixed_us_empty_ell.hyb".
  double hyb_empty_ell_us = 0.0;
  /// The gap between two kernels run back to back when the cache was written (microseconds; 0 = not measured, as
  /// in cache files written before it): measure_launch_gap's median of an empty kernel timed in gated batches,
  /// as the warm-up times its products. Every fitted term above describes products at this gap. Cache key
  /// "launch_gap_us".
  double launch_gap_us = 0.0;
  /// 1 where launch_gap_us was timed gated (timing_options::gated, as a gated warm-up times its products), 0 back
  /// to back: the runtime times the gap now the same way. Cache key "launch_gap_gated".
  double launch_gap_gated = 0.0;
  /// The gap now minus launch_gap_us (microseconds; 0 = unknown or unchanged): every prediction moves by the
  /// product's kernels (launch_gaps_of) times this. Measured at run time (context::measure_launch_gap), never
  /// cached. On one H100 the gap between back-to-back kernels moved by ~0.16 us from one run to the next while
  /// the products did not change: session 46 ran the same gated warm-up twice, five minutes apart, and every
  /// product of the first ran 0.15-0.17 us faster per kernel (COO and cuSPARSE CSR, two kernels, 0.35 us; ALG2
  /// 0.54-0.67 us), at any size; the first run's fit then put the held-out matrices, timed in the slower state,
  /// low, and 5 of 14 formats met the accuracy targets against 11 with the second (docs/models.md, Session 47).
  double launch_shift_us = 0.0;
  /// csr_scalar's x gathers re-read from DRAM: the share of the L2 that holds an x sector between two of its uses
  /// (0: no re-reads, as in cache files written before it). Each entry of csr_scalar gathers its x sector through
  /// the L1 and the L2 on its own (a thread per row: the warp's 32 gathers are 32 rows' columns), so with random
  /// columns an x sector is fetched about k = x_sectors_per_nnz x nnz x 32 / x bytes times, at gaps spread over
  /// the whole product; beyond the L2 the streamed rows evict it between uses, which coo_x_reread_bytes prices
  /// with the L2 size times this share. On the H100 session-32 gated warm-up csr_scalar's random-column matrices
  /// grew per entry with x's share of the L2 (rows of 64: 46 -> 67 bytes per entry at DRAM rate from 270K to
  /// 1.08M rows; 4M rows of 12: 89, 2M rows of 24: 73, where the model said 52-62), the bands did not. The re-reads
  /// are weighted by x_sectors_per_nnz (predict.cpp, csr_scalar_x_reread_bytes). Fitted per device
  /// (fit_format_corrections) on the csr_scalar samples whose re-reads the term moves: 1.0 on the H100 gated
  /// warm-ups of sessions 25-32, 0.35 on the H200's of session 33 (docs/models.md, Session 33). Cache key
  /// "x_reread_l2_share.csr_scalar".
  double csr_scalar_x_reread_l2_share = 0.0;
  /// The share of the L2 a layout's footprint must stay under for the product to run from the L2 (the
  /// placeholder's in-L2 terms: the chain factors in the L2, the streaming efficiency, cuSPARSE SELL's wide
  /// chains). 1 (cache files written before it): the whole L2. The L2 does not keep a working set up to its
  /// full size: x, y and the row pointers stream through it beside the layout, its lines are spread over
  /// slices by an address hash, and the H100 / H200 L2 is two partitions, each caching what the SMs next to it
  /// read from the other (so a line can sit in both). On the session-32 H100 and session-33 H200 gated
  /// warm-ups, samples with layouts of 0.7-1.0 of the L2 ran like the DRAM ones. Fitted per device
  /// (fit_format_corrections): the share of {1, 0.9, 0.8, 0.7, 0.6, 0.5} whose whole fit leaves the least mean
  /// relative error over the training samples (H100 0.8, H200 0.7; docs/models.md, Session 33). Cache key
  /// "l2_resident_share".
  double l2_resident_share = 1.0;
  /// PELLR's chain counted in the lanes of its length-sorted order (sorted_chain_lanes), as JAD's: 1 where the fit
  /// that set its chain factors counted them so (every fit since session 33), 0 (cache files written before it)
  /// the natural order's lanes (chain_lanes). PELLR walks its rows sorted by length (layout_ref_ell.hpp), so the
  /// warp that walks the longest chain holds the 32 longest rows, not the longest row's natural group: a tail of
  /// long rows, one per natural warp, is one group of up to 32 long rows there. On the H200 gated pairs of session
  /// 33 pellr's held-out mean / p95 went from 8.4 / 15.7 % to 6.1 / 14.2 % and from 8.5 / 15.9 % to 5.6 / 13.7 %; on the
  /// H100 pairs (sessions 25-32) nothing moved: their fits give PELLR's chain no lanes slope in the L2. Cache key
  /// "chain_lanes_sorted.pellr".
  double pellr_sorted_lanes = 0.0;
  // (Sessions 34-38 fitted `format_remainder_share`, the cost of a `#pragma unroll 4` remainder iteration in the
  // chains of ELLPACK-R, PELLR and csr_vector, cache keys "chain_remainder_share.<format>". Session 39's kernels
  // walk those rows in chunks of 4 instead, whose rounds layout_traffic_of counts; such keys are not read.)
  /// Per-format factor on the serial chain's latency per entry (indexed by format_id; 1 for cache files
  /// written before it): the median of (measured - fixed costs) / chain over the warm-up's samples a chain
  /// clearly dominates (fit_format_corrections). The 90 / 270 ns per entry above are one format's; on the
  /// H100 held-out set the thread-per-row layouts of small matrices with long rows measured 1.2x (jad,
  /// sell_delta16) to 2x (ell) the chain of the same entries (bench/results/2026-11-23_h100_session5_accuracy.csv).
  std::array<double, format_count> format_chain_scale = per_format(1.0);
  /// Per-format growth of the chain's latency per entry with the lanes that walk it together (indexed by
  /// format_id; 0 for cache files written before it): the chain term is multiplied by
  /// 1 + format_chain_lanes x (chain_lanes - 1) / 31, so 0 is one lane's latency for any number of lanes and
  /// 1 doubles it with a full group of 32; for JAD, whose chain grows steeply from one lane to two and hardly
  /// beyond eight, the position (chain_lanes - 1) / 31 is (1 - 1 / chain_lanes) / (1 - 1 / 32) instead
  /// (predict.cpp, saturating_lanes). A lane's loads of its own row need their own sectors: the 32-row
  /// group of the longest row issues as many sectors per step as it has rows still running. On the H100
  /// held-out set jad took 85 ns per entry behind one long row (hangGlider_2, adder_dcop_05) and 125-134 ns
  /// behind blocks of them (mbeacxc, bcsstk13), csr_scalar 60 and 94 ns; from DRAM csr_scalar 106 ns behind
  /// the power-law matrix's one dense row and 192 ns behind the circuit's 20
  /// (bench/results/2026-11-23_h100_session5_l1_fresh_cache_accuracy_samples.jsonl.xz).
  std::array<double, format_count> format_chain_lanes = per_format(0.0);
  /// Per-format factor on the chain when the layout does not fit in the L2 (indexed by format_id; 0 = not
  /// fitted: format_chain_scale serves both regimes, as in cache files written before it). The 90 / 270 ns
  /// per entry are one format's; how much slower a chain runs from DRAM than in the L2 depends on the format
  /// (which of its loads stream, how many depend on each other): on the H100 warm-up the SELL layouts took
  /// 255-290 ns per entry from DRAM (sell, sell_sigma, with one lane or 32), csr_scalar 144 ns, while one
  /// factor for both regimes, the median over the samples of both, gave sell 1.11 x 270 ns and csr_scalar
  /// 0.72 x 270 ns: the 2M-row circuit's 20 rows of 200000 measured 51.6 ms (sell), predicted 59.9 ms
  /// (bench/results/2026-11-23_h100_session6_block_warmup_samples.jsonl.xz,
  /// 2026-11-24_h100_session12_accuracy_samples.jsonl.xz). The chain term from DRAM is
  /// format_chain_scale_dram x (1 + format_chain_lanes x (lanes - 1) / 31). Fitted like format_chain_scale
  /// on the chain-bound samples beyond the L2 alone (fit_format_corrections); cache key
  /// "chain_scale_dram.<format>".
  std::array<double, format_count> format_chain_scale_dram = per_format(0.0);
  /// The lanes' growth of the chain from DRAM (indexed by format_id; -1 = not fitted: format_chain_lanes).
  /// From DRAM a lane's loads of its own row are DRAM sectors of their own, and the chain grows with the lanes
  /// far more than in the L2: csr_scalar on the H200 warm-up took 139-210 ns per entry behind one long row
  /// and 297 ns with 32 rows of 1024-2048 walked together (in the L2: +13 % at 32 lanes). Fitted like
  /// format_chain_lanes on the chains beyond the L2 alone, with at least 2 samples per lane group; cache key
  /// "chain_lanes_dram.<format>".
  std::array<double, format_count> format_chain_lanes_dram = per_format(-1.0);
  /// How much faster a chain from DRAM runs along a row whose x gathers stay in one sector for several entries
  /// (indexed by format_id; 0 = not fitted, as in cache files written before it; fitted for csr_scalar only):
  /// the chain term from DRAM is multiplied by 1 - kappa x (1 - scatter), scatter = (rho - vb / 32) / (1 - vb /
  /// 32) in [0, 1] of the longest sampled row's x sector changes per entry rho (gather_mixture::longest_row_ratio;
  /// 0 contiguous, 1 a sector per entry), factor 1 where unknown. On the H100 (session-42 gated runs) csr_scalar's
  /// chains from DRAM took 103-136 ns per entry along the warm-up's contiguous long rows of 200000 (1-20 lanes)
  /// and 143 ns along its random pareto rows, 160-194 ns along the held-out circuit's random dense rows and 124
  /// ns along the same rows with contiguous columns; one factor put the circuit 26 % under. Fitted from the
  /// chain-bound warm-up samples beyond the L2 that carry the statistic, split at scatter 1/2 (at least 2 each:
  /// the kappa whose line passes through both groups' medians, clamped to [0, 0.9]; fit_format_corrections).
  /// Cache key "chain_scatter_dram.<format>".
  std::array<double, format_count> format_chain_scatter_dram = per_format(0.0);
  /// cuSPARSE SELL's chains in the L2 run at one of two rates, set by the layout's stored entries (32 x
  /// n_iter_natural, the sellValuesSize our layout passes to cusparseCreateSlicedEll), not by the rows, the
  /// nonzeros, the slices or the lanes: on the H100 gated warm-ups and held-out sets every chain-bound product
  /// of at most 179K stored entries took 0.33-0.53 of the raw chain (one to 32 long rows of 400-1600 in
  /// 16000 rows: 0.44-0.47), every one of 191K or more 0.72-1.0 (mbeacxc's 16 slices as PGPgiantcompo's 334
  /// and astro-ph's 523). cuSPARSE's kernel is a black box; a switch of its kernel or of its threads per row at
  /// a size is the reading (docs/models.md, Session 29: cusparse_sell). This is the boundary in stored entries
  /// (0 = one rate, as in cache files written before it): the geometric middle of the gap between the
  /// warm-up's two groups of chains (fit_format_corrections). Cache key "chain_wide_padded.cusparse_sell".
  double cusparse_sell_wide_padded = 0.0;
  /// The chain factor in the L2 above that boundary (format_chain_scale's below it); the lanes slope is
  /// format_chain_lanes'. Cache key "chain_scale_wide.cusparse_sell".
  double cusparse_sell_wide_chain_scale = 0.0;
  /// Per-format L2 rate (indexed by format_id; 0 = l2_gather_gbs, as in cache files written before it), fitted
  /// per device (fit_format_corrections: the median over the format's warm-up samples whose L2 term is at least
  /// 1.2x the streaming and chain terms and four launches long, of their L2 traffic bytes / (measured - fixed
  /// costs)), for cuSPARSE CSR, our SELL-32 and SELL-32 with 16-bit deltas only.
  /// cuSPARSE CSR (session 32): calibrate_device measures l2_gather_gbs on one random-column matrix; on the five
  /// H100 gated warm-ups of sessions 27-30 the 71-72 gather-bound cuSPARSE CSR samples (random columns, 8000-8M
  /// rows) give 4807-4829 GB/s against the calibrated 4557, which had put them and the held-out random-column
  /// matrices (2M rows, power-law and normal rows) 7-10 % over (docs/models.md, Session 32).
  /// SELL (session 33): their
  /// kernel (sell_common.cuh) issues a chunk of 4 independent gathers per step for all 32 rows of a slice, so
  /// the L2 serves them at a rate of their own, not at that of calibrate_device's one cuSPARSE CSR matrix: on
  /// the H200 session-33 gated warm-up SELL's 54 gather-bound samples (random columns, 34K-4M rows) give 5955
  /// GB/s against the calibrated 5126, sell_delta16's 24 give 6048 (H100 session 32: 5123 and 5327 against
  /// 4557), where the calibrated rate had put the held-out 2M-row random-column matrices and the 8M-row 7-point
  /// Laplacian 11-17 % over on the H200. Tested and not kept for the other layouts: their rate falls more as x
  /// fills the L2 (H100: ELLPACK-R 4900 -> 4308 GB/s from 1M to 2M random-column rows, SELL 5100 -> 4926), so the
  /// median of the warm-up's smaller matrices put the held-out 2M-row ones 10-17 % under (docs/models.md,
  /// Session 33).
  /// cuSPARSE SELL (session 34): fitted the same way, but on and for matrices whose x fits in the share of the L2
  /// that keeps a working set (l2_resident_share); beyond it the calibrated rate. Its gather-bound warm-up samples
  /// ran 1.12x the calibrated rate on the H100 session-32 warm-up (5111 GB/s, 49 samples) and 1.16x on the H200's
  /// (5939, 52), where the calibrated rate had put the held-out 2M-row random-column matrices 9-14 % over (-2 to
  /// -3 % after); the 8M-row 7-point Laplacian (x 64 MB) keeps the calibrated rate, which the own one put 16-19 %
  /// under on the H200 (docs/models.md, Session 34). Cache key "l2_gather_gbs.<format>".
  std::array<double, format_count> format_l2_gather_gbs = per_format(0.0);
  /// Per-format share of the traffic term (streaming or L2, whichever is larger) that adds to the chain
  /// (indexed by format_id; 0 = none: the larger of the two alone, as in cache files written before it): a chain
  /// does not hide all of the other rows' traffic. On the H100 session-41 gated warm-up ELL's chains in the L2 took
  /// 0.67-0.99 of the raw chain on 1000 rows and 0.89-1.16 on 8000 (the same chains, 8x the traffic beside them);
  /// the single median factor put the held-out small matrices with long rows (mbeacxc, G51, watt_2: 496-1856
  /// rows) 13-18 % over; csr_vector's single long rows beside many short rows (adder_dcop_05) 15-19 % over. The
  /// variable part is max(traffic, chain + format_overlap x traffic), traffic = max(streaming, L2 term). Chosen
  /// from a grid by the training error (fit_format_corrections), the chain factors fitted net of it; fitted for
  /// csr_vector and ELL (predict.cpp, overlap_fitted: held out on the H100 pairs of session 41 it took csr_vector's
  /// p95 from 16-17 % to 11-14 % and ELL's from 13-15 % to 12-13.5 %, and raised jad's on every pair where it was
  /// tried). Cache key "chain_overlap.<format>".
  std::array<double, format_count> format_overlap = per_format(0.0);
  /// Per format, the share of its L2 traffic besides the x gathers (the layout's moved bytes and y) that its L2 term
  /// counts where the layout lies beyond the L2 (1: all of it, as in cache files written before it). There the
  /// matrix streams from DRAM (the streaming term prices it) and the L2 term is the x gathers': on the H100 gated
  /// pair of session 43 the 2M-row random rows of 24 (x 16 MB) took 3.0-3.3 TB/s of x sectors in every format whose
  /// moved bytes lay between 584 and 882 MB (ELL, ELLR, SELL, PELLR, csr_vector, cuSPARSE SELL), while the term
  /// counted those bytes beside the gathers and put ELL, ELLR and HYB 12-13 % over. The calibrated rate
  /// (l2_gather_gbs, measured on cuSPARSE CSR over all of its L2 bytes) is scaled to the same share of the calibration
  /// product's bytes. Fitted per device for the formats priced at the calibrated rate with no L2 term of their own
  /// (matrix_share_fitted: ELL, ELLR, PELLR, HYB, JAD, csr_vector), from the grid {1, 0.5, 0.25} by the whole fit's
  /// training error per format, as format_overlap (docs/models.md, Session 44). Cache key "l2_matrix_share.<format>".
  std::array<double, format_count> format_l2_matrix_share = per_format(1.0);
  /// Per format, 1 where a layout that stays in the L2 (l2_resident_share) is read at the L2 term's pace rather than
  /// streamed from DRAM: its streaming term is at most its L2 term (0: the streaming term as it is, as in cache files
  /// written before it). Back to back, a layout in the L2 stays there between products; ELL's padded slots, read in
  /// order across the warp, were the one held-out sample bound by that stream on the H100 session-44 pair
  /// (delaunay_n15 +14.1 %: measured 4.2 us = fixed cost + the L2 term). Fitted per device for ELL and HYB
  /// (l2_stream_fitted), from {0, 1} by the whole fit's training error per format; tried for every format in session
  /// 34 and not kept (cuSPARSE SELL ran the other way). Cache key "l2_stream.<format>".
  std::array<double, format_count> format_l2_stream = per_format(0.0);
  /// Per format, how much longer a step of its chain in the L2 takes per doubling of x's size, from 4 KiB up to the
  /// SM's L1 (l1_bytes_per_sm): the raw chain is scaled by 1 + k log2(x / 16 KiB) with x clamped there (0: flat, as
  /// in cache files written before it). A step gathers x, from the L1 while x fits there beside the rest of the
  /// SM's work and from the L2 as it does not: on the H100 gated warm-up of session 46 ELL's chains in the L2 took
  /// 72-87 ns a step with x of 8 KB (1000 rows), 80-98 ns with 64 KB and 96-106 ns with 132-250 KB, and the
  /// held-out matrices with x of 4-15 KB (mbeacxc, G51, email-Eu-core, watt_2) 68-75 ns, which the flat factor put
  /// 6-14 % over. Fitted per device for ELL (chain_x_fitted) from the grid {0.03, 0.06} by the whole fit's training
  /// error per format, as format_overlap (docs/models.md, Session 46). Cache key "chain_x_doubling.<format>".
  std::array<double, format_count> format_chain_x_doubling = per_format(0.0);
  /// Per format, what its idle lanes leave of the streaming rate beyond their filled share, where a row takes one
  /// step of its lanes: csr_vector's streaming efficiency is the filled share of its lanes plus this (predict.cpp,
  /// placeholder_terms_of; 0.04 as measured on the H100 warm-up of session 13, the value of cache files written
  /// before it). Fitted per device for csr_vector (idle_lane_fitted) from the grid {-0.04, 0, 0.07, 0.1} by the
  /// whole fit's training error, as format_overlap: on the eight H100 gated pairs of sessions 42-46 every fit chose
  /// 0.1 and csr_vector's held-out mean fell on all eight (docs/models.md, Session 46). Cache key
  /// "idle_lane_offset.<format>".
  std::array<double, format_count> format_idle_lane_offset = per_format(0.04);
  /// Per format, how much faster than its calibrated streaming rate it streams per doubling of the mean row length
  /// above the calibration product's 8 entries per row: the efficiency is scaled by 1 + k log2(max(1, mean / 8)) (0: flat,
  /// as in cache files written before it). cuSPARSE CSR (ALG1) pays per row besides the bytes (row pointers, y, the
  /// rows' reductions), which its efficiency, measured on rows of 8, charges to every byte: on the H100 gated pairs of
  /// sessions 42-46 its stream-bound products with local gathers were within 1 % of the prediction on rows of 7 and
  /// 5-16 % over on rows of 12-40 (the 3D stencils of 21-27 held out: 5-13 % over on every pair). Fitted per device for
  /// cuSPARSE CSR (stream_row_fitted) from the grid {0.03, 0.05, 0.07} by the whole fit's training error, as
  /// format_overlap (docs/models.md, Session 46). Cache key "stream_row_doubling.<format>".
  std::array<double, format_count> format_stream_row_doubling = per_format(0.0);
};

/// The chain term's factor for `lanes` lanes (chain_lanes): format_chain_scale x (1 + format_chain_lanes x
/// (lanes - 1) / 31); JAD: (1 - 1 / lanes) / (1 - 1 / 32) in place of (lanes - 1) / 31; csr_scalar (whose
/// lanes are csr_scalar_chain_lanes, up to 2048): (lanes - 1) / 31 clamped at 64 lanes instead of 32.
double chain_factor(const bandwidth_model_params& p, format_id f, double lanes);
/// The same for a chain from DRAM (the layout beyond the L2): format_chain_scale_dram in place of
/// format_chain_scale where it was fitted.
double chain_factor(const bandwidth_model_params& p, format_id f, double lanes, bool in_l2);

/// Cache keys of a format's fitted corrections in cache_entry::device_metrics: "fixed_us.<format name>" and
/// "chain_scale.<format name>".
std::string fixed_cost_key(format_id f);
std::string chain_scale_key(format_id f);
std::string chain_lanes_key(format_id f);  ///< "chain_lanes.<format name>"
std::string chain_scale_dram_key(format_id f);  ///< "chain_scale_dram.<format name>"
std::string chain_lanes_dram_key(format_id f);  ///< "chain_lanes_dram.<format name>"
std::string chain_scatter_dram_key(format_id f);  ///< "chain_scatter_dram.<format name>"
std::string chain_overlap_key(format_id f);  ///< "chain_overlap.<format name>"
std::string l2_matrix_share_key(format_id f);  ///< "l2_matrix_share.<format name>"
std::string l2_stream_key(format_id f);  ///< "l2_stream.<format name>"
std::string chain_x_key(format_id f);  ///< "chain_x_doubling.<format name>"
std::string idle_lane_key(format_id f);  ///< "idle_lane_offset.<format name>"
std::string stream_row_key(format_id f);  ///< "stream_row_doubling.<format name>"
std::string floor_key(format_id f);  ///< "floor_us.<format name>"
std::string floor_small_y_key(format_id f);  ///< "floor_small_y_us.<format name>"
/// The y size (bytes) up to which bandwidth_model_params::format_floor_small_y_us replaces the floor.
inline constexpr double small_y_bytes = 4096.0;
std::string floor_adds_l2_key(format_id f);  ///< "floor_adds_l2.<format name>"
std::string l2_gather_key(format_id f);  ///< "l2_gather_gbs.<format name>"
/// Whether `p` carries fitted per-format corrections (any fixed cost or chain factor off its neutral value).
bool has_format_corrections(const bandwidth_model_params& p);
/// Copies the per-format corrections (fixed costs, floors, chain factors and their lanes slopes) of `from` into
/// `to`, leaving its device constants: the shipped defaults' corrections for a device of its own constants, and
/// the neutral corrections (`bandwidth_model_params{}`) a fit starts from.
void copy_format_corrections(const bandwidth_model_params& from, bandwidth_model_params& to);

/// The device constants as the per-device cache stores them (cache_entry::device_metrics): fills `p` and returns
/// true when the three required ones (stream_read_gbs, launch_overhead_us, cusparse_csr_overhead_us) are
/// present and positive; the later optional ones (cuSPARSE CSR efficiency, ALG2's fixed cost and efficiency)
/// keep their defaults when absent, ALG2's fixed cost then ALG1's; the per-format fixed costs
/// (format_fixed_us) are stored as "fixed_us.<format name>", 0 when absent, the chain factors as
/// "chain_scale.<format name>", 1 when absent. Shared by the runtime and aijp_refit.
bool params_from_metrics(const std::map<std::string, double>& metrics, bandwidth_model_params& p);
/// The inverse: writes every constant under the same keys.
void params_to_metrics(const bandwidth_model_params& p, std::map<std::string, double>& metrics);

/// What one SpMV in a layout stores, moves and waits for, derived from the row statistics alone. Shared by
/// the placeholder model and our fitted model (runtime/src/model_aijp.cpp) so their layouts agree.
struct layout_traffic {
  double device_bytes = 0;    ///< memory the layout holds beyond the CSR copy
  double moved_bytes = 0;     ///< matrix bytes one SpMV reads and writes (x and y excluded)
  double padded_entries = 0;  ///< stored entries of a padded layout (0 for unpadded ones)
  int launches = 1;           ///< kernel launches per SpMV
  double serial_entries = 0;  ///< longest dependent chain of entries one thread walks (csr_vector: in steps of its
                              ///< one-row loop, see layout_traffic_of in predict.cpp)
  /// Bytes of the layout one SpMV touches, each once (x and y excluded): what must fit in the L2 for its
  /// chain to run at the L2 latency. moved_bytes except where a layout fetches sectors more than once
  /// (csr_scalar's entries that miss L1 fetch their sectors again; the data stay as large).
  double footprint_bytes = 0;
  double slot_work = 0;       ///< thread-slot iterations of the whole SpMV
};
/// The kernels (and memsets) one product of `f` runs on the device, each separated from the next by the gap
/// between back-to-back kernels (bandwidth_model_params::launch_shift_us): our formats' launches
/// (layout_traffic::launches: COO and HYB with a COO part 2, the others 1), cuSPARSE SELL 1, cuSPARSE CSR 2 and
/// its ALG2 3.5. The cuSPARSE counts are the ratios of their products' shifts to the one-kernel formats' on the
/// two H100 gated warm-up pairs whose gap moved (sessions 42 and 46: ALG1 2.1 and 2.3, ALG2 3.2-4.1 over sizes;
/// docs/models.md, Session 47), not traced kernels.
double launch_gaps_of(format_id f, const row_stats& s);
/// `us`, a prediction of one product of `f` at the cache's gap between back-to-back kernels, moved to the gap now:
/// plus its kernels (launch_gaps_of) times p.launch_shift_us, never below 0; `us` itself where the shift is 0. The
/// placeholder applies it to its own predictions; aijp_accuracy and aijp_refit to every other model's.
double at_launch_shift(format_id f, const row_stats& s, const bandwidth_model_params& p, double us);

/// `device` (optional) gives the geometry some kernels adapt to (csr_vector stacks rows per lane group once
/// the matrix needs more than a wave); nullptr = unknown: the kernels' one-wave variant is assumed.
/// `x_sectors_per_nnz` (optional, 0 = unknown) is the sampled x-gather locality: csr_scalar's gathers share
/// the L1 with its rows' sectors, so they raise the share of the rows' entries that miss it.
layout_traffic layout_traffic_of(format_id f, const row_stats& s, int value_bytes,
                                 const device_properties* device = nullptr, double x_sectors_per_nnz = 0.0);

/// Unified L1 / shared memory per SM of `device` in bytes, from its compute capability (nullptr: 128 KB).
double l1_bytes_per_sm(const device_properties* device);

/// Lanes per row of our csr_vector kernel: the smallest power of two >= the mean row length, at most 32
/// (the rule of the 2013 Kepler CRS study). kernels/src/formats/csr.cu uses the same rule.
int csr_vector_lanes(const row_stats& s);

/// The row length most of csr_vector's lane groups see: the mode when at least half of the rows have it,
/// else the mean. A few long rows raise the mean, hence the lanes per row, while the other rows stay short:
/// 4096 rows of 2000 random columns above a 2M-row 7-point stencil (mean 10.8) give 16 lanes to rows of 7,
/// and csr_vector measured 232 us where the mean-based estimate said 142 (H100,
/// bench/results/2026-11-23_h100_session4_final_partition_online.txt).
double csr_vector_typical_length(const row_stats& s);

/// Rows of the SM that holds csr_scalar's longest row still running over that row's max_len steps, as the
/// lanes whose position ((lanes - 1) / 31, clamped at csr_scalar_lanes_span) is the average over the steps of
/// each step's clamped position: for the first min(mean, max_len) steps the longest row's 32-row group
/// (chain_lanes) plus the other rows resident on its SM (at the mean length), for the rest the group alone;
/// in [1, rows on the SM]. The SM holds min(rows, 256 x min(resident blocks per SM, ceil(blocks / sm_count)))
/// rows of the thread-per-row kernel's 256-thread blocks (one block per SM for a matrix under 256 x sm_count
/// rows). Every one of those rows' lanes issues a load of its own line at each step, and the L1 of the SM
/// serves all of them: the unit of csr_scalar's chain lanes (predict.cpp, csr_scalar_lanes_span). Without the
/// device geometry: chain_lanes.
double csr_scalar_chain_lanes(const row_stats& s, const device_properties* device);

/// Rows per lane group of our csr_vector kernel on `device` (layout_ref::csr_vector_slots, the rule the
/// kernel applies): 4 when one row per group needs more blocks than one wave of resident blocks, else 1.
/// Resident blocks = sm_count x (max_threads_per_sm / 256): the kernel's 32 registers leave the resident
/// threads as the limit (the kernel asks the occupancy API, 8 blocks per SM on an H100/H200). 1 when the
/// device geometry is unknown (nullptr or zero SMs / threads).
int csr_vector_slots(const row_stats& s, const device_properties* device);

struct format_estimate {
  format_id format = format_id::cusparse_csr;
  bool feasible = false;
  std::string reason;          ///< why infeasible (empty when feasible)
  double bytes = 0.0;          ///< bytes one SpMV moves under the layout (minimal-bytes model)
  double device_bytes = 0.0;   ///< extra device memory the format needs beyond the CSR copy
  double predicted_us = 0.0;   ///< predicted time of one y = A x
  bool fitted = false;         ///< predicted_us comes from a fitted model (else the placeholder)
};

struct prediction_input {
  row_stats stats;
  device_properties device;
  size_type free_memory_bytes = 0;  ///< free device memory at analysis time
  int value_bytes = 8;              ///< sizeof(double) or sizeof(float)
  bool columns_sorted = true;       ///< every row's columns strictly increasing (compressed-index layouts)
  index_type max_column_step = 0;   ///< largest step between consecutive columns of a row
  double x_sectors_per_nnz = 0.0;   ///< sampled x-gather locality in natural row order (0: unknown)
  sorted_locality sorted;           ///< the same, and y's, in the length-sorted order (0: unknown)
  gather_mixture x_mixture;         ///< the same per window at evenly spaced nonzeros (empty: unknown)
  /// Bytes the rest of the matrix moves through the L2 between two products of these rows: 0 for a whole matrix,
  /// the other blocks' bytes for a block of a partition plan. The layout stays in the L2 from one product to the
  /// next only where its footprint and these fit together in the share of the L2 that keeps a working set.
  double l2_shared_bytes = 0.0;
};

/// prediction_input::l2_shared_bytes of a block of rows of `whole`: the other rows' entries (value and column
/// index) and their row pointers and entries of y, the least any layout of them moves (their formats are not known
/// while the blocks are priced). 0 for the whole matrix.
double rest_of_matrix_bytes(const row_stats& whole, const row_stats& block, int value_bytes);

/// Whether sell_delta16 can encode these columns: every row sorted, every step within 16 bits.
inline bool sell_delta16_columns_fit(const prediction_input& in)
{
  return in.columns_sorted && in.max_column_step <= sell_delta16_max_step;
}

/// The streaming bandwidth that explains measured products of one matrix (online refinement: the running format and
/// the ones compared with it): `scale` times `p.stream_read_gbs`, from a geometric grid of 57 points over [1/4, 4]
/// (2^(1/14) apart), minimises the root mean square of log(predicted / measured) over `measured`, each a format and its
/// measured time in microseconds (formats whose prediction is infeasible or not positive are left out). A per-format
/// correction multiplies every format alike, so when the cached bandwidth is wrong it cannot re-rank formats whose
/// traffic binds them differently (session 46: lap7 200^3 from a cache with the bandwidth doubled, where every format's
/// L2 term became its largest and ranked ELLR first, 1.17x the measured best; docs/models.md, Session 47).
struct stream_scale_fit {
  double scale = 1.0;          ///< factor on stream_read_gbs
  double rms_log_error = 0.0;  ///< at `scale`
  double rms_log_error_at_1 = 0.0;  ///< at the cached bandwidth
  int formats = 0;             ///< measurements used
};
stream_scale_fit fit_stream_scale(const prediction_input& in, const bandwidth_model_params& p,
                                  const std::vector<std::pair<format_id, double>>& measured);

/// x bytes our COO kernel reads again from DRAM. Every warp owns an equal chunk of nonzeros and all of them
/// run at once (kernels/src/formats/coo.cu), so the uses of an x sector by rows far apart in the matrix (a
/// stencil's neighbouring grid lines and planes, different long rows) fall at unrelated times of the product,
/// and a use finds the sector in the L2 only if the bytes streamed since the previous use fit in it. With
/// k = x_sectors_per_nnz x nnz x 32 / x_bytes gathers per x sector (beyond the first, each a reuse) at random
/// times, the gap before a reuse is exponential with mean 1 / k of the product, and the reuse misses with
/// probability exp(-k L2 / bytes): x_bytes (k - 1) exp(-k L2 / bytes), `bytes` what the product streams with x
/// once and y. 0 when k <= 1 or the locality or the L2 size is unknown.
double coo_x_reread_bytes(const row_stats& s, int value_bytes, double x_sectors_per_nnz, double bytes, double l2_bytes);

/// Sector bytes a layout that sorts all rows by length (jad, pellr) moves beyond what the natural order
/// moves: x gathers of a warp whose rows lie apart (distinct x sectors in sorted order minus those in natural
/// order, times 32 bytes per sector) and the scattered y writes (distinct y sectors per row beyond the
/// contiguous value_bytes / 32, twice: a partial sector is read before it is written back). The rows of one
/// x or y sector are visited once per length class, at different times, so beyond the L2 each visit is a
/// DRAM access. sell_sigma sorts within windows of 4096 rows, whose visits stay close in time: measured as
/// fast as row order on the circuit body where jad and pellr take 2x
/// (bench/results/2026-11-23_h100_sorted_layouts.txt), so it pays nothing. 0 for the other layouts and when
/// the locality is unknown. Shared by the placeholder and our fitted model.
double sorted_scatter_bytes(format_id f, const row_stats& s, int value_bytes, double x_sectors_per_nnz,
                            const sorted_locality& sorted);

/// Bytes one SpMV passes through the L2 to the SMs: the layout's moved bytes, y, the x gathers at 32 bytes per
/// distinct sector (x_sectors_per_nnz x nnz x 32; x once when the locality is unknown) and what a length-sorted
/// order adds (sorted_scatter_bytes). The placeholder bounds a product below by these bytes at
/// bandwidth_model_params::l2_gather_gbs: on matrices with random columns (one sector per nonzero, x in the
/// L2) the formats measured 1.3-2.1x the DRAM-streaming prediction on an H100, all at 4.2-5.0 TB/s of this
/// traffic (bench/results/2026-11-23_h100_run7_warmup_samples.jsonl.xz). Where x does not fit in the L2 the
/// gathers that miss it cost DRAM sectors too; the sampled feature cannot tell how far apart a column's
/// visits are (a power-law matrix whose columns stay in a window of 32768 hits the L2 with 64 MB of x), so that
/// is not modelled.
double l2_traffic_bytes(format_id f, const row_stats& s, int value_bytes, double x_sectors_per_nnz, const sorted_locality& sorted,
                        const device_properties* device = nullptr);

/// One measured SpMV, for fit_format_corrections: the prediction input of its matrix and its time.
struct fixed_cost_observation {
  format_id format = format_id::cusparse_csr;
  prediction_input input;
  double measured_us = 0.0;
};

/// Observations used per format by fit_format_corrections (0: that correction was not fitted).
struct format_fit {
  std::array<int, format_count> fixed{};
  std::array<int, format_count> chain{};
  std::array<int, format_count> lanes{};  ///< observations behind format_chain_lanes (0: not fitted)
  std::array<int, format_count> chain_dram{};  ///< observations behind format_chain_scale_dram (0: not fitted)
  std::array<int, format_count> scatter_dram{};  ///< chains behind format_chain_scatter_dram (0: not fitted)
  std::array<int, format_count> overlap{};  ///< training samples behind a non-zero format_overlap (0: none)
  std::array<int, format_count> l2_matrix_share{};  ///< training samples behind a format_l2_matrix_share below 1 (0: none)
  std::array<int, format_count> l2_stream{};  ///< training samples behind a format_l2_stream of 1 (0: none)
  std::array<int, format_count> chain_x{};    ///< training samples behind a non-zero format_chain_x_doubling (0: none)
  std::array<int, format_count> idle_lane{};  ///< training samples behind a format_idle_lane_offset other than 0.04 (0: none)
  std::array<int, format_count> stream_row{};  ///< training samples behind a non-zero format_stream_row_doubling (0: none)
  std::array<int, format_count> floor{};  ///< observations behind format_floor_us (0: not fitted)
  std::array<int, format_count> floor_small_y{};  ///< observations behind format_floor_small_y_us (0: not fitted)
  int coo_efficiency = 0;  ///< observations behind bandwidth_model_params::coo_efficiency (0: not fitted)
  int hyb_empty_ell = 0;  ///< observations behind bandwidth_model_params::hyb_empty_ell_us (0: not fitted)
  int cusparse_sell_wide = 0;  ///< chains above bandwidth_model_params::cusparse_sell_wide_padded (0: not fitted)
  int csr_scalar_x_reread = 0;  ///< observations behind bandwidth_model_params::csr_scalar_x_reread_l2_share (0: not fitted)
  int l2_resident = 0;  ///< training samples behind bandwidth_model_params::l2_resident_share (0: not fitted, 1 kept)
  double l2_resident_error = 0;  ///< their mean relative error at the chosen share
  double l2_resident_error_whole = 0;  ///< and at the whole L2 (share 1)
  std::array<int, format_count> l2_gather{};  ///< observations behind format_l2_gather_gbs (0: not fitted)
};

/// Fits the placeholder's per-format corrections from measured products. p.format_floor_us: for each format
/// with at least `min_samples` observations whose variable part (streaming, chain and L2 terms) is below a
/// quarter of a launch, their median measured time. p.format_fixed_us: for each format with at least
/// `min_samples` observations whose variable part is at most two launches (cuSPARSE SELL: half a launch), the value that minimises their
/// mean relative error under max(launch, floor, fixed + variable) (the largest such value where the floor
/// leaves a range of them equally good). p.format_chain_scale: for each format with at
/// least `min_samples` observations whose chain clearly dominates (two launches long, twice the traffic
/// terms), the median of (measured - fixed costs) / chain, clamped to [0.25, 4]; where at least 3 of them
/// have chains walked by one to 16 lanes and 3 by more (chain_lanes), the line through the two groups'
/// medians instead: its value at one lane is the chain factor and its relative slope (clamped to [0, 4]) is
/// p.format_chain_lanes; then the fixed costs again. p.coo_efficiency: with at least `min_samples` COO
/// observations that stream from DRAM (bytes beyond the L2, the streaming term at the full rate above the L2
/// term), the median of their bytes (coo_x_reread_bytes included) / (bandwidth x (measured - fixed costs)),
/// fitted before the floors and again once COO's fixed cost is fitted. p.hyb_empty_ell_us: where at least
/// `min_samples` HYBs without an ELL part and as many other HYBs are dominated by fixed costs, HYB's fixed cost
/// is fitted on the others and the K = 0 HYBs' own fixed cost apart; the difference. cuSPARSE SELL's chains in the L2,
/// ordered by stored entries, split where the two groups' medians leave the least absolute deviation (at
/// least 3 chains each, the upper median at least 1.25 x the lower): p.cusparse_sell_wide_padded and
/// p.cusparse_sell_wide_chain_scale, the lower group alone fitting format_chain_scale and its lanes slope.
/// The fit starts from neutral corrections (refitting gives the same values); formats without enough
/// observations keep their fixed costs and chain factors, but a format with any observation and no fitted
/// floor loses its floor (one left from other measurements would bound every prediction from below).
format_fit fit_format_corrections(const std::vector<fixed_cost_observation>& obs, bandwidth_model_params& p, int min_samples = 5);

/// The placeholder's terms for one format (microseconds), for diagnostics (aijp_refit --explain): its
/// prediction is max(launch, floor, fixed + max(stream, chain, l2)).
struct placeholder_breakdown {
  double fixed_us = 0;    ///< launches, library overhead and the fitted per-format fixed cost
  double floor_us = 0;    ///< the fitted per-format floor (0: none)
  double stream_us = 0;   ///< DRAM streaming of the layout's bytes (and the sorted scatter, COO's x re-reads)
  double chain_us = 0;    ///< the longest dependent chain, times the fitted chain factor
  double l2_us = 0;       ///< L2 traffic at the calibrated gather rate
  double mixture_us = 0;  ///< what the gather mixture adds to max(stream, L2) (prediction_input::x_mixture)
  double predicted_us = 0;
  double raw_chain_us = 0;   ///< the chain before the fitted factor (entries x the L2 or DRAM latency)
  double lanes = 1;          ///< the chain's lanes (chain_lanes; csr_vector, jad, csr_scalar: their own count)
  bool in_l2 = false;        ///< the layout's bytes fit in the L2 (the chain at the L2 latency)
  double moved_bytes = 0;    ///< layout_traffic::moved_bytes
};
placeholder_breakdown explain_bandwidth_model(format_id f, const prediction_input& in, const bandwidth_model_params& p);

/// Estimates every format in `candidates` (feasibility first, then cost).
std::vector<format_estimate> predict_bandwidth_model(const prediction_input& in, const bandwidth_model_params& p,
                                                     const std::vector<format_id>& candidates);

/// cuSPARSE CSR's predicted product time above one kernel launch, from the matrix's sizes alone (its fixed cost
/// and its bytes at its calibrated streaming efficiency need no statistics): the most any format can save per
/// product before an analysis, and the device time a product overlaps with the host work queued after it.
double cusparse_csr_us_above_launch(const device_properties& device, const bandwidth_model_params& p, size_type rows,
                                    size_type cols, size_type nnz, int value_bytes);

/// A physical floor for any model's prediction: one SpMV cannot finish before one kernel launch plus one thread's walk of its longest dependent chain of entries at the L2
/// latency per entry, nor before the part of its working set (layout bytes + x once + y) that exceeds the L2
/// has streamed from DRAM at the measured bandwidth. Fitted models extrapolated beyond their samples otherwise
/// predict sub-launch times for small matrices, miss rows far longer than any benchmark row, and predict
/// bandwidths above the memory's on large matrices. `device` as in layout_traffic_of (nullptr: the kernels'
/// one-wave variants, whose chains are the shorter ones, so the floor stays a floor).
double at_least_launches(format_id f, const row_stats& s, int value_bytes, const bandwidth_model_params& p, double predicted_us,
                         const device_properties* device = nullptr);

/// Default of plan_options::baseline_margin (kernels/gpu_matrix.hpp): the fraction by which a format must be
/// predicted faster than cuSPARSE CSR to be chosen over it. Also the rule aijp_accuracy and aijp_refit report.
constexpr double default_baseline_margin = 0.03;

/// Estimated host cost (us) of converting the CSR copy to `f`, a layout of `layout_bytes` (the amortization's
/// price of a conversion). A layout is read and written a few times (widths, scan, fill; sorts for the sorted
/// layouts) plus allocations and launches: 150 us + 3x the bytes at `stream_gbs` (GB/s) matches the measured
/// 0.12-0.25 ms on small matrices and 3-9 SpMVs on 50M-nonzero ones (bench/results/2026-11-22_h200_formats.txt).
/// A format on the CSR copy (csr_vector, csr_scalar) builds no layout: making its format object and installing
/// the plan took 6-23 us on the H100 (bench/results/2026-11-25_h100_session28_trace.txt), charged as
/// csr_copy_install_us. cuSPARSE SELL's first use in a process loads its kernels (5.4-22.5 ms against 17-21 us for
/// its second product on the H100 machine, bench/results/2026-11-24_h100_session14_first_use_short_solves.txt and
/// _session15_first_use.txt): `first_cusparse_sell` adds cusparse_sell_first_use_us, the middle of those.
constexpr double csr_copy_install_us = 25.0;
constexpr double cusparse_sell_first_use_us = 12000.0;
double conversion_estimate_us(format_id f, double layout_bytes, double csr_bytes, double stream_gbs, bool first_cusparse_sell);

/// Index into `estimates` of the feasible format with the smallest predicted time; cuSPARSE CSR wins ties.
/// Returns -1 when none is feasible.
int select_best(const std::vector<format_estimate>& estimates);

}  // namespace aijp
