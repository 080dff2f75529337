#include <aijpredict/warmup.hpp>

#include <aijpredict/cache.hpp>
#include <aijpredict/gpu_matrix.hpp>
#include <aijpredict/measure.hpp>
#include <aijpredict/model_samples.hpp>

#include "cuda_check.hpp"
#include "device_buffer.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>

namespace aijp {

// The benchmark grid, in units of this GPU's strips (never hard-coded sizes): DESIGN.md section 3. The
// published grids (P_NZ up to 2048 and 10 strips on a 14-SM Fermi) would be billions of nonzeros on a
// 132-SM Hopper, so the thread-per-row series stops at 4 strips and P_NZ 64 (at most ~70M nonzeros), and
// the warp-per-row series (strips 32x smaller) keeps P_NZ up to 2048.
std::vector<warmup_point> warmup_grid(const device_properties& d, bool full)
{
  using L = device_generator_spec::lengths;
  using F = model::family;
  const size_type s1 = strips_for_lanes(d, 1, 1).rows_per_strip;
  const size_type s32 = strips_for_lanes(d, d.warp_size, 1).rows_per_strip;
  std::vector<warmup_point> g;
  auto add = [&](L dist, size_type rows, double mean, double param, size_type window, F fam) {
    device_generator_spec s;
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
  // Our model's extra coverage, the shapes real matrices have and the papers' grids lack: launch-bound small
  // matrices, banded columns (x reuse), skewed and heavy-tailed rows (one long row bounds a thread-per-row
  // layout), large stencil-like bands.
  const std::vector<aijp::size_type> small = full ? std::vector<aijp::size_type>{1000, 8000, 32000, 128000, 512000}
                                                  : std::vector<aijp::size_type>{2000, 32000, 256000};
  for (aijp::size_type rows : small) {
    for (double mean : full ? std::vector<double>{4, 12, 40} : std::vector<double>{5, 24}) {
      add(L::constant, rows, mean, 0, static_cast<aijp::size_type>(2 * mean + 2), F::other);  // banded
      add(L::normal, rows, mean, mean / 2, static_cast<aijp::size_type>(8 * mean + 8), F::other);
      add(L::normal, rows, mean, mean, rows, F::other);  // skewed, random columns
      if (full) add(L::uniform, rows, mean, mean, static_cast<aijp::size_type>(8 * mean + 8), F::other);
    }
    // Heavy tail: a few rows thousands long. The window caps a row at 32768 entries so a thread-per-row format
    // costs milliseconds, not seconds, per product.
    add(L::pareto, rows, 8, 2.1, std::min<aijp::size_type>(rows, 32768), F::other);
  }
  // Blocks of long rows on top of short ones, in the L2: the chain's latency per entry grows with the lanes
  // that walk it together (one long row: 85 ns per entry for jad on an H100, a block: 130 ns), which the
  // other families do not separate (their longest rows are alone, or every row is long).
  if (full) {
    for (double k : {1.0, 2.0, 8.0, 20.0, 32.0}) {
      for (aijp::size_type len : {400, 1600}) add(L::block, 16000, 8, k, len, F::other);
    }
  }
  for (aijp::size_type rows : full ? std::vector<aijp::size_type>{2000000, 8000000} : std::vector<aijp::size_type>{2000000}) {
    add(L::constant, rows, 7, 0, 16, F::other);    // 7-point-stencil-like band
    add(L::constant, rows / 4, 27, 0, 64, F::other);  // 27-point-like
    add(L::pareto, rows, 12, 2.1, 32768, F::other);
  }
  // Beyond the L2 (appended last, so the earlier points keep their seeds and keys and a samples file of the
  // previous full grid resumes with these only). Blocks of 1, 2, 8, 20 and 32 rows of 200000 contiguous
  // columns on 2M rows of 12 (columns in a window of 200000; 290-365 MB as CSR, x 16 MB): chains from DRAM
  // whose x fits in the L2, the regime of format_chain_scale_dram (fitted from 5 chain-bound samples; without
  // these csr_scalar had one, the 2M-row pareto, and csr_vector none), with both lane groups (1-16, 17-32)
  // holding the 2 each its DRAM lanes slope needs. Then random columns with x of 16 and 32 MB at the same 48M
  // nonzeros (the random matrices above have x of at most 8.7 MB): the L2-bound gathers of the held-out
  // 16 MB ones. Estimated cost on an H100, from the held-out 2M-row circuit (20 rows of 200000: 17-65 ms
  // per product for the 7 formats the chain bounds, 0.1 ms for the 4 others; ell, ellr and pellr do not
  // fit): time_spmv runs a product over 6 ms 5 times, so ~2-2.5 s per block; ~1 s per random matrix.
  if (full) {
    for (double k : {1.0, 2.0, 8.0, 20.0, 32.0}) add(L::block, 2000000, 12, k, 200000, F::other);
    add(L::normal, 2000000, 24, 6, 2000000, F::other);
    add(L::normal, 4000000, 12, 3, 4000000, F::other);
  }
  // cuSPARSE SELL's chains in the L2 run at two rates split by the layout's stored entries (sellValuesSize,
  // 32 x n_iter_natural; bandwidth_model_params::cusparse_sell_wide_padded), a step the points above place only
  // within a gap: no chain-bound product lies between the 1600-long blocks of 16000 rows (179.1K, fast) and
  // the normal rows of 8000 x 12 +- 12 (293.8K, slow) (docs/models.md, Session 29: cusparse_sell). So that the
  // fit places the step from measurements (on the H100 in session 30 all of these ran at the fast rate, and the
  // split moved to 287.6K: the slow rate is not a threshold in stored entries alone, docs/models.md, Session 30),
  // the blocks of 1600 and of 400 on more rows of 8 (appended last):
  // the same chains as the 16000-row blocks, 8 x rows + 32 x (long - 8) stored entries, 32 x pad more where
  // the block starts a slice (its longer row before it is then the longest of the slice above). 1600 on
  // 16800-28800 rows: 185344, 198176, 210944, 223776, 242944, 262240, 281344; 400 on 21600-33600 rows:
  // 185376, 198144, 211040, 223968, 243040, 262144, 281504 (both shapes at each size; long rows 1 and 32 in
  // turn, which the blocks measured the same). cuSPARSE SELL only: for the other formats these are twins of
  // the 16000-row blocks (the same chains) that would only add weight to two shapes in their fits. Estimated
  // cost on an H100, from the 16000-row blocks of the gated warm-up (cusparse_sell 19 and 70 us, ~1.7x that at
  // the slow rate; time_spmv's 9 samples of 1 ms): ~15 ms per point with generation and plan, ~0.2 s in all.
  if (full) {
    const std::vector<std::pair<aijp::size_type, aijp::size_type>> gap = {  // (rows, long)
        {16800, 1600}, {18400, 1600}, {20000, 1600}, {21600, 1600}, {24000, 1600}, {26400, 1600}, {28800, 1600},
        {21600, 400},  {23200, 400},  {24800, 400},  {26400, 400},  {28800, 400},  {31200, 400},  {33600, 400}};
    for (std::size_t i = 0; i < gap.size(); ++i) {
      add(L::block, gap[i].first, 8, i % 2 == 0 ? 1.0 : 32.0, gap[i].second, F::other);
      g.back().formats = {format_id::cusparse_sell};
    }
  }
  // Products whose y fits in 4 KiB (small_y_bytes): COO clears y with a cudaMemsetAsync before its product, and
  // runs ~0.6 us faster where y fits in 4 KiB (format_floor_small_y_us; H100, session 42, rows of 25: 5.2-5.8 us
  // for 128-512 rows against 6.4-6.6 us from 576; mbeacxc, 496 rows, 5.5-5.6 us against a floor of 5.8-6.2). Its
  // own floor there, from these (appended last: the earlier points keep their seeds). COO only: cuSPARSE CSR
  // stepped at the same rows of 25 (6.4 -> 7.1 us) but not on mbeacxc (6.7 us, the larger rows' floor), and with
  // these points its small-y floor put mbeacxc 7 % under; the other formats show no step. ~1 ms each.
  for (aijp::size_type rows : {320, 400, 480}) {
    for (double mean : {12.0, 40.0}) {
      add(L::constant, rows, mean, 0, rows, F::other);
      g.back().formats = {format_id::coo};
    }
  }
  return g;
}

bool warmup_point::measures(format_id f) const
{
  return formats.empty() || std::find(formats.begin(), formats.end(), f) != formats.end();
}

warmup_result run_warmup(const context& ctx, const warmup_options& opts)
{
  const auto t0 = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const auto& dev = ctx.device();
  const cache::store store(opts.cache_dir.empty() ? cache::default_directory() : std::filesystem::path(opts.cache_dir));
  const auto fp = make_fingerprint(dev);
  warmup_result res;
  res.cache_file = store.path_for(fp).string();
  res.samples_file = (store.directory() / (fp.file_stem() + (opts.gated ? ".gated" : "") + ".samples.jsonl")).string();
  std::filesystem::create_directories(store.directory());
  if (opts.restart) std::filesystem::remove(res.samples_file);
  auto previous = model::read_samples(res.samples_file);
  std::set<std::string> done;
  for (const auto& s : previous.samples) done.insert(s.matrix + "|" + format_name(s.format));
  std::vector<model::sample> samples = std::move(previous.samples);

  const auto grid = warmup_grid(dev, opts.full);
  detail::stream_guard sg;
  const cudaStream_t stream = sg.get();
  // The samples are timed as aijp_accuracy times the held-out matrices (timing_options' batches of 1 ms, 5
  // products first, the median of 9), with the total capped for the large ones, so that the two differ by the
  // machine alone. That alone does not make the launch-bound samples agree: with batches of 0.5 ms after 3
  // products cuSPARSE CSR's floor measured 9.46 us in the warm-up and 8.15 us in the report of the same run,
  // with these batches 7.6 and 8.47 us (H100, bench/results/2026-11-24_h100_session14_run2_accuracy.txt and
  // _session14_accuracy.txt): the host-bound floor drifts 10-16 % between phases of one run.
  timing_options topt;
  topt.max_total_ms = 60;
  topt.gated = opts.gated;
  // The gap between back-to-back kernels, timed as the samples are, at the start and then every
  // gap_every_s: each sample carries the last one, and the fit moves every sample to their median
  // (model::at_launch_gap), the gap the cache records. On one H100 the gap moved by ~0.16 us between two runs
  // of the same warm-up five minutes apart, and with it every product by that much per kernel
  // (docs/models.md, Session 47).
  constexpr double gap_every_s = 2.0;
  double gap_us = 0, gap_at = -gap_every_s;
  const auto current_gap = [&] {
    if (elapsed() - gap_at >= gap_every_s) {
      gap_us = measure_launch_gap(stream, dev, topt).median_us;
      gap_at = elapsed();
    }
    return gap_us;
  };
  size_t step = 0;
  for (const auto& gp : grid) {
    const std::string key = gp.key();
    if (opts.progress) opts.progress(step++, grid.size(), elapsed(), key);
    bool all_done = true;
    for (auto f : opts.formats) all_done = all_done && (!gp.measures(f) || done.count(key + "|" + format_name(f)));
    if (all_done) continue;
    auto m = generate_on_device<double>(gp.spec, stream);
    const auto v = m.view();
    model::matrix_features feat;
    feat.stats = compute_row_stats_device(v.rows, v.cols, v.row_ptr, stream);
    feat.value_bytes = sizeof(double);
    const locality_sample loc = sample_locality(v.rows, v.cols, v.row_ptr, v.col_idx, sizeof(double), stream);
    feat.x_sectors_per_nnz = loc.x_sectors_per_nnz;
    feat.sorted = loc.sorted;
    feat.x_mixture = loc.x_mixture;
    detail::device_buffer<double> x(v.cols), y(v.rows);
    AIJP_CUDA_CHECK(cudaMemsetAsync(x.data(), 0, v.cols * sizeof(double), stream));
    for (auto f : opts.formats) {
      if (!gp.measures(f) || done.count(key + "|" + format_name(f))) continue;
      plan_options po;
      po.forced = f;
      try {
        gpu_matrix<double> g(ctx, v, memory_space::device, po, stream);
        if (g.format() != f) continue;  // infeasible here: nothing to learn
        model::sample s;
        s.format = f;
        s.source = gp.source;
        s.features = feat;
        s.measured_us = time_spmv(g, x.data(), y.data(), stream, topt).median_us;
        s.launch_gap_us = current_gap();
        s.matrix = key;
        model::append_sample(res.samples_file, s);
        samples.push_back(s);
        ++res.measured_now;
      } catch (const device_out_of_memory&) {
        // this format does not fit next to the benchmark matrix: no sample
      }
    }
  }
  if (opts.progress) opts.progress(grid.size(), grid.size(), elapsed(), "measured");
  res.samples = samples.size();
  // Every sample as measured at the median gap (samples of an earlier warm-up without one stay as measured).
  res.launch_gap_us = model::median_launch_gap_us(samples);
  samples = model::at_launch_gap(std::move(samples), res.launch_gap_us);
  if (opts.fit) {
    cache::cache_entry initial;
    initial.device = fp;
    initial.created_by = "aijpredict warm-up";
    initial.created_at = cache::iso8601_utc_now();
    std::map<std::string, model::coefficient_table> fitted;
    for (const auto& name : model::model_names()) {
      auto mdl = model::make_model(name);
      mdl->fit(samples, dev);
      fitted[name] = mdl->coefficients();
      std::vector<double> err;
      for (const auto& s : samples) {
        if (const auto p = mdl->predict_us(s.format, s.features, dev)) err.push_back(model::relative_error(*p, s.measured_us));
      }
      std::sort(err.begin(), err.end());
      char line[160];
      if (err.empty()) {
        std::snprintf(line, sizeof(line), "%-20s no predictions (not enough samples of its benchmark families)", name.c_str());
      } else {
        double mean = 0;
        for (double e : err) mean += e;
        std::snprintf(line, sizeof(line), "%-20s %5zu predictions, in-sample mean error %5.1f %%, p95 %5.1f %%",
                      name.c_str(), err.size(), 100 * mean / err.size(), 100 * err[static_cast<size_t>(0.95 * (err.size() - 1))]);
      }
      res.lines.push_back(line);
    }
    store.update(
        fp,
        [&](cache::cache_entry& e) {
          for (const auto& [name, table] : fitted) e.coefficients[name] = table;
          // The launch floor of every prediction: never above the fastest SpMV measured.
          const double fastest = model::fastest_spmv_us(samples);
          const auto launch = e.device_metrics.find("launch_overhead_us");
          if (fastest > 0 && (launch == e.device_metrics.end() || fastest < launch->second)) {
            e.device_metrics["launch_overhead_us"] = fastest;
            e.provenance["launch_overhead_us"] = "fastest SpMV of the warm-up samples, " + cache::iso8601_utc_now();
          }
          // The gap the fit describes (the samples' median), and how it was timed.
          if (res.launch_gap_us > 0) {
            e.device_metrics["launch_gap_us"] = res.launch_gap_us;
            e.device_metrics["launch_gap_gated"] = opts.gated ? 1.0 : 0.0;
            e.provenance["launch_gap_us"] = std::string("median gap between back-to-back empty kernels") + (opts.gated ? " (gated)" : "") +
                                            " over the warm-up's samples, " + cache::iso8601_utc_now();
          } else {  // samples without a gap (an earlier warm-up's): a gap recorded before would not describe this fit
            e.device_metrics.erase("launch_gap_us");
            e.device_metrics.erase("launch_gap_gated");
            e.provenance.erase("launch_gap_us");
          }
          // The placeholder's per-format fixed costs, from the samples its fixed costs dominate.
          bandwidth_model_params params;
          if (params_from_metrics(e.device_metrics, params)) {
            params.l2_bytes = dev.l2_bytes;
            const auto used = model::fit_format_corrections(samples, dev, params);
            params_to_metrics(params, e.device_metrics);  // as aijp_refit --write-cache
            int fixed = 0, chains = 0, floors = 0;
            for (int f = 0; f < format_count; ++f) {
              fixed += used.fixed[f] > 0;
              chains += used.chain[f] > 0;
              floors += used.floor[f] > 0;
            }
            e.provenance["fixed_us"] = "placeholder fixed costs of " + std::to_string(fixed) + " formats, floors of " +
                                       std::to_string(floors) + " and chain factors of " + std::to_string(chains) +
                                       " from the warm-up's samples, " + cache::iso8601_utc_now();
          }
          e.provenance["warmup"] = std::string(opts.full ? "full" : "quick") + " grid, " + std::to_string(samples.size()) +
                                   " samples, " + cache::iso8601_utc_now();
        },
        initial);
  }
  res.seconds = elapsed();
  return res;
}

}  // namespace aijp
