#include "test_matrices.hpp"

#include <aijpredict/matrix_market.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <algorithm>
#include <stdexcept>

namespace aijp::test {

std::string matrix_dir()
{
  const char* d = std::getenv("AIJP_MATRIX_DIR");
  return d ? d : "";
}

std::vector<std::string> real_matrix_names()
{
  std::ifstream in(matrix_dir() + "/MANIFEST.tsv");
  if (!in) throw std::runtime_error("cannot open " + matrix_dir() + "/MANIFEST.tsv (set AIJP_MATRIX_DIR)");
  std::string line;
  std::getline(in, line);  // header
  std::vector<std::string> names;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::vector<std::string> f;
    std::string cell;
    while (std::getline(ss, cell, '\t')) f.push_back(cell);
    if (f.size() > 5 && f[5] != "complex") names.push_back(f[0]);
  }
  return names;
}

csr_matrix<double> load_shared(const std::string& name)
{
  return io::read_matrix_market(matrix_dir() + "/" + name + ".mtx.gz");
}

namespace {

csr_matrix<double> from_rows(size_type rows, size_type cols, const std::vector<std::vector<std::pair<int, double>>>& r)
{
  csr_matrix<double> a;
  a.rows = rows;
  a.cols = cols;
  a.row_ptr.assign(1, 0);
  for (const auto& row : r) {
    for (const auto& [c, v] : row) {
      a.col_idx.push_back(c);
      a.values.push_back(v);
    }
    a.row_ptr.push_back(static_cast<index_type>(a.col_idx.size()));
  }
  return a;
}

unsigned long long next(unsigned long long& s)
{
  s += 0x9e3779b97f4a7c15ull;
  unsigned long long z = s;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double unit(unsigned long long& s) { return static_cast<double>(next(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0; }

// rows x cols with row r holding len(r) distinct pseudo-random columns.
template <typename LenFn>
csr_matrix<double> random_rows(size_type rows, size_type cols, LenFn len, unsigned long long seed)
{
  std::vector<std::vector<std::pair<int, double>>> r(static_cast<size_t>(rows));
  unsigned long long s = seed;
  for (size_type i = 0; i < rows; ++i) {
    const size_type l = std::min<size_type>(len(i), cols);
    const size_type start = cols > 0 ? static_cast<size_type>(next(s) % cols) : 0;
    for (size_type k = 0; k < l; ++k) r[i].push_back({static_cast<int>((start + k * 7919) % cols), unit(s)});
  }
  // distinct columns: stride 7919 is prime, so distinct while l <= cols and gcd(7919, cols) == 1
  for (auto& row : r) {
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end(), [](auto& x, auto& y) { return x.first == y.first; }), row.end());
  }
  return from_rows(rows, cols, r);
}

}  // namespace

std::vector<named_matrix> edge_cases()
{
  std::vector<named_matrix> out;
  out.push_back({"0x0", from_rows(0, 0, {})});
  out.push_back({"0x5", from_rows(0, 5, {})});
  out.push_back({"3x0", from_rows(3, 0, {{}, {}, {}})});
  out.push_back({"1x1", from_rows(1, 1, {{{0, 2.5}}})});
  out.push_back({"all_empty_40x40", from_rows(40, 40, std::vector<std::vector<std::pair<int, double>>>(40))});
  out.push_back({"empty_rows_100x100", random_rows(100, 100, [](size_type i) { return i % 3 == 0 ? 0 : i % 7; }, 1)});
  out.push_back({"one_dense_row_70x70", random_rows(70, 70, [](size_type i) { return i == 33 ? 70 : 1; }, 2)});
  out.push_back({"wide_33x1000", random_rows(33, 1000, [](size_type i) { return 1 + i * 13 % 40; }, 3)});
  out.push_back({"tall_1000x33", random_rows(1000, 33, [](size_type i) { return i % 5; }, 4)});
  out.push_back({"warp_plus_one_33x33", random_rows(33, 33, [](size_type i) { return 1 + i % 4; }, 5)});
  out.push_back({"long_row_70001_5x70001",
                 random_rows(5, 70001, [](size_type i) { return i == 2 ? 70001 : 3; }, 6)});  // 70001 > 2^16
  return out;
}

std::vector<double> random_vector(size_type n, unsigned long long seed)
{
  std::vector<double> v(static_cast<size_t>(n));
  unsigned long long s = seed;
  for (auto& e : v) e = unit(s);
  return v;
}

csr_matrix<double> with_lengths(const std::vector<int>& lengths, size_type cols)
{
  csr_matrix<double> a;
  a.rows = static_cast<size_type>(lengths.size());
  a.cols = cols;
  for (int len : lengths) {
    for (int k = 0; k < len; ++k) {
      a.col_idx.push_back(k);
      a.values.push_back(1.0 + k);
    }
    a.row_ptr.push_back(static_cast<index_type>(a.col_idx.size()));
  }
  return a;
}

}  // namespace aijp::test
