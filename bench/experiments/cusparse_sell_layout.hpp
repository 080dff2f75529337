// The cuSPARSE SELL layout of the experiment programs (aijp_csell_switch, aijp_cusparse_launch_shape): a host matrix
// as sorted columns per row, built on the device as cusparseCreateSlicedEll with slice 32 and
// CUSPARSE_SPMV_SELL_ALG1, as kernels/src/formats/cusparse_variants.cu builds it, and timed in batches of back-to-back
// products. Errors exit (experiment_check.hpp).
#pragma once

#include "experiment_check.hpp"

#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace sell_experiment {

constexpr int slice = 32;  // as cusparse_variants.cu

// Row lengths and columns of one test matrix, in CSR order (square: rows x rows).
struct host_matrix {
  int rows = 0;
  std::vector<std::vector<int>> cols;  // per row
};

// The matrix as cuSPARSE SELL on the device, with x = 1 and y, ready for products on `stream`'s handle.
template <typename Value>
class device_sell {
 public:
  device_sell(cusparseHandle_t h, const host_matrix& m) : h_(h)
  {
    const int slices = (m.rows + slice - 1) / slice;
    std::vector<int> offsets(slices + 1, 0);
    for (int k = 0; k < slices; ++k) {
      int width = 0;
      for (int r = k * slice; r < std::min(m.rows, (k + 1) * slice); ++r) width = std::max(width, static_cast<int>(m.cols[r].size()));
      offsets[k + 1] = offsets[k] + width * slice;
      longest_ = std::max(longest_, width);
    }
    stored_ = offsets[slices];
    std::vector<int> col(stored_, -1);  // padding: column -1, value 0 (cuSPARSE's convention, fill_slices)
    std::vector<Value> val(stored_, Value(0));
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
    CHECK(cudaMalloc(&off_, offsets.size() * sizeof(int)));
    CHECK(cudaMalloc(&col_, std::max(1LL, stored_) * sizeof(int)));
    CHECK(cudaMalloc(&val_, std::max(1LL, stored_) * sizeof(Value)));
    CHECK(cudaMalloc(&x_, m.rows * sizeof(Value)));
    CHECK(cudaMalloc(&y_, m.rows * sizeof(Value)));
    CHECK(cudaMemcpy(off_, offsets.data(), offsets.size() * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(col_, col.data(), stored_ * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(val_, val.data(), stored_ * sizeof(Value), cudaMemcpyHostToDevice));
    const std::vector<Value> ones(m.rows, Value(1));
    CHECK(cudaMemcpy(x_, ones.data(), m.rows * sizeof(Value), cudaMemcpyHostToDevice));
    SCHECK(cusparseCreateSlicedEll(&a_, m.rows, m.rows, nnz, stored_, slice, off_, col_, val_, CUSPARSE_INDEX_32I,
                                   CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, type));
    SCHECK(cusparseCreateDnVec(&xd_, m.rows, x_, type));
    SCHECK(cusparseCreateDnVec(&yd_, m.rows, y_, type));
    std::size_t bytes = 0;
    SCHECK(cusparseSpMV_bufferSize(h_, CUSPARSE_OPERATION_NON_TRANSPOSE, &one_, a_, xd_, &zero_, yd_, type,
                                   CUSPARSE_SPMV_SELL_ALG1, &bytes));
    if (bytes > 0) CHECK(cudaMalloc(&buf_, bytes));
  }
  ~device_sell()
  {
    if (buf_ != nullptr) cudaFree(buf_);
    cusparseDestroySpMat(a_);
    cusparseDestroyDnVec(xd_);
    cusparseDestroyDnVec(yd_);
    cudaFree(off_);
    cudaFree(col_);
    cudaFree(val_);
    cudaFree(x_);
    cudaFree(y_);
  }
  device_sell(const device_sell&) = delete;
  device_sell& operator=(const device_sell&) = delete;

  void product() const
  {
    SCHECK(cusparseSpMV(h_, CUSPARSE_OPERATION_NON_TRANSPOSE, &one_, a_, xd_, &zero_, yd_, type, CUSPARSE_SPMV_SELL_ALG1, buf_));
  }
  long long stored() const { return stored_; }  ///< sellValuesSize: 32 x the slices' widths
  int longest() const { return longest_; }      ///< the widest slice

 private:
  static constexpr cudaDataType type = sizeof(Value) == 8 ? CUDA_R_64F : CUDA_R_32F;
  cusparseHandle_t h_;
  long long stored_ = 0;
  int longest_ = 0;
  int *off_ = nullptr, *col_ = nullptr;
  Value *val_ = nullptr, *x_ = nullptr, *y_ = nullptr;
  cusparseSpMatDescr_t a_ = nullptr;
  cusparseDnVecDescr_t xd_ = nullptr, yd_ = nullptr;
  void* buf_ = nullptr;
  const Value one_ = Value(1), zero_ = Value(0);
};

// `reps` samples of the time per product, us, sorted: each a batch of `batch` products back to back after an untimed
// one, so that the events bracket device work only and not the host issue of the first product.
template <typename Product>
std::vector<double> time_batches(cudaStream_t s, const Product& product, int reps, int batch)
{
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
  return t;
}

// The experiments' command line: --reps N, --batch B, --long L (at least `min_long`), and --series LIST where
// `series` is given. Returns -1 to run, else the exit status (0 after --help, 2 after a bad argument, with `usage`).
struct options {
  int reps = 20;
  int batch = 10;
  int long_len = 400;
  std::string series;
};
inline int parse(int argc, char** argv, const char* usage, options& o, int min_long, bool series)
{
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(usage, stdout);
      return 0;
    } else if (a == "--reps" && i + 1 < argc) {
      o.reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--batch" && i + 1 < argc) {
      o.batch = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--long" && i + 1 < argc) {
      o.long_len = std::max(min_long, std::atoi(argv[++i]));
    } else if (series && a == "--series" && i + 1 < argc) {
      o.series = argv[++i];
    } else {
      std::fputs(usage, stderr);
      return 2;
    }
  }
  return -1;
}

}  // namespace sell_experiment
