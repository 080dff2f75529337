// Experiment: the launch shape of cuSPARSE SELL's SpMV (CUSPARSE_SPMV_SELL_ALG1, slice 32, as
// kernels/src/formats/cusparse_variants.cu builds it) and how its long slices compete.
//
// cuSPARSE SELL's chain-bound products are its worst-predicted (docs/models.md, Sessions 29-43): the warm-up's
// blocks of one long slice among short ones run at ~41 ns per step of the slice, 16 slices of 400 that are all
// long (496 rows, in the L2) at 95-124 ns, and the held-out matrices spread between (mbeacxc 57 ns, 23 % under;
// ego-Facebook 63 ns, 21 % over). The library cannot see inside the closed kernel; this program asks CUPTI for
// its kernels' names, grids, blocks, registers and shared memory, and times series that separate what may set
// the time of a step:
//   shape    rows of 8 (local columns) from 512 to 2M rows, and the session-29 size series (one row of 400 on
//            rows of 8, 120K-300K stored entries; 16 slices of one length, 152K-229K): which kernel, what grid;
//   compete  32768 rows of 8 with K slices (K = 0..64) whose 32 rows are all 400 long, the K slices consecutive
//            (packed) or spread over the matrix, their columns shared (every lane gathers the same column at a
//            step: one x sector), own (each row contiguous from its own random start: up to 32 sectors a step,
//            contiguous along the row) or random (400 random columns of the 32768);
//   alllong  R rows that are all 400 long (R = 64..4096): every slice walks the chain.
// Times are device times per product: the median over `reps` batches of back-to-back products after an untimed
// one (CUDA events, CUPTI off), as aijp_csell_switch.
// Prints TSV: series, rows, slices, K, placement, columns, stored, longest, median_us, min_us, kernels
// (name:grid:block:regs:smem per kernel of one product, traced with CUPTI).
// Built by CMake as aijp_cusparse_launch_shape when CUPTI is found (bench/CMakeLists.txt); --help.
#include "cusparse_sell_layout.hpp"

