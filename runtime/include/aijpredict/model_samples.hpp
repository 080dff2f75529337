// Measured samples on disk: one JSON object per line (JSON Lines), appended as the warm-up measures, so an
// interrupted warm-up resumes where it stopped and the accuracy report can refit offline.
#pragma once

#include <aijpredict/models.hpp>
#include <aijpredict/predict.hpp>

#include <string>
#include <vector>

namespace aijp::model {

/// One line of JSON for a sample (no newline).
std::string to_json_line(const sample& s);
/// Parses a line written by to_json_line; throws aijp::bad_input on anything else.
sample from_json_line(const std::string& line);

/// Appends one line to `path` (creating it) and flushes it to disk.
void append_sample(const std::string& path, const sample& s);

struct sample_file {
  std::vector<sample> samples;
  int bad_lines = 0;  ///< lines that did not parse (a write cut short by an interruption); skipped
};
/// Reads every sample of `path`; a missing file gives no samples.
sample_file read_samples(const std::string& path);

/// The fastest measured SpMV over `samples`, any format; 0 for no samples. The warm-up stores min(this, the
/// calibrated empty-kernel launch time) as the device's launch time, the floor of every prediction, which
/// must not exceed what real SpMVs measured the same way achieve (on an H100 an empty kernel timed back to
/// back took 5.2 us while small SpMVs took 4.5 us, 2026-11-22).
double fastest_spmv_us(const std::vector<sample>& samples);

/// The placeholder's input for a sample's matrix on `device`: its statistics, value size and sampled locality.
prediction_input prediction_input_of(const sample& s, const device_properties& device);

/// The median of the samples' launch gaps (sample::launch_gap_us), 0 where none was measured: the gap a fit on
/// them describes once at_launch_gap moved each sample to it.
double median_launch_gap_us(const std::vector<sample>& samples);

/// `samples` as measured at the gap `gap_us`: each sample with a gap of its own moves by its product's kernels
/// (launch_gaps_of) times (gap_us - its gap) and takes gap_us; samples without one, and every sample when
/// gap_us is 0, stay as they are. The warm-up fits its samples at the median of the gaps it measured, so a gap
/// that moves during the warm-up does not bend the fitted fixed costs.
std::vector<sample> at_launch_gap(std::vector<sample> samples, double gap_us);

/// aijp::fit_format_corrections over measured samples (the warm-up's, or aijp_refit's --train).
format_fit fit_format_corrections(const std::vector<sample>& samples, const device_properties& device, bandwidth_model_params& p);

}  // namespace aijp::model
