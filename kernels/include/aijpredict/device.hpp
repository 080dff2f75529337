// Device discovery and the per-process execution context (host API; compiles with a plain C++ compiler).
#pragma once

#include <aijpredict/cache.hpp>
#include <aijpredict/device_geometry.hpp>
#include <aijpredict/models.hpp>
#include <aijpredict/online.hpp>
#include <aijpredict/predict.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace aijp {

/// True when a usable CUDA device is present; otherwise `why` (if given) says what is missing.
bool device_available(std::string* why = nullptr);

/// Properties of device `ordinal`, read with cudaDeviceGetAttribute / cudaGetDeviceProperties.
device_properties query_device_properties(int ordinal);

/// Free and total memory of the current device (cudaMemGetInfo: 22-53 us on the H100). Each call is kept as the
/// device's latest reading (recent_device_memory_info).
void device_memory_info(size_type* free_bytes, size_type* total_bytes);

/// The current device's latest reading by device_memory_info in this process, if it is at most max_age_ms old,
/// with the device bytes this process allocated from the driver since (detail::device_allocate, the block
/// pools) taken off the free bytes: no driver call. Allocations of other processes, and of this one outside
/// this library (PETSc, cuSPARSE), since the reading are not seen. False (outputs untouched) where there is
/// no such reading.
bool recent_device_memory_info(double max_age_ms, size_type* free_bytes, size_type* total_bytes);

/// The pool of CSR-copy blocks that destroyed matrices leave for later uploads (plan_options::upload_pool):
/// the bytes it holds unused now, and trim_upload_pool gives them back to the driver (waits for the device;
/// returns the bytes given back), e.g. before a large allocation outside this library. An allocation of ours
/// that runs out of device memory trims it itself.
std::size_t upload_pool_idle_bytes();
std::size_t trim_upload_pool();

/// Fingerprint for the coefficient cache: device identity, driver, runtime and cuSPARSE versions and the
/// hash of the compiled kernel set.
cache::device_fingerprint make_fingerprint(const device_properties& dev);

/// Measures the two device constants of the placeholder model: streaming read bandwidth (GB/s, a
/// read-reduce over a buffer several times the L2) and back-to-back launch time of an empty kernel (us).
bandwidth_model_params calibrate_device(const device_properties& dev, cudaStream_t stream);

/// What loading the library's CUDA modules at context creation did (context_options::preload).
struct kernel_preload_report {
  int modules = 0;          ///< modules reached (one per translation unit with kernels, per value type)
  int functions = 0;        ///< their functions
  int loaded_now = 0;       ///< of which were not loaded yet
  double ms = 0;            ///< host time it took
  std::string note;         ///< empty, or why part of it was not done (old driver, an error)
  std::vector<std::string> units;  ///< the modules reached, by source and variant ("csr.cu double part 2")
  /// The library's host code mapped ahead (detail::prefault_host_code): pages of its executable segment
  /// that were touched, and the host time it took.
  long code_pages = 0;
  double code_ms = 0;
};

/// Which of the library's CUDA modules the context loads at its creation (see kernels/src/module_preload.hpp).
enum class kernel_preload {
  none,    ///< lazy loading decides: each module is loaded inside the product that first launches it
  double_values,  ///< modules of double kernels and value-type neutral ones (the PETSc plugin with real double)
  float_values,   ///< modules of float kernels and neutral ones
  all
};

/// Loads the library's CUDA modules of `which` value type and every function in them (what a context does
/// at its creation). Calling it again loads nothing more. Never throws for a driver older than CUDA 12.4
/// (no module enumeration): each module is then loaded, its other functions at their first use (`note`).
kernel_preload_report preload_kernels(kernel_preload which);

struct context_options {
  std::string cache_dir;    ///< empty: aijp::cache::default_directory()
  bool use_cache = true;    ///< false: calibrate and never touch the file system
  /// Performance model whose fitted coefficients (from the cache, written by aijp_warmup) rank the formats;
  /// "placeholder" uses the bandwidth model only. Formats the model has no coefficients for use the
  /// placeholder's estimate.
  /// Default "placeholder": on the H200 held-out set (bench/results/2026-11-22_h200_accuracy.txt) the
  /// calibrated placeholder still selects better than the fitted models; see docs/models.md.
  std::string model = "placeholder";
  /// Online refinement (docs/models.md): plans time sampled products with CUDA events and refine
  /// per-format corrections of the model's predictions, which the analysis of every later plan applies.
  /// The corrections are loaded from the cache (model key online_<model>) and saved back, merged with what
  /// other processes wrote, by save_online() and by the destructor. Off by default: tools that measure
  /// the models themselves must see them uncorrected.
  bool online = false;
  /// How the context reads its device's cache file: called exactly once per construction with
  /// `use_cache`, after the device is known and before anything is written, with the file's path. Empty:
  /// aijp::cache::read_file_bytes. The PETSc plugin passes a reader with which one MPI rank per file reads
  /// it and broadcasts the bytes to the ranks that share it (a collective call; see petsc_plugin). The
  /// bytes get every check of a file read here (aijp::cache::store::load_from).
  std::function<cache::file_bytes(const std::filesystem::path&)> read_cache;
  /// Modules loaded at construction, so that no product pays for one (under lazy loading the first launch
  /// of a module's kernel loads the module: ~85 us + ~25 us per kernel it holds, on the H100 machine, after
  /// the GPU's queue drains, inside whichever product of whichever solve first converts to that format).
  /// Costs a few milliseconds once per process (kernel_preload_report::ms).
  kernel_preload preload = kernel_preload::double_values;
  /// Measure the gap between back-to-back kernels at construction (context::measure_launch_gap, ~10 ms) where
  /// the cache recorded the warm-up's: predictions then describe this run's launches, not the warm-up's.
  bool measure_launch_gap = false;
};

