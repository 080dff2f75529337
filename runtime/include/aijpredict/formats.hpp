// The storage formats the runtime can choose from.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace aijp {

enum class format_id : int {
  cusparse_csr = 0,  ///< cuSPARSE generic SpMV on CSR, ALG1: PETSc aijcusparse's kernel; always feasible
  sell_c_sigma = 1,  ///< SELL-C-sigma, C = 32 (one warp per slice, thread per row), sorting window sigma
};

constexpr int format_count = 2;

/// Short name used in options, reports, JSON ("cusparse_csr", "sell").
const char* format_name(format_id f);
/// One-line description for help texts.
const char* format_description(format_id f);
/// Parses a name from format_name(); throws aijp::bad_input listing the valid names otherwise.
format_id parse_format(const std::string& name);
/// Parses a comma-separated list ("cusparse_csr,sell"); an empty string means all formats.
std::vector<format_id> parse_format_list(const std::string& list);
std::vector<format_id> all_formats();

}  // namespace aijp
