// The storage formats the runtime can choose from.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace aijp {

enum class format_id : int {
  cusparse_csr = 0,       ///< cuSPARSE generic SpMV on CSR, ALG1: PETSc aijcusparse's kernel; always feasible
  sell_c_sigma = 1,       ///< SELL-C-sigma, C = 32, sigma = 1: slices of 32 consecutive rows, thread per row
  cusparse_csr_alg2 = 2,  ///< cuSPARSE CSR ALG2 (merge-based, deterministic) after cusparseSpMV_preprocess
  cusparse_sell = 3,      ///< cuSPARSE sliced ELL (slice 32), generic SpMV
  csr_scalar = 4,         ///< CSR, one thread per row
  csr_vector = 5,         ///< CSR, 2..32 lanes per row chosen from the row lengths, shuffle reduction
  coo = 6,                ///< COO, one thread per nonzero
  ell = 7,                ///< ELLPACK, column-major, every row padded to the longest
  ellr = 8,               ///< ELLPACK-R: ELL plus row lengths; threads stop at their own row's end
  pellr = 9,              ///< PELLR: rows sorted by length (permutation), ELLPACK-R layout
  jad = 10,               ///< JAD: jagged diagonals of the length-sorted rows
  hyb = 11,               ///< HYB: ELL of the Bell-Garland width K plus COO for the rest
  sell_sigma = 12,        ///< SELL-C-sigma, C = 32, rows sorted by length inside windows of sigma rows
  sell_delta16 = 13,      ///< SELL-32 with 16-bit column deltas inside each row (10 bytes per nonzero)
};

constexpr int format_count = 14;

/// Largest step between consecutive columns of a row that sell_delta16 stores (16-bit deltas).
constexpr int sell_delta16_max_step = 65535;

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
