#include <aijpredict/predict.hpp>

#include <aijpredict/layout_ref_csr.hpp>
#include <aijpredict/layout_ref_ell.hpp>
#include <aijpredict/online.hpp>

#include "model_fit.hpp"

#include <algorithm>
#include <initializer_list>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>

namespace aijp {

namespace {

constexpr int slice_height = 32;  // SELL slice height and warp size of the thread-per-row kernels
// Largest fitted chain_scatter_dram (bandwidth_model_params::format_chain_scatter_dram): a contiguous row's chain at
// 0.1 of a scattered one's at least.
constexpr double max_chain_scatter = 0.9;
// Steps of csr_vector's one-row loop per dependent round (kernels/src/formats/csr.cu walks them in chunks).
constexpr double csr_vector_unroll = layout_ref::csr_chunk;
// Unroll of its stacked loop (`#pragma unroll 2`, all rows' loads of a step issued together).
constexpr double csr_vector_stacked_unroll = 2.0;

// Fraction of the streaming bandwidth HYB's COO part reaches on what it moves (hyb_coo_bytes). Its kernel is
// not COO's (hyb.cu: a warp per 256 consecutive entries, in entry order) and its entries are those of the rows
// longer than the ELL width, whose own x gathers the sampled locality does not describe: the sampler counts a
// 32-row group's distinct sectors, which its long rows share, while each 256-entry piece lies in one row. On the
// held-out 2M-row circuit, whose COO part is its 20 rows of 200000 random columns, the part took 0.61 (H100)
// and 0.45 (H200) of the streaming rate, the ELL part at the full rate and the fixed costs subtracted
// (bench/results/2026-11-24_h100_session25_run2_accuracy_gated_samples.jsonl.xz,
// 2026-11-23_h200_session6_accuracy_samples.jsonl.xz); COO's fitted rate (0.92-0.95) put that HYB 15 % (H100)
// and 26 % (H200) under. It keeps the 0.7 it shared with COO before COO's rate was fitted.
// Only beyond the L2, where it was measured: a HYB whose working set fits in the L2 streams its COO part from
// the L2 at the rate of the rest of its bytes. The H100 gated warm-ups' HYBs without an ELL part (K = 0: fewer
// than 4096 rows, every entry in the COO part, the ELL kernel only writing y) measured 7.06-7.29 us flat from
// 4000 to 45000 entries, where 0.7 made the stream term grow from 0.05 to 0.36 us, and the held-out ego-Facebook
// (176468 entries, 7.1-7.7 us) had been predicted 17-22 % over (docs/models.md, Session 28: hyb).
constexpr double hyb_coo_efficiency = 0.7;

// What HYB's COO part moves: its entries with row indices, and y read and written by the atomics.
double hyb_coo_bytes(const row_stats& s, int vb)
{
  return static_cast<double>(s.hyb_coo_nnz) * (vb + 2.0 * sizeof(index_type)) + 2.0 * static_cast<double>(s.rows) * vb;
}

// A HYB whose ELL part is empty (K = 0, every entry in the COO part): its ELL kernel only writes y, with no
// round of loads (col_idx, then x) to wait for before the COO kernel can start, so its fixed cost is HYB's
// plus its own fitted bandwidth_model_params::hyb_empty_ell_us. On the H100 gated warm-ups of sessions 27-28
// the 13 K = 0 HYBs (1000 rows, 4000-45000 entries) measured 1.5-2.1 us beyond their two launches and terms,
// the HYBs with both parts at the same terms 1.9-3.5 us; one fixed cost over both (+1.91..+2.01 us) left the
// held-out K = 0 HYBs up to 10 % over and those with both parts up to 7 % under. Fitted apart: -0.39..-0.54 us.
bool hyb_empty_ell(const row_stats& s) { return s.hyb_ell_width == 0 && s.hyb_coo_nnz > 0; }

// Access-pattern efficiency and library overhead of the placeholder model (not layout facts).
struct placeholder_terms {
  double efficiency = 1.0;  // fraction of streaming bandwidth the access pattern reaches
  double fixed_us = 0;      // library overhead beyond the launches (cuSPARSE)
};

// `streamed_bytes`: what the layout moves per SpMV with x once and y (HYB weighs its COO part by it).
placeholder_terms placeholder_terms_of(format_id f, const row_stats& s, const bandwidth_model_params& p, int vb,
                                       double streamed_bytes, bool in_l2)
{
  placeholder_terms t;
  switch (f) {
    case format_id::cusparse_csr:
      // Faster per byte on longer rows than on the calibration's rows of 8 (format_stream_row_doubling), never
      // above the streaming bandwidth.
      t.efficiency = std::min(std::max(1.0, p.cusparse_csr_efficiency),
                              p.cusparse_csr_efficiency * (1.0 + p.format_stream_row_doubling[static_cast<int>(f)] *
                                                                     std::log2(std::max(1.0, s.mean / 8.0))));
      t.fixed_us = p.cusparse_csr_overhead_us - p.launch_us;
      break;
    case format_id::cusparse_csr_alg2:
      // ALG2 streams the same arrays at ALG1's rate; what it costs beyond ALG1 does not grow with the bytes,
      // so it belongs to the fixed costs (its own overhead and fitted fixed cost), not to an efficiency. On
      // the H100 warm-up and held-out matrices beyond the L2, ALG2 measured ALG1 + 2-24 us (1-7 %: 387 vs
      // 377 us on an 8M-row band, 339 vs 316 us on the 27-point stencil), where its calibrated efficiency
      // (0.68 against ALG1's 0.76, measured on one 1.8M-row band) and L2 rate (4.0 against 4.5 TB/s) had it
      // 12 % slower, 8-28 % above the measurement (bench/results/2026-11-23_h100_session6_*_samples.jsonl.xz).
      t.efficiency = p.cusparse_csr_efficiency;
      t.fixed_us = p.cusparse_csr_alg2_overhead_us - p.launch_us;
      break;
    case format_id::cusparse_sell:
      t.fixed_us = 1.5;  // DESIGN.md section 7: cuSPARSE SELL ~5 us per call on H100
      break;
    case format_id::csr_vector: {
      // Idle lanes on short rows: the lanes are chosen from the mean, the idle share follows the typical row.
      // Where the typical row takes one step of its lanes, every round of loads leaves the idle lanes' share of
      // the bytes in flight unused, and the rate follows the filled share closely: the H100 warm-up's
      // stream-bound samples of 7-27 entries on 8-32 lanes measured their filled share + 0.04 (median of 7,
      // -0.04 to +0.10; the held-out 3D stencils + 0.04 (lap27) to + 0.11 (fem3: rows of 21 on 32 lanes, 261.7
      // us where the 0.25 this had before put 221.6), bench/results/2026-11-24_h100_session13_*_samples.jsonl.xz);
      // an H200 warm-up measured - 0.08, so the offset is fitted per device (format_idle_lane_offset, 0.04 where a
      // cache has none). Rows of several steps keep the next steps' loads in the same round (the unrolled
      // loop), so the last step's idle lanes cost less: + 0.25 there (constant rows of 40 on 32 lanes, filled
      // 0.63, measured 0.83-0.93).
      const int lanes = csr_vector_lanes(s);
      const double typ = csr_vector_typical_length(s);
      const double filled = typ / (lanes * std::max(1.0, std::ceil(typ / lanes)));
      t.efficiency = std::clamp(filled + (typ <= lanes ? p.format_idle_lane_offset[static_cast<int>(f)] : 0.25), 0.05, 1.0);
      break;
    }
    case format_id::coo:
      t.efficiency = p.coo_efficiency;
      break;
    case format_id::hyb:
      if (hyb_empty_ell(s)) t.fixed_us = p.hyb_empty_ell_us;
      if (s.hyb_coo_nnz > 0 && streamed_bytes > 0 && !in_l2) {
        // Beyond the L2 the ELL part streams at full rate, the COO part (its entries with row indices, and y
        // read and written by the atomics) at hyb_coo_efficiency: without this a HYB whose COO part holds
        // nearly everything (a block of dense rows) was predicted 30 % below COO itself. In the L2: one rate.
        const double coo_part = std::min(hyb_coo_bytes(s, vb), streamed_bytes);
        t.efficiency = streamed_bytes / ((streamed_bytes - coo_part) + coo_part / hyb_coo_efficiency);
      }
      break;
    default:
      break;
  }
  return t;
}

}  // namespace

namespace {
// A cache value accepted as read (`lo` <= value <= `hi`), as one above 0 only (lo exclusive), as a flag (any value > 0
// is 1, else 0) or as exactly 0 or 1; anything else, NaN included, leaves the field as it was.
enum class accepted { range, positive, flag, zero_or_one };
bool read_value(accepted how, double lo, double hi, double v, double& out)
{
  switch (how) {
    case accepted::range:
      if (!(v >= lo && v <= hi)) return false;
      break;
    case accepted::positive:
      if (!(v > lo && v <= hi)) return false;
      break;
    case accepted::flag:
      if (std::isnan(v)) return false;
      v = v > 0 ? 1.0 : 0.0;
      break;
    case accepted::zero_or_one:
      if (v != 0.0 && v != 1.0) return false;
      break;
  }
  out = v;
  return true;
}

// The fitted corrections, per format and scalar: each with its cache key and what a cache value must be to be
// read. params_from_metrics / params_to_metrics (neutral values, the field's default, as absent keys),
// copy_format_corrections and has_format_corrections all go through these two lists, so a new correction is one
// entry here.
struct per_format_correction {
  std::array<double, format_count> bandwidth_model_params::*field;
  std::string (*key)(format_id);
  accepted how;
  double lo, hi;
  void read(double v, double& out) const { read_value(how, lo, hi, v, out); }
};
const per_format_correction per_format_corrections[] = {
    {&bandwidth_model_params::format_fixed_us, fixed_cost_key, accepted::range, -1e3, 1e3},
    {&bandwidth_model_params::format_chain_scale, chain_scale_key, accepted::range, 0.25, 4.0},
    {&bandwidth_model_params::format_chain_lanes, chain_lanes_key, accepted::range, 0.0, 4.0},
    {&bandwidth_model_params::format_chain_scale_dram, chain_scale_dram_key, accepted::range, 0.25, 4.0},
    {&bandwidth_model_params::format_chain_lanes_dram, chain_lanes_dram_key, accepted::range, 0.0, 4.0},
    {&bandwidth_model_params::format_chain_scatter_dram, chain_scatter_dram_key, accepted::range, 0.0, max_chain_scatter},
    {&bandwidth_model_params::format_l2_matrix_share, l2_matrix_share_key, accepted::range, 0.0, 1.0},
    {&bandwidth_model_params::format_l2_stream, l2_stream_key, accepted::zero_or_one, 0.0, 1.0},
    {&bandwidth_model_params::format_overlap, chain_overlap_key, accepted::range, 0.0, 1.0},
    {&bandwidth_model_params::format_chain_x_doubling, chain_x_key, accepted::range, 0.0, 0.25},
    {&bandwidth_model_params::format_idle_lane_offset, idle_lane_key, accepted::range, -0.5, 0.5},
    {&bandwidth_model_params::format_stream_row_doubling, stream_row_key, accepted::range, 0.0, 0.25},
    {&bandwidth_model_params::format_floor_us, floor_key, accepted::range, 0.0, 1e3},
    {&bandwidth_model_params::format_floor_small_y_us, floor_small_y_key, accepted::range, 0.0, 1e3},
    {&bandwidth_model_params::format_floor_adds_l2, floor_adds_l2_key, accepted::flag, 0.0, 1.0},
    {&bandwidth_model_params::format_l2_gather_gbs, l2_gather_key, accepted::positive, 0.0, 1e6},
};
struct scalar_correction {
  double bandwidth_model_params::*field;
  const char* key;
  accepted how;
  double lo, hi;
  void read(double v, double& out) const { read_value(how, lo, hi, v, out); }
};
const scalar_correction scalar_corrections[] = {
    {&bandwidth_model_params::cusparse_csr_floor_us_per_doubling, "floor_us_per_doubling.cusparse_csr", accepted::range, 0.0, 10.0},
    {&bandwidth_model_params::cusparse_csr_floor_us_per_row_share, "floor_us_per_row_share.cusparse_csr", accepted::range, 0.0, 100.0},
    {&bandwidth_model_params::coo_efficiency, "stream_efficiency.coo", accepted::positive, 0.0, 1.0},
    {&bandwidth_model_params::hyb_empty_ell_us, "fixed_us_empty_ell.hyb", accepted::range, -1e3, 1e3},
    {&bandwidth_model_params::csr_scalar_x_reread_l2_share, "x_reread_l2_share.csr_scalar", accepted::positive, 0.0, 16.0},
    {&bandwidth_model_params::l2_resident_share, "l2_resident_share", accepted::positive, 0.0, 1.0},
    {&bandwidth_model_params::pellr_sorted_lanes, "chain_lanes_sorted.pellr", accepted::positive, 0.0, 1.0},
    {&bandwidth_model_params::cusparse_sell_wide_padded, "chain_wide_padded.cusparse_sell", accepted::positive, 0.0, 1e15},
    {&bandwidth_model_params::cusparse_sell_wide_chain_scale, "chain_scale_wide.cusparse_sell", accepted::positive, 0.0, 4.0},
};
}  // namespace

bool params_from_metrics(const std::map<std::string, double>& m, bandwidth_model_params& p)
{
  const auto bw = m.find("stream_read_gbs");
  const auto launch = m.find("launch_overhead_us");
  const auto csr = m.find("cusparse_csr_overhead_us");
  if (bw == m.end() || launch == m.end() || csr == m.end()) return false;
  if (!(bw->second > 0) || !(launch->second > 0) || !(csr->second > 0)) return false;
  p.stream_read_gbs = bw->second;
  p.launch_us = launch->second;
  p.cusparse_csr_overhead_us = csr->second;
  const auto optional = [&](const char* key, double& value, double hi) {
    const auto it = m.find(key);
    if (it != m.end() && it->second > 0 && it->second <= hi) value = it->second;
  };
  optional("cusparse_csr_efficiency", p.cusparse_csr_efficiency, 1.0);
  optional("cusparse_csr_alg2_efficiency", p.cusparse_csr_alg2_efficiency, 1.0);
  p.cusparse_csr_alg2_overhead_us = p.cusparse_csr_overhead_us;
  optional("cusparse_csr_alg2_overhead_us", p.cusparse_csr_alg2_overhead_us, 1e6);
  optional("scatter_efficiency", p.scatter_efficiency, 1.0);
  optional("l2_gather_gbs", p.l2_gather_gbs, 1e6);
  optional("l2_gather_alg2_gbs", p.l2_gather_alg2_gbs, 1e6);
  for (const auto& c : per_format_corrections) {
    for (int i = 0; i < format_count; ++i) {
      const auto it = m.find(c.key(static_cast<format_id>(i)));
      if (it != m.end()) c.read(it->second, (p.*c.field)[i]);
    }
  }
  for (const auto& c : scalar_corrections) {
    const auto it = m.find(c.key);
    if (it != m.end()) c.read(it->second, p.*c.field);
  }
  optional("launch_gap_us", p.launch_gap_us, 1e3);
  const auto lg = m.find("launch_gap_gated");
  if (lg != m.end()) p.launch_gap_gated = lg->second > 0 ? 1.0 : 0.0;
  return true;
}

void params_to_metrics(const bandwidth_model_params& p, std::map<std::string, double>& m)
{
  m["stream_read_gbs"] = p.stream_read_gbs;
  m["launch_overhead_us"] = p.launch_us;
  m["cusparse_csr_overhead_us"] = p.cusparse_csr_overhead_us;
  m["cusparse_csr_efficiency"] = p.cusparse_csr_efficiency;
  m["cusparse_csr_alg2_overhead_us"] = p.cusparse_csr_alg2_overhead_us;
  m["cusparse_csr_alg2_efficiency"] = p.cusparse_csr_alg2_efficiency;
  m["scatter_efficiency"] = p.scatter_efficiency;
  m["l2_gather_gbs"] = p.l2_gather_gbs;
  if (p.l2_gather_alg2_gbs > 0) m["l2_gather_alg2_gbs"] = p.l2_gather_alg2_gbs;
  // Neutral per-format values are stored as absent keys (and a stale key of an earlier fit is removed).
  const auto put = [&m](const std::string& key, double v, double neutral) {
    if (v != neutral) {
      m[key] = v;
    } else {
      m.erase(key);
    }
  };
  const bandwidth_model_params neutral;
  for (const auto& c : per_format_corrections) {
    for (int i = 0; i < format_count; ++i) put(c.key(static_cast<format_id>(i)), (p.*c.field)[i], (neutral.*c.field)[i]);
  }
  for (const auto& c : scalar_corrections) put(c.key, p.*c.field, neutral.*c.field);
  put("launch_gap_us", p.launch_gap_us, 0.0);
  put("launch_gap_gated", p.launch_gap_us > 0 ? p.launch_gap_gated : 0.0, 0.0);
}

std::string fixed_cost_key(format_id f) { return std::string("fixed_us.") + format_name(f); }
std::string floor_key(format_id f) { return std::string("floor_us.") + format_name(f); }
std::string floor_small_y_key(format_id f) { return std::string("floor_small_y_us.") + format_name(f); }
std::string floor_adds_l2_key(format_id f) { return std::string("floor_adds_l2.") + format_name(f); }
std::string l2_gather_key(format_id f) { return std::string("l2_gather_gbs.") + format_name(f); }
std::string chain_scale_key(format_id f) { return std::string("chain_scale.") + format_name(f); }
std::string chain_lanes_key(format_id f) { return std::string("chain_lanes.") + format_name(f); }
std::string chain_scale_dram_key(format_id f) { return std::string("chain_scale_dram.") + format_name(f); }
std::string chain_overlap_key(format_id f) { return std::string("chain_overlap.") + format_name(f); }
std::string chain_lanes_dram_key(format_id f) { return std::string("chain_lanes_dram.") + format_name(f); }
std::string chain_scatter_dram_key(format_id f) { return std::string("chain_scatter_dram.") + format_name(f); }
std::string l2_matrix_share_key(format_id f) { return std::string("l2_matrix_share.") + format_name(f); }
std::string l2_stream_key(format_id f) { return std::string("l2_stream.") + format_name(f); }
std::string chain_x_key(format_id f) { return std::string("chain_x_doubling.") + format_name(f); }
std::string idle_lane_key(format_id f) { return std::string("idle_lane_offset.") + format_name(f); }
std::string stream_row_key(format_id f) { return std::string("stream_row_doubling.") + format_name(f); }

double rest_of_matrix_bytes(const row_stats& whole, const row_stats& block, int value_bytes)
{
  const double nnz = static_cast<double>(whole.nnz > block.nnz ? whole.nnz - block.nnz : 0);
  const double rows = static_cast<double>(whole.rows > block.rows ? whole.rows - block.rows : 0);
  return nnz * (value_bytes + sizeof(index_type)) + rows * (value_bytes + sizeof(index_type));
}

namespace {
// Where `lanes` (chain_lanes) lies between one lane (0) and a full group of 32 (1).
double lanes_position(double lanes) { return std::clamp((lanes - 1.0) / (stats_warp_size - 1.0), 0.0, 1.0); }
// JAD's longest chain grows with the lanes that walk it together steeply from one lane to two and hardly beyond
// eight: (measured - fixed) / chain on the warm-up's chain-bound samples in the L2 was 0.78 / 1.15 / 1.50 / 1.53
// behind 1 / 2 / 8 / 32 long rows of 400-1600 entries on an H100 and 0.77 / 1.12 / 1.48 / 1.50 on an H200
// (bench/results/2026-11-24_h100_session13_warmup_samples.jsonl.xz, 2026-11-23_h200_session6_warmup_samples),
// the shape of 1 - 1 / lanes: each step of the chain waits for the slowest of its lanes' x gathers, and the
// second lane adds the most. A line in the lanes put the one long row of hangGlider_2 and adder_dcop_05
// (chain_lanes 1.1) at the median of the few-lane group, 35 % above the measurement (H100 held-out set,
// 2026-11-24). csr_scalar's block samples grow along the line instead (0.53 / 0.54 / 0.60 / 0.90), and the other
// layouts' fitted slopes are near 0 on the H100, so they keep it.
bool saturating_lanes(format_id f) { return f == format_id::jad; }

// Formats whose overlap of chain and traffic is fitted (bandwidth_model_params::format_overlap): csr_vector and ELL.
// Fitted for every format on the H100 gated pairs of session 41 (fit on the warm-up, scored on the held-out set),
// the training error chose it for csr_vector (0.6), pellr and jad (0.3), the SELL layouts (0.15) and, at any gain,
// ELL (0.3; 1.8 % lower training error). Held out, csr_vector's mean / p95 went from 5.5 / 17.1, 4.9 / 16.1 and
// 7.7 / 16.2 % to 4.0 / 11.3, 3.7 / 11.1 and 6.2 / 14.0 (its single long rows beside many short ones: adder_dcop_05
// +19 -> +7 %), ELL's from 5.1 / 13.3, 5.7 / 14.0 and 5.2 / 15.3 to 4.2 / 12.4, 4.5 / 11.7 and 4.8 / 13.5, while
// jad's p95 rose on every pair (9.4 -> 11.5, 9.1 -> 12.2, 11.2 -> 14.1) and the others moved within 1 point either
// way. HYB keeps none, also where its chain factor in the L2 is ELL's: with ELL's overlap its mean rose 0.3-0.7
// points on every pair (docs/models.md, Session 41).
bool overlap_fitted(format_id f) { return f == format_id::csr_vector || f == format_id::ell; }

// Formats whose share of the matrix's bytes in the L2 term beyond the L2 is fitted
// (bandwidth_model_params::format_l2_matrix_share): those priced at the calibrated L2 rate with no L2 term of their
// own. cuSPARSE CSR, cuSPARSE SELL, SELL and SELL-delta16 fit their own rates over all of their L2 bytes
// (format_l2_gather_gbs); COO and csr_scalar price their x re-reads beyond the L2 apart (coo_x_reread_bytes,
// csr_scalar_x_reread_bytes), and their training error chose no matrix bytes where the held-out sets wanted them
// (H100 session-43 pair: COO 3.7 -> 4.8 %, csr_scalar 6.0 -> 6.4 % mean at a share of 0).
bool matrix_share_fitted(format_id f)
{
  return f == format_id::ell || f == format_id::ellr || f == format_id::pellr || f == format_id::hyb ||
         f == format_id::jad || f == format_id::csr_vector;
}

// Formats whose in-L2 layouts may be read at the L2 term's pace (bandwidth_model_params::format_l2_stream): ELL, whose
// padded slots every lane reads in order, and HYB, whose ELL part is the same walk. Offline on eight pairs (six H100, two
// H200), ELL's held-out mean fell on seven (session 44's pair 4.8 / 14.0 -> 4.2 / 10.4 %; session 40's rose 2.5 -> 2.7) and
// HYB's on four (one rose 0.1), and no other format moved; applied to csr_vector it made its held-out error worse
// (session 44's pair 3.7 -> 6.4 % mean).
bool l2_stream_fitted(format_id f) { return f == format_id::ell || f == format_id::hyb; }

// Formats whose chain in the L2 grows with x's size (bandwidth_model_params::format_chain_x_doubling): ELL. Offline on
// the eight H100 gated pairs of sessions 42-46 every fit chose 0.06 for ELL and its held-out p95 fell on all eight
// (s46 run 2: 4.0 / 12.7 -> 3.7 / 8.8 %). Offered to every format with a chain, the training error also chose it for
// PELLR and JAD, whose held-out p95 then rose on six and five pairs (s44: PELLR 5.7 -> 9.5 %, JAD 9.1 -> 16.1 %), and
// for no other (docs/models.md, Session 46).
bool chain_x_fitted(format_id f) { return f == format_id::ell; }

// Formats whose idle lanes' offset on their streaming rate is fitted (bandwidth_model_params::format_idle_lane_offset):
// csr_vector, the one format whose lanes per row follow the mean row length.
bool idle_lane_fitted(format_id f) { return f == format_id::csr_vector; }

// Formats whose streaming rate grows with the row length (bandwidth_model_params::format_stream_row_doubling): cuSPARSE
// CSR (ALG1). Offline on the eight H100 gated pairs of sessions 42-46 at 0.03 its held-out mean fell on all eight; ALG2
// at the same value rose on six (its cost beyond ALG1 does not grow with the bytes, placeholder_terms_of).
bool stream_row_fitted(format_id f) { return f == format_id::cusparse_csr; }

// Formats whose product is several kernels in sequence, the data-moving one after the others, so that its L2
// traffic adds to the floor (bandwidth_model_params::format_floor_adds_l2): cuSPARSE CSR ALG1 and ALG2 (more than
// one kernel per call, ~9.5 us where one launch takes 4.3 us, predict.hpp) and COO (y = beta y, then the
// products). On the five H100 gated pairs of sessions 27-30 (fit on the warm-up, scored on the held-out set)
// this took cuSPARSE CSR's mean error 0.3-1.1 points lower, ALG2's 0-0.4 and COO's 0.1-1.2, the regret equal
// or lower. Not the single-kernel formats, whose floor is one launch and the latency their traffic overlaps
// (csr_vector: mean 0.1 lower on one pair, 0.1-1.4 higher on four), nor HYB (two kernels, but +0.1 on three
// pairs, -0.2 on two) (docs/models.md, Session 32).
bool floor_adds_l2(format_id f)
{
  return f == format_id::cusparse_csr || f == format_id::cusparse_csr_alg2 || f == format_id::coo;
}

// The fixed-cost fit's samples: those whose variable terms are at most this many launches. Two launches, except
// cuSPARSE SELL, whose chain term misfits its short chains by more than any other format's: on the H100
// session-32 gated warm-up its chains of 12-40 steps in the L2 took 50-80 ns per step (constant rows of 12 and
// 40: -8..-18 % at the fitted factor, 41 ns per step on the long chains), the held-out real matrices' chains of
// 47-334 steps 31-37 ns (mcfe, zenios, email-Eu-core). Samples of up to two launches of terms carried that misfit
// into the fixed cost (-1.10 us, 33 samples), which put the warm-up's own chains of at most 8 steps 6-13 % over
// and the held-out small matrices (Pd, airfoil1, fe_4elt2, 4elt, bcspwr10: 2.8-3.3 us) 10-16 %. At half a
// launch the terms are chains of at most ~30 steps and the fit keeps 15 samples: -1.28 us on the H100, -1.07 on
// the H200 (-1.02 before), and cuSPARSE SELL's held-out mean fell on all seven gated pairs of sessions 25-33 by
// 0.2-1.2 points (docs/models.md, Session 34). Tested and not kept for every format (ell, ellr and jad 2-5 points
// worse) and for PELLR (too few samples left to fit its fixed cost on some warm-ups).
double fixed_cost_span_launches(format_id f) { return f == format_id::cusparse_sell ? 0.5 : 2.0; }

// csr_scalar's chain lanes are the rows of the longest row's SM still running (csr_scalar_chain_lanes), up to
// 256 x 8; its lanes position is the other layouts' (lanes - 1) / 31, not clamped at 32 lanes but at
// csr_scalar_lanes_span (position 63 / 31), so the fitted slope keeps its unit (per 31 lanes). On
// the H100 gated warm-ups the chains in the L2 grow from 0.67 of the raw chain behind one long row to 0.92-1.23
// behind a block of 32 (one warp of long rows on the SM), and the held-out FEM matrices, whose whole block of
// 256 rows walks rows of 30-100 entries at once (bcsstk16: 190 busy rows, bcsstk13: 115, mcfe: 105), measure
// 1.06-1.31, the warm-up's 256 constant rows of 40 on each SM 1.8-1.9: the step's cost keeps growing past a
// warp and flattens within a few warps. The span is chosen, not fitted: 32 (one warp, the other formats'
// clamp) took at most a point off the held-out csr_scalar mean and raised the p95 of the session-28 runs; 64
// took 1-3 points off the mean on 8 of 10 H100 gated pairs (+0.3 and +0.8 on the other two) and 5-14 off the
// p95 on all; 96-128 did better on the placed warm-ups and worse on the older ones, 256 worse
// (docs/models.md, Session 28: csr_scalar). With the position averaged over the steps (csr_scalar_chain_lanes,
// session 29) the choice matters less: 48, 64 and 96 gave held-out means within 0.3 points of each other on the
// four session-27/28 gated pairs (run A 8.6 / 8.5 / 8.4 %; 128 too on the session-28 runs, +0.9 on session 27's),
// 32 and 256 0.7-2.8 points more.
constexpr double csr_scalar_lanes_span = 64.0;

// lanes_position for format f: 1 - 1 / lanes scaled to [0, 1] where the chain saturates (saturating_lanes);
// for csr_scalar (lanes - 1) / 31 up to csr_scalar_lanes_span lanes.
double lanes_position(format_id f, double lanes)
{
  if (f == format_id::csr_scalar) return std::clamp((lanes - 1.0) / (stats_warp_size - 1.0), 0.0, (csr_scalar_lanes_span - 1.0) / (stats_warp_size - 1.0));
  if (!saturating_lanes(f)) return lanes_position(lanes);
  const double l = std::clamp(lanes, 1.0, static_cast<double>(stats_warp_size));
  return (1.0 - 1.0 / l) / (1.0 - 1.0 / stats_warp_size);
}

// Whether a chain is priced from DRAM: the layout beyond the L2 and a DRAM factor fitted for the format.
bool chain_from_dram(const bandwidth_model_params& p, format_id f, bool in_l2)
{
  return !in_l2 && p.format_chain_scale_dram[static_cast<int>(f)] > 0;
}
}  // namespace

double chain_factor(const bandwidth_model_params& p, format_id f, double lanes)
{
  const int i = static_cast<int>(f);
  return p.format_chain_scale[i] * (1.0 + p.format_chain_lanes[i] * lanes_position(f, lanes));
}

double chain_factor(const bandwidth_model_params& p, format_id f, double lanes, bool in_l2)
{
  const int i = static_cast<int>(f);
  if (!chain_from_dram(p, f, in_l2)) return chain_factor(p, f, lanes);
  const double slope = p.format_chain_lanes_dram[i] >= 0 ? p.format_chain_lanes_dram[i] : p.format_chain_lanes[i];
  return p.format_chain_scale_dram[i] * (1.0 + slope * lanes_position(f, lanes));
}

void copy_format_corrections(const bandwidth_model_params& from, bandwidth_model_params& to)
{
  for (const auto& c : per_format_corrections) to.*c.field = from.*c.field;
  for (const auto& c : scalar_corrections) to.*c.field = from.*c.field;
}

bool has_format_corrections(const bandwidth_model_params& p)
{
  const bandwidth_model_params neutral;
  for (const auto& c : per_format_corrections) {
    if (p.*c.field != neutral.*c.field) return true;
  }
  for (const auto& c : scalar_corrections) {
    if (p.*c.field != neutral.*c.field) return true;
  }
  return false;
}

double l1_bytes_per_sm(const device_properties* device)
{
  // The unified L1 / shared memory per SM (all of it L1 for kernels without shared memory): 256 KB on
  // sm_90, 192 KB on sm_80, 128 KB on sm_70, sm_75, sm_86 and sm_89 (CUDA programming guide, compute
  // capabilities). Unknown: the smallest.
  if (device == nullptr) return 128.0 * 1024;
  if (device->cc_major >= 9) return 256.0 * 1024;
  if (device->cc_major == 8 && device->cc_minor == 0) return 192.0 * 1024;
  return 128.0 * 1024;
}

int csr_vector_lanes(const row_stats& s) { return layout_ref::csr_vector_lanes(s.mean); }

double csr_vector_typical_length(const row_stats& s)
{
  return 2 * s.mode_count >= s.rows && s.rows > 0 ? static_cast<double>(s.mode_len) : s.mean;
}

double csr_scalar_chain_lanes(const row_stats& s, const device_properties* device)
{
  if (device == nullptr || device->sm_count <= 0 || device->max_threads_per_sm <= 0 || s.max_len <= 0 || s.rows <= 0)
    return chain_lanes(s);
  const double block = layout_ref::csr_block_size;
  const double blocks = std::ceil(static_cast<double>(s.rows) / block);
  const double resident = std::max(1, device->max_threads_per_sm / layout_ref::csr_block_size);
  const double on_sm = std::min(static_cast<double>(s.rows), block * std::min(resident, std::ceil(blocks / device->sm_count)));
  const double group = std::min(static_cast<double>(stats_warp_size), on_sm);
  // The step's cost follows the rows busy at that step, clamped at csr_scalar_lanes_span, so the position is
  // averaged over the steps after the clamp, not taken of the averaged rows: the SM's other rows (at the mean
  // length) run beside the longest row's group for its first `mean` steps only, the group's own rows
  // (chain_lanes) for all max_len. Clamping the average counted watt_2's 224 rows of 6 beside its row of 128
  // as 12 busy rows over all 128 steps (position 0.37, where the steps give 0.11), and a FEM block of rows of
  // 60 beside a longest row of 81 (bcsstk16: 194 busy rows) at the clamp over all its steps (now 55). Refitted
  // on the H100 session-27/28 gated warm-ups, the slope in the L2 went from +0.20 to +0.41..+0.47 per 31 lanes
  // (the 1000- and 8000-row matrices whose rows are all long, at 0.92-1.15 of their raw chain, now sit at 22-42
  // lanes instead of 60-133), the factor at one lane 0.72 -> 0.70-0.72; held-out csr_scalar mean 0.7-1.5 points
  // lower on the four gated pairs (docs/models.md, Session 29: csr_scalar).
  // Returned as the lanes whose position is that average (the position is linear below the span).
  const double span = (csr_scalar_lanes_span - 1.0) / (stats_warp_size - 1.0);
  const auto position = [span](double lanes) { return std::clamp((lanes - 1.0) / (stats_warp_size - 1.0), 0.0, span); };
  const double own = chain_lanes(s);
  const double max_len = static_cast<double>(s.max_len);
  const double beside = std::min(s.mean, max_len);  // steps the SM's other rows run beside the group
  const double u = (beside * position(own + (on_sm - group)) + (max_len - beside) * position(own)) / max_len;
  return std::clamp(1.0 + (stats_warp_size - 1.0) * u, 1.0, on_sm);
}

int csr_vector_slots(const row_stats& s, const device_properties* device)
{
  if (device == nullptr || device->sm_count <= 0 || device->max_threads_per_sm <= 0) return 1;
  const size_type resident_blocks =
      static_cast<size_type>(device->sm_count) * (device->max_threads_per_sm / layout_ref::csr_block_size);
  return layout_ref::csr_vector_slots(s.rows, csr_vector_lanes(s), resident_blocks);
}

namespace {
// Longest dependent chain, in entries, of JAD's thread-per-row loop over its own row length under `#pragma unroll 4`
// (kernels/src/formats/jad.cu): nvcc emits an unrolled loop whose round issues the loads of 4 entries together,
// then a remainder loop of n % 4 iterations, each a dependent index -> x chain of its own (PTX of the loop, CUDA
// 13.0, sm_90). In a warp whose rows differ in length the two loops diverge and run one after the other, so the
// warp holding the longest row (max_len) takes the most rounds of any length it may hold: floor(n / 4) + n % 4
// over n in [max(min_len, max_len - 3), max_len]. In entries at the unrolled rate (4 per round), so that the chain
// factors keep their meaning on long rows (rows of 8 to 1600 entries: 1608). The ELL family walked the same loop
// until session 39 (ELLPACK-R and PELLR with a fitted share of a round per remainder iteration).
double unroll4_chain_entries(double longest, double shortest)
{
  if (longest < 1.0) return 0.0;
  double rounds = 0;
  for (double n = longest; n >= std::max({shortest, longest - 3.0, 1.0}); n -= 1.0) {
    rounds = std::max(rounds, std::floor(n / 4.0) + std::fmod(n, 4.0));
  }
  return 4.0 * rounds;
}

// Longest chain, in entries at the rate of a round of `chunk`, of a loop that walks n slots in chunks (ell_common.cuh's
// ell_spmv: ELL, ELLPACK-R, PELLR, HYB's ELL part; csr.cu's csr_vector with one row per lane group, in lane steps):
// ceil(n / chunk) rounds whatever n is. In a warp whose rows differ in length the longest row's chunks bound it; the
// shorter rows' last chunk is a predicate of the same loop, not a loop of its own. H200 gated held-out set (2026-11-28, bench/results/..._session39_ell_chunks.txt):
// ell / ellr / pellr / hyb 5.7 / 5.5 / 4.7 / 5.2 % mean error counted so, against 6.3 / 5.1 / 5.3 / 5.9 with one
// entry per entry and 6.3 / 5.1 / 4.0 / 5.9 with the old remainder count (docs/models.md, Session 39).
double chunk_chain_entries(double longest, double chunk = layout_ref::ell_chunk)
{
  return longest < 1.0 ? 0.0 : chunk * std::ceil(longest / chunk);
}


}  // namespace

namespace {
// The kernels one product of `f` runs (launch_gaps_of), given its layout's traffic: cuSPARSE's as measured (its
// launches are not ours to count), our formats' launches.
double kernel_gaps(format_id f, const layout_traffic& c)
{
  switch (f) {
    case format_id::cusparse_csr:
      return 2.0;
    case format_id::cusparse_csr_alg2:
      return 3.5;
    case format_id::cusparse_sell:
      return 1.0;
    default:
      return static_cast<double>(c.launches);
  }
}
}  // namespace

double launch_gaps_of(format_id f, const row_stats& s)
{
  return kernel_gaps(f, layout_traffic_of(f, s, static_cast<int>(sizeof(double))));
}

namespace {
// `us` moved by `kernels` gaps of `shift_us` (at_launch_shift), never below 0; `us` itself where the shift is 0.
double shifted_by_gaps(double us, double kernels, double shift_us) { return shift_us != 0 ? std::max(0.0, us + kernels * shift_us) : us; }
}  // namespace

double at_launch_shift(format_id f, const row_stats& s, const bandwidth_model_params& p, double us)
{
  return p.launch_shift_us != 0 ? shifted_by_gaps(us, launch_gaps_of(f, s), p.launch_shift_us) : us;
}

layout_traffic layout_traffic_of(format_id f, const row_stats& s, int vb, const device_properties* device,
                                 double x_sectors_per_nnz)
{
  const double entry = vb + sizeof(index_type);
  const double idx = sizeof(index_type);
  const double rows = static_cast<double>(s.rows), nnz = static_cast<double>(s.nnz);
  const double row_ptr = (rows + 1) * idx;
  const double slices = std::ceil(rows / slice_height);
  // Natural order: the SELL slices are the warps of Eq. 1, so a padded slice layout stores 32 x N_iter.
  const double natural = slice_height * static_cast<double>(s.n_iter_natural);
  const double sorted = slice_height * static_cast<double>(s.n_iter_sorted);
  layout_traffic c;
  switch (f) {
    case format_id::cusparse_csr:
      c.moved_bytes = nnz * entry + row_ptr;
      c.slot_work = nnz;
      break;
    case format_id::cusparse_csr_alg2:
      c.device_bytes = rows * 8;  // preprocess data (estimate)
      c.moved_bytes = nnz * entry + row_ptr;
      c.slot_work = nnz;
      break;
    case format_id::csr_scalar: {
      // Each thread walks its own row: a warp's load touches 32 rows, one sector each, and its next loads
      // find the rest of those sectors in L1 as long as the resident threads' rows fit there. Beyond that
      // each entry fetches its own value and index sectors (64 bytes). The share of entries that miss is the
      // share of the resident rows' bytes beyond L1. H100: the 3D 7-point Laplacian (172 KB of resident
      // rows in 256 KB) measured 306 us where one sector per entry said 660 us, and the 27-point stencil (663
      // KB) 1046 us where it said 652 us (bench/results/2026-11-23_h100_session5_chain_accuracy.csv).
      // The x gathers (__ldg) are cached in the same L1: every distinct x sector an entry brings in (the sampled
      // x_sectors_per_nnz, 32 bytes each) takes room the rows' sectors would need. With random columns (one
      // sector per entry) the rows of 24 on 2M rows measured 1200-1209 us on an H100 where the rows alone said
      // 761 (the same matrix in every other format within -5..+6 % of its prediction), and the 27-point stencil
      // 1040 us where they said 866 (bench/results/2026-11-24_h100_session24_*_gated_samples.jsonl.xz).
      const double resident = device != nullptr && device->max_threads_per_sm > 0 ? device->max_threads_per_sm : 2048.0;
      const double footprint = resident * s.mean * (entry + std::max(0.0, x_sectors_per_nnz) * 32.0);
      const double l1 = l1_bytes_per_sm(device);
      const double miss = footprint > l1 ? (footprint - l1) / footprint : 0.0;
      c.moved_bytes = nnz * (entry + miss * (64.0 - entry)) + row_ptr;
      c.footprint_bytes = nnz * entry + row_ptr;
      c.serial_entries = s.max_len;
      c.slot_work = natural;
      break;
    }
    case format_id::csr_vector: {
      const int lanes = csr_vector_lanes(s);
      const int slots = csr_vector_slots(s, device);
      // Steps of one lane: through the longest row and through a row of mean length. With a full warp a row
      // longer than 32 starts at the 32-aligned index below its first entry (csr.cu, as CUSP), so it walks up
      // to 31 entries more: rows of 95 or 81 take 4 steps, not 3, wherever they start 15 or more entries past
      // an aligned index (bcsstk13, mcfe). Rows all of one length n start at multiples of n, i.e. at most
      // 32 - gcd(n, 32) past an aligned index (rows of 40: 24, 2 steps; rows of 64: 0).
      constexpr int aligned = layout_ref::csr_vector_aligned_lanes;
      const double offset = s.min_len == s.max_len ? aligned - std::gcd(static_cast<int>(s.max_len), aligned) : aligned - 1;
      const double longest = lanes == aligned && s.max_len > aligned
                                 ? std::ceil((s.max_len + offset) / aligned)
                                 : std::ceil(s.max_len / static_cast<double>(lanes));
      const double typ = csr_vector_typical_length(s);
      const double typical = std::max(1.0, std::ceil(typ / lanes));
      c.moved_bytes = nnz * entry + row_ptr;
      // Serial chain in steps at the rate of a round of csr_vector_unroll steps. With one row per group a lane
      // walks its steps in chunks of layout_ref::csr_chunk (= csr_vector_unroll), so the longest row takes
      // ceil(longest / chunk) rounds, counted as whole rounds of 4 steps beyond the first, whose latency every
      // product has and the fixed cost holds: H200 gated held-out set (2026-11-28), the first round counted
      // put matrices of one round 3-15 % over (2.45-2.73 us measured, 2.82 predicted), csr_vector 9.4 / 22.2 %
      // mean / p95; without it 7.3 / 16.9 % (docs/models.md, Session 39).
      // With rows stacked (slot i of group g is row block_first + i * groups + g) every step issues the
      // loads of all the thread's rows before any fma (csr.cu), so the chain is the longest row's, at
      // csr_vector_stacked_unroll steps per round; the other rows add loads to each round, not rounds.
      c.serial_entries = slots == 1 ? std::max(0.0, chunk_chain_entries(longest, csr_vector_unroll) - csr_vector_unroll)
                                    : 1.0 + csr_vector_unroll / csr_vector_stacked_unroll * (longest - 1.0);
      // Long rows stored together (natural-order N_iter within 1.5x of the length-sorted one, rows far longer
      // than typical) fill several slots of a lane group, whose rows then count one after another: 4096 rows
      // of 2000 above a 2M-row stencil measured 232 us on an H100 and 223 us on an H200 (GPU-independent, like
      // a latency chain) where one long row's chain gives 67 us. The long rows are estimated from the warps
      // N_iter charges beyond the typical row (each at most max_len), 32 rows each; a lane group gets one of
      // every `groups` consecutive rows (rounded down: 20 dense rows of a circuit over 32 groups stay one).
      if (slots > 1 && s.max_len > 8 * typ && s.max_len > 0 &&
          static_cast<double>(s.n_iter_natural) <= 1.5 * static_cast<double>(s.n_iter_sorted)) {
        const double warps = std::ceil(rows / 32.0);
        const double long_rows = 32.0 * std::max(0.0, static_cast<double>(s.n_iter_natural) - warps * typ) / s.max_len;
        const double groups = static_cast<double>(layout_ref::csr_block_size / lanes);
        c.serial_entries *= std::clamp(std::floor(long_rows / groups), 1.0, static_cast<double>(slots));
      }
      // Load iterations of all lanes: stacking gives a lane more rows, not more or fewer loads.
      c.slot_work = rows * lanes * typical;
      break;
    }
    case format_id::coo:
      c.device_bytes = nnz * idx;                            // row indices; columns and values shared with CSR
      c.moved_bytes = nnz * (entry + idx) + 2 * rows * vb;  // atomics read-modify-write y
      c.launches = 2;                                       // y = beta y, then the products
      c.slot_work = nnz;
      break;
    case format_id::ell:
      c.padded_entries = rows * s.max_len;
      c.device_bytes = c.padded_entries * entry;
      c.moved_bytes = c.device_bytes;
      c.serial_entries = chunk_chain_entries(s.max_len);  // ell_spmv walks the width in chunks of 4
      c.slot_work = c.padded_entries;
      break;
    case format_id::ellr:
      c.padded_entries = rows * s.max_len;
      c.device_bytes = c.padded_entries * entry + rows * idx;
      c.moved_bytes = natural * entry + rows * idx;
      // Rows of natural order walk their own lengths in chunks of 4: the longest row's chunks bound its warp.
      c.serial_entries = chunk_chain_entries(s.max_len);
      c.slot_work = natural;
      break;
    case format_id::pellr:
      c.padded_entries = rows * s.max_len;
      c.device_bytes = c.padded_entries * entry + 2 * rows * idx;
      c.moved_bytes = sorted * entry + 2 * rows * idx;
      // The same chunks of 4 as ELLR (ell_common.cuh); sorted by length, the warp of the longest rows bounds it.
      // (Under the `#pragma unroll 4` loop before session 39 the worst length in [max_len - 3, max_len] did:
      // counting entries then left pellr's small matrices 9-14 % under on the H100 gated sets of sessions 22-25.)
      c.serial_entries = chunk_chain_entries(s.max_len);
      c.slot_work = sorted;
      break;
    case format_id::jad:
      c.device_bytes = nnz * entry + rows * idx + (s.max_len + 1.0) * idx;
      c.moved_bytes = nnz * entry + rows * idx;
      // jad_spmv (jad.cu) walks a sorted row's own length under the same `#pragma unroll 4` as PELLR, so the
      // same unrolled rounds and dependent remainder (one length per warp, two at a boundary). Counting entries
      // left JAD's small chain-bound matrices (rows of 5-19: airfoil1, Pd, 4elt, delaunay_n15, bcspwr10, power,
      // fe_4elt2) 9-15 % under on the H100 gated held-out sets of sessions 24-27 (docs/models.md, session 28).
      c.serial_entries = unroll4_chain_entries(s.max_len, s.min_len);
      c.slot_work = sorted;
      break;
    case format_id::hyb:
      c.padded_entries = rows * s.hyb_ell_width;
      c.device_bytes = c.padded_entries * entry + s.hyb_coo_nnz * (entry + idx) + (s.hyb_coo_nnz > 0 ? (rows + 1) * idx : 0);
      c.moved_bytes = c.device_bytes + (s.hyb_coo_nnz > 0 ? 2 * rows * vb : 0);
      c.launches = s.hyb_coo_nnz > 0 ? 2 : 1;
      c.serial_entries = chunk_chain_entries(s.hyb_ell_width);  // its ELL part: ell_spmv's chunks
      c.slot_work = c.padded_entries + static_cast<double>(s.hyb_coo_nnz);
      break;
    case format_id::sell_c_sigma:
    case format_id::cusparse_sell:
      c.padded_entries = natural;
      c.device_bytes = natural * entry + (slices + 1) * (f == format_id::cusparse_sell ? 4.0 : 8.0);
      c.moved_bytes = c.device_bytes;
      c.serial_entries = s.max_len;
      c.slot_work = natural;
      break;
    case format_id::sell_sigma:
      // Sorting inside windows brings the padding down towards the globally sorted N_iter.
      c.padded_entries = sorted;
      c.device_bytes = sorted * entry + (slices + 1) * 8.0 + rows * idx;
      c.moved_bytes = c.device_bytes;
      c.serial_entries = s.max_len;
      c.slot_work = sorted;
      break;
    case format_id::sell_delta16:
      c.padded_entries = natural;
      c.device_bytes = natural * (vb + 2) + rows * idx + (slices + 1) * 8.0;
      c.moved_bytes = c.device_bytes;
      c.serial_entries = s.max_len;
      c.slot_work = natural;
      break;
  }
  if (c.footprint_bytes == 0) c.footprint_bytes = c.moved_bytes;
  return c;
}

stream_scale_fit fit_stream_scale(const prediction_input& in, const bandwidth_model_params& p,
                                  const std::vector<std::pair<format_id, double>>& measured)
{
  stream_scale_fit fit;
  const auto rms_at = [&](double scale, int* used) {
    bandwidth_model_params q = p;
    q.stream_read_gbs = p.stream_read_gbs * scale;
    double sum = 0;
    int n = 0;
    for (const auto& [f, us] : measured) {
      if (!(us > 0) || !std::isfinite(us)) continue;
      const auto est = predict_bandwidth_model(in, q, {f});
      if (est.empty() || !est[0].feasible || !(est[0].predicted_us > 0)) continue;
      const double l = std::log(est[0].predicted_us / us);
      sum += l * l;
      ++n;
    }
    if (used != nullptr) *used = n;
    return n > 0 ? std::sqrt(sum / n) : 0.0;
  };
  fit.rms_log_error_at_1 = fit.rms_log_error = rms_at(1.0, &fit.formats);
  if (fit.formats == 0 || !(p.stream_read_gbs > 0)) return fit;
  // Outward from 1, so that of equal errors the scale nearest 1 stays (the lower one at equal distance).
  for (int d = 1; d <= 28; ++d) {
    for (const int k : {-d, d}) {
      const double scale = std::pow(2.0, k / 14.0);
      const double e = rms_at(scale, nullptr);
      if (e < fit.rms_log_error - 1e-12) {
        fit.rms_log_error = e;
        fit.scale = scale;
      }
    }
  }
  return fit;
}

double coo_x_reread_bytes(const row_stats& s, int vb, double x_sectors_per_nnz, double bytes, double l2_bytes)
{
  const double x_bytes = static_cast<double>(std::min(s.cols, s.nnz)) * vb;
  if (!(x_sectors_per_nnz > 0) || !(l2_bytes > 0) || !(bytes > 0) || !(x_bytes > 0)) return 0.0;
  const double k = x_sectors_per_nnz * static_cast<double>(s.nnz) * 32.0 / x_bytes;
  if (k <= 1.0) return 0.0;
  return x_bytes * (k - 1.0) * std::exp(-k * l2_bytes / bytes);
}

double sorted_scatter_bytes(format_id f, const row_stats& s, int vb, double x_sectors_per_nnz, const sorted_locality& l)
{
  if (f != format_id::jad && f != format_id::pellr) return 0.0;
  double extra = 0.0;
  if (x_sectors_per_nnz > 0 && l.x_sectors_per_nnz > x_sectors_per_nnz) {
    extra += (l.x_sectors_per_nnz - x_sectors_per_nnz) * static_cast<double>(s.nnz) * 32.0;
  }
  const double contiguous = vb / 32.0;  // y sectors per row written in order
  if (l.y_sectors_per_row > contiguous) extra += 2.0 * (l.y_sectors_per_row - contiguous) * static_cast<double>(s.rows) * 32.0;
  return extra;
}

namespace {
// The x gathers' L2 traffic: a 32-byte sector per distinct sector sampled (x_sectors_per_nnz), x once when unknown.
double gather_bytes(const row_stats& s, int vb, double x_sectors_per_nnz)
{
  return x_sectors_per_nnz > 0 ? x_sectors_per_nnz * static_cast<double>(s.nnz) * 32.0
                               : static_cast<double>(std::min<size_type>(s.cols, s.nnz)) * vb;
}

// l2_traffic_bytes from a layout's traffic and its sorted_scatter_bytes (the planner predicts ~30000 blocks:
// the predictor passes what it has computed already).
double l2_bytes_of(const layout_traffic& c, const row_stats& s, int vb, double x_sectors_per_nnz, double scatter)
{
  return c.moved_bytes + static_cast<double>(s.rows) * vb + gather_bytes(s, vb, x_sectors_per_nnz) + scatter;
}
}  // namespace

double l2_traffic_bytes(format_id f, const row_stats& s, int vb, double x_sectors_per_nnz, const sorted_locality& sorted,
                        const device_properties* device)
{
  return l2_bytes_of(layout_traffic_of(f, s, vb, device, x_sectors_per_nnz), s, vb, x_sectors_per_nnz,
                     sorted_scatter_bytes(f, s, vb, x_sectors_per_nnz, sorted));
}

namespace {
// Rows per nonzero, at most 1 (cuSPARSE CSR's floor: bandwidth_model_params::cusparse_csr_floor_us_per_row_share).
double row_share_of(const row_stats& s)
{
  return s.nnz > 0 ? std::min(1.0, static_cast<double>(s.rows) / static_cast<double>(s.nnz)) : 0.0;
}

// The placeholder's terms for one format, before the fitted per-format corrections.
struct placeholder_parts {
  layout_traffic traffic;
  double bytes = 0;      // moved with x once and y, plus the sorted scatter
  double fixed_us = 0;   // launches and library overhead
  double stream_us = 0;  // DRAM streaming
  double serial_us = 0;  // the longest dependent chain at the uncorrected latency per entry
  double lanes = 1;      // lanes that walk it together (chain_lanes)
  bool in_l2 = false;    // the layout's bytes fit in the L2 (the chain at the L2 latency)
  double l2_us = 0;      // L2 traffic at the calibrated rate
  double mixture_us = 0;  // what the gather mixture adds to max(stream, L2) (mixture_us_of)
  double after_chain_us = 0;  // a kernel launched after the chain's kernel (HYB's COO part): adds to the chain
  double rows = 0;            // the matrix's rows (cuSPARSE CSR's floor)
  double y_bytes = 0;         // rows x value bytes (the small-y floor)
  double row_share = 0;       // min(1, rows / nnz) (cuSPARSE CSR's floor)
  double l2_rate_gbs = 0;     // the L2 rate of l2_us
  double scatter = -1;        // the chain's row's x gathers, 0 contiguous .. 1 a sector each; -1 unknown (scatter_of)
  double kernel_gaps = 1;     // launch_gaps_of: what bandwidth_model_params::launch_shift_us moves
};

// The chain's row's scatter (bandwidth_model_params::format_chain_scatter_dram): the longest sampled row's x sector
// changes per entry, from vb / 32 (contiguous) to 1 mapped to [0, 1]; -1 (unknown) without the statistic or where
// the sampled row is shorter than half the longest row (it would describe other rows than the chain's).
double scatter_of(const prediction_input& in)
{
  const gather_mixture& m = in.x_mixture;
  if (!(m.longest_row_len > 0) || !(m.longest_row_ratio > 0) || 2 * m.longest_row_len < static_cast<double>(in.stats.max_len))
    return -1.0;
  const double least = std::min(1.0, in.value_bytes / 32.0);
  return least < 1.0 ? std::clamp((m.longest_row_ratio - least) / (1.0 - least), 0.0, 1.0) : 1.0;
}

// The chain's factor for its row's scatter: 1 - kappa (1 - scatter), 1 where unknown.
double scatter_factor(double kappa, double scatter) { return scatter >= 0 && kappa > 0 ? 1.0 - kappa * (1.0 - scatter) : 1.0; }

// The formats whose chain from DRAM is fitted for its row's scatter (bandwidth_model_params::format_chain_scatter_dram):
// csr_scalar only. Fitted for every thread-per-row format on the H100 session-43 gated pair, JAD's (0.16) put its
// contiguous long rows 10-16 % under (the 2M-row power law +6.6 -> -9.9 %, the circuit with contiguous dense rows
// -0.9 -> -16.3 %) and cuSPARSE SELL's moved nothing; in the L2 cuSPARSE SELL's (0.24) raised its held-out mean
// from 7.7 to 8.5 % (email-Eu-core +19 -> +31 %, bcsstk16 +6 -> -11 %) and the others' were below 0.06
// (docs/models.md, Session 43).
bool scatter_fitted(format_id f) { return f == format_id::csr_scalar; }

// What the gather mixture (prediction_input::x_mixture) adds to the traffic term max(stream, L2): the nonzeros
// of each bin of windows stream their share of the layout's bytes or move their share of the L2 traffic with the
// bin's own x sectors, whichever is longer, and the bins add up to sum_b max(w_b stream, l2_b); the term is what
// that sum exceeds max(stream, L2) by, never negative, so that the traffic is the larger of the two. The L2 term
// is the whole-matrix ratio's, sampled per group of rows, and the bins are windows around evenly spaced nonzeros.
// Until session 46 the term subtracted the bins' own max(stream, sum_b l2_b), which equals max(stream, L2) only
// where the two samplings agree: where the whole-matrix ratio is above the bins' the traffic counted both (the
// H100 2M-row power law: HYB 8.4 % over, 2.9 % with the larger), where it is below (a circuit's dense rows, which
// the row groups miss) the traffic came out under the bins' own sum. On the eight H100 gated pairs of sessions 42-46
// HYB's held-out p95 fell by up to 3 points and only COO's mean on one pair rose, by 0.1 point (docs/models.md,
// Session 46). With the bins at the whole-matrix ratio (one bin) the term is 0. A whole-matrix ratio puts a
// circuit's 4M dense-row nonzeros of random columns (a sector each) and its 8M banded ones (0.12) at one ratio
// under the streaming term, while they run one after the other at their own bounds: on the H100
// (gated, session 42) COO took 75.6 us for the banded part alone, +7.6-10 us with 400K dense-row nonzeros and
// +46-55 us with 4M, about their time at the random gathers' rate (87 nonzeros per ns on the 2M-row random
// rows of 24), and 93.7 us where the 20 dense rows' columns were contiguous (docs/models.md, Session 42).
// `l2_bytes` is the layout's L2 traffic with the whole-matrix ratio, `gathers` its x gathers in it.
double mixture_us_of(const prediction_input& in, double stream_us, double l2_bytes, double gathers, double l2_rate_gbs)
{
  const gather_mixture& m = in.x_mixture;
  if (!m.known() || !(l2_rate_gbs > 0) || in.stats.nnz <= 0) return 0.0;
  const double rate = l2_rate_gbs * 1e3;  // bytes per microsecond
  const double rest = std::max(0.0, l2_bytes - gathers);  // the L2 traffic besides the x gathers
  const double nnz_sectors = static_cast<double>(in.stats.nnz) * 32.0;
  double sum_max = 0.0;
  for (int b = 0; b < gather_mixture::bins; ++b) {
    const double w = m.share[b];
    if (!(w > 0)) continue;
    sum_max += std::max(w * stream_us, w * (rest + m.ratio[b] * nnz_sectors) / rate);
  }
  return std::max(0.0, sum_max - std::max(stream_us, l2_bytes / rate));
}

// HYB's COO part is a kernel of its own launched after the ELL kernel (kernels/src/formats/hyb.cu), so it
// cannot overlap the ELL part's chain of K entries: a HYB bound by that chain takes the chain and then the
// COO part, streamed (its entries with row indices, y read and written by the atomics, at hyb_coo_efficiency
// beyond the L2, at the full rate in it) or
// bound by its x gathers in the L2, whichever is longer. Without a chain the whole product streams as one
// and the COO part is inside the stream and L2 terms. On the H100 gated held-out set the small HYBs with both
// parts (4900-33000 rows) had been predicted 0-15 % under their measurements by the chain-or-stream maximum,
// the longer chains the most (bcsstk16, astro-ph; bench/results/2026-11-24_h100_session22_accuracy_gated_samples.jsonl.xz).
double hyb_coo_part_us(const row_stats& s, int vb, double x_sectors_per_nnz, const bandwidth_model_params& p, bool in_l2)
{
  if (s.hyb_coo_nnz <= 0) return 0.0;
  const double coo_nnz = static_cast<double>(s.hyb_coo_nnz);
  const double coo_bytes = hyb_coo_bytes(s, vb);
  const double stream = p.stream_read_gbs > 0 ? coo_bytes / (p.stream_read_gbs * 1e3 * (in_l2 ? 1.0 : hyb_coo_efficiency)) : 0.0;
  const double gathers = x_sectors_per_nnz > 0 ? x_sectors_per_nnz * coo_nnz * 32.0 : coo_nnz * vb;
  const double l2 = p.l2_gather_gbs > 0 ? (coo_bytes + gathers) / (p.l2_gather_gbs * 1e3) : 0.0;
  return std::max(stream, l2);
}

// The loads a step of csr_vector's longest chain keeps in flight, in lanes (the unit of chain_lanes for the
// thread-per-row layouts, whose warp walks chain_lanes long rows together): the row's `lanes` lanes times the
// rows each of them walks at once. With rows stacked (slots > 1) slot i of group g is row i x groups + g of
// the block, so the chain_lanes long rows of one 32-row group share a lane group once they outnumber the
// groups (ceil(chain_lanes / groups) rows each, at most slots). chain_lanes itself counts rows of a warp of
// threads, which csr_vector spreads over 32 / lanes groups and up to 4 slots: on the H100 gated warm-up the
// 2M-row blocks with 1, 2 and 8 long rows of 200000 (16 lanes, one long row per group) measured 1.40-1.51x
// their modelled chain from DRAM and those with 20 and 32 (two per group) 2.01-2.08x, while chain_lanes (1-32)
// put 8 with 20 and 32 and the held-out circuit (20 rows of 200000 on 8 lanes, one per group) 53 % over
// (bench/results/2026-11-24_h100_session24_*_gated_samples.jsonl.xz).
double csr_vector_chain_lanes(const row_stats& s, const device_properties* device)
{
  const int lanes = csr_vector_lanes(s);
  const int slots = csr_vector_slots(s, device);
  const double groups = static_cast<double>(layout_ref::csr_block_size / lanes);
  const double rows = slots > 1 ? std::clamp(std::ceil(std::round(chain_lanes(s)) / groups), 1.0, static_cast<double>(slots)) : 1.0;
  return std::min(static_cast<double>(stats_warp_size), lanes * rows);
}

// csr_scalar's x re-reads from DRAM (bandwidth_model_params::csr_scalar_x_reread_l2_share): COO's model of a
// gather whose uses of a sector lie at random gaps (coo_x_reread_bytes), with the L2 that keeps x between two uses
// taken as the fitted share of the L2: the rows csr_scalar streams, and their L1 misses re-fetched through the L2
// (layout_traffic_of), share it. Weighted by x_sectors_per_nnz, the share of gathers that bring a sector no other
// row of their 32-row group uses: random gaps describe those, while a stencil's or a band's shared sectors come
// back with the neighbouring rows, a plane or less later. Unweighted, the 8M-row 7-point Laplacian (x 64 MB, 0.19
// sectors per entry) went from 9 % under to 12 % over on the H100 session-32 held-out set; weighted, -5 %, while
// the 2M-row random rows of 24 went from 21 % to 14 % under (docs/models.md, Session 33). 0 (the cache files
// written before it): none.
double csr_scalar_x_reread_bytes(const row_stats& s, int vb, double x_sectors_per_nnz, double bytes, double l2_bytes,
                                 const bandwidth_model_params& p)
{
  if (!(p.csr_scalar_x_reread_l2_share > 0)) return 0.0;
  return std::min(1.0, std::max(0.0, x_sectors_per_nnz)) *
         coo_x_reread_bytes(s, vb, x_sectors_per_nnz, bytes, l2_bytes * p.csr_scalar_x_reread_l2_share);
}

// Whether a format's own L2 rate (format_l2_gather_gbs) prices its L2 term for this matrix: always, except
// cuSPARSE SELL's where x does not fit in the share of the L2 that keeps a working set (l2_resident_share). Its
// rate was fitted on gathers whose x stays in the L2: on the H100 session-32 gated warm-up its 2M-row random
// rows of 24 (x 16 MB) ran 1.10x the calibrated rate, its 4M-row ones (x 32 MB) 0.79x; the held-out 8M-row
// 7-point Laplacian (x 64 MB, beyond the L2) runs below the streaming rate on the H200 (233.5 us against 194 us
// of streaming), where the calibrated L2 term (208.6 us) was the closer bound and the own rate put it 16-19 %
// under (docs/models.md, Session 34). sell's and sell_delta16's rates hold everywhere, as fitted in session 33.
bool own_l2_rate_applies(format_id f, const row_stats& s, int vb, double l2_bytes, const bandwidth_model_params& p)
{
  if (f != format_id::cusparse_sell) return true;
  return static_cast<double>(std::min(s.cols, s.nnz)) * vb <= p.l2_resident_share * l2_bytes;
}

placeholder_parts parts_of(format_id f, const prediction_input& in, const bandwidth_model_params& p)
{
  const row_stats& s = in.stats;
  const int vb = in.value_bytes;
  const double bw = p.stream_read_gbs * 1e3;  // bytes per microsecond
  // x is read at least once (at best), y written once: common to every layout.
  const double vectors = static_cast<double>(std::min<size_type>(s.cols, s.nnz)) * vb + static_cast<double>(s.rows) * vb;
  placeholder_parts r;
  r.rows = static_cast<double>(s.rows);
  r.y_bytes = static_cast<double>(s.rows) * vb;
  r.row_share = row_share_of(s);
  r.scatter = scatter_of(in);
  const layout_traffic& c = r.traffic = layout_traffic_of(f, s, vb, &in.device, in.x_sectors_per_nnz);
  // In the L2 where the layout stays under the share of it that keeps a working set (l2_resident_share), with
  // what the rest of the matrix moves between two of its products (a block of a partition plan).
  const double shared = std::max(0.0, in.l2_shared_bytes);
  const bool in_l2 = in.device.l2_bytes > 0 && c.footprint_bytes + shared < p.l2_resident_share * in.device.l2_bytes;
  const placeholder_terms pt = placeholder_terms_of(f, s, p, vb, c.moved_bytes + vectors, in_l2);
  const double scatter = sorted_scatter_bytes(f, s, vb, in.x_sectors_per_nnz, in.sorted);
  r.bytes = c.moved_bytes + vectors + scatter;
  r.fixed_us = c.launches * p.launch_us + pt.fixed_us;
  r.kernel_gaps = kernel_gaps(f, c);
  r.serial_us = c.serial_entries * (in_l2 ? p.serial_entry_l2_ns : p.serial_entry_dram_ns) * 1e-3;
  // A step of a chain in the L2 waits longer as x outgrows the L1 (format_chain_x_doubling).
  const double x_doubling = p.format_chain_x_doubling[static_cast<int>(f)];
  if (in_l2 && x_doubling > 0) {
    const double x = static_cast<double>(s.cols) * vb;
    r.serial_us *= 1.0 + x_doubling * std::log2(std::clamp(x, 4096.0, std::max(4096.0, l1_bytes_per_sm(&in.device))) / 16384.0);
  }
  // JAD walks the rows sorted by length, so its longest chain is walked by the 32 longest rows, not by the
  // longest row's natural group: the lanes in the sorted order, where known. On the H100 held-out sets the
  // natural lanes left jad's one-long-row matrices (hangGlider_2, adder_dcop_05: ratio to the raw chain 0.96-0.99)
  // and its tails of long rows (email-Eu-core, G51, PGPgiantcompo: 1.15-1.31) in one group, and the warm-up's
  // pareto rows (natural 1.03-1.36 lanes, sorted harmonic 2.0-4.7) among the single rows; with the sorted
  // lanes jad's mean / p95 error went from 7.8 / 25.1 % to 6.5 / 18.1 % on the session-24 pair, with the
  // statistic recomputed on the host for the committed samples (docs/models.md, Session 24, JAD/SELL).
  // csr_vector walks its longest row with the lanes of one group, each of them issuing one load per step for
  // every row of its group that is still running (the stacked slots): csr_vector_chain_lanes.
  // csr_scalar's step waits on the L1 that serves every row of the SM still running: csr_scalar_chain_lanes.
  // PELLR sorts its rows by length too: the sorted lanes where the fit counted them so (pellr_sorted_lanes).
  const bool sorted_lanes = f == format_id::jad || (f == format_id::pellr && p.pellr_sorted_lanes > 0);
  r.lanes = sorted_lanes                 ? sorted_chain_lanes(s)
            : f == format_id::csr_vector ? csr_vector_chain_lanes(s, &in.device)
            : f == format_id::csr_scalar ? csr_scalar_chain_lanes(s, &in.device)
                                         : chain_lanes(s);
  r.in_l2 = in_l2;
  // The scatter's visits miss the L2 in the share of the working set that does not fit in it.
  const double beyond_l2 = in.device.l2_bytes > 0 ? std::max(0.0, 1.0 - in.device.l2_bytes / r.bytes) : 1.0;
  // COO's chunks read x again where uses of a sector lie far apart (coo_x_reread_bytes), at its own rate.
  // csr_scalar's gathers likewise, with the fitted share of the L2 that keeps x (csr_scalar_x_reread_bytes).
  const double reread = f == format_id::coo          ? coo_x_reread_bytes(s, vb, in.x_sectors_per_nnz, r.bytes, in.device.l2_bytes)
                        : f == format_id::csr_scalar ? csr_scalar_x_reread_bytes(s, vb, in.x_sectors_per_nnz, r.bytes, in.device.l2_bytes, p)
                                                     : 0.0;
  r.stream_us = (r.bytes - scatter + reread) / (bw * pt.efficiency) + beyond_l2 * scatter / (bw * p.scatter_efficiency);
  // The calibrated L2 rate, but the format's own where the warm-up fitted one (format_l2_gather_gbs).
  const double own_l2_rate =
      own_l2_rate_applies(f, s, vb, in.device.l2_bytes, p) ? p.format_l2_gather_gbs[static_cast<int>(f)] : 0.0;
  const double l2_rate = own_l2_rate > 0 ? own_l2_rate : p.l2_gather_gbs;
  r.l2_rate_gbs = l2_rate;  // before the matrix share's scaling below: the own rates are fitted against it (fit_l2_rates)
  double l2_bytes = l2_bytes_of(c, s, vb, in.x_sectors_per_nnz, scatter);
  const double gathers = gather_bytes(s, vb, in.x_sectors_per_nnz);
  double l2_rate_used = l2_rate;
  // Beyond the L2, the share of the bytes besides the x gathers that the format's L2 term counts
  // (format_l2_matrix_share), at the rate the calibration product would have shown over the same share of its
  // bytes: cuSPARSE CSR on 16 random columns per row (device.cu), 16 sectors of x against 16 entries of value and
  // column, a row pointer and an entry of y per row, in double precision.
  const double matrix_share = p.format_l2_matrix_share[static_cast<int>(f)];
  if (!in_l2 && matrix_share < 1.0) {
    constexpr double calibration_gathers = 16 * 32.0, calibration_rest = 16 * 12.0 + 4 + 8;
    const double g = gathers + scatter;
    l2_bytes = g + matrix_share * std::max(0.0, l2_bytes - g);
    l2_rate_used = l2_rate * (calibration_gathers + matrix_share * calibration_rest) / (calibration_gathers + calibration_rest);
  }
  r.l2_us = l2_rate_used > 0 ? l2_bytes / (l2_rate_used * 1e3) : 0.0;
  r.mixture_us = mixture_us_of(in, r.stream_us, l2_bytes, gathers, l2_rate_used);
  // A layout that stays in the L2 read at the L2 term's pace (format_l2_stream).
  if (in_l2 && p.format_l2_stream[static_cast<int>(f)] > 0) r.stream_us = std::min(r.stream_us, r.l2_us);
  if (f == format_id::hyb && r.serial_us > 0) r.after_chain_us = hyb_coo_part_us(s, vb, in.x_sectors_per_nnz, p, in_l2);
  return r;
}

// Whether cuSPARSE SELL's chain runs at its rate for layouts above the boundary in stored entries
// (bandwidth_model_params::cusparse_sell_wide_padded): in the L2 only, where it was measured; from DRAM every
// sampled layout lies far above it and format_chain_scale_dram describes them.
bool cusparse_sell_wide(format_id f, double padded_entries, bool in_l2, const bandwidth_model_params& p)
{
  return f == format_id::cusparse_sell && in_l2 && p.cusparse_sell_wide_padded > 0 && p.cusparse_sell_wide_chain_scale > 0 &&
         padded_entries > p.cusparse_sell_wide_padded;
}

// The chain with its fitted factor, and what runs after it (HYB's COO part).
double chain_us_of(format_id f, const placeholder_parts& t, const bandwidth_model_params& p)
{
  const double factor =
      cusparse_sell_wide(f, t.traffic.padded_entries, t.in_l2, p)
          ? p.cusparse_sell_wide_chain_scale * (1.0 + p.format_chain_lanes[static_cast<int>(f)] * lanes_position(f, t.lanes))
          : chain_factor(p, f, t.lanes, t.in_l2);
  const double scatter =
      chain_from_dram(p, f, t.in_l2) ? scatter_factor(p.format_chain_scatter_dram[static_cast<int>(f)], t.scatter) : 1.0;
  return t.serial_us * factor * scatter + t.after_chain_us;
}

// The traffic term: the longer of streaming and the L2 traffic, plus the gather mixture's term.
double traffic_of(const placeholder_parts& t) { return std::max(t.stream_us, t.l2_us) + t.mixture_us; }

// The terms that grow with the matrix: streaming, the chain and the L2 traffic.
double variable_of(format_id f, const placeholder_parts& t, const bandwidth_model_params& p)
{
  const double chain = chain_us_of(f, t, p), traffic = traffic_of(t);
  return std::max(traffic, chain + p.format_overlap[static_cast<int>(f)] * traffic);
}

// Whether a product's y is small enough for the small-y floor (bandwidth_model_params::format_floor_small_y_us).
bool small_y(double y_bytes) { return y_bytes > 0 && y_bytes <= small_y_bytes; }

// The format's floor for the product of `t`: the fitted floor (the small-y one where y fits in small_y_bytes and
// it is fitted), which for cuSPARSE CSR grows with log2(rows) and the rows per nonzero
// (bandwidth_model_params::cusparse_csr_floor_us_per_doubling, cusparse_csr_floor_us_per_row_share).
double floor_of(format_id f, const placeholder_parts& t, const bandwidth_model_params& p)
{
  const int i = static_cast<int>(f);
  const double fl = p.format_floor_us[i] > 0 && small_y(t.y_bytes) && p.format_floor_small_y_us[i] > 0 ? p.format_floor_small_y_us[i]
                                                                                                      : p.format_floor_us[i];
  if (f != format_id::cusparse_csr || !(fl > 0)) return fl;
  return fl + p.cusparse_csr_floor_us_per_doubling * std::log2(std::max(1.0, t.rows)) + p.cusparse_csr_floor_us_per_row_share * t.row_share;
}

// What adds to the format's floor (bandwidth_model_params::format_floor_adds_l2): its L2 traffic term, where the
// layout fits in the L2 and the floor is fitted; beyond the L2 the fixed cost and the streaming term describe the
// product.
double floor_traffic_of(format_id f, const placeholder_parts& t, const bandwidth_model_params& p)
{
  const int i = static_cast<int>(f);
  if (!(p.format_floor_adds_l2[i] > 0) || !(p.format_floor_us[i] > 0) || !t.in_l2) return 0.0;
  return t.l2_us;
}

// The prediction from the terms and the per-format corrections. The fitted fixed cost may be negative (the
// placeholder's own guess too high); no product is faster than one launch, the fastest measured SpMV, nor than
// the format's fitted floor (bandwidth_model_params::format_floor_us).
double predicted_of(format_id f, const placeholder_parts& t, const bandwidth_model_params& p)
{
  const int i = static_cast<int>(f);
  const double at_cached_gap =
      std::max({p.launch_us, floor_of(f, t, p) + floor_traffic_of(f, t, p), t.fixed_us + p.format_fixed_us[i] + variable_of(f, t, p)});
  return shifted_by_gaps(at_cached_gap, t.kernel_gaps, p.launch_shift_us);
}

// One measured observation's relative error under `p` (the fits that choose a share from a grid sum them).
double relative_error_of(const fixed_cost_observation& o, const bandwidth_model_params& p)
{
  return std::abs(predicted_of(o.format, parts_of(o.format, o.input, p), p) - o.measured_us) / o.measured_us;
}
}  // namespace

placeholder_breakdown explain_bandwidth_model(format_id f, const prediction_input& in, const bandwidth_model_params& p)
{
  const placeholder_parts t = parts_of(f, in, p);
  const int i = static_cast<int>(f);
  placeholder_breakdown b;
  b.fixed_us = t.fixed_us + p.format_fixed_us[i];
  b.floor_us = floor_of(f, t, p);
  b.stream_us = t.stream_us;
  b.chain_us = chain_us_of(f, t, p);
  b.l2_us = t.l2_us;
  b.mixture_us = t.mixture_us;
  b.predicted_us = predicted_of(f, t, p);
  b.raw_chain_us = t.serial_us;
  b.lanes = t.lanes;
  b.in_l2 = t.in_l2;
  b.moved_bytes = t.traffic.moved_bytes;
  return b;
}

std::vector<format_estimate> predict_bandwidth_model(const prediction_input& in, const bandwidth_model_params& p,
                                                     const std::vector<format_id>& candidates)
{
  const row_stats& s = in.stats;
  std::vector<format_estimate> out;
  out.reserve(candidates.size());
  for (format_id f : candidates) {
    const placeholder_parts t = parts_of(f, in, p);
    const layout_traffic& c = t.traffic;
    format_estimate e;
    e.format = f;
    e.device_bytes = c.device_bytes;
    e.bytes = t.bytes;
    e.predicted_us = predicted_of(f, t, p);
    // Feasibility: padding blow-up, index range, free memory. cuSPARSE CSR is always feasible.
    if (f == format_id::sell_delta16 && !sell_delta16_columns_fit(in)) {
      e.reason = !in.columns_sorted ? "rows with unsorted columns cannot be delta-encoded"
                                    : "a column step of " + std::to_string(in.max_column_step) + " does not fit in 16 bits";
    } else if (c.padded_entries > 16.0 * static_cast<double>(s.nnz) + 1e6) {
      e.reason = "padding blow-up: " + std::to_string(static_cast<long long>(c.padded_entries)) + " stored entries for " +
                 std::to_string(static_cast<long long>(s.nnz)) + " nonzeros";
    } else if (c.padded_entries > static_cast<double>(std::numeric_limits<index_type>::max()) * 64.0) {
      e.reason = "padded size exceeds the index range";
    } else if (in.free_memory_bytes > 0 && c.device_bytes > 0.8 * static_cast<double>(in.free_memory_bytes)) {
      e.reason = "needs " + std::to_string(static_cast<long long>(c.device_bytes / 1048576)) +
                 " MiB, more than 80% of free device memory";
    } else {
      e.feasible = true;
    }
    if (f == format_id::cusparse_csr) {
      e.feasible = true;
      e.reason.clear();
    }
    out.push_back(e);
  }
  return out;
}

double cusparse_csr_us_above_launch(const device_properties& device, const bandwidth_model_params& p, size_type rows,
                                    size_type cols, size_type nnz, int value_bytes)
{
  prediction_input in;
  in.stats.rows = rows;
  in.stats.cols = cols;
  in.stats.nnz = nnz;
  in.device = device;
  in.value_bytes = value_bytes;
  return std::max(0.0, predict_bandwidth_model(in, p, {format_id::cusparse_csr}).front().predicted_us - p.launch_us);
}

namespace {
// The per-format fields fit_format_corrections chooses from grids (its stages): fit_corrections_at takes them as
// given instead of neutral.
using format_field = std::array<double, format_count> bandwidth_model_params::*;
constexpr format_field staged_fields[] = {
    &bandwidth_model_params::format_stream_row_doubling, &bandwidth_model_params::format_idle_lane_offset,
    &bandwidth_model_params::format_l2_stream,           &bandwidth_model_params::format_chain_x_doubling,
    &bandwidth_model_params::format_overlap,             &bandwidth_model_params::format_l2_matrix_share};

// The whole fit below with the layouts counted in the L2 under `l2_share` of it (l2_resident_share), and the
// staged_fields of `staged` (neutral where null).
format_fit fit_corrections_at(const std::vector<fixed_cost_observation>& obs, bandwidth_model_params& out, int min_samples,
                              double l2_share, const bandwidth_model_params* staged = nullptr)
{
  // The fit starts from neutral corrections, whatever `out` holds (a cache entry refitted offline gives the
  // same values as the warm-up that fitted it), and writes only the corrections it could fit.
  bandwidth_model_params p = out;
  copy_format_corrections(bandwidth_model_params{}, p);
  p.l2_resident_share = l2_share;
  if (staged != nullptr) {
    for (const format_field field : staged_fields) p.*field = staged->*field;
  }
  p.pellr_sorted_lanes = 1.0;
  for (int i = 0; i < format_count; ++i) p.format_floor_adds_l2[i] = floor_adds_l2(static_cast<format_id>(i)) ? 1.0 : 0.0;
  format_fit used;
  std::vector<placeholder_parts> parts;
  parts.reserve(obs.size());
  for (const auto& o : obs) parts.push_back(parts_of(o.format, o.input, p));
  // COO's streaming efficiency, from its samples that stream from DRAM: the product's bytes beyond the L2 and
  // its streaming term, at the full rate, above its L2 term; the median of bytes (with the x re-reads) over
  // bandwidth x (measured - fixed costs). Fitted before the floors (its terms decide which small samples are
  // below a quarter launch) and again once COO's fixed cost is fitted (-1.9 to +0.3 us on the H100 and H200
  // warm-ups, against products of 35-1300 us); COO's terms are recomputed each time.
  const auto fit_coo_efficiency = [&] {
    const int ci = static_cast<int>(format_id::coo);
    const double bw = p.stream_read_gbs * 1e3;
    std::vector<double> e;
    for (std::size_t k = 0; k < obs.size(); ++k) {
      const auto& o = obs[k];
      const auto& t = parts[k];
      if (o.format != format_id::coo || !(o.measured_us > 0) || !(o.input.device.l2_bytes > 0) || !(bw > 0)) continue;
      if (t.bytes <= o.input.device.l2_bytes) continue;
      const double streamed = t.stream_us * p.coo_efficiency * bw;  // bytes with the x re-reads
      const double net = o.measured_us - t.fixed_us - p.format_fixed_us[ci];
      if (streamed / bw < t.l2_us || !(net > 0)) continue;
      e.push_back(streamed / (bw * net));
    }
    if (static_cast<int>(e.size()) < std::max(1, min_samples)) return;
    used.coo_efficiency = static_cast<int>(e.size());
    p.coo_efficiency = std::clamp(online::median(std::move(e)), 0.25, 1.0);
    for (std::size_t k = 0; k < obs.size(); ++k) {
      if (obs[k].format == format_id::coo) parts[k] = parts_of(obs[k].format, obs[k].input, p);
    }
  };
  fit_coo_efficiency();
  // csr_scalar's x re-reads (bandwidth_model_params::csr_scalar_x_reread_l2_share): over its samples whose
  // re-reads at the smallest share would add at least 5 % to the streamed bytes (random columns beyond the L2),
  // the share of a fixed grid (or none) whose predictions leave the least mean relative error. Like COO's
  // efficiency before the floors and again once the fixed cost is fitted. A grid, not a closed form: the
  // re-reads fall off exponentially with the share, and the samples it moves are few (8-40 on a warm-up).
  const auto fit_csr_scalar_x_reread = [&] {
    constexpr double shares[] = {0.25, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0};
    bandwidth_model_params q = p;
    std::vector<std::size_t> moved;
    q.csr_scalar_x_reread_l2_share = shares[0];
    for (std::size_t k = 0; k < obs.size(); ++k) {
      const auto& o = obs[k];
      if (o.format != format_id::csr_scalar || !(o.measured_us > 0)) continue;
      const placeholder_parts t = parts_of(o.format, o.input, q);
      if (csr_scalar_x_reread_bytes(o.input.stats, o.input.value_bytes, o.input.x_sectors_per_nnz, t.bytes,
                                    o.input.device.l2_bytes, q) >= 0.05 * t.bytes)
        moved.push_back(k);
    }
    used.csr_scalar_x_reread = 0;
    if (static_cast<int>(moved.size()) < std::max(1, min_samples)) return;
    const auto error = [&](double share) {
      q.csr_scalar_x_reread_l2_share = share;
      double e = 0;
      for (std::size_t k : moved) e += relative_error_of(obs[k], q);  // csr_scalar's samples only
      return e;
    };
    double best = 0.0, best_e = error(0.0);
    for (double share : shares) {
      const double e = error(share);
      if (e < best_e) {
        best_e = e;
        best = share;
      }
    }
    p.csr_scalar_x_reread_l2_share = best;
    if (best > 0) used.csr_scalar_x_reread = static_cast<int>(moved.size());
    for (std::size_t k = 0; k < obs.size(); ++k) {
      if (obs[k].format == format_id::csr_scalar) parts[k] = parts_of(obs[k].format, obs[k].input, p);
    }
  };
  fit_csr_scalar_x_reread();
  // The own L2 rates (format_l2_gather_gbs) of cuSPARSE CSR and the SELL layouts (cuSPARSE SELL's from its samples
  // whose x fits in the L2, own_l2_rate_applies), from their samples whose L2
  // term dominates (at least 1.2x the streaming and chain terms, and four launches long): the median of L2 bytes /
  // (measured - fixed costs). Like COO's efficiency, fitted before the floors and again once the fixed costs are
  // fitted; a pass with too few samples keeps what an earlier pass fitted.
  const auto own_l2_rate = [](format_id f) {
    return f == format_id::cusparse_csr || f == format_id::sell_c_sigma || f == format_id::sell_delta16 ||
           f == format_id::cusparse_sell;
  };
  const auto refresh = [&](const std::array<int, format_count>& fitted) {
    for (std::size_t k = 0; k < obs.size(); ++k) {
      if (fitted[static_cast<int>(obs[k].format)] > 0) parts[k] = parts_of(obs[k].format, obs[k].input, p);
    }
  };
  const auto fit_l2_rates = [&] {
    std::array<std::vector<double>, format_count> r;
    for (std::size_t k = 0; k < obs.size(); ++k) {
      const auto& o = obs[k];
      const auto& t = parts[k];
      const int i = static_cast<int>(o.format);
      if (!own_l2_rate(o.format) || !(o.measured_us > 0) || !(t.l2_rate_gbs > 0)) continue;
      if (!own_l2_rate_applies(o.format, o.input.stats, o.input.value_bytes, o.input.device.l2_bytes, p)) continue;
      if (t.l2_us < 1.2 * std::max(t.stream_us, chain_us_of(o.format, t, p)) || t.l2_us < 4 * p.launch_us) continue;
      const double net = o.measured_us - t.fixed_us - p.format_fixed_us[i];
      if (net > 0) r[i].push_back(t.l2_us * t.l2_rate_gbs / net);
    }
    std::array<int, format_count> fitted{};
    for (int i = 0; i < format_count; ++i) {
      if (static_cast<int>(r[i].size()) < std::max(1, min_samples)) continue;
      fitted[i] = used.l2_gather[i] = static_cast<int>(r[i].size());
      p.format_l2_gather_gbs[i] = online::median(std::move(r[i]));
    }
    refresh(fitted);
  };
  fit_l2_rates();
  // The floors first; then the fixed costs from the samples the fixed costs dominate, with the given chain
  // scales; the chain scales from the samples a chain dominates, net of those fixed costs; then the fixed costs
  // again with the new scales (which move which samples count as dominated by fixed costs only at the margin).
  // The floors come from the samples whose variable terms are below a quarter of a launch (the chain factors
  // only move which samples count at the margin: the chain of such a sample is short).
  const auto variable = [&](std::size_t k) { return variable_of(obs[k].format, parts[k], p); };
  {
    std::array<std::vector<double>, format_count> tiny;
    // The samples with y in small_y_bytes (format_floor_small_y_us): base, log2 rows and rows per nonzero.
    std::array<std::vector<std::array<double, 3>>, format_count> tiny_small_y;
    std::vector<double> csr_log_rows, csr_share, csr_tiny;  // cuSPARSE CSR's samples: log2 rows, rows per nonzero, measured
    for (std::size_t k = 0; k < obs.size(); ++k) {
      if (!(obs[k].measured_us > 0) || variable(k) >= 0.25 * p.launch_us) continue;
      // A floor that the L2 term adds to is fitted on the measured time less that term.
      const bool adds = p.format_floor_adds_l2[static_cast<int>(obs[k].format)] > 0 && parts[k].in_l2;
      const double base = obs[k].measured_us - (adds ? parts[k].l2_us : 0.0);
      if (small_y(parts[k].y_bytes)) {
        tiny_small_y[static_cast<int>(obs[k].format)].push_back({base, std::log2(std::max(1.0, parts[k].rows)), parts[k].row_share});
        continue;
      }
      tiny[static_cast<int>(obs[k].format)].push_back(base);
      if (obs[k].format == format_id::cusparse_csr) {
        csr_log_rows.push_back(std::log2(std::max(1.0, parts[k].rows)));
        csr_share.push_back(parts[k].row_share);
        csr_tiny.push_back(base);
      }
    }
    for (int i = 0; i < format_count; ++i) {
      if (static_cast<int>(tiny[i].size()) < std::max(1, min_samples)) continue;
      used.floor[i] = static_cast<int>(tiny[i].size());
      p.format_floor_us[i] = online::median(std::move(tiny[i]));
    }
    // cuSPARSE CSR's floor grows with log2(rows) (measured; presumably a binary search of the row offsets placing each
    // block of its nonzero-balanced split): the least-squares line over the same samples, where they span
    // at least a factor 4 in rows and the slope is positive; otherwise flat at the median.
    // With the rows per nonzero as a second regressor (cusparse_csr_floor_us_per_row_share) where the samples span
    // 0.1 of it and its slope comes out positive: with log2(rows) where they span a factor 4 and that slope is not
    // negative, else alone.
    const int ci = static_cast<int>(format_id::cusparse_csr);
    p.cusparse_csr_floor_us_per_doubling = 0.0;
    p.cusparse_csr_floor_us_per_row_share = 0.0;
    if (used.floor[ci] > 0) {
      const auto [lo, hi] = std::minmax_element(csr_log_rows.begin(), csr_log_rows.end());
      const auto [slo, shi] = std::minmax_element(csr_share.begin(), csr_share.end());
      // Least squares on 1, log2 rows (where `with_rows`) and rows per nonzero: true where the slopes are usable.
      const auto fit_with_share = [&](bool with_rows) {
        model::detail::dense_matrix a(csr_tiny.size(), 3);
        for (std::size_t j = 0; j < csr_tiny.size(); ++j) {
          a(j, 0) = 1.0;
          a(j, 1) = with_rows ? csr_log_rows[j] : 0.0;  // a zero column: least_squares gives it 0
          a(j, 2) = csr_share[j];
        }
        const auto x = model::detail::least_squares(a, csr_tiny);
        if (!std::isfinite(x[0]) || !(x[1] >= 0) || !(x[2] > 0)) return false;
        p.format_floor_us[ci] = x[0];
        p.cusparse_csr_floor_us_per_doubling = x[1];
        p.cusparse_csr_floor_us_per_row_share = x[2];
        return true;
      };
      const bool share = *shi - *slo >= 0.1 && ((*hi - *lo >= 2.0 && fit_with_share(true)) || fit_with_share(false));
      const auto l = model::detail::fit_line(csr_log_rows, csr_tiny);
      if (!share && *hi - *lo >= 2.0 && l && l->slope > 0) {
        p.cusparse_csr_floor_us_per_doubling = l->slope;
        p.format_floor_us[ci] = l->intercept;
      }
    }
    // The small-y floors: the median of the small-y samples (cuSPARSE CSR's net of its per-doubling and row-share
    // terms), for the formats whose floor is fitted.
    for (int i = 0; i < format_count; ++i) {
      p.format_floor_small_y_us[i] = 0.0;
      used.floor_small_y[i] = 0;
      if (used.floor[i] == 0 || static_cast<int>(tiny_small_y[i].size()) < std::max(1, min_samples)) continue;
      const double per_doubling = i == ci ? p.cusparse_csr_floor_us_per_doubling : 0.0;
      const double per_share = i == ci ? p.cusparse_csr_floor_us_per_row_share : 0.0;
      std::vector<double> v;
      for (const auto& [base, log_rows, share] : tiny_small_y[i]) v.push_back(base - per_doubling * log_rows - per_share * share);
      used.floor_small_y[i] = static_cast<int>(v.size());
      p.format_floor_small_y_us[i] = online::median(std::move(v));
    }
  }
  // The fixed costs: per format, the value c minimising the mean relative error of
  // max(launch, floor, fixed + c + variable) over the samples whose variable terms are at most two launches
  // (cuSPARSE SELL: half a launch, fixed_cost_span_launches).
  // The error is piecewise linear in c, so its minimum lies where one sample's sum meets its measurement or
  // the floor; where a range of values is equally good (samples the floor covers), the largest one.
  const auto fit_fixed = [&] {
    struct point {
      double a;  // fixed + variable without the correction
      double m;  // measured
      double lo; // launch or the format's floor for this matrix
    };
    std::array<std::vector<point>, format_count> pts;
    // HYBs without an ELL part (hyb_empty_ell), at the fixed cost of the others (their own part taken out):
    // fitted apart where both kinds have enough samples, their difference is p.hyb_empty_ell_us.
    std::vector<point> hyb_empty;
    for (std::size_t k = 0; k < obs.size(); ++k) {
      const auto& o = obs[k];
      if (!(o.measured_us > 0)) continue;
      const double v = variable(k);
      if (v > fixed_cost_span_launches(o.format) * p.launch_us) continue;  // not dominated by fixed costs
      // csr_scalar's streaming term prices its L1 misses at the DRAM rate (layout_traffic_of), which a layout in
      // the L2 does not pay: on the H100 session-32 gated warm-up its stream-bound samples in the L2 within two
      // launches (32000-128000 rows of 4-12 entries) were predicted 4-44 % over, so they pulled the fixed cost to
      // -0.18 us, where the other 20 (chain-bound) ask for +0.01, and the held-out small real matrices (chains of
      // 5-19 entries) read 3-10 % under. Those samples say what the streaming term misses, not what the fixed
      // cost is (docs/models.md, Session 34: csr_scalar).
      if (o.format == format_id::csr_scalar && parts[k].in_l2 &&
          parts[k].stream_us > std::max(chain_us_of(o.format, parts[k], p), parts[k].l2_us))
        continue;
      const point x{parts[k].fixed_us + v, o.measured_us,
                    std::max(p.launch_us, floor_of(o.format, parts[k], p) + floor_traffic_of(o.format, parts[k], p))};
      if (o.format == format_id::hyb && hyb_empty_ell(o.input.stats)) {
        hyb_empty.push_back({x.a - p.hyb_empty_ell_us, x.m, x.lo});
      } else {
        pts[static_cast<int>(o.format)].push_back(x);
      }
    }
    const auto best_fixed = [](const std::vector<point>& q) {
      const auto error = [&](double c) {
        double e = 0;
        for (const auto& x : q) e += std::abs(std::max(x.lo, x.a + c) - x.m) / x.m;
        return e;
      };
      std::vector<double> candidates;
      for (const auto& x : q) {
        candidates.push_back(x.m - x.a);
        candidates.push_back(x.lo - x.a);
      }
      double best_c = 0, best_e = std::numeric_limits<double>::infinity();
      for (double c : candidates) {
        const double e = error(c);
        if (e < best_e * (1 - 1e-12) || (e <= best_e * (1 + 1e-12) && c > best_c)) {
          best_e = std::min(e, best_e);
          best_c = c;
        }
      }
      return best_c;
    };
    const int hi = static_cast<int>(format_id::hyb);
    const bool hyb_split = static_cast<int>(std::min(hyb_empty.size(), pts[hi].size())) >= std::max(1, min_samples);
    if (!hyb_split) pts[hi].insert(pts[hi].end(), hyb_empty.begin(), hyb_empty.end());
    for (int i = 0; i < format_count; ++i) {
      used.fixed[i] = 0;
      const auto& q = pts[i];
      if (static_cast<int>(q.size()) < std::max(1, min_samples)) continue;
      used.fixed[i] = static_cast<int>(q.size());
      p.format_fixed_us[i] = best_fixed(q);
    }
    used.hyb_empty_ell = 0;
    p.hyb_empty_ell_us = 0;
    if (hyb_split) {
      used.hyb_empty_ell = static_cast<int>(hyb_empty.size());
      p.hyb_empty_ell_us = best_fixed(hyb_empty) - p.format_fixed_us[hi];
    }
    for (std::size_t k = 0; k < obs.size(); ++k) {
      if (obs[k].format == format_id::hyb && hyb_empty_ell(obs[k].input.stats)) parts[k] = parts_of(obs[k].format, obs[k].input, p);
    }
  };
  fit_fixed();
  fit_coo_efficiency();
  fit_csr_scalar_x_reread();
  fit_l2_rates();
  {
    // Per format: (lanes position u in [0, 1] by the format's lanes_position, measured chain / uncorrected chain,
    // one to 16 lanes or more, in L2) of the chain-dominated samples. The lane groups are counted in lanes, not
    // in u, so that JAD's saturating u (two lanes sit halfway) leaves them as they were, except where JAD's chains
    // of about one lane set the line's low end (below).
    struct chain_ratio {
      double u, r;
      bool few;  // one to 16 lanes
      bool in_l2;
      bool x_in_l2;  // x (min(cols, nnz) values) fits in the L2
      bool one_lane;  // about one lane in the format's own position (JAD: in the sorted order, where known)
      double padded;  // the layout's stored entries (cuSPARSE SELL's two rates)
      double scatter;  // the chain's row's x gathers (scatter_of; -1 unknown)
      bool wide = false;  // above cusparse_sell_wide_padded: fitted apart
    };
    // kappa of format_chain_scatter_dram from (scatter, ratio net of the lanes) of the chains beyond the L2 whose scatter is
    // known: the chains along rows of scatter below 1/2 against the others (at least 2 each), their medians; the
    // kappa for which 1 - kappa (1 - scatter) passes through both, where the first group's ratio is the lower one.
    const auto fit_scatter = [](const std::vector<std::pair<double, double>>& sv, int& used_n) {
      std::vector<double> s_lo, r_lo, s_hi, r_hi;
      for (const auto& [sc, r] : sv) {
        if (sc < 0) continue;
        (sc < 0.5 ? s_lo : s_hi).push_back(sc);
        (sc < 0.5 ? r_lo : r_hi).push_back(r);
      }
      used_n = 0;
      if (s_lo.size() < 2 || s_hi.size() < 2) return 0.0;
      const double a_lo = 1.0 - online::median(s_lo), a_hi = 1.0 - online::median(s_hi);
      const double q = online::median(r_lo) / online::median(r_hi);
      if (!(q < 1.0) || !(a_lo > q * a_hi)) return 0.0;
      used_n = static_cast<int>(s_lo.size() + s_hi.size());
      return std::clamp((1.0 - q) / (a_lo - q * a_hi), 0.0, max_chain_scatter);
    };
    std::array<std::vector<chain_ratio>, format_count> ratios;
    constexpr double few_lanes = 15.0 / 31.0;  // one to 16 lanes
    for (std::size_t k = 0; k < obs.size(); ++k) {
      const auto& o = obs[k];
      const auto& t = parts[k];
      const int i = static_cast<int>(o.format);
      if (!(o.measured_us > 0) || !(t.serial_us > 0)) continue;
      // A chain that clearly dominates: at least two launches long and twice the traffic terms.
      if (t.serial_us < 2 * p.launch_us || t.serial_us < 2 * traffic_of(t)) continue;
      const double x_bytes = static_cast<double>(std::min(o.input.stats.cols, o.input.stats.nnz)) * o.input.value_bytes;
      const double net = o.measured_us - t.fixed_us - p.format_fixed_us[i] - t.after_chain_us -
                         p.format_overlap[i] * traffic_of(t);
      // The lane groups in lanes: 1-16 and more (csr_scalar: busy rows of its SM, csr_scalar_chain_lanes).
      ratios[i].push_back({lanes_position(o.format, t.lanes), net / t.serial_us,
                           lanes_position(t.lanes) <= few_lanes, t.in_l2,
                           !(o.input.device.l2_bytes > 0) || x_bytes < o.input.device.l2_bytes,
                           lanes_position(o.format, t.lanes) <= few_lanes &&
                               (o.format != format_id::jad || o.input.stats.sorted_chain_lanes > 0),
                           t.traffic.padded_entries, t.scatter});
    }
    constexpr std::size_t per_group = 3;
    // cuSPARSE SELL's chains in the L2 run at two rates, split by the stored entries (see
    // bandwidth_model_params::cusparse_sell_wide_padded): on the H100 gated warm-ups the blocks of 16000 rows
    // with long rows of 400 and 1600 (140K and 179K stored entries) took 0.44-0.47 of the raw chain and the
    // pareto rows of 8000 and 32000 rows (301K, 1.1M) 0.79-1.0, at every lane count. Ordered by stored entries,
    // the split is the one whose two medians leave the least absolute deviation, with at least per_group chains
    // on each side; it counts only where the upper median is at least 1.25 x the lower one (a step, not the
    // spread of one rate). The boundary is the geometric middle of the gap between the two groups: the warm-up
    // places the step only within that gap.
    p.cusparse_sell_wide_padded = 0.0;
    p.cusparse_sell_wide_chain_scale = 0.0;
    used.cusparse_sell_wide = 0;
    {
      auto& rs = ratios[static_cast<int>(format_id::cusparse_sell)];
      std::vector<std::size_t> l2;
      for (std::size_t k = 0; k < rs.size(); ++k) {
        if (rs[k].in_l2 && rs[k].padded > 0) l2.push_back(k);
      }
      std::sort(l2.begin(), l2.end(), [&](std::size_t a, std::size_t b) { return rs[a].padded < rs[b].padded; });
      const auto deviation = [&](std::size_t from, std::size_t to, double& med) {
        std::vector<double> r;
        for (std::size_t j = from; j < to; ++j) r.push_back(rs[l2[j]].r);
        med = online::median(r);
        double d = 0;
        for (double v : r) d += std::abs(v - med);
        return d;
      };
      double best = std::numeric_limits<double>::infinity();
      std::size_t split = 0;
      for (std::size_t k = per_group; k + per_group <= l2.size(); ++k) {
        if (!(rs[l2[k]].padded > rs[l2[k - 1]].padded)) continue;  // a boundary between two sizes only
        double lo = 0, hi = 0;
        const double d = deviation(0, k, lo) + deviation(k, l2.size(), hi);
        if (hi >= 1.25 * lo && lo > 0 && d < best) {
          best = d;
          split = k;
        }
      }
      if (split > 0) {
        for (std::size_t j = split; j < l2.size(); ++j) rs[l2[j]].wide = true;
        p.cusparse_sell_wide_padded = std::sqrt(rs[l2[split - 1]].padded * rs[l2[split]].padded);
        used.cusparse_sell_wide = static_cast<int>(l2.size() - split);
      }
    }
    for (int i = 0; i < format_count; ++i) {
      used.chain[i] = used.lanes[i] = 0;
      if (static_cast<int>(ratios[i].size()) < std::max(1, min_samples)) continue;
      used.chain[i] = static_cast<int>(ratios[i].size());
      // The slope from the chains in the L2 only: from DRAM the latency per entry depends on what misses (x
      // beyond the L2 or not, a long row streaming alone or beside the bulk) more than on the lanes, and
      // mixing the two regimes hid the lanes (H100 warm-up, 2026-11-23).
      // The line is in u. Grouped by lanes (1-16, 17-32), the few-lane group's median u lies near 0.25 for the
      // linear position but near 0.76 for JAD's saturating one (2-16 lanes sit at u 0.52-0.97), so its value at
      // one lane was an extrapolation about 3 times the span between the two medians, set by chains of 2-16 lanes
      // and not by the one-lane chains the warm-up measures: on the H100 the session-27 block placement moved the
      // 8-long-row blocks from 1.40-1.49 to 1.10-1.13 of their raw chain, the few-lane median from 1.36 to 1.26,
      // and JAD's factor at one lane from 0.98 to 0.60, where the one-lane blocks measured 0.91-0.94 and the
      // held-out single long rows (hangGlider_2, adder_dcop_05, watt_2) 0.95-1.02 (-29..-35 %). For a saturating
      // position the groups are split in u itself: the chains of about one lane (u <= few_lanes: fewer than 1.9
      // lanes, the warm-up's single long rows, at least 2 of them) against all the others. Without such chains,
      // the lanes groups as before. JAD's one lane is one in the sorted order: samples without the sorted
      // statistic (written before session 24) carry the natural lanes, where the pareto rows (1.03-1.36 natural,
      // 2.0-4.7 sorted) would join the single long rows.
      std::size_t one_lane = 0;
      for (const auto& c : ratios[i]) one_lane += c.in_l2 && c.one_lane && !c.wide;
      const bool by_u = saturating_lanes(static_cast<format_id>(i)) && one_lane >= 2;
      std::vector<double> u_lo, r_lo, u_hi, r_hi;
      for (const auto& c : ratios[i]) {
        if (!c.in_l2 || c.wide) continue;
        const bool lo = by_u ? c.one_lane : c.few;
        (lo ? u_lo : u_hi).push_back(c.u);
        (lo ? r_lo : r_hi).push_back(c.r);
      }
      double slope = 0.0;
      if (u_lo.size() >= (by_u ? 2 : per_group) && u_hi.size() >= per_group) {
        const double ul = online::median(std::move(u_lo)), uh = online::median(std::move(u_hi));
        const double rl = online::median(std::move(r_lo)), rh = online::median(std::move(r_hi));
        if (uh > ul && rh > rl) {
          const double b = (rh - rl) / (uh - ul);
          const double a = rl - b * ul;
          if (a > 0) {
            slope = std::min(b / a, 4.0);
            used.lanes[i] = used.chain[i];
          }
        }
      }
      // The factor at one lane: the median over all chain samples of their ratio net of the lanes.
      std::vector<double> at_one, wide;
      for (const auto& c : ratios[i]) (c.wide ? wide : at_one).push_back(c.r / (1.0 + slope * c.u));
      p.format_chain_scale[i] = std::clamp(online::median(std::move(at_one)), 0.25, 4.0);
      p.format_chain_lanes[i] = slope;
      if (!wide.empty()) p.cusparse_sell_wide_chain_scale = std::clamp(online::median(std::move(wide)), 0.25, 4.0);
      // From DRAM on its own where enough chains ran beyond the L2 (see format_chain_scale_dram), with its own
      // lanes slope where both lane groups have at least 2 of them. Chains whose x gathers miss the L2 too are a
      // third regime the warm-up holds one matrix of (the 8M-row pareto, x 64 MB: 1.5-1.9x the 2M-row one's
      // latency per entry for csr_scalar and jad on an H100), left out.
      std::vector<double> du_lo, dr_lo, du_hi, dr_hi;
      int n_dram = 0;
      for (const auto& c : ratios[i]) {
        if (c.in_l2 || !c.x_in_l2) continue;
        ++n_dram;
        (c.few ? du_lo : du_hi).push_back(c.u);
        (c.few ? dr_lo : dr_hi).push_back(c.r);
      }
      used.chain_dram[i] = 0;
      p.format_chain_scatter_dram[i] = 0.0;
      if (n_dram >= std::max(1, min_samples)) {
        double dram_slope = slope;
        if (du_lo.size() >= 2 && du_hi.size() >= 2) {
          const double ul = online::median(du_lo), uh = online::median(du_hi);
          const double rl = online::median(dr_lo), rh = online::median(dr_hi);
          dram_slope = 0.0;
          if (uh > ul && rh > rl) {
            const double b = (rh - rl) / (uh - ul);
            const double a = rl - b * ul;
            if (a > 0) dram_slope = std::min(b / a, 4.0);
          }
          p.format_chain_lanes_dram[i] = dram_slope;
        }
        std::vector<std::pair<double, double>> sv;
        for (const auto& c : ratios[i]) {
          if (!c.in_l2 && c.x_in_l2) sv.emplace_back(c.scatter, c.r / (1.0 + dram_slope * c.u));
        }
        if (scatter_fitted(static_cast<format_id>(i))) p.format_chain_scatter_dram[i] = fit_scatter(sv, used.scatter_dram[i]);
        std::vector<double> dram;
        for (const auto& [sc, r] : sv) dram.push_back(r / scatter_factor(p.format_chain_scatter_dram[i], sc));
        used.chain_dram[i] = n_dram;
        p.format_chain_scale_dram[i] = std::clamp(online::median(std::move(dram)), 0.25, 4.0);
        // With the chains from DRAM described apart, the factor in the L2 comes from the chains in the L2
        // alone (at least per_group of them): a warm-up with as many chains from DRAM as in the L2 otherwise
        // moves it halfway to the DRAM factor (csr_vector 1.33 -> 1.91 with the session-13 grid's blocks).
        std::vector<double> in_l2;
        for (const auto& c : ratios[i]) {
          if (c.in_l2 && !c.wide) in_l2.push_back(c.r / (1.0 + slope * c.u));
        }
        if (in_l2.size() >= per_group) p.format_chain_scale[i] = std::clamp(online::median(std::move(in_l2)), 0.25, 4.0);
      }
    }
    // HYB's ELL part runs ELL's kernel (ell_common.cuh, ell_spmv over K slots instead of max_len): where
    // fewer than per_group of HYB's own chains ran in the L2, its factor there is ELL's. On the H100 gated
    // warm-ups all 7 chain-bound HYBs are constant rows of 512-2048 from DRAM, so HYB's factor in the L2 was
    // the DRAM one (2.02-2.04) where ELL's 9 chains in the L2 give 2.35-2.38; the small HYBs with both parts
    // (4000-33000 rows, ELL chains of 4-60 entries in the L2) were 0-20 % under in the warm-up and 3-12 %
    // held out, and the fixed cost fitted over them and the K = 0 HYBs (+2.13..+2.19 us) put the latter
    // 3-14 % over. With ELL's factor the fixed cost is +1.91..+2.01 us and hyb's held-out mean / p95 went
    // from 5.2-6.2 / 10.8-11.8 % to 4.5-5.0 / 8.6-11.0 % (docs/models.md, Session 29: hyb).
    const int hyb_i = static_cast<int>(format_id::hyb), ell_i = static_cast<int>(format_id::ell);
    std::size_t hyb_l2 = 0, ell_l2 = 0;
    for (const auto& c : ratios[hyb_i]) hyb_l2 += c.in_l2;
    for (const auto& c : ratios[ell_i]) ell_l2 += c.in_l2;
    if (used.chain[hyb_i] > 0 && used.chain[ell_i] > 0 && hyb_l2 < per_group && ell_l2 >= per_group) {
      // The chains from DRAM keep HYB's own factor and slope.
      if (!(p.format_chain_scale_dram[hyb_i] > 0)) p.format_chain_scale_dram[hyb_i] = p.format_chain_scale[hyb_i];
      if (p.format_chain_lanes_dram[hyb_i] < 0) p.format_chain_lanes_dram[hyb_i] = p.format_chain_lanes[hyb_i];
      p.format_chain_scale[hyb_i] = p.format_chain_scale[ell_i];
      p.format_chain_lanes[hyb_i] = p.format_chain_lanes[ell_i];
    }
  }
  fit_fixed();
  // A format measured here whose floor could not be fitted (too few samples below a quarter launch) gets
  // none, rather than keeping what `out` held: that floor came from other measurements (a shipped default
  // copied into a new cache, timed back to back, where the host's issue rate floors every small product at
  // ~4.5 us), and a floor bounds every prediction from below: a gated warm-up (device time) that kept those
  // floors predicted sell's small products 4.57 us against 2.8-4.0 us measured (H100, 2026-11-24,
  // docs/models.md). The fixed costs and chain factors of such a format stay: they add to the terms.
  std::array<bool, format_count> observed{};
  for (const auto& o : obs) {
    if (o.measured_us > 0) observed[static_cast<int>(o.format)] = true;
  }
  for (int i = 0; i < format_count; ++i) {
    if (used.fixed[i] > 0) out.format_fixed_us[i] = p.format_fixed_us[i];
    if (observed[i]) out.format_floor_us[i] = p.format_floor_us[i];  // fitted (its samples are observed) or none
    if (observed[i]) out.format_floor_small_y_us[i] = p.format_floor_small_y_us[i];
    if (observed[i]) out.format_floor_adds_l2[i] = p.format_floor_us[i] > 0 ? p.format_floor_adds_l2[i] : 0.0;
    if (observed[i] && i == static_cast<int>(format_id::cusparse_csr)) {
      out.cusparse_csr_floor_us_per_doubling = p.cusparse_csr_floor_us_per_doubling;
      out.cusparse_csr_floor_us_per_row_share = p.cusparse_csr_floor_us_per_row_share;
    }
    if (used.coo_efficiency > 0 && i == static_cast<int>(format_id::coo)) out.coo_efficiency = p.coo_efficiency;
    if (used.hyb_empty_ell > 0 && i == static_cast<int>(format_id::hyb)) out.hyb_empty_ell_us = p.hyb_empty_ell_us;
    if (observed[i] && i == static_cast<int>(format_id::csr_scalar)) out.csr_scalar_x_reread_l2_share = p.csr_scalar_x_reread_l2_share;
    if (used.l2_gather[i] > 0) out.format_l2_gather_gbs[i] = p.format_l2_gather_gbs[i];
    if (used.chain[i] > 0 && i == static_cast<int>(format_id::cusparse_sell)) {
      out.cusparse_sell_wide_padded = p.cusparse_sell_wide_padded;
      out.cusparse_sell_wide_chain_scale = p.cusparse_sell_wide_chain_scale;
    }
    if (used.chain[i] > 0 && i == static_cast<int>(format_id::pellr)) out.pellr_sorted_lanes = p.pellr_sorted_lanes;
    if (observed[i]) out.format_overlap[i] = used.chain[i] > 0 ? p.format_overlap[i] : 0.0;
    if (observed[i]) out.format_l2_matrix_share[i] = p.format_l2_matrix_share[i];
    if (observed[i]) out.format_l2_stream[i] = p.format_l2_stream[i];
    if (observed[i]) out.format_chain_x_doubling[i] = used.chain[i] > 0 ? p.format_chain_x_doubling[i] : 0.0;
    if (observed[i]) out.format_idle_lane_offset[i] = p.format_idle_lane_offset[i];
    if (observed[i]) out.format_stream_row_doubling[i] = p.format_stream_row_doubling[i];
    if (used.chain[i] > 0) {
      out.format_chain_scale[i] = p.format_chain_scale[i];
      out.format_chain_lanes[i] = p.format_chain_lanes[i];
      out.format_chain_scale_dram[i] = p.format_chain_scale_dram[i];
      out.format_chain_lanes_dram[i] = p.format_chain_lanes_dram[i];
      out.format_chain_scatter_dram[i] = p.format_chain_scatter_dram[i];
    }
  }
  out.l2_resident_share = l2_share;
  return used;
}

// Sum and count of the placeholder's relative errors over the measured observations of each format.
std::array<std::pair<double, int>, format_count> relative_errors_by_format(const std::vector<fixed_cost_observation>& obs,
                                                                          const bandwidth_model_params& p)
{
  std::array<std::pair<double, int>, format_count> e{};
  for (const auto& o : obs) {
    if (!(o.measured_us > 0)) continue;
    const double pred = predicted_of(o.format, parts_of(o.format, o.input, p), p);
    if (!std::isfinite(pred)) continue;
    auto& [sum, n] = e[static_cast<int>(o.format)];
    sum += std::abs(pred - o.measured_us) / o.measured_us;
    ++n;
  }
  return e;
}

// Mean relative error of the placeholder over the measured observations.
double mean_relative_error(const std::vector<fixed_cost_observation>& obs, const bandwidth_model_params& p)
{
  double sum = 0;
  int n = 0;
  for (const auto& [s, k] : relative_errors_by_format(obs, p)) {
    sum += s;
    n += k;
  }
  return n > 0 ? sum / n : 0.0;
}
}  // namespace

format_fit fit_format_corrections(const std::vector<fixed_cost_observation>& obs, bandwidth_model_params& out, int min_samples)
{
  // Which layouts run from the L2 (bandwidth_model_params::l2_resident_share) decides which samples every other
  // correction is fitted on, so the whole fit runs at each share of a grid and the share whose fit leaves the
  // least mean relative error over the training samples is kept, if it improves on the whole L2 by at least 1 %
  // of that error (a share no sample tells apart from 1 leaves 1: the same fit as before the share existed).
  constexpr double shares[] = {1.0, 0.9, 0.8, 0.7, 0.6, 0.5};
  bandwidth_model_params best = out;
  format_fit best_fit = fit_corrections_at(obs, best, min_samples, shares[0]);
  const double whole = mean_relative_error(obs, best);
  double best_error = whole;
  for (std::size_t k = 1; k < std::size(shares); ++k) {
    bandwidth_model_params q = out;
    const format_fit fit = fit_corrections_at(obs, q, min_samples, shares[k]);
    const double e = mean_relative_error(obs, q);
    if (e < best_error && e < 0.99 * whole) {
      best_error = e;
      best = q;
      best_fit = fit;
    }
  }
  // Per-format values chosen from grids, in stages: each stage sets one of the staged_fields (`field`) for the
  // formats `fitted` selects. It runs the whole fit at each value `w` of `values` for those formats (the field's
  // neutral value, bandwidth_model_params' own, for the others; the earlier stages' fields as they chose them, the
  // later ones' neutral), and per format keeps the value whose fit leaves the least mean relative error over that
  // format's training samples, where the fit kept a value other than the neutral one and it improves on the current
  // fit's error by at least 0.5 % of that error; then the fit with the chosen values, whose training samples per
  // format go to `counts` of format_fit. The formats' corrections are fitted apart from each other (HYB's chain factor
  // in the L2 may be ELL's, fitted at ELL's overlap), so one pass per grid value suffices.
  bandwidth_model_params staged;  // the staged_fields as the stages choose them, neutral until then
  format_fit staged_counts;
  const auto fit_with = [&](bandwidth_model_params& q) { return fit_corrections_at(obs, q, min_samples, best.l2_resident_share, &staged); };
  const auto stage = [&](std::initializer_list<double> values, bool (*fitted)(format_id), format_field field,
                         std::array<int, format_count> format_fit::*counts) {
    const double neutral = (bandwidth_model_params{}.*field)[0];
    const auto applied = [&](const bandwidth_model_params& q, int i) { return (q.*field)[i] != neutral; };
    std::array<double, format_count>& slot = staged.*field;
    const auto current = relative_errors_by_format(obs, best);
    std::array<double, format_count> chosen = per_format(neutral), chosen_error{};
    for (int i = 0; i < format_count; ++i) chosen_error[i] = current[i].second > 0 ? current[i].first / current[i].second : 0.0;
    for (double w : values) {
      for (int i = 0; i < format_count; ++i) slot[i] = fitted(static_cast<format_id>(i)) ? w : neutral;
      bandwidth_model_params q = out;
      fit_with(q);
      const auto e = relative_errors_by_format(obs, q);
      for (int i = 0; i < format_count; ++i) {
        if (e[i].second == 0 || current[i].second == 0 || !applied(q, i)) continue;
        const double mean = e[i].first / e[i].second;
        if (mean < chosen_error[i] && mean < 0.995 * current[i].first / current[i].second) {
          chosen[i] = w;
          chosen_error[i] = mean;
        }
      }
    }
    if (chosen != per_format(neutral)) {
      slot = chosen;
      bandwidth_model_params q = out;
      best_fit = fit_with(q);
      best = q;
      best_error = mean_relative_error(obs, best);
      for (int i = 0; i < format_count; ++i) (staged_counts.*counts)[i] = applied(best, i) ? current[i].second : 0;
    }
    slot = best.*field;  // as the fit kept it, for the later stages
  };
  // The streaming rates' dependence on the rows (bandwidth_model_params::format_stream_row_doubling, cuSPARSE CSR;
  // format_idle_lane_offset, csr_vector) and the in-L2 layouts read at the L2 term's pace
  // (bandwidth_model_params::format_l2_stream, ELL and HYB): first, as they move which samples a stream bounds, and so
  // the overlaps' and the matrix shares' fits.
  stage({0.03, 0.05, 0.07}, stream_row_fitted, &bandwidth_model_params::format_stream_row_doubling, &format_fit::stream_row);
  stage({-0.04, 0.0, 0.07, 0.1}, idle_lane_fitted, &bandwidth_model_params::format_idle_lane_offset, &format_fit::idle_lane);
  stage({1.0}, l2_stream_fitted, &bandwidth_model_params::format_l2_stream, &format_fit::l2_stream);
  // The chain's growth with x's size in the L2 (bandwidth_model_params::format_chain_x_doubling), ELL: before the
  // overlaps, which are fitted on the chain's shape.
  stage({0.03, 0.06}, chain_x_fitted, &bandwidth_model_params::format_chain_x_doubling, &format_fit::chain_x);
  // The overlap of chain and traffic (bandwidth_model_params::format_overlap), csr_vector and ELL.
  stage({0.15, 0.3, 0.45, 0.6}, overlap_fitted, &bandwidth_model_params::format_overlap, &format_fit::overlap);
  // The share of the matrix's bytes in the L2 term beyond the L2 (bandwidth_model_params::format_l2_matrix_share),
  // against all of the bytes (1).
  stage({0.5, 0.25}, matrix_share_fitted, &bandwidth_model_params::format_l2_matrix_share, &format_fit::l2_matrix_share);
  for (const auto counts : {&format_fit::stream_row, &format_fit::idle_lane, &format_fit::l2_stream, &format_fit::chain_x,
                            &format_fit::overlap, &format_fit::l2_matrix_share}) {
    best_fit.*counts = staged_counts.*counts;
  }
  out = best;
  best_fit.l2_resident_error = best_error;
  best_fit.l2_resident_error_whole = whole;
  best_fit.l2_resident = 0;
  if (out.l2_resident_share < 1.0) {
    for (const auto& o : obs) best_fit.l2_resident += o.measured_us > 0 ? 1 : 0;
  }
  return best_fit;
}

double at_least_launches(format_id f, const row_stats& s, int value_bytes, const bandwidth_model_params& p, double predicted_us,
                         const device_properties* device)
{
  const layout_traffic c = layout_traffic_of(f, s, value_bytes, device);
  // One launch: a second launch on the same stream overlaps the first one's tail (COO's y = beta y is short).
  const double latency = p.launch_us + c.serial_entries * p.serial_entry_l2_ns * 1e-3;
  double streaming = 0;
  if (p.l2_bytes > 0 && p.stream_read_gbs > 0) {
    const double working_set = c.moved_bytes + static_cast<double>(std::min(s.cols, s.nnz)) * value_bytes +
                               static_cast<double>(s.rows) * value_bytes;
    streaming = std::max(working_set - p.l2_bytes, 0.0) / (p.stream_read_gbs * 1e3);
  }
  return std::max({predicted_us, latency, streaming});
}

double conversion_estimate_us(format_id f, double layout_bytes, double csr_bytes, double stream_gbs, bool first_cusparse_sell)
{
  if (f == format_id::csr_vector || f == format_id::csr_scalar) return csr_copy_install_us;
  double us = 150.0 + 3.0 * (layout_bytes + csr_bytes) / (stream_gbs * 1e3);
  if (f == format_id::cusparse_sell && first_cusparse_sell) us += cusparse_sell_first_use_us;
  return us;
}

int select_best(const std::vector<format_estimate>& estimates)
{
  int best = -1;
  for (int i = 0; i < static_cast<int>(estimates.size()); ++i) {
    const auto& e = estimates[i];
    if (!e.feasible) continue;
    if (best < 0 || e.predicted_us < estimates[best].predicted_us) best = i;
  }
  return best;
}

}  // namespace aijp
