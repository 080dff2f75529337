// Host time of one cuSPARSE CSR SpMV call sequence as aijpredict's cuSPARSE CSR path issues it, against
// variants: the scalars alpha and beta through device pointers (CUSPARSE_POINTER_MODE_DEVICE, as PETSc's
// aijcusparse does) instead of host ones, and without the cusparseSetStream before each call. Session 35
// measured aijpredict's product on cuSPARSE CSR at +0.7-0.85 us of host time over aijcusparse's inside one-CPU
// GMRES solves, and its csr_vector product 0.3-0.5 us below it: the difference lies in the cuSPARSE call.
//
// Session 36: aijpredict's product on cuSPARSE CSR measured +0.3 us (bcsstk13, zenios) and +1.3 us (Pd: 8081 rows,
// 1.6 per row) of host time over aijcusparse's, the same on the stream (aijp_solve_ab -time_mult): variants
// without cusparseSpMV_preprocess (a descriptor of its own), and the matrix's shape as arguments.
//
// Each variant runs `calls` products of a banded matrix (default 2003 rows, 43 per row: bcsstk13's size) on one stream,
// a synchronisation every 16 calls so that the queue never fills (the call's own host time, not the GPU's
// throughput), each call timed alone; the variants interleaved in rounds. With `pollute_kb` > 0, that many KiB
// are written between two calls (a solve's other work evicting the caches). Prints per variant the median
// over rounds of the median host time per call.
//
// Built as aijp_cusparse_call_cost (bench/CMakeLists.txt).
// Usage: aijp_cusparse_call_cost [calls=4000] [rounds=9] [pollute_kb=0] [rows=2003] [half_bandwidth=21]
#include "experiment_check.hpp"

#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using clk = std::chrono::steady_clock;

static double median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

