// aijp_warmup: the offline cache warm-up. Generates the benchmark matrices of the performance models on the
// GPU, times every format through the production executor (aijp::gpu_matrix with a forced format), fits
// every model and writes the coefficients into this GPU's cache file. Resumable: samples are appended to a
// state file next to the cache as they are measured, and a restarted run skips what is already there.
#include <aijpredict/cache.hpp>
#include <aijpredict/device_generate.hpp>
#include <aijpredict/gpu_matrix.hpp>
#include <aijpredict/measure.hpp>
#include <aijpredict/model_samples.hpp>
#include <aijpredict/models.hpp>

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace {

const char* usage =
    "Usage: aijp_warmup [--quick | --full] [options]\n"
    "\n"
    "Fills this GPU's aijpredict coefficient cache: generates the benchmark matrices of the performance models\n"
    "on the GPU (constant row lengths on strip multiples for Guo-Wang; normal and uniform row lengths for\n"
    "Wang-Gu-Li; small, banded and random-column matrices for our own model), times every format through the\n"
    "same executor production uses (a forced plan), fits every model and writes the coefficients to the cache\n"
    "file of this GPU. Samples are appended to <cache>/<device>.samples.jsonl as they are measured; an\n"
    "interrupted run continues where it stopped.\n"
    "\n"
    "Options:\n"
    "  --quick           small grid, about 30 s on an H100/H200 (default)\n"
    "  --full            full grid, about 3 minutes\n"
    "  --cache-dir DIR   cache directory (default: $AIJPREDICT_CACHE_DIR, else $XDG_CACHE_HOME/aijpredict)\n"
    "  --restart         discard the samples of earlier runs of this GPU first\n"
    "  --formats LIST    only these formats (comma-separated; default all)\n"
    "  --no-fit          measure only; do not fit or write coefficients\n"
    "  --help            this text\n";

[[noreturn]] void die(const std::string& m)
{
  std::cerr << "aijp_warmup: " << m << "\n";
  std::exit(2);
}

struct grid_point {
  aijp::device_generator_spec spec;
  aijp::model::family source;
  std::string key() const { return spec.to_string(); }
};

// The benchmark grid, in units of this GPU's strips (never hard-coded sizes): DESIGN.md section 3. The
// published grids (P_NZ up to 2048 and 10 strips on a 14-SM Fermi) would be billions of nonzeros on a
// 132-SM Hopper, so the thread-per-row series stops at 4 strips and P_NZ 64 (at most ~70M nonzeros), and
// the warp-per-row series (strips 32x smaller) keeps P_NZ up to 2048.
std::vector<grid_point> make_grid(const aijp::device_properties& d, bool full)
{
  using L = aijp::device_generator_spec::lengths;
  using F = aijp::model::family;
  const aijp::size_type s1 = aijp::strips_for_lanes(d, 1, 1).rows_per_strip;
  const aijp::size_type s32 = aijp::strips_for_lanes(d, d.warp_size, 1).rows_per_strip;
  std::vector<grid_point> g;
  auto add = [&](L dist, aijp::size_type rows, double mean, double param, aijp::size_type window, F fam) {
    aijp::device_generator_spec s;
    s.dist = dist;
    s.rows = rows;
    s.cols = rows;
    s.mean = mean;
    s.param = param;
    s.window = window;
    s.seed = 1 + g.size();
    g.push_back({s, fam});
  };
  const std::vector<int> pnz1 = full ? std::vector<int>{2, 4, 8, 16, 32, 64} : std::vector<int>{4, 16, 64};
  const std::vector<int> strips1 = full ? std::vector<int>{1, 2, 3, 4} : std::vector<int>{1, 2};
  for (int p : pnz1) {
    for (int i : strips1) add(L::constant, s1 * i, p, 0, s1 * i, F::constant);
  }
  // Guo-Wang split the CSR-vector line at max threads per block (1024): two P_NZ above it per strip count.
  const std::vector<int> pnz32 = full ? std::vector<int>{32, 128, 512, 1024, 1536, 2048} : std::vector<int>{128, 512, 1536, 2048};
  const std::vector<int> strips32 = full ? std::vector<int>{1, 2, 4, 8} : std::vector<int>{1, 4};
  for (int p : pnz32) {
    for (int i : strips32) add(L::constant, s32 * i, p, 0, s32 * i, F::constant);
  }
  for (int p : full ? std::vector<int>{10, 40, 70, 100} : std::vector<int>{10, 100}) {
    add(L::constant, s1, p, 0, s1, F::constant);  // COO series: one strip, P_NZ 10..100 (Guo-Wang)
  }
  // Wang-Gu-Li: every mean on the same strip multiples (their fits pair means at a fixed strip count).
  for (double mean : full ? std::vector<double>{8, 24, 64, 128} : std::vector<double>{8, 32}) {
    for (int i : {1, 2}) {
      add(L::normal, s1 * i, mean, mean / 4, s1 * i, F::normal);
      add(L::uniform, s1 * i, mean, mean / 2, s1 * i, F::uniform);
    }
  }
  // Our model's extra coverage: launch-bound small matrices, banded columns (x reuse), skewed rows.
  for (aijp::size_type rows : full ? std::vector<aijp::size_type>{2000, 16000, 128000, 1000000}
                                   : std::vector<aijp::size_type>{4000, 64000, 1000000}) {
    for (double mean : {5.0, 24.0}) {
      add(L::constant, rows, mean, 0, static_cast<aijp::size_type>(2 * mean), F::other);  // banded
      add(L::normal, rows, mean, mean, rows, F::other);                                  // skewed, random
      if (full) add(L::uniform, rows, mean, mean, static_cast<aijp::size_type>(8 * mean), F::other);
    }
  }
  return g;
}

void progress(size_t done, size_t total, double elapsed_s, const std::string& what)
{
  const int width = 30;
  const int fill = total ? static_cast<int>(width * done / total) : width;
  const double eta = done ? elapsed_s / done * (total - done) : 0;
  char bar[64];
  std::memset(bar, ' ', width);
  std::memset(bar, '#', fill);
  bar[width] = '\0';
  if (isatty(2)) {
    std::fprintf(stderr, "\r[%s] %zu/%zu  %5.1f s  ETA %4.0f s  %-60.60s", bar, done, total, elapsed_s, eta, what.c_str());
    if (done == total) std::fprintf(stderr, "\n");
  } else {
    std::fprintf(stderr, "[%s] %zu/%zu  %5.1f s  ETA %4.0f s  %s\n", bar, done, total, elapsed_s, eta, what.c_str());
  }
}

}  // namespace

