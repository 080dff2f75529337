// What every measurement tool in bench/ shares: a fatal error with the tool's name, integer options, the CUDA
// check of the tools, and the reading of a MATRIX argument (a Matrix Market file or gen:SPEC). Host C++ only;
// each tool defines aijp::bench::tool_name (e.g. "aijp_bench").
#pragma once

#include <aijpredict/csr.hpp>
#include <aijpredict/generators.hpp>
#include <aijpredict/matrix_market.hpp>

#include <cstdlib>
#include <iostream>
#include <string>

namespace aijp::bench {

/// The tool's name, prefixed to its error messages; defined once in each tool.
extern const char* const tool_name;

/// Prints "<tool>: <msg>" to stderr and exits with status 2.
[[noreturn]] inline void die(const std::string& msg)
{
  std::cerr << tool_name << ": " << msg << "\n";
  std::exit(2);
}

/// The value of an integer option in [min, 1000000]; dies naming the flag otherwise.
inline int parse_int(const std::string& flag, const char* v, int min)
{
  char* end = nullptr;
  const long x = v ? std::strtol(v, &end, 10) : 0;
  if (!v || *end != '\0' || x < min || x > 1000000) die(flag + " needs an integer >= " + std::to_string(min));
  return static_cast<int>(x);
}

/// One MATRIX argument, read: `name` is the file name without its folders, or the argument itself for gen:SPEC.
struct input_matrix {
  std::string name;
  csr_matrix<double> a;
};

/// Reads a Matrix Market file or generates gen:SPEC (aijp::gen::from_spec); throws what the reader throws.
inline input_matrix load_input(const std::string& in)
{
  input_matrix m{in, {}};
  if (in.rfind("gen:", 0) == 0) {
    m.a = gen::from_spec(in.substr(4));
  } else {
    m.a = io::read_matrix_market(in);
    m.name = in.substr(in.find_last_of('/') + 1);
  }
  return m;
}

}  // namespace aijp::bench

/// Dies with the failed CUDA call and its error string (tools only: the library throws aijp::device_error).
#define AIJP_TOOL_CUDA(call)                                                                                   \
  do {                                                                                                         \
    const cudaError_t e_ = (call);                                                                             \
    if (e_ != cudaSuccess) ::aijp::bench::die(std::string(#call) + " failed: " + cudaGetErrorString(e_));    \
  } while (0)
