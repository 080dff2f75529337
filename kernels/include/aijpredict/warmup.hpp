// The offline cache warm-up as a library call: the aijp_warmup tool and the PETSc option
// -mat_aijpredict_warmup both run it. Generates the models' benchmark matrices on the GPU, times every
// format through the production executor (forced plans), fits every model and writes the coefficients into
// this GPU's cache file. Resumable through a samples file next to the cache file.
#pragma once

#include <aijpredict/device.hpp>
#include <aijpredict/device_generate.hpp>
#include <aijpredict/models.hpp>

#include <functional>
#include <string>
#include <vector>

namespace aijp {

struct warmup_point {
  device_generator_spec spec;
  model::family source = model::family::other;
  /// Empty: every format of warmup_options::formats is timed on this matrix. Otherwise only those of them
  /// listed here (a point that samples one format's behaviour and would only add weight to one shape in
  /// the other formats' fits).
  std::vector<format_id> formats;
  std::string key() const { return spec.to_string(); }
  bool measures(format_id f) const;
};

/// The benchmark grid in units of this GPU's strips (quick or full; see the definition for the choices).
std::vector<warmup_point> warmup_grid(const device_properties& d, bool full);

struct warmup_options {
  bool full = false;                           ///< full grid (~3 min on an H200) instead of quick (~30 s)
  std::string cache_dir;                       ///< empty: cache::default_directory()
  bool restart = false;                        ///< discard earlier samples of this GPU first
  bool fit = true;                             ///< fit the models and write the coefficients
  std::vector<format_id> formats = all_formats();
  /// Time the samples gated (timing_options::gated): the products' device time without the host's issue
  /// rate. Kept in a samples file of its own (<device>.gated.samples.jsonl) so the two kinds never mix;
  /// the fitted coefficients then predict device time.
  bool gated = false;
  /// Called before each matrix and at the end: (done, total, elapsed seconds, what).
  std::function<void(size_t, size_t, double, const std::string&)> progress;
};

struct warmup_result {
  std::string cache_file;
  std::string samples_file;
  size_t samples = 0;             ///< samples available for the fit (earlier runs included)
  size_t measured_now = 0;        ///< samples measured in this call
  double seconds = 0;
  double launch_gap_us = 0;       ///< median gap between back-to-back kernels over the samples (0: none measured)
  std::vector<std::string> lines; ///< one per model: in-sample error summary
};

/// Runs the warm-up with `ctx` (its device constants are written to the cache by the context already).
warmup_result run_warmup(const context& ctx, const warmup_options& opts);

}  // namespace aijp
