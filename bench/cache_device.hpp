// The GPU a cache file describes, for the host-only tools (aijp_refit, aijp_plan): its device properties from the
// entry's fingerprint and the placeholder's constants and corrections from its device_metrics. Dies with the tool's
// name (tool_support.hpp) when the file cannot be read or lacks the constants.
#pragma once

#include "tool_support.hpp"

#include <aijpredict/cache.hpp>
#include <aijpredict/device_geometry.hpp>
#include <aijpredict/predict.hpp>

#include <string>

namespace aijp::bench {

struct cache_device {
  cache::cache_entry entry;
  device_properties device;
  bandwidth_model_params params;
};

/// Reads `file` (any device's cache file or a shipped default); the properties a cache does not keep come from the
/// arguments (the resident threads per SM and the largest block of that GPU).
inline cache_device read_cache_device(const std::string& file, int threads_per_sm, int threads_per_block)
{
  const auto loaded = cache::read_file_any_device(file);
  if (loaded.status != cache::load_status::ok) die(loaded.message);
  cache_device c;
  c.entry = *loaded.entry;
  const auto& fp = c.entry.device;
  device_properties& dev = c.device;
  dev.name = fp.name;
  dev.uuid = fp.uuid;
  dev.cc_major = fp.cc_major;
  dev.cc_minor = fp.cc_minor;
  dev.sm_count = fp.sm_count;
  dev.l2_bytes = fp.l2_bytes;
  dev.mem_bus_width_bits = fp.mem_bus_width_bits;
  dev.mem_clock_khz = fp.mem_clock_khz;
  dev.max_threads_per_sm = threads_per_sm;
  dev.max_threads_per_block = threads_per_block;
  if (!params_from_metrics(c.entry.device_metrics, c.params)) {
    die(file + " lacks the device constants (stream_read_gbs, launch_overhead_us, cusparse_csr_overhead_us)");
  }
  c.params.l2_bytes = dev.l2_bytes;
  return c;
}

}  // namespace aijp::bench
