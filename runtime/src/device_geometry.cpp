#include <aijpredict/device_geometry.hpp>

#include <aijpredict/error.hpp>

#include <sstream>

namespace aijp {

namespace {
strip_geometry make_strips(size_type per_strip, size_type count)
{
  AIJP_ENSURE(per_strip > 0, bad_input, "device properties are not initialised (zero threads per SM)");
  return {per_strip, (count + per_strip - 1) / per_strip};
}
}  // namespace

strip_geometry strips_for_lanes(const device_properties& dev, int lanes, size_type rows)
{
  AIJP_ENSURE(lanes >= 1 && lanes <= dev.warp_size, bad_input, "lanes per row must be in [1, warp size]");
  return make_strips(static_cast<size_type>(dev.sm_count) * (dev.max_threads_per_sm / lanes), rows);
}

strip_geometry strips_for_coo(const device_properties& dev, size_type nnz)
{
  return make_strips(static_cast<size_type>(dev.sm_count) * dev.max_threads_per_sm, nnz);
}

std::string device_properties::to_string() const
{
  std::ostringstream os;
  os << name << " (sm_" << cc_major << cc_minor << ", " << sm_count << " SMs, " << max_threads_per_sm
     << " threads/SM, L2 " << l2_bytes / (1024 * 1024) << " MiB, " << total_memory_bytes / (1024 * 1024 * 1024)
     << " GiB, peak " << static_cast<int>(peak_bandwidth_gbs()) << " GB/s)";
  return os.str();
}

}  // namespace aijp
