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
#include "experiment_check.hpp"

#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

constexpr int slice = 32;  // as cusparse_variants.cu

// Row lengths and columns of one test matrix, in CSR order.
struct host_matrix {
  int rows = 0;
  std::vector<std::vector<int>> cols;  // per row
};

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
  const int slices = (m.rows + slice - 1) / slice;
  std::vector<int> offsets(slices + 1, 0);
  int longest = 0;
  for (int k = 0; k < slices; ++k) {
    int width = 0;
    for (int r = k * slice; r < std::min(m.rows, (k + 1) * slice); ++r) width = std::max(width, static_cast<int>(m.cols[r].size()));
    offsets[k + 1] = offsets[k] + width * slice;
    longest = std::max(longest, width);
  }
  const long long stored = offsets[slices];
  std::vector<int> col(stored, -1);  // padding: column -1, value 0 (cuSPARSE's convention, fill_slices)
  std::vector<Value> val(stored, Value(0));
  long long nnz = 0;
  for (int r = 0; r < m.rows; ++r) {
    const int k = r / slice;
    for (std::size_t j = 0; j < m.cols[r].size(); ++j) {
      const long long at = offsets[k] + static_cast<long long>(j) * slice + r % slice;  // column-major in the slice
      col[at] = m.cols[r][j];
      val[at] = Value(1);
      ++nnz;
    }
  }
  int *d_off = nullptr, *d_col = nullptr;
  Value *d_val = nullptr, *d_x = nullptr, *d_y = nullptr;
  CHECK(cudaMalloc(&d_off, offsets.size() * sizeof(int)));
  CHECK(cudaMalloc(&d_col, stored * sizeof(int)));
  CHECK(cudaMalloc(&d_val, stored * sizeof(Value)));
  CHECK(cudaMalloc(&d_x, m.rows * sizeof(Value)));
  CHECK(cudaMalloc(&d_y, m.rows * sizeof(Value)));
  CHECK(cudaMemcpy(d_off, offsets.data(), offsets.size() * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_col, col.data(), stored * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_val, val.data(), stored * sizeof(Value), cudaMemcpyHostToDevice));
  const std::vector<Value> ones(m.rows, Value(1));
  CHECK(cudaMemcpy(d_x, ones.data(), m.rows * sizeof(Value), cudaMemcpyHostToDevice));
  const cudaDataType type = sizeof(Value) == 8 ? CUDA_R_64F : CUDA_R_32F;
  cusparseSpMatDescr_t a = nullptr;
  cusparseDnVecDescr_t x = nullptr, y = nullptr;
  SCHECK(cusparseCreateSlicedEll(&a, m.rows, m.rows, nnz, stored, slice, d_off, d_col, d_val, CUSPARSE_INDEX_32I,
                                 CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, type));
  SCHECK(cusparseCreateDnVec(&x, m.rows, d_x, type));
  SCHECK(cusparseCreateDnVec(&y, m.rows, d_y, type));
  const Value one(1), zero(0);
  std::size_t bytes = 0;
  SCHECK(cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, a, x, &zero, y, type, CUSPARSE_SPMV_SELL_ALG1, &bytes));
  void* buf = nullptr;
  if (bytes > 0) CHECK(cudaMalloc(&buf, bytes));
  const auto product = [&] {
    SCHECK(cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, a, x, &zero, y, type, CUSPARSE_SPMV_SELL_ALG1, buf));
  };
  for (int i = 0; i < 5; ++i) product();  // module load, warm L2
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    product();  // untimed: queued ahead of the start event, so that the batch follows it without a gap
    CHECK(cudaEventRecord(e0, s));
    for (int b = 0; b < batch; ++b) product();
    CHECK(cudaEventRecord(e1, s));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1e3 / batch);
  }
  std::sort(t.begin(), t.end());
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  if (buf != nullptr) CHECK(cudaFree(buf));
  SCHECK(cusparseDestroySpMat(a));
  SCHECK(cusparseDestroyDnVec(x));
  SCHECK(cusparseDestroyDnVec(y));
  CHECK(cudaFree(d_off));
  CHECK(cudaFree(d_col));
  CHECK(cudaFree(d_val));
  CHECK(cudaFree(d_x));
  CHECK(cudaFree(d_y));
  return {stored, longest, t[t.size() / 2], t.front()};
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
  int reps = 20;
  int batch = 10;
  int long_len = 400;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(usage, stdout);
      return 0;
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--batch" && i + 1 < argc) {
      batch = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--long" && i + 1 < argc) {
      long_len = std::max(9, std::atoi(argv[++i]));
    } else {
      std::fputs(usage, stderr);
      return 2;
    }
  }
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
