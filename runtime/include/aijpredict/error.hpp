// Error model of the host layers (runtime/, cache/, kernels/ host code).
//
// Every failure is a typed exception carrying where it was raised; the PETSc adapter converts them to
// PETSc error codes at its boundary (PetscCallCXX-style), everything else lets them propagate.
#pragma once

#include <stdexcept>
#include <string>

namespace aijp {

/// Base of all aijpredict errors.
class error : public std::runtime_error {
 public:
  error(const std::string& what, const char* file, int line)
      : std::runtime_error(what + " [" + file + ":" + std::to_string(line) + "]") {}
};

/// Malformed or unsupported user input (a file, a matrix, an option value).
class bad_input : public error {
  using error::error;
};

/// A case the library does not handle (index width, scalar type, ...); callers degrade to a correct path.
class not_supported : public error {
  using error::error;
};

/// A CUDA runtime or library call failed.
class device_error : public error {
  using error::error;
};

/// The device ran out of memory; callers degrade to a format that needs less or to the CSR baseline.
class device_out_of_memory : public device_error {
  using device_error::device_error;
};

}  // namespace aijp

#define AIJP_THROW(kind, msg) throw kind((msg), __FILE__, __LINE__)
#define AIJP_ENSURE(cond, kind, msg) \
  do {                               \
    if (!(cond)) AIJP_THROW(kind, (msg)); \
  } while (0)
