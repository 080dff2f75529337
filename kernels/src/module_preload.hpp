// Loading this library's CUDA modules ahead of their first launch.
//
// Under lazy loading (CUDA 12's default) a module is loaded at the first launch of any of its kernels, and
// each further kernel of it at its own first launch: ~85 us + ~25 us per kernel the module holds, plus ~30 us
// per further kernel, on the thread issuing the launch and only after the GPU's queued work has drained
// (bench/results/2026-11-24_h100_session14_module_load.txt). Inside a product of a short solve that is a
// chunk of host time no staged step can split. Every translation unit with kernels therefore registers an
// anchor (AIJP_MODULE_ANCHOR); preload_modules() reaches each anchor's module through the driver and loads
// all of its functions, which the context does once at its creation (context_options::preload).
#pragma once

#include <aijpredict/device.hpp>

namespace aijp::detail {

/// One translation unit's module, reached through a kernel compiled into it.
struct module_anchor {
  const char* unit;     ///< the source and variant ("coo.cu double", "stats.cu")
  int value_bytes;      ///< 8 or 4: the module holds kernels of that value type only; 0: value-type neutral
  const void* kernel;   ///< a __global__ function of the unit (host stub address)
};

struct module_anchor_registrar {
  module_anchor_registrar(const char* unit, int value_bytes, const void* kernel);
};

/// Loads every function of every registered module whose value type is `value_bytes` (8, 4) or neutral;
/// value_bytes 0 loads all. Never throws for a driver without the module-enumeration entry points (before
/// CUDA 12.4): it then loads each module through its anchor alone and says so in the report's note.
kernel_preload_report preload_modules(int value_bytes);

/// Maps every page of the executable segment that holds this library's host code (the shared object, or
/// the program it is linked into) by reading one byte of each. A code page is otherwise mapped by a page
/// fault at the first call of a function on it: a staged part whose decision first ran the online
/// corrections took 18-29 us of host time in 14 trivial calls, with 2-4 page faults, on the H100 machine
/// (bench/results/2026-11-24_h100_session21_short_solves.txt). Returns the pages touched; 0 when the
/// segment is not found.
long prefault_host_code();

}  // namespace aijp::detail

/// Registers the enclosing translation unit's module for preload_modules(): an empty kernel in it and a
/// registrar. `unit` is a string literal, `value_bytes` 8, 4 or 0 (module_anchor::value_bytes).
#define AIJP_MODULE_ANCHOR(unit, value_bytes)                                                                      \
  namespace {                                                                                                      \
  __global__ void aijp_module_anchor_kernel() {}                                                                   \
  const ::aijp::detail::module_anchor_registrar aijp_module_anchor_registrar_{                                    \
      unit, value_bytes, reinterpret_cast<const void*>(&aijp_module_anchor_kernel)};                              \
  }
