// Loading this library's CUDA modules ahead of their first launch (module_preload.hpp).
#include "module_preload.hpp"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <link.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <utility>
#include <string>
#include <vector>

namespace aijp::detail {
namespace {

std::vector<module_anchor>& anchors()
{
  static std::vector<module_anchor> a;  // filled during static initialisation, read afterwards
  return a;
}

// A driver entry point, through the runtime (no link-time dependence on libcuda); nullptr when the driver
// lacks it.
template <class Fn>
Fn driver_entry(const char* name, unsigned version)
{
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &q) != cudaSuccess || q != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<Fn>(fn);
}

struct driver_calls {
  PFN_cuFuncGetModule_v11000 func_get_module = nullptr;
  PFN_cuModuleGetFunctionCount_v12040 function_count = nullptr;
  PFN_cuModuleEnumerateFunctions_v12040 enumerate = nullptr;
  PFN_cuFuncIsLoaded_v12040 is_loaded = nullptr;
  PFN_cuFuncLoad_v12040 load = nullptr;
  bool complete() const { return func_get_module && function_count && enumerate && is_loaded && load; }
};

driver_calls find_driver_calls()
{
  driver_calls d;
  d.func_get_module = driver_entry<PFN_cuFuncGetModule_v11000>("cuFuncGetModule", 11000);
  d.function_count = driver_entry<PFN_cuModuleGetFunctionCount_v12040>("cuModuleGetFunctionCount", 12040);
  d.enumerate = driver_entry<PFN_cuModuleEnumerateFunctions_v12040>("cuModuleEnumerateFunctions", 12040);
  d.is_loaded = driver_entry<PFN_cuFuncIsLoaded_v12040>("cuFuncIsLoaded", 12040);
  d.load = driver_entry<PFN_cuFuncLoad_v12040>("cuFuncLoad", 12040);
  return d;
}

}  // namespace

module_anchor_registrar::module_anchor_registrar(const char* unit, int value_bytes, const void* kernel)
{
  anchors().push_back({unit, value_bytes, kernel});
}

long prefault_host_code()
{
  // The read-only segments (code, constants) of the object holding this function and of the C and C++
  // runtime libraries its host code calls into (exp, the mutexes, the allocator).
  struct ranges {
    std::uintptr_t self = 0;
    std::vector<std::pair<std::uintptr_t, std::uintptr_t>> r;
  } found;
  found.self = reinterpret_cast<std::uintptr_t>(&prefault_host_code);
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) -> int {
        auto& f = *static_cast<ranges*>(data);
        bool mine = false;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          const std::uintptr_t b = info->dlpi_addr + ph.p_vaddr;
          if (ph.p_type == PT_LOAD && f.self >= b && f.self < b + ph.p_memsz) mine = true;
        }
        const char* name = info->dlpi_name ? info->dlpi_name : "";
        const char* base = std::strrchr(name, '/') ? std::strrchr(name, '/') + 1 : name;
        bool runtime = false;
        for (const char* lib : {"libm.so", "libc.so", "libstdc++.so", "libgcc_s.so"}) {
          if (std::strncmp(base, lib, std::strlen(lib)) == 0) runtime = true;
        }
        if (!mine && !runtime) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD || (ph.p_flags & PF_W)) continue;
          const std::uintptr_t b = info->dlpi_addr + ph.p_vaddr;
          f.r.emplace_back(b, b + ph.p_memsz);
        }
        return 0;
      },
      &found);
  const long page = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
  long pages = 0;
  for (const auto& [begin, end] : found.r) {
    for (std::uintptr_t a = begin & ~static_cast<std::uintptr_t>(page - 1); a < end; a += page, ++pages) {
      (void)*reinterpret_cast<const volatile unsigned char*>(a < begin ? begin : a);  // a volatile read stays
    }
  }
  return pages;
}

kernel_preload_report preload_modules(int value_bytes)
{
  const auto t0 = std::chrono::steady_clock::now();
  kernel_preload_report r;
  const driver_calls drv = find_driver_calls();
  if (!drv.complete()) r.note = "the driver has no module enumeration (CUDA < 12.4): modules loaded, their functions at first use";
  std::vector<CUfunction> functions;
  for (const module_anchor& a : anchors()) {
    if (value_bytes != 0 && a.value_bytes != 0 && a.value_bytes != value_bytes) continue;
    // Getting the anchor's function loads its module (and the anchor).
    cudaFunction_t f = nullptr;
    cudaError_t e = cudaGetFuncBySymbol(&f, a.kernel);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      if (r.note.empty()) r.note = std::string(a.unit) + ": " + cudaGetErrorName(e);
      continue;
    }
    ++r.modules;
    r.units.emplace_back(a.unit);
    if (!drv.complete()) continue;
    CUmodule mod = nullptr;
    unsigned count = 0;
    if (drv.func_get_module(&mod, reinterpret_cast<CUfunction>(f)) != CUDA_SUCCESS || drv.function_count(&count, mod) != CUDA_SUCCESS) {
      if (r.note.empty()) r.note = std::string(a.unit) + ": its module could not be enumerated";
      continue;
    }
    functions.resize(count);
    if (count > 0 && drv.enumerate(functions.data(), count, mod) != CUDA_SUCCESS) {
      if (r.note.empty()) r.note = std::string(a.unit) + ": its functions could not be enumerated";
      continue;
    }
    for (CUfunction fn : functions) {
      ++r.functions;
      CUfunctionLoadingState state = CU_FUNCTION_LOADING_STATE_UNLOADED;
      if (drv.is_loaded(&state, fn) == CUDA_SUCCESS && state == CU_FUNCTION_LOADING_STATE_LOADED) continue;
      if (drv.load(fn) == CUDA_SUCCESS) {
        ++r.loaded_now;
      } else if (r.note.empty()) {
        r.note = std::string(a.unit) + ": a function could not be loaded";
      }
    }
  }
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace aijp::detail
