// Experiment (not built by CMake): cost of the first cuSPARSE CSR ALG1 products with and without
// cusparseSpMV_preprocess on a 27-point stencil n^3, three descriptors in one process (pass 0 pays the lazy
// module loading). Build: nvcc -O2 -arch=sm_90 -o prep cusparse_first_product.cu -lcusparse
// Run: ./prep N PREPROCESS_FIRST   (bench/results/2026-11-23_h100_session5_cusparse_first_product.txt)
#include <cuda_runtime.h>
#include <cusparse.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#define CK(x) do { auto e = (x); if (e != 0) { std::printf("error %d at line %d\n", (int)e, __LINE__); std::exit(1); } } while (0)
static double now() { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 128; bool pre_first = argc > 2 ? std::atoi(argv[2]) : 1;
  long rows = (long)n * n * n; std::vector<int> rp(rows + 1); std::vector<int> ci; ci.reserve(rows * 27);
  for (long r = 0; r < rows; ++r) { int i = r / (n * n), j = (r / n) % n, k = r % n; rp[r] = ci.size();
    for (int a = -1; a <= 1; ++a) for (int b = -1; b <= 1; ++b) for (int c = -1; c <= 1; ++c) {
      int ii = i + a, jj = j + b, kk = k + c; if (ii < 0 || jj < 0 || kk < 0 || ii >= n || jj >= n || kk >= n) continue;
      ci.push_back((ii * n + jj) * n + kk); } }
  rp[rows] = ci.size(); long nnz = ci.size(); std::vector<double> v(nnz, 1.0), x(rows, 1.0);
  int *drp, *dci; double *dv, *dx, *dy; CK(cudaMalloc(&drp, (rows + 1) * 4)); CK(cudaMalloc(&dci, nnz * 4)); CK(cudaMalloc(&dv, nnz * 8));
  CK(cudaMalloc(&dx, rows * 8)); CK(cudaMalloc(&dy, rows * 8));
  CK(cudaMemcpy(drp, rp.data(), (rows + 1) * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(dci, ci.data(), nnz * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dv, v.data(), nnz * 8, cudaMemcpyHostToDevice)); CK(cudaMemcpy(dx, x.data(), rows * 8, cudaMemcpyHostToDevice));
  cudaStream_t s; CK(cudaStreamCreate(&s)); double t0 = now(); cusparseHandle_t h; CK(cusparseCreate(&h)); CK(cusparseSetStream(h, s));
  std::printf("lap27 %d^3: %ld rows, %ld nnz; cusparseCreate %.3f ms\n", n, rows, nnz, now() - t0);
  double one = 1, zero = 0;
  for (int pass = 0; pass < 3; ++pass) {
    bool pre = pass == 0 ? pre_first : (pass == 1 ? !pre_first : pre_first);
    cusparseSpMatDescr_t A; cusparseDnVecDescr_t X, Y;
    CK(cusparseCreateCsr(&A, rows, rows, nnz, drp, dci, dv, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
    CK(cusparseCreateDnVec(&X, rows, dx, CUDA_R_64F)); CK(cusparseCreateDnVec(&Y, rows, dy, CUDA_R_64F));
    CK(cudaStreamSynchronize(s)); t0 = now(); size_t bytes = 0;
    CK(cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, X, &zero, Y, CUDA_R_64F, CUSPARSE_SPMV_CSR_ALG1, &bytes));
    void* buf = nullptr; if (bytes) CK(cudaMalloc(&buf, bytes)); double t_buf = now() - t0; t0 = now();
    if (pre) CK(cusparseSpMV_preprocess(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, X, &zero, Y, CUDA_R_64F, CUSPARSE_SPMV_CSR_ALG1, buf));
    CK(cudaStreamSynchronize(s)); double t_pre = now() - t0; std::vector<double> t;
    for (int k = 0; k < 12; ++k) { t0 = now();
      CK(cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, X, &zero, Y, CUDA_R_64F, CUSPARSE_SPMV_CSR_ALG1, buf));
      CK(cudaStreamSynchronize(s)); t.push_back(now() - t0); }
    std::printf("pass %d, preprocess %s: buffer %zu B %.3f ms, preprocess %.3f ms, products (ms):", pass, pre ? "yes" : "no", bytes, t_buf, t_pre);
    for (double d : t) std::printf(" %.3f", d); std::printf("\n");
    cusparseDestroySpMat(A); cusparseDestroyDnVec(X); cusparseDestroyDnVec(Y); if (buf) cudaFree(buf);
  }
  return 0;
}