#include <cuda_runtime.h>
#include <cupti.h>
#include <cusparse.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#define UCHECK(call)                                                                        \
  do {                                                                                      \
    CUptiResult r_ = (call);                                                                \
    if (r_ != CUPTI_SUCCESS) {                                                              \
      const char* m_ = nullptr;                                                             \
      cuptiGetResultString(r_, &m_);                                                        \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, m_ ? m_ : "?"); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

namespace {

using sell_experiment::host_matrix;
using sell_experiment::slice;

struct kernel_record {
  std::string name;
  int grid[3], block[3];
  int regs, smem;
  double us;
};
std::mutex records_mutex;
std::vector<kernel_record> records;

std::string short_name(const char* mangled)
{
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && d != nullptr ? d : mangled;
  std::free(d);
  const auto paren = s.find('(');
  if (paren != std::string::npos) s.resize(paren);  // the name and its template arguments, not the parameters
  if (s.size() > 90) s = s.substr(0, 90) + "...";
  for (char& c : s) {
    if (c == '\t' || c == ':') c = c == ':' ? '.' : ' ';
  }
  return s;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records)
{
  *size = 1 << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid)
{
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    kernel_record r;
    r.name = short_name(k->name);
    r.grid[0] = k->gridX, r.grid[1] = k->gridY, r.grid[2] = k->gridZ;
    r.block[0] = k->blockX, r.block[1] = k->blockY, r.block[2] = k->blockZ;
    r.regs = k->registersPerThread;
    r.smem = k->staticSharedMemory + k->dynamicSharedMemory;
    r.us = static_cast<double>(k->end - k->start) * 1e-3;
    std::lock_guard<std::mutex> lock(records_mutex);
    records.push_back(std::move(r));
  }
  std::free(buffer);
}

// `len` columns in [lo, lo + span), one random column per equal segment (sorted, distinct), as the generators.
void spread(std::vector<int>& out, int len, long long lo, long long span, std::mt19937_64& g)
{
  out.clear();
  for (int k = 0; k < len; ++k) {
    const long long a = lo + k * span / len, b = lo + (k + 1) * span / len;
    out.push_back(static_cast<int>(a + static_cast<long long>(g() % static_cast<std::uint64_t>(std::max(1LL, b - a)))));
  }
}

// Rows of `base_len` with columns in a window of 2 x base_len + 2 around the row.
host_matrix short_rows(int rows, int base_len, std::mt19937_64& g)
{
  host_matrix m;
  m.rows = rows;
  m.cols.resize(rows);
  const long long w = std::min<long long>(rows, 2LL * base_len + 2);
  for (int r = 0; r < rows; ++r) {
    const long long lo = std::clamp<long long>(r - w / 2, 0, rows - w);
    spread(m.cols[r], std::min<int>(base_len, static_cast<int>(w)), lo, w, g);
  }
  return m;
}

enum class columns { shared, own, random };
const char* name_of(columns c) { return c == columns::shared ? "shared" : c == columns::own ? "own" : "random"; }

// Makes row r `len` long with columns of kind c (shared: first_col .. + len; own: contiguous from a random start;
// random: spread over all columns).
void long_row(host_matrix& m, int r, int len, columns c, int first_col, std::mt19937_64& g)
{
  auto& out = m.cols[r];
  if (c == columns::random) {
    spread(out, len, 0, m.rows, g);
    return;
  }
  const int start = c == columns::shared ? first_col : static_cast<int>(g() % static_cast<std::uint64_t>(m.rows - len));
  out.clear();
  for (int j = 0; j < len; ++j) out.push_back(start + j);
}

struct result {
  long long stored = 0;
  int longest = 0;
  double median_us = 0, min_us = 0;
  std::string kernels;
};

template <typename Value>
result time_sell(cusparseHandle_t h, cudaStream_t s, const host_matrix& m, int reps, int batch)
{
  const sell_experiment::device_sell<Value> d(h, m);
  for (int i = 0; i < 5; ++i) d.product();  // module load, warm L2
  CHECK(cudaStreamSynchronize(s));
  // One product traced.
  UCHECK(cuptiActivityFlushAll(1));
  {
    std::lock_guard<std::mutex> lock(records_mutex);
    records.clear();
  }
  UCHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  d.product();
  CHECK(cudaStreamSynchronize(s));
  UCHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  UCHECK(cuptiActivityFlushAll(1));
  std::string kernels;
  {
    std::lock_guard<std::mutex> lock(records_mutex);
    for (const auto& r : records) {
      char b[256];
      std::snprintf(b, sizeof b, "%s%s:%dx%dx%d:%dx%dx%d:%d:%d:%.2f", kernels.empty() ? "" : " | ", r.name.c_str(), r.grid[0],
                    r.grid[1], r.grid[2], r.block[0], r.block[1], r.block[2], r.regs, r.smem, r.us);
      kernels += b;
    }
  }
  const auto t = sell_experiment::time_batches(s, [&] { d.product(); }, reps, batch);
  return {d.stored(), d.longest(), t[t.size() / 2], t.front(), kernels};
}

void print(const char* series, const host_matrix& m, int k, const char* placement, const char* cols, const result& r)
{
  std::printf("%s\t%d\t%d\t%d\t%s\t%s\t%lld\t%d\t%.3f\t%.3f\t%s\n", series, m.rows, (m.rows + slice - 1) / slice, k, placement,
              cols, r.stored, r.longest, r.median_us, r.min_us, r.kernels.c_str());
  std::fflush(stdout);
}

}  // namespace

const char* const usage =
    "Usage: aijp_cusparse_launch_shape [--reps N] [--batch B] [--long L] [--series LIST]\n"
    "\n"
    "Traces cuSPARSE SELL's SpMV (slice 32, CUSPARSE_SPMV_SELL_ALG1, double) with CUPTI (kernel name, grid,\n"
    "block, registers, shared memory) and times it on three series (bench/experiments/cusparse_launch_shape.cu):\n"
    "shape (rows of 8 from 512 to 2M rows; one long row over 120K-300K stored entries; 16 slices of one length),\n"
    "compete (32768 rows of 8 with K = 0..64 slices of long rows, packed or spread, columns shared, own or\n"
    "random) and alllong (64..4096 rows all long). Writes TSV to stdout: series, rows, slices, K, placement,\n"
    "columns, stored, longest, median_us, min_us, kernels (name:grid:block:regs:smem_bytes:us per kernel).\n"
    "\n"
    "Options:\n"
    "  --reps N       samples per matrix (default 11); the median and minimum are printed\n"
    "  --batch B      products back to back per sample (default 10)\n"
    "  --long L       length of the long rows (default 400, at least 16)\n"
    "  --series LIST  comma-separated subset of shape,compete,alllong (default: all)\n"
    "  --help         this text\n";

