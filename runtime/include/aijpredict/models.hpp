// Performance models: features of a matrix -> predicted SpMV time of each storage format on one GPU.
//
// Several models live side by side behind one interface so that they can be compared on the same samples
// (bench accuracy report): the published strip models of Guo & Wang (2012/2014) and of Wang, Gu & Li
// (2017), and our own fitted model. Models are fitted from measured samples (the warm-up drives the real
// executor with forced formats over generated benchmark matrices) and their coefficients are stored in the
// per-device cache as model -> format -> name -> value.
//
// Host-only: no CUDA, no PETSc.
#pragma once

#include <aijpredict/device_geometry.hpp>
#include <aijpredict/formats.hpp>
#include <aijpredict/stats.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace aijp::model {

/// Benchmark family a sample comes from; the published models fit only their own families.
enum class family {
  constant,  ///< every row has the same length P_NZ (Guo-Wang instrumenting matrices)
  normal,    ///< row lengths from a normal distribution (Wang-Gu-Li)
  uniform,   ///< row lengths from a uniform distribution (Wang-Gu-Li)
  other,     ///< anything else: real matrices, stencils, power-law graphs (our model may fit on these)
};
const char* family_name(family f);

/// What a model may read about a matrix.
struct matrix_features {
  row_stats stats;
  int value_bytes = 8;
  /// Locality of the x gathers, sampled on the device: mean number of distinct 32-byte sectors of x touched
  /// by a group of 32 consecutive rows, divided by the nonzeros of the group (1 = every entry its own
  /// sector, ~1/4 for a banded double matrix). 0 = unknown.
  double x_sectors_per_nnz = 0.0;
  /// The locality in the order of the layouts that sort rows by length (0 = unknown): their x-gather
  /// feature adds aijp::sorted_scatter_bytes.
  sorted_locality sorted;
  /// How that locality spreads over the nonzeros (unknown: empty): the placeholder's mixture term.
  gather_mixture x_mixture;
};

/// One measurement: the time of y = A x for one format, median of many repetitions.
struct sample {
  format_id format = format_id::cusparse_csr;
  family source = family::other;
  matrix_features features;
  double measured_us = 0.0;
  std::string matrix;  ///< name, for reports
  /// The gap between back-to-back kernels measured near this sample (measure_launch_gap, microseconds; 0 =
  /// not measured, as in samples written before session 47). at_launch_gap moves the sample to another gap.
  double launch_gap_us = 0.0;
};

/// Coefficients as stored in the cache: format name -> coefficient name -> value.
using coefficient_table = std::map<std::string, std::map<std::string, double>>;

class performance_model {
 public:
  virtual ~performance_model() = default;
  /// Stable name used in the cache and in reports ("guo_wang", "wang_gu_li_normal", "wang_gu_li_uniform",
  /// "aijp").
  virtual std::string name() const = 0;
  /// Whether the model has a formula for this format (the published models cover only some formats).
  virtual bool covers(format_id f) const = 0;
  /// Predicted time in microseconds; nullopt if the format is not covered or the model is not fitted for it.
  virtual std::optional<double> predict_us(format_id f, const matrix_features& m, const device_properties& d) const = 0;
  /// Fits every covered format from the samples it can use; formats without enough samples stay unfitted.
  virtual void fit(const std::vector<sample>& samples, const device_properties& d) = 0;
  virtual coefficient_table coefficients() const = 0;
  /// Restores coefficients from the cache; unknown formats or names are ignored, missing ones leave that
  /// format unfitted.
  virtual void set_coefficients(const coefficient_table& c) = 0;
};

/// Names accepted by make_model.
std::vector<std::string> model_names();
/// Creates an unfitted model by name; throws aijp::bad_input listing the valid names otherwise.
std::unique_ptr<performance_model> make_model(const std::string& name);

/// Our model ("aijp") predicts T = sum_k c_k phi_k with c_k >= 0 per format. These are its coefficient names
/// (the keys under each format in coefficients()), in the order of aijp_features(); docs/models.md defines
/// each feature.
std::vector<std::string> aijp_coefficient_names();
/// The feature vector phi of the "aijp" model for format f: constant, working-set bytes within L2 and beyond
/// it, x-gather sector bytes, longest serial chain (in L2 / beyond), thread-slot iterations. Exposed for
/// reports (which feature explains what) and tests.
std::vector<double> aijp_features(format_id f, const matrix_features& m, const device_properties& d);

/// Relative error |predicted - measured| / measured (D_r of the papers).
inline double relative_error(double predicted, double measured) { return (predicted > measured ? predicted - measured : measured - predicted) / measured; }

}  // namespace aijp::model
