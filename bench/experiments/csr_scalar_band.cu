// Experiment (session 49): why csr_scalar takes 1.17-1.23x longer on the 8M-row band (rows of 7, columns
// i-3..i+3) than on the 8M-row 7-point Laplacian (200^3, rows of <= 7) on the H100, while ELL, SELL,
// csr_vector and cuSPARSE CSR differ by -3..+2 % between the two (docs/models.md, Session 48).
//
// Stand-alone (no library code): builds the CSR matrices on the host, copies them to the GPU and times
// one-thread-per-row kernels with CUDA events (warm-up, then batches of back-to-back launches; the median
// batch). Matrices:
//   band          rows of 7, columns i + d, d = -3..3 (the suite's gen:banded:rows=8000000,bw=3)
//   lap7          200^3 7-point Laplacian (the suite's gen:lap7:200x200x200), columns sorted
//   spreadS       rows of 7, columns i + d*S, d = -3..3 (S = 16: consecutive steps one 128-byte line apart;
//                 S = 64: no step shares a line with another): the band's pattern with less overlap of the
//                 x lines of consecutive steps
//   band_rev      the band with each row's columns in reverse order (same lines, other step order)
// With --long, rows where session 39's chunks lost (docs/models.md, Session 39), 2M rows:
//   rand24        row lengths round(N(24, 6^2)) (at least 1), columns uniform over all (the suite's gen:normal)
//   local24       the same lengths, columns uniform in a window of +-64 around the diagonal
//   rand100       rows of 100 columns uniform over all (0.5M rows)
// Kernels: the library's csr_scalar loop (`#pragma unroll 4`), unroll 1, unroll 8, a "chunked" loop that loads a
// row's column indices and values 8 at a time, then its x entries, then the fmas, and "first8": the first 8 entries
// of a row so, then the library's loop for the rest (one round for rows of at most 8, long rows as the library's).
// Session 49's committed run (bench/results/2026-12-08_h100_session49_csr_scalar_band.txt) had neither first8
// nor --long.
// --ncu: run each (matrix, kernel) once, for `ncu --kernel-name regex:spmv` to read counters.
#include "experiment_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

struct host_csr {
  std::string name;
  int rows = 0;
  std::vector<int> row_ptr, col;
};

static host_csr make_offsets(const std::string& name, int rows, const std::vector<long>& offsets)
{
  host_csr a;
  a.name = name;
  a.rows = rows;
  a.row_ptr.assign(1, 0);
  a.col.reserve(static_cast<size_t>(rows) * offsets.size());
  for (int i = 0; i < rows; ++i) {
    for (long d : offsets) {
      const long j = i + d;
      if (j >= 0 && j < rows) a.col.push_back(static_cast<int>(j));
    }
    a.row_ptr.push_back(static_cast<int>(a.col.size()));
  }
  return a;
}

// Rows of `len(i)` distinct columns, sorted: uniform over [0, rows) (window 0) or within +-window of the diagonal.
template <typename LenFn>
static host_csr make_random(const std::string& name, int rows, LenFn len, int window, std::uint64_t seed)
{
  host_csr a;
  a.name = name;
  a.rows = rows;
  a.row_ptr.assign(1, 0);
  std::mt19937_64 gen(seed);
  std::vector<int> row;
  for (int i = 0; i < rows; ++i) {
    const int n = len(gen);
    row.clear();
    while (static_cast<int>(row.size()) < n) {
      const long j = window > 0 ? i - window + static_cast<long>(gen() % (2 * window + 1)) : static_cast<long>(gen() % rows);
      if (j < 0 || j >= rows || std::find(row.begin(), row.end(), static_cast<int>(j)) != row.end()) continue;
      row.push_back(static_cast<int>(j));
    }
    std::sort(row.begin(), row.end());
    a.col.insert(a.col.end(), row.begin(), row.end());
    a.row_ptr.push_back(static_cast<int>(a.col.size()));
  }
  return a;
}

static host_csr make_lap7(int n)
{
  host_csr a;
  a.name = "lap7";
  a.rows = n * n * n;
  a.row_ptr.assign(1, 0);
  a.col.reserve(static_cast<size_t>(a.rows) * 7);
  const long plane = static_cast<long>(n) * n;
  for (int z = 0; z < n; ++z)
    for (int y = 0; y < n; ++y)
      for (int x = 0; x < n; ++x) {
        const long i = z * plane + static_cast<long>(y) * n + x;
        if (z > 0) a.col.push_back(static_cast<int>(i - plane));
        if (y > 0) a.col.push_back(static_cast<int>(i - n));
        if (x > 0) a.col.push_back(static_cast<int>(i - 1));
        a.col.push_back(static_cast<int>(i));
        if (x < n - 1) a.col.push_back(static_cast<int>(i + 1));
        if (y < n - 1) a.col.push_back(static_cast<int>(i + n));
        if (z < n - 1) a.col.push_back(static_cast<int>(i + plane));
        a.row_ptr.push_back(static_cast<int>(a.col.size()));
      }
  return a;
}

