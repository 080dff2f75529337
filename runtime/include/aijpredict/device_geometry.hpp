// What the models need to know about a GPU, and the strip geometry of each kernel family.
//
// The fields are read from cudaDeviceGetAttribute by kernels/ (aijp::query_device_properties); this header
// is plain data so the host runtime and its tests never need CUDA. Nothing here is hard-coded per GPU.
#pragma once

#include <aijpredict/csr.hpp>

#include <string>

namespace aijp {

struct device_properties {
  int ordinal = -1;
  std::string name;
  std::string uuid;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  int max_threads_per_sm = 0;
  int max_threads_per_block = 0;
  int warp_size = 32;
  int l2_bytes = 0;
  int mem_bus_width_bits = 0;
  int mem_clock_khz = 0;
  size_type total_memory_bytes = 0;

  /// Theoretical DRAM bandwidth in GB/s from bus width and memory clock (double data rate).
  double peak_bandwidth_gbs() const { return 2.0 * mem_clock_khz * 1e3 * (mem_bus_width_bits / 8.0) / 1e9; }
  int warps_per_sm() const { return warp_size > 0 ? max_threads_per_sm / warp_size : 0; }
  std::string to_string() const;
};

/// A strip is the largest row block the GPU processes with a full load of threads in one wave
/// (Guo & Wang 2012; DESIGN.md section 1). `rows_per_strip` is counted in nonzeros for COO.
struct strip_geometry {
  size_type rows_per_strip = 0;
  size_type strips = 0;
};

/// Strip of a kernel that assigns `lanes` threads to each row (1 = thread per row: ELL, ELLPACK-R,
/// PELLR, JAD, CSR-scalar, SELL; 32 = warp per row: CSR-vector of Guo-Wang; 16 = Wang-Gu-Li CSR-V).
strip_geometry strips_for_lanes(const device_properties& dev, int lanes, size_type rows);
/// COO (one thread per nonzero): S_COO = N_SM x threads/SM nonzeros.
strip_geometry strips_for_coo(const device_properties& dev, size_type nnz);

}  // namespace aijp
