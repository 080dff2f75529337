// Row-length statistics of a sparse matrix: the features every performance model reads.
//
// The device computes them (kernels/, aijp::compute_row_stats_device); `compute_row_stats` below is the
// host reference walking the same definitions, used as the oracle in tests and as the CPU fallback.
#pragma once

#include <aijpredict/csr.hpp>

#include <array>
#include <string>
#include <vector>

namespace aijp {

/// Warp width used by the per-warp iteration counts (PELLR paper, Wang & Gu 2020, Eq. 1-2).
constexpr int stats_warp_size = 32;

/// Statistics of the row lengths b_r = row_ptr[r+1] - row_ptr[r].
struct row_stats {
  size_type rows = 0;
  size_type cols = 0;
  size_type nnz = 0;
  double mean = 0.0;      ///< nnz / rows (0 for no rows)
  double stddev = 0.0;    ///< population standard deviation sigma of the row lengths
  index_type min_len = 0; ///< shortest row (0 for no rows)
  index_type max_len = 0; ///< longest row
  index_type mode_len = 0;///< most frequent row length; ties go to the shorter length
  size_type mode_count = 0;
  size_type empty_rows = 0;
  /// Eq. 1: sum over groups of 32 consecutive rows (natural order) of the longest row in the group:
  /// the iterations of a thread-per-row kernel (ELLPACK-R, CSR-scalar) in the natural row order.
  size_type n_iter_natural = 0;
  /// Eq. 1 for the rows sorted by decreasing length (PELLR, JAD, SELL-C-sigma with a global sort).
  size_type n_iter_sorted = 0;
  /// Eq. 2, the arithmetic work: b multiplies and b - 1 adds per non-empty row, i.e. 2 nnz - nonempty rows.
  /// (The paper's formula counts -1 for the zero-padded rows of the last warp; we count real rows only.)
  size_type n_p = 0;
  /// HYB split by the Bell-Garland rule: the largest K such that at least max(4096, rows/3) rows have
  /// >= K nonzeros; the ELL part holds min(b_r, K) per row, the COO part the rest.
  index_type hyb_ell_width = 0;
  size_type hyb_coo_nnz = 0;
  /// Nonzeros of the group of 32 consecutive rows (natural order, as N_iter) that holds the longest row;
  /// among groups whose longest row ties, the largest. Divided by max_len it is the number of lanes that
  /// walk the thread-per-row layouts' longest chain together (chain_lanes): one long row alone, or a
  /// block of them. 0 = unknown (samples written before it was computed).
  size_type chain_warp_nnz = 0;
  /// Lanes that walk the longest row together in the length-sorted order (jad): the first sorted group holds
  /// the 32 longest rows, of which fewer remain as its steps pass their lengths. The harmonic mean over the
  /// longest row's max_len steps of the rows still running, max_len / sum_k 1 / running(k), in [1, 32]: a chain
  /// whose per-step cost is linear in 1 / lanes (predict.cpp, the saturating lanes) costs that mean's value on
  /// average. 0 = unknown (samples written before it was computed, strip-merged statistics).
  double sorted_chain_lanes = 0.0;