template <int unroll>
__global__ void __launch_bounds__(256) spmv_scalar(int rows, const int* __restrict__ rp, const int* __restrict__ ci,
                                                   const double* __restrict__ v, const double* __restrict__ x,
                                                   double* __restrict__ y)
{
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const int end = rp[row + 1];
  double sum = 0;
#pragma unroll unroll
  for (int k = rp[row]; k < end; ++k) sum = fma(v[k], __ldg(x + ci[k]), sum);
  y[row] = sum;
}

// Entries [k0, min(k0 + 8, end)) of a row loaded together (column indices and values, then x; the rest predicated
// off), then added to `sum` in order.
__device__ __forceinline__ double chunk8(int k0, int end, const int* __restrict__ ci, const double* __restrict__ v,
                                         const double* __restrict__ x, double sum)
{
  int c[8];
  double a[8], xv[8];
#pragma unroll
  for (int s = 0; s < 8; ++s) {
    const bool in = k0 + s < end;
    c[s] = in ? ci[k0 + s] : 0;
    a[s] = in ? v[k0 + s] : 0.0;
  }
#pragma unroll
  for (int s = 0; s < 8; ++s) xv[s] = __ldg(x + c[s]);
#pragma unroll
  for (int s = 0; s < 8; ++s) sum = fma(a[s], xv[s], sum);
  return sum;
}

// The whole row in chunks of 8.
__global__ void __launch_bounds__(256) spmv_chunked(int rows, const int* __restrict__ rp, const int* __restrict__ ci,
                                                    const double* __restrict__ v, const double* __restrict__ x,
                                                    double* __restrict__ y)
{
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const int end = rp[row + 1];
  double sum = 0;
  for (int k0 = rp[row]; k0 < end; k0 += 8) sum = chunk8(k0, end, ci, v, x, sum);
  y[row] = sum;
}

// The first 8 entries of the row as one chunk, then the library's loop.
__global__ void __launch_bounds__(256) spmv_first8(int rows, const int* __restrict__ rp, const int* __restrict__ ci,
                                                   const double* __restrict__ v, const double* __restrict__ x,
                                                   double* __restrict__ y)
{
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const int begin = rp[row], end = rp[row + 1];
  double sum = chunk8(begin, end, ci, v, x, 0.0);
#pragma unroll 4
  for (int k = begin + 8; k < end; ++k) sum = fma(v[k], __ldg(x + ci[k]), sum);
  y[row] = sum;
}

using kernel_t = void (*)(int, const int*, const int*, const double*, const double*, double*);

struct kernel_entry {
  const char* name;
  kernel_t fn;
};