/// Everything per device and per process: properties, model parameters (from the per-device cache, or
/// calibrated once and written there), and the messages produced while loading them.
class context {
 public:
  explicit context(const context_options& opts = {});
  /// Saves the online corrections (save_online) if any were learned; never throws.
  ~context();
  context(const context&) = delete;
  context& operator=(const context&) = delete;
  const device_properties& device() const { return device_; }
  const bandwidth_model_params& model_params() const { return params_; }
  /// Where the parameters came from ("cache file <path>", "calibrated now, saved to <path>", ...).
  const std::string& params_source() const { return params_source_; }
  /// Warnings met on the way (corrupt cache file, unwritable directory); each one sentence.
  const std::vector<std::string>& warnings() const { return warnings_; }
  /// The fitted model in use, or nullptr when only the placeholder model is available.
  const model::performance_model* fitted_model() const { return model_.get(); }
  /// One line: which model ranks the formats and where its coefficients came from.
  const std::string& model_source() const { return model_source_; }
  /// Factor applied to the fitted model's times (1 unless the coefficients come from another GPU's default).
  double model_scale() const { return model_scale_; }
  /// What the module preload at construction did (all zero with kernel_preload::none).
  const kernel_preload_report& preload() const { return preload_; }

  /// Times the gap between back-to-back kernels now (aijp::measure_launch_gap, gated where the cache's was) and,
  /// where the cache recorded its warm-up's (bandwidth_model_params::launch_gap_us), moves every later
  /// prediction of this context by each product's kernels times the difference (launch_shift_us). Returns
  /// the gap in microseconds. The fitted terms describe products at the warm-up's gap, which on one H100 moved
  /// by ~0.16 us between runs (docs/models.md, Session 47). Call it between plans' analyses, not while another
  /// thread analyses a matrix with this context. Synchronises `stream`.
  double measure_launch_gap(cudaStream_t stream);
  /// The gap the last measure_launch_gap measured (0: never measured).
  double launch_gap_now() const { return launch_gap_now_; }

  /// The online corrections every plan of this context reads and refines; nullptr when online refinement
  /// is off. Shared: a plan keeps it alive even if the context is replaced.
  std::shared_ptr<online::corrections> online_corrections() const { return online_; }
  /// One line: where the corrections came from and how many observations they hold.
  std::string online_source() const;
  /// Merges the corrections into the cache file under its writer lock (another process's cells with more
  /// observations win, cell by cell; other models and metrics are untouched) when this process observed
  /// anything since loading or the last save. Returns the file written, or an empty path when there was
  /// nothing to save or the cache is disabled. Throws aijp::error when the file cannot be written.
  std::filesystem::path save_online();

 private:
  device_properties device_;
  bandwidth_model_params params_;
  std::string params_source_;
  std::vector<std::string> warnings_;
  std::shared_ptr<model::performance_model> model_;
  std::string model_source_ = "placeholder bandwidth model";
  double model_scale_ = 1.0;
  double launch_gap_now_ = 0;
  kernel_preload_report preload_;
  std::shared_ptr<online::corrections> online_;
  std::string online_key_;           // cache model key of the corrections (online_<effective model>)
  std::string online_loaded_from_;   // what the corrections were loaded from
  double online_saved_obs_ = 0;      // observations in the corrections when loaded / last saved
  std::filesystem::path cache_dir_;  // empty: cache disabled
  cache::device_fingerprint fingerprint_;

  void init_(const context_options& opts, cache::load_result& loaded);
  void load_online_(const context_options& opts, const cache::load_result& loaded);

  void calibrate_();
  void default_corrections_(const cache::device_fingerprint& fp);
  void load_default_model_(const context_options& opts, const cache::device_fingerprint& fp);
};

}  // namespace aijp