int main(int argc, char** argv)
{
  bool full = false, restart = false, fit = true;
  std::string cache_dir;
  std::vector<aijp::format_id> formats = aijp::all_formats();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << usage;
      return 0;
    } else if (a == "--quick") {
      full = false;
    } else if (a == "--full") {
      full = true;
    } else if (a == "--restart") {
      restart = true;
    } else if (a == "--no-fit") {
      fit = false;
    } else if (a == "--cache-dir" && i + 1 < argc) {
      cache_dir = argv[++i];
    } else if (a == "--formats" && i + 1 < argc) {
      try {
        formats = aijp::parse_format_list(argv[++i]);
      } catch (const std::exception& e) {
        die(e.what());
      }
    } else {
      die("unknown or incomplete option '" + a + "' (see --help)");
    }
  }
  std::string why;
  if (!aijp::device_available(&why)) die(why + ": the warm-up needs a GPU");

  const auto t0 = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  try {
    aijp::context_options co;
    co.cache_dir = cache_dir;
    aijp::context ctx(co);  // loads or measures the device constants (and writes them to the cache)
    for (const auto& w : ctx.warnings()) std::cerr << "aijp_warmup: " << w << "\n";
    const auto& dev = ctx.device();
    const aijp::cache::store store(cache_dir.empty() ? aijp::cache::default_directory() : std::filesystem::path(cache_dir));
    const auto fp = aijp::make_fingerprint(dev);
    const std::string state = (store.directory() / (fp.file_stem() + ".samples.jsonl")).string();
    std::filesystem::create_directories(store.directory());
    if (restart) std::filesystem::remove(state);
    auto previous = aijp::model::read_samples(state);
    if (previous.bad_lines) std::cerr << "aijp_warmup: skipped " << previous.bad_lines << " unreadable lines of " << state << "\n";
    std::set<std::string> done;
    for (const auto& s : previous.samples) done.insert(s.matrix + "|" + aijp::format_name(s.format));

    const auto grid = make_grid(dev, full);
    std::fprintf(stderr, "aijp_warmup: %s grid, %zu matrices x %zu formats on %s; state %s (%zu samples already)\n",
                 full ? "full" : "quick", grid.size(), formats.size(), dev.name.c_str(), state.c_str(),
                 previous.samples.size());
    cudaStream_t stream;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) die("cannot create a CUDA stream");
    aijp::timing_options topt;
    topt.warmup = 3;
    topt.min_samples = 5;
    topt.min_sample_ms = 0.1;
    topt.max_total_ms = 40;
    std::vector<aijp::model::sample> samples = previous.samples;
    size_t step = 0;
    for (const auto& gp : grid) {
      ++step;
      const std::string key = gp.key();
      bool all_done = true;
      for (auto f : formats) all_done = all_done && done.count(key + "|" + aijp::format_name(f));
      progress(step - 1, grid.size(), elapsed(), key);
      if (all_done) continue;
      auto m = aijp::generate_on_device<double>(gp.spec, stream);
      const auto v = m.view();
      aijp::model::matrix_features feat;
      feat.stats = aijp::compute_row_stats_device(v.rows, v.cols, v.row_ptr, stream);
      feat.value_bytes = sizeof(double);
      feat.x_sectors_per_nnz = aijp::sample_x_sectors_per_nnz(v.rows, v.cols, v.row_ptr, v.col_idx, 8, stream);
      double *x = nullptr, *y = nullptr;
      if (cudaMalloc(reinterpret_cast<void**>(&x), v.cols * sizeof(double)) != cudaSuccess ||
          cudaMalloc(reinterpret_cast<void**>(&y), v.rows * sizeof(double)) != cudaSuccess) {
        die("out of device memory for the vectors of " + key);
      }
      cudaMemsetAsync(x, 0, v.cols * sizeof(double), stream);
      for (auto f : formats) {
        if (done.count(key + "|" + aijp::format_name(f))) continue;
        aijp::plan_options po;
        po.forced = f;
        try {
          aijp::gpu_matrix<double> g(ctx, v, aijp::memory_space::device, po, stream);
          if (g.format() != f) continue;  // infeasible here: nothing to learn
          const auto t = aijp::time_spmv(g, x, y, stream, topt);
          aijp::model::sample s;
          s.format = f;
          s.source = gp.source;
          s.features = feat;
          s.measured_us = t.median_us;
          s.matrix = key;
          aijp::model::append_sample(state, s);
          samples.push_back(s);
        } catch (const aijp::device_out_of_memory& e) {
          std::fprintf(stderr, "\naijp_warmup: %s on %s: out of memory, skipped\n", aijp::format_name(f), key.c_str());
        }
      }
      cudaFree(x);
      cudaFree(y);
    }
    progress(grid.size(), grid.size(), elapsed(), "measured");
    cudaStreamDestroy(stream);

    if (!fit) return 0;
    std::fprintf(stderr, "aijp_warmup: fitting %zu models on %zu samples\n", aijp::model::model_names().size(), samples.size());
    aijp::cache::cache_entry initial;
    initial.device = fp;
    initial.created_by = "aijp_warmup";
    initial.created_at = aijp::cache::iso8601_utc_now();
    std::map<std::string, aijp::model::coefficient_table> fitted;
    for (const auto& name : aijp::model::model_names()) {
      auto model = aijp::model::make_model(name);
      model->fit(samples, dev);
      fitted[name] = model->coefficients();
      // In-sample error, as a sanity line (the accuracy report measures held-out matrices).
      std::vector<double> err;
      for (const auto& s : samples) {
        if (const auto p = model->predict_us(s.format, s.features, dev)) err.push_back(aijp::model::relative_error(*p, s.measured_us));
      }
      std::sort(err.begin(), err.end());
      if (!err.empty()) {
        double mean = 0;
        for (double e : err) mean += e;
        std::fprintf(stderr, "  %-20s %5zu predictions, in-sample mean error %5.1f %%, p95 %5.1f %%\n", name.c_str(),
                     err.size(), 100 * mean / err.size(), 100 * err[static_cast<size_t>(0.95 * (err.size() - 1))]);
      }
    }
    store.update(
        fp,
        [&](aijp::cache::cache_entry& e) {
          for (const auto& [name, table] : fitted) e.coefficients[name] = table;
          e.provenance["warmup"] = std::string(full ? "full" : "quick") + " grid, " + std::to_string(samples.size()) +
                                   " samples, " + aijp::cache::iso8601_utc_now();
        },
        initial);
    std::fprintf(stderr, "aijp_warmup: wrote %s (%.1f s)\n", store.path_for(fp).c_str(), elapsed());
  } catch (const std::exception& e) {
    die(e.what());
  }
  return 0;
}