int main(int argc, char** argv)
{
  bool ncu = false, small = false, long_rows = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--ncu")) ncu = true;
    else if (!std::strcmp(argv[i], "--small")) small = true;
    else if (!std::strcmp(argv[i], "--long")) long_rows = true;
    else if (!std::strcmp(argv[i], "--help")) {
      std::printf("usage: csr_scalar_band [--ncu] [--small] [--long]\n  times one-thread-per-row SpMV variants on the band, "
                  "the 7-point Laplacian and spread bands (see the source's header)\n  --ncu: each (matrix, kernel) "
                  "once, for ncu\n  --small: 64^3 rows instead of 200^3 (a quick check)\n  --long: also rows of about 24 (random, "
                  "local) and of 100 (random)\n");
      return 0;
    } else {
      std::fprintf(stderr, "csr_scalar_band: unknown argument '%s' (see --help)\n", argv[i]);
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "csr_scalar_band: no usable CUDA device: this experiment needs a GPU\n");
    return 1;
  }
  const int n = small ? 64 : 200;
  const int rows = n * n * n;
  std::vector<host_csr> mats;
  mats.push_back(make_offsets("band", rows, {-3, -2, -1, 0, 1, 2, 3}));
  mats.push_back(make_lap7(n));
  mats.push_back(make_offsets("spread16", rows, {-48, -32, -16, 0, 16, 32, 48}));
  mats.push_back(make_offsets("spread64", rows, {-192, -128, -64, 0, 64, 128, 192}));
  mats.push_back(make_offsets("band_rev", rows, {3, 2, 1, 0, -1, -2, -3}));
  if (long_rows) {
    const int long_count = rows / 4;  // 2M rows of 200^3 (65536 of 64^3)
    const auto normal24 = [](std::mt19937_64& g) {
      std::normal_distribution<double> d(24.0, 6.0);
      return std::max(1, static_cast<int>(std::lround(d(g))));
    };
    mats.push_back(make_random("rand24", long_count, normal24, 0, 2));
    mats.push_back(make_random("local24", long_count, normal24, 64, 3));
    mats.push_back(make_random("rand100", long_count / 4, [](std::mt19937_64&) { return 100; }, 0, 4));
  }
  const kernel_entry kernels[] = {{"unroll4", spmv_scalar<4>},
                                  {"unroll1", spmv_scalar<1>},
                                  {"unroll8", spmv_scalar<8>},
                                  {"first8", spmv_first8},
                                  {"chunked", spmv_chunked}};
  std::mt19937_64 gen(1);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> hx(rows);
  for (auto& e : hx) e = u(gen);
  double *x, *y;
  CHECK(cudaMalloc(&x, sizeof(double) * rows));
  CHECK(cudaMalloc(&y, sizeof(double) * rows));
  CHECK(cudaMemcpy(x, hx.data(), sizeof(double) * rows, cudaMemcpyHostToDevice));
  cudaEvent_t t0, t1;
  CHECK(cudaEventCreate(&t0));
  CHECK(cudaEventCreate(&t1));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, %d SMs; rows %d (--long: %d, rand100 %d); double values, int32 indices; median of 9 batches of 20 "
              "launches (us per product)\n", prop.name, prop.multiProcessorCount, rows, rows / 4, rows / 16);
  std::printf("%-10s %10s", "matrix", "nnz");
  for (const auto& k : kernels) std::printf(" %9s", k.name);
  std::printf("   max |y - ref| / sum |a x|\n");
  for (const auto& m : mats) {
    const int mrows = m.rows;  // columns < mrows <= rows: x covers them
    const size_t nnz = m.col.size();
    std::vector<double> hv(nnz);
    for (auto& e : hv) e = u(gen);
    std::vector<double> ref(mrows), scale(mrows);
    for (int i = 0; i < mrows; ++i) {
      double s = 0, t = 0;
      for (int k = m.row_ptr[i]; k < m.row_ptr[i + 1]; ++k) {
        s += hv[k] * hx[m.col[k]];
        t += std::abs(hv[k] * hx[m.col[k]]);
      }
      ref[i] = s;
      scale[i] = t;
    }
    int *rp, *ci;
    double* v;
    CHECK(cudaMalloc(&rp, sizeof(int) * (mrows + 1)));
    CHECK(cudaMalloc(&ci, sizeof(int) * nnz));
    CHECK(cudaMalloc(&v, sizeof(double) * nnz));
    CHECK(cudaMemcpy(rp, m.row_ptr.data(), sizeof(int) * (mrows + 1), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(ci, m.col.data(), sizeof(int) * nnz, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(v, hv.data(), sizeof(double) * nnz, cudaMemcpyHostToDevice));
    const int blocks = (mrows + 255) / 256;
    std::printf("%-10s %10zu", m.name.c_str(), nnz);
    double worst = 0;
    for (const auto& k : kernels) {
      if (ncu) {
        k.fn<<<blocks, 256>>>(mrows, rp, ci, v, x, y);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        std::printf(" %9s", "ran");
      } else {
        for (int w = 0; w < 10; ++w) k.fn<<<blocks, 256>>>(mrows, rp, ci, v, x, y);
        CHECK(cudaGetLastError());
        std::vector<float> batch;
        for (int b = 0; b < 9; ++b) {
          CHECK(cudaEventRecord(t0));
          for (int r = 0; r < 20; ++r) k.fn<<<blocks, 256>>>(mrows, rp, ci, v, x, y);
          CHECK(cudaEventRecord(t1));
          CHECK(cudaEventSynchronize(t1));
          float ms = 0;
          CHECK(cudaEventElapsedTime(&ms, t0, t1));
          batch.push_back(ms * 1000.f / 20.f);
        }
        std::sort(batch.begin(), batch.end());
        std::printf(" %9.1f", batch[4]);
      }
      std::vector<double> hy(mrows);
      CHECK(cudaMemcpy(hy.data(), y, sizeof(double) * mrows, cudaMemcpyDeviceToHost));
      for (int i = 0; i < mrows; ++i)
        worst = std::max(worst, std::abs(hy[i] - ref[i]) / std::max(1e-300, scale[i]));
    }
    std::printf("   %.1e%s\n", worst, worst > 1e-12 ? "  WRONG" : "");
    CHECK(cudaFree(rp));
    CHECK(cudaFree(ci));
    CHECK(cudaFree(v));
  }
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  return 0;
}