  index_type spread() const { return max_len - min_len; } ///< max - min
  std::string to_string() const;
};

/// Locality of the vector accesses in the order of the layouts that sort rows by length (jad, pellr,
/// sell_sigma), sampled on the device (aijp::sample_locality): a warp of the sorted order holds 32
/// rows of one length that in natural order may lie far apart. 0 = unknown.
struct sorted_locality {
  double x_sectors_per_nnz = 0.0;  ///< distinct 32-byte sectors of x per nonzero of such a warp
  double y_sectors_per_row = 0.0;  ///< distinct 32-byte sectors of y such a warp writes, per row
};

/// How the x-gather locality spreads over the nonzeros: windows placed at evenly spaced nonzeros (each the
/// 32-row group holding its nonzero, at most gather_mixture_window entries of it around the nonzero, as the
/// row-order sampler's groups), binned by their distinct 32-byte x sectors per nonzero into `bins` equal
/// bins of [0, 1]. A matrix whose nonzeros mix local and scattered gathers (a circuit's dense rows of random
/// columns beside a banded bulk) spends each part's time at its own bound; the whole-matrix ratio, and one
/// sampled per group of rows rather than per nonzero, hide that (predict.cpp, the mixture term). Empty
/// (share 0 everywhere) = unknown: samples written before it, blocks of a partition.
struct gather_mixture {
  static constexpr int bins = 8;
  std::array<double, bins> share{};  ///< fraction of the windows in each bin (sums to 1 when known)
  std::array<double, bins> ratio{};  ///< the mean sectors per nonzero of the windows in each bin
  /// The longest row holding a window's nonzero (the chains' rows where a long row holds a share of the
  /// nonzeros), its own gathers: the row's length, and its x sector changes per entry, 1 + the consecutive
  /// entries of the row whose x lie in different 32-byte sectors, over at most gather_mixture_window of its
  /// entries centred on that nonzero, divided by the entries looked at (1/4 for doubles read contiguously, 1
  /// for a sector each; an upper bound on the row's distinct sectors per entry where its columns are unsorted).
  /// 0 = unknown (samples written before it, blocks of a partition).
  double longest_row_len = 0;
  double longest_row_ratio = 0;
  bool known() const
  {
    double t = 0;
    for (double v : share) t += v;
    return t > 0.5;
  }
  double mean() const
  {
    double m = 0;
    for (int b = 0; b < bins; ++b) m += share[b] * ratio[b];
    return m;
  }
};
/// Entries of a mixture window (the row-order sampler's cap per group).
inline constexpr int gather_mixture_window = 4096;

/// Host reference: statistics of a host CSR matrix (row_ptr must be host memory; values are not read).
template <typename Value>
row_stats compute_row_stats(const csr_view<Value>& a);

/// Rows of one length: an occupied bin of the row-length histogram.
struct length_bin {
  index_type len = 0;
  size_type rows = 0;
};

/// Statistics from the occupied bins of a row-length histogram (increasing lengths, no empty bin), plus
/// the quantities a histogram cannot give (sum of squares is derived; n_iter_natural is passed in).
/// Shared by the host reference and the device path (the device computes the histogram, the host finishes
/// the tail), so both give bit-identical results. Its cost is in the occupied lengths, not in max_len: a
/// matrix with rows of 50000 entries and a few distinct lengths costs microseconds (a staged step's part).
row_stats stats_from_bins(size_type rows, size_type cols, const std::vector<length_bin>& bins, size_type n_iter_natural,
                          size_type chain_warp_nnz = 0);

/// The same from the whole histogram: `hist[L]` = number of rows with length L (L = 0..size-1).
row_stats stats_from_histogram(size_type rows, size_type cols, const size_type* hist, size_type hist_size,
                               size_type n_iter_natural, size_type chain_warp_nnz = 0);

/// Average number of rows of the longest row's group of 32 that are still running over its max_len steps:
/// chain_warp_nnz / max_len, in [1, 32]; 1 when unknown or empty.
double chain_lanes(const row_stats& s);

/// chain_lanes in the length-sorted order: sorted_chain_lanes where known, else chain_lanes.
double sorted_chain_lanes(const row_stats& s);

/// Ordering key of a 32-row group for row_stats::chain_warp_nnz: the longest row first, then the group's
/// nonzeros (saturated at 2^32 - 1). The device reduces it with one 64-bit atomicMax.
constexpr unsigned long long chain_key(index_type warp_max, unsigned long long warp_nnz)
{
  return (static_cast<unsigned long long>(warp_max) << 32) | (warp_nnz < 0xffffffffull ? warp_nnz : 0xffffffffull);
}
constexpr size_type chain_key_nnz(unsigned long long key) { return static_cast<size_type>(key & 0xffffffffull); }

}  // namespace aijp
