// Experiment: does cuSPARSE SELL (cusparseCreateSlicedEll + cusparseSpMV, CUSPARSE_SPMV_SELL_ALG1, slice 32, as
// kernels/src/formats/cusparse_variants.cu builds it) change its rate along a long slice at a size of the layout?
// On the H100 gated warm-ups and held-out sets its chain-bound products in the L2 took 0.33-0.53 of the raw chain
// up to 179K stored entries (sellValuesSize) and 0.72-1.0 from 191K (docs/models.md, Session 29: cusparse_sell);
// the warm-up had no chain between 179K and 294K, and mbeacxc (190.6K) lies in that gap. Each series holds the
// longest slice fixed and moves the stored entries across the gap, in steps of about 4K:
//   block   rows of 8 (columns local to the row) and one row of `long` at row 330 (contiguous columns), the
//           stored entries moved by the rows (120K-340K): the warm-up's `block` matrices, whose chain stays;
//   wide    16 slices (512 rows) of one length each, the stored entries moved by that length (512 x length,
//           152K-229K): mbeacxc's shape, whose chain grows with the stored entries (time / length is the rate);
//   float   the block series in single precision: a step at the same stored entries means a size in entries,
//           at 1.5x the entries (same bytes of values and columns, 8 vs 12 bytes) a size in bytes.
// Prints one line per matrix: series, value bytes, rows, slices, stored entries, longest slice, the median and
// the minimum over `reps` samples of the time per product, us. A sample is a batch of products run back to back
// after an untimed one, so that the events bracket device work only and not cuSPARSE's host issue of the first
// product (the products, an estimated 15-130 us on an H100, outlast their ~5-8 us issue, so the queue stays
// ahead): the time is the device's, as the gated warm-up's.
// Built by CMake as aijp_csell_switch (bench/CMakeLists.txt); aijp_csell_switch --help.
#include "cusparse_sell_layout.hpp"

#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using sell_experiment::host_matrix;
using sell_experiment::slice;

// Rows of 8 with columns around the row, and one row of `long_len` contiguous columns at row 330 (an odd first
// column, as the warm-up's placed blocks).
host_matrix block_matrix(int rows, int long_len)
{
  host_matrix m;
  m.rows = rows;
  m.cols.resize(rows);
  for (int r = 0; r < rows; ++r) {
    const int len = r == 330 ? long_len : 8;
    const int first = r == 330 ? 1 : std::clamp(r - 4, 0, std::max(0, rows - len));
    for (int j = 0; j < len; ++j) m.cols[r].push_back((first + j) % rows);
  }
  return m;
}

// 512 rows of `len` columns spread over the 512 columns (mbeacxc: 496 rows of up to 484 over 496 columns).
host_matrix wide_matrix(int len)
{
  host_matrix m;
  m.rows = 512;
  m.cols.resize(m.rows);
  for (int r = 0; r < m.rows; ++r) {
    for (int j = 0; j < len; ++j) m.cols[r].push_back(static_cast<int>((static_cast<long long>(j) * 512 / len + r) % 512));
    std::sort(m.cols[r].begin(), m.cols[r].end());
  }
  return m;
}

struct result {
  long long stored = 0;
  int longest = 0;
  double median_us = 0, min_us = 0;
};

template <typename Value>
result time_sell(cusparseHandle_t h, cudaStream_t s, const host_matrix& m, int reps, int batch)
{
  const sell_experiment::device_sell<Value> d(h, m);
  for (int i = 0; i < 5; ++i) d.product();  // module load, warm L2
  const auto t = sell_experiment::time_batches(s, [&] { d.product(); }, reps, batch);
  return {d.stored(), d.longest(), t[t.size() / 2], t.front()};
}

void print(const char* series, int value_bytes, const host_matrix& m, const result& r)
{
  std::printf("%s\t%d\t%d\t%d\t%lld\t%d\t%.3f\t%.3f\n", series, value_bytes, m.rows, (m.rows + slice - 1) / slice, r.stored,
              r.longest, r.median_us, r.min_us);
  std::fflush(stdout);
}

}  // namespace

const char* const usage =
    "Usage: aijp_csell_switch [--reps N] [--batch B] [--long L]\n"
    "\n"
    "Times cuSPARSE SELL (slice 32, CUSPARSE_SPMV_SELL_ALG1) on chain-bound matrices whose stored entries\n"
    "(sellValuesSize) cross 120K-340K at a fixed longest slice, to see whether and where its rate steps\n"
    "(docs/models.md, Session 29: cusparse_sell). Series: block (rows of 8 and one row of L, double), float (the\n"
    "same in single precision), wide (16 slices of one length, 152K-229K). Writes a TSV table to stdout:\n"
    "series, value_bytes, rows, slices, stored, longest, median_us, min_us (per product, device time).\n"
    "\n"
    "Options:\n"
    "  --reps N    samples per matrix (default 20); the median and minimum are printed\n"
    "  --batch B   products back to back per sample (default 10)\n"
    "  --long L    length of the block's long row (default 400, at least 9); the warm-up's blocks use 400, 1600\n"
    "  --help      this text\n";

int main(int argc, char** argv)
{
  sell_experiment::options o;
  if (const int rc = sell_experiment::parse(argc, argv, usage, o, 9, false); rc >= 0) return rc;
  const int reps = o.reps, batch = o.batch, long_len = o.long_len;
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  cusparseHandle_t h;
  SCHECK(cusparseCreate(&h));
  SCHECK(cusparseSetStream(h, s));
  std::printf("series\tvalue_bytes\trows\tslices\tstored\tlongest\tmedian_us\tmin_us\n");
  // block: stored = 32 x (8 x (slices - 1) + long), 120K-340K in steps of 4096 (16 slices), more than 330 rows.
  for (int slices = 16; 32LL * (8LL * (slices - 1) + long_len) <= 340000; slices += 16) {
    const int rows = slices * slice;
    if (rows <= 330 || 32LL * (8LL * (slices - 1) + long_len) < 120000) continue;
    const host_matrix m = block_matrix(rows, long_len);
    print("block", 8, m, time_sell<double>(h, s, m, reps, batch));
    print("float", 4, m, time_sell<float>(h, s, m, reps, batch));
  }
  // wide: 16 slices of one length, stored = 512 x length: 152K-229K in steps of 4096 (8 per row).
  for (int len = 296; len <= 448; len += 8) {
    const host_matrix m = wide_matrix(len);
    print("wide", 8, m, time_sell<double>(h, s, m, reps, batch));
  }
  SCHECK(cusparseDestroy(h));
  CHECK(cudaStreamDestroy(s));
  return 0;
}