int main(int argc, char** argv)
{
  if (argc > 1 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::printf("Usage: aijp_cusparse_call_cost [calls=4000] [rounds=9] [pollute_kb=0] [rows=2003] [half_bandwidth=21]\n"
                "Host time per call of cuSPARSE CSR SpMV call sequences (host or device scalars, with or without\n"
                "cusparseSetStream, with or without cusparseSpMV_preprocess), each call timed alone, the variants\n"
                "interleaved in rounds; pollute_kb KiB written between calls; a banded matrix of `rows` rows and\n"
                "2 half_bandwidth + 1 per row. Prints per variant the median over rounds of the median per call.\n");
    return 0;
  }
  const int calls = argc > 1 ? std::atoi(argv[1]) : 4000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 9;
  const int pollute_kb = argc > 3 ? std::atoi(argv[3]) : 0;
  const int n = argc > 4 ? std::atoi(argv[4]) : 2003;
  const int half = argc > 5 ? std::atoi(argv[5]) : 21;
  if (calls < 16 || rounds < 1 || pollute_kb < 0 || n < 1 || n > (1 << 24) || half < 0 || half > 512) {
    std::fprintf(stderr, "usage: aijp_cusparse_call_cost [calls>=16] [rounds>=1] [pollute_kb>=0] [rows in 1..2^24] [half_bandwidth in 0..512] (--help)\n");
    return 2;
  }
  std::vector<int> rp(n + 1, 0), ci;
  std::vector<double> va;
  for (int i = 0; i < n; ++i) {
    for (int j = std::max(0, i - half); j <= std::min(n - 1, i + half); ++j) {
      ci.push_back(j);
      va.push_back(j == i ? 4.0 : -0.1);
    }
    rp[i + 1] = static_cast<int>(ci.size());
  }
  const int nnz = rp[n];
  int *drp, *dci;
  double *dva, *dx, *dy, *dscal;
  CHECK(cudaMalloc(&drp, sizeof(int) * (n + 1)));
  CHECK(cudaMalloc(&dci, sizeof(int) * nnz));
  CHECK(cudaMalloc(&dva, sizeof(double) * nnz));
  CHECK(cudaMalloc(&dx, sizeof(double) * n));
  CHECK(cudaMalloc(&dy, sizeof(double) * n));
  CHECK(cudaMalloc(&dscal, sizeof(double) * 2));
  const double scal[2] = {0.0, 1.0};
  CHECK(cudaMemcpy(drp, rp.data(), sizeof(int) * (n + 1), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dci, ci.data(), sizeof(int) * nnz, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dva, va.data(), sizeof(double) * nnz, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dscal, scal, sizeof(scal), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(dx, 0, sizeof(double) * n));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  cusparseHandle_t h;
  SCHECK(cusparseCreate(&h));
  SCHECK(cusparseSetStream(h, s));
  cusparseSpMatDescr_t A;
  SCHECK(cusparseCreateCsr(&A, n, n, nnz, drp, dci, dva, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
  cusparseDnVecDescr_t X, Y;
  SCHECK(cusparseCreateDnVec(&X, n, dx, CUDA_R_64F));
  SCHECK(cusparseCreateDnVec(&Y, n, dy, CUDA_R_64F));
  const double one = 1.0, zero = 0.0;
  size_t bytes = 0;
  SCHECK(cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, X, &zero, Y, CUDA_R_64F, CUSPARSE_SPMV_CSR_ALG1, &bytes));
  void* buf = nullptr;
  CHECK(cudaMalloc(&buf, std::max<size_t>(bytes, 16)));
  SCHECK(cusparseSpMV_preprocess(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, X, &zero, Y, CUDA_R_64F, CUSPARSE_SPMV_CSR_ALG1, buf));
  // The same arrays behind a descriptor never preprocessed, with a workspace of its own.
  cusparseSpMatDescr_t A0;
  SCHECK(cusparseCreateCsr(&A0, n, n, nnz, drp, dci, dva, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
  SCHECK(cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A0, X, &zero, Y, CUDA_R_64F, CUSPARSE_SPMV_CSR_ALG1, &bytes));
  void* buf0 = nullptr;
  CHECK(cudaMalloc(&buf0, std::max<size_t>(bytes, 16)));
  std::vector<char> junk(static_cast<size_t>(pollute_kb) * 1024, 1);

  struct variant {
    const char* name;
    bool device_scalars, set_stream, bind, preprocessed;
  };
  const variant vs[] = {
      {"host scalars, SetStream + 2 DnVecSetValues (aijpredict)", false, true, true, true},
      {"device scalars, SetStream + 2 DnVecSetValues", true, true, true, true},
      {"host scalars, 2 DnVecSetValues, no SetStream", false, false, true, true},
      {"device scalars, 2 DnVecSetValues, no SetStream", true, false, true, true},
      {"host scalars, SpMV alone", false, false, false, true},
      {"device scalars, SpMV alone", true, false, false, true},
      {"host scalars, SetStream + 2 DnVecSetValues, no preprocess", false, true, true, false},
      {"device scalars, 2 DnVecSetValues, no preprocess", true, false, true, false},
  };
  const int nv = sizeof(vs) / sizeof(vs[0]);
  std::vector<std::vector<double>> med(nv);
  std::vector<double> t(calls);
  for (int r = 0; r < rounds; ++r) {
    for (int k = 0; k < nv; ++k) {
      const variant& v = vs[(k + r) % nv];
      const int vi = (k + r) % nv;
      SCHECK(cusparseSetPointerMode(h, v.device_scalars ? CUSPARSE_POINTER_MODE_DEVICE : CUSPARSE_POINTER_MODE_HOST));
      const double* alpha = v.device_scalars ? dscal + 1 : &one;
      const double* beta = v.device_scalars ? dscal : &zero;
      for (int c = 0; c < calls; ++c) {
        if (c % 16 == 0) CHECK(cudaStreamSynchronize(s));
        for (size_t b = 0; b < junk.size(); b += 64) junk[b] = static_cast<char>(c);
        const auto t0 = clk::now();
        if (v.set_stream) SCHECK(cusparseSetStream(h, s));
        if (v.bind) {
          SCHECK(cusparseDnVecSetValues(X, dx));
          SCHECK(cusparseDnVecSetValues(Y, dy));
        }
        SCHECK(cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, alpha, v.preprocessed ? A : A0, X, beta, Y, CUDA_R_64F,
                            CUSPARSE_SPMV_CSR_ALG1, v.preprocessed ? buf : buf0));
        t[c] = std::chrono::duration<double, std::micro>(clk::now() - t0).count();
      }
      CHECK(cudaStreamSynchronize(s));
      med[vi].push_back(median(t));
    }
  }
  CHECK(cudaGetLastError());
  std::printf("cuSPARSE CSR ALG1 SpMV call sequence, %d x %d with %d nonzeros, %d calls x %d rounds, %d KiB written between calls\n", n, n, nnz, calls, rounds, pollute_kb);
  std::printf("%-58s %12s %12s\n", "variant", "us (med)", "- first");
  for (int k = 0; k < nv; ++k) {
    std::vector<double> d;
    for (int r = 0; r < rounds; ++r) d.push_back(med[k][r] - med[0][r]);
    std::printf("%-58s %12.3f %12.3f\n", vs[k].name, median(med[k]), median(d));
  }
  return 0;
}