int main(int argc, char** argv)
{
  sell_experiment::options o;
  o.reps = 11;
  o.series = "shape,compete,alllong";
  if (const int rc = sell_experiment::parse(argc, argv, usage, o, 16, true); rc >= 0) return rc;
  const int reps = o.reps, batch = o.batch, long_len = o.long_len;
  const std::string series = o.series;
  const auto wants = [&](const char* s) { return ("," + series + ",").find(std::string(",") + s + ",") != std::string::npos; };
  UCHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  cusparseHandle_t h;
  SCHECK(cusparseCreate(&h));
  SCHECK(cusparseSetStream(h, s));
  std::mt19937_64 g(20261207);
  std::printf("series\trows\tslices\tK\tplacement\tcolumns\tstored\tlongest\tmedian_us\tmin_us\tkernels\n");
  if (wants("shape")) {
    for (int rows : {512, 2048, 8192, 32768, 131072, 524288, 2097152}) {
      const host_matrix m = short_rows(rows, 8, g);
      print("shape", m, 0, "-", "local", time_sell<double>(h, s, m, reps, batch));
    }
    // One long row on rows of 8 (the session-29 block series), stored 32 x (8 x (slices - 1) + L).
    for (long long target : {120000LL, 160000LL, 180000LL, 200000LL, 240000LL, 300000LL}) {
      const int slices = static_cast<int>(std::max(16LL, (target / 32 - long_len) / 8 + 1));
      host_matrix m = short_rows(slices * slice, 8, g);
      long_row(m, 330, long_len, columns::shared, 1, g);
      print("shape_block", m, 1, "row330", "shared", time_sell<double>(h, s, m, reps, batch));
    }
    for (int len : {296, 336, 376, 416, 448}) {  // 16 slices of one length: mbeacxc's shape
      host_matrix m;
      m.rows = 512;
      m.cols.resize(512);
      for (int r = 0; r < 512; ++r) spread(m.cols[r], len, 0, 512, g);
      print("shape_wide", m, 16, "all", "spread512", time_sell<double>(h, s, m, reps, batch));
    }
  }
  if (wants("compete")) {
    const int rows = 32768, slices = rows / slice;
    for (columns c : {columns::shared, columns::own, columns::random}) {
      for (int k : {0, 1, 2, 4, 8, 16, 32, 64}) {
        for (int packed = 1; packed >= 0; --packed) {
          if (k <= 1 && packed == 0) continue;  // one slice: no placement to vary
          host_matrix m = short_rows(rows, 8, g);
          const int first_slice = 64;
          const int stride = packed ? 1 : std::max(1, (slices - first_slice) / std::max(1, k));
          for (int i = 0; i < k; ++i) {
            const int sl = first_slice + i * stride;
            for (int r = sl * slice; r < (sl + 1) * slice; ++r) long_row(m, r, long_len, c, 4097, g);
          }
          print("compete", m, k, packed ? "packed" : "spread", name_of(c), time_sell<double>(h, s, m, reps, batch));
        }
      }
    }
  }
  if (wants("alllong")) {
    for (columns c : {columns::shared, columns::random}) {
      for (int rows : {64, 256, 512, 1024, 4096}) {
        host_matrix m;
        m.rows = std::max(rows, long_len + 1);
        m.cols.resize(m.rows);
        for (int r = 0; r < m.rows; ++r) {
          if (r < rows) long_row(m, r, long_len, c, 1, g);
        }
        print("alllong", m, (rows + slice - 1) / slice, "first", name_of(c), time_sell<double>(h, s, m, reps, batch));
      }
    }
  }
  SCHECK(cusparseDestroy(h));
  CHECK(cudaStreamDestroy(s));
  return 0;
}
