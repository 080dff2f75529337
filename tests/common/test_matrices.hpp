// Test inputs shared by the unit, GPU and PETSc tests: the real matrices of ../shared/matrices and the edge
// cases every format must handle.
#pragma once

#include <aijpredict/csr.hpp>

#include <string>
#include <vector>

namespace aijp::test {

struct named_matrix {
  std::string name;
  csr_matrix<double> a;
};

/// Directory of the shared matrices ($AIJP_MATRIX_DIR, set by CTest); empty if unset.
std::string matrix_dir();
/// Names (MANIFEST.tsv) of the matrices with real, integer or pattern values (complex ones excluded).
std::vector<std::string> real_matrix_names();
/// Loads one shared matrix by name (symmetric files expanded).
csr_matrix<double> load_shared(const std::string& name);

/// Edge cases: 0 rows, 0 columns, empty rows, one dense row, 1 x 1, rectangular both ways, a row longer
/// than 2^16, a matrix of all-empty rows, and matrices just over a warp / slice in size.
std::vector<named_matrix> edge_cases();

/// A matrix whose row r has lengths[r] entries in columns 0, 1, ... with values 1, 2, ...: row statistics by hand.
csr_matrix<double> with_lengths(const std::vector<int>& lengths, size_type cols);

/// Deterministic pseudo-random vector with entries in [-1, 1].
std::vector<double> random_vector(size_type n, unsigned long long seed);

}  // namespace aijp::test
