// Matrix Market (NIST .mtx) reader and writer for host CSR matrices, plain or gzip-compressed.
//
// The reader is the entry point for every real matrix the project sees (the SuiteSparse test set in
// shared/matrices, files given to the command-line tools). It is strict: any malformed file throws
// aijp::bad_input naming the file, the 1-based line and what was wrong; a file that is well formed but
// outside what the library handles (complex scalars, indices beyond 32 bits) throws aijp::not_supported.
// It never returns a matrix that differs from what the file says.
//
// Format reference: "The Matrix Market Exchange Formats: Initial Design" (Boisvert, Pozo, Remington,
// NISTIR 5935, 1996), https://math.nist.gov/MatrixMarket/formats.html
#pragma once

#include <aijpredict/csr.hpp>

#include <string>

namespace aijp {
namespace io {

/// What a Matrix Market file declares in its banner and size line (nothing is expanded or checked
/// beyond the header itself).
struct mm_info {
  size_type rows = 0;
  size_type cols = 0;
  /// Stored entries the file declares: the third number of the size line for `coordinate`; for `array`
  /// the values the layout implies (rows*cols for general, n(n+1)/2 for symmetric, n(n-1)/2 for
  /// skew-symmetric). For symmetric files this counts one triangle only.
  size_type entries = 0;
  std::string format;   ///< "coordinate" or "array"
  std::string field;    ///< "real", "integer", "pattern" or "complex"
  std::string symmetry; ///< "general", "symmetric", "skew-symmetric" or "hermitian"
};

/// Reads the banner and size line of `path` (`.mtx`, or gzip-compressed in any file name: the content
/// decides). Banner keywords are matched case-insensitively and returned lower-case. Complex files are
/// reported, not rejected, so callers can inspect them.
///
/// @throws bad_input  file missing or unreadable (with strerror), missing or unknown banner, an invalid
///                    banner combination (e.g. pattern hermitian, symmetric non-square), a bad size line.
/// @throws not_supported  rows or cols above 2^31 - 1 (the 32-bit local index range).
mm_info read_matrix_market_header(const std::string& path);

/// Reads the whole matrix of `path` into a host CSR matrix with double values.
///
/// Supported: `coordinate` and `array` formats; `real`, `integer` and `pattern` fields (pattern entries
/// are 1.0); `general`, `symmetric` and `skew-symmetric` symmetry. Symmetric files are expanded to both
/// triangles (each stored off-diagonal a_ij also gives a_ji; diagonal entries once); skew-symmetric ones
/// give a_ji = -a_ij and must not store a nonzero diagonal entry. Entries of either triangle are accepted.
///
/// Duplicate entries of the same (row, col) are summed, as PETSc's MatSetValues(..., ADD_VALUES) would;
/// explicitly stored zeros are kept as structural nonzeros. In the result, every row's column indices are
/// strictly ascending.
///
/// `array` (dense, column-major) files give a CSR matrix holding every entry, zeros included
/// (nnz = rows * cols), so that the structure does not depend on the values.
///
/// @throws bad_input  any malformed input; the message holds the path, "line N" (1-based) and the
///   problem: missing/unknown banner, bad size line, negative sizes, an entry line that does not parse,
///   a row or column index out of range (which index, its value and the bound), a value that is not a
///   number or is NaN/Inf or overflows double, fewer entries than declared (how many were found), extra
///   entries after the declared count, a nonzero diagonal entry in a skew-symmetric file, a file that
///   cannot be opened or read (with strerror or the zlib message, e.g. a truncated gzip stream).
/// @throws not_supported  complex or hermitian files ("complex matrices are not supported (real scalars
///   only)"), rows or cols above 2^31 - 1, or more than 2^31 - 1 entries after symmetric expansion
///   (counted before duplicates are summed).
csr_matrix<double> read_matrix_market(const std::string& path);

/// Writes `a` as a `coordinate real general` Matrix Market file with 1-based indices and values printed
/// with "%.17g" (exact round trip through read_matrix_market). A path ending in ".gz" is written
/// gzip-compressed at zlib level 1 (random 17-digit values: a file 7% larger than level 6, written 4x
/// faster). Entries are written in row order as stored; duplicates, if `a` has any, are written as they
/// are and sum again on reading.
///
/// @throws bad_input  `a` is not a valid CSR matrix (row_ptr size or monotonicity, column out of range,
///   array sizes), or the file cannot be created or written (with strerror).
void write_matrix_market(const std::string& path, const csr_matrix<double>& a);

}  // namespace io
}  // namespace aijp
