// Matrix Market reader and writer: the shared SuiteSparse set against an independent parse, every error
// case of the reader (type, file, line, reason), expansion of symmetric files, duplicates, round trips.
#include "io_test_helpers.hpp"

#include <aijpredict/error.hpp>
#include <aijpredict/generators.hpp>
#include <aijpredict/matrix_market.hpp>

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace {

using aijp::csr_matrix;
using aijp::index_type;
using aijp::size_type;

std::string matrix_dir()
{
  if (const char* env = std::getenv("AIJP_MATRIX_DIR")) return env;
  return AIJP_DEFAULT_MATRIX_DIR;
}

/// A fresh directory for the files one test writes (removed with its files at the end of the test).
class temp_dir {
 public:
  temp_dir()
  {
    std::string tmpl = ::testing::TempDir() + "aijp_io_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = buf.data();
  }
  ~temp_dir()
  {
    for (const auto& f : files_) std::remove(f.c_str());
    rmdir(path_.c_str());
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  /// Path of `name` in the directory (registered for removal).
  std::string file(const std::string& name)
  {
    files_.push_back(path_ + "/" + name);
    return files_.back();
  }

  std::string write(const std::string& name, const std::string& content)
  {
    const auto p = file(name);
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }

  std::string write_gz(const std::string& name, const std::string& content)
  {
    const auto p = file(name);
    gzFile f = gzopen(p.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    if (f != nullptr) {
      EXPECT_EQ(gzwrite(f, content.data(), static_cast<unsigned>(content.size())), static_cast<int>(content.size()));
      gzclose(f);
    }
    return p;
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

/// Reads `path`; expects bad_input whose message names the file, "line <line>:" (when line > 0) and
/// contains `what`.
void expect_bad_input(const std::string& path, size_type line, const std::string& what)
{
  try {
    (void)aijp::io::read_matrix_market(path);
    ADD_FAILURE() << "no exception for " << path << " (expected bad_input: " << what << ")";
  } catch (const aijp::bad_input& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    if (line > 0) {
      EXPECT_NE(msg.find("line " + std::to_string(line) + ":"), std::string::npos) << msg;
    }
    EXPECT_NE(msg.find(what), std::string::npos) << "expected '" << what << "' in: " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type for " << path << ": " << e.what();
  }
}

void expect_not_supported(const std::string& path, const std::string& what)
{
  try {
    (void)aijp::io::read_matrix_market(path);
    ADD_FAILURE() << "no exception for " << path << " (expected not_supported: " << what << ")";
  } catch (const aijp::not_supported& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << "expected '" << what << "' in: " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type for " << path << ": " << e.what();
  }
}

/// Dense copy for small hand-checked matrices.
std::vector<std::vector<double>> dense(const csr_matrix<double>& a)
{
  std::vector<std::vector<double>> d(static_cast<std::size_t>(a.rows),
                                     std::vector<double>(static_cast<std::size_t>(a.cols), 0.0));
  for (size_type r = 0; r < a.rows; ++r) {
    for (auto k = a.row_ptr[static_cast<std::size_t>(r)]; k < a.row_ptr[static_cast<std::size_t>(r) + 1]; ++k) {
      d[static_cast<std::size_t>(r)][static_cast<std::size_t>(a.col_idx[static_cast<std::size_t>(k)])] =
          a.values[static_cast<std::size_t>(k)];
    }
  }
  return d;
}

// ------------------------------------------------------------------------------------------------
// The shared SuiteSparse matrices

struct manifest_row {
  std::string name;
  size_type rows = 0;
  size_type cols = 0;
  size_type nnz_stored = 0;
  std::string symmetry;
  std::string field;
};

std::vector<manifest_row> read_manifest(const std::string& dir)
{
  std::ifstream in(dir + "/MANIFEST.tsv");
  std::vector<manifest_row> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream fields(line);
    manifest_row m;
    std::string rows_s, cols_s, nnz_s;
    std::getline(fields, m.name, '\t');
    std::getline(fields, rows_s, '\t');
    std::getline(fields, cols_s, '\t');
    std::getline(fields, nnz_s, '\t');
    std::getline(fields, m.symmetry, '\t');
    std::getline(fields, m.field, '\t');
    m.rows = std::stoll(rows_s);
    m.cols = std::stoll(cols_s);
    m.nnz_stored = std::stoll(nnz_s);
    rows.push_back(m);
  }
  return rows;
}

/// What an independent, deliberately simple parse (whole file, getline, strtoll/strtod) finds.
struct reference_parse {
  size_type stored = 0;                          ///< entry lines
  size_type diagonal = 0;                        ///< stored entries with i == j
  std::vector<std::pair<index_type, index_type>> positions;  ///< after expansion, sorted, unique
  double sum = 0.0;                              ///< sum of all values after expansion
  double abs_sum = 0.0;
};

reference_parse parse_reference(const std::string& path, bool symmetric, bool pattern)
{
  std::string text;
  gzFile f = gzopen(path.c_str(), "rb");
  EXPECT_NE(f, nullptr) << path;
  if (f == nullptr) return {};
  char buf[1 << 16];
  int got = 0;
  while ((got = gzread(f, buf, sizeof(buf))) > 0) text.append(buf, static_cast<std::size_t>(got));
  gzclose(f);

  reference_parse ref;
  std::istringstream in(text);
  std::string line;
  bool size_seen = false;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '%') continue;
    if (!size_seen) {
      size_seen = true;
      continue;
    }
    char* p = nullptr;
    const long long i = std::strtoll(line.c_str(), &p, 10);
    const long long j = std::strtoll(p, &p, 10);
    const double v = pattern ? 1.0 : std::strtod(p, nullptr);
    ++ref.stored;
    const auto ii = static_cast<index_type>(i - 1);
    const auto jj = static_cast<index_type>(j - 1);
    ref.positions.emplace_back(ii, jj);
    ref.sum += v;
    ref.abs_sum += std::abs(v);
    if (i == j) {
      ++ref.diagonal;
    } else if (symmetric) {
      ref.positions.emplace_back(jj, ii);
      ref.sum += v;
      ref.abs_sum += std::abs(v);
    }
  }
  std::sort(ref.positions.begin(), ref.positions.end());
  ref.positions.erase(std::unique(ref.positions.begin(), ref.positions.end()), ref.positions.end());
  return ref;
}

TEST(io_matrix_market, suitesparse_manifest)
{
  const std::string dir = matrix_dir();
  const auto manifest = read_manifest(dir);
  ASSERT_GE(manifest.size(), 50u) << "no MANIFEST.tsv in " << dir << " (set AIJP_MATRIX_DIR)";
  int loaded = 0;
  int complex_rejected = 0;
  for (const auto& m : manifest) {
    SCOPED_TRACE(m.name);
    const std::string path = dir + "/" + m.name + ".mtx.gz";
    const auto info = aijp::io::read_matrix_market_header(path);
    EXPECT_EQ(info.rows, m.rows);
    EXPECT_EQ(info.cols, m.cols);
    EXPECT_EQ(info.entries, m.nnz_stored);
    EXPECT_EQ(info.format, "coordinate");
    EXPECT_EQ(info.field, m.field);
    EXPECT_EQ(info.symmetry, m.symmetry);

    if (m.field == "complex") {
      expect_not_supported(path, "complex matrices are not supported (real scalars only)");
      ++complex_rejected;
      continue;
    }
    const auto a = aijp::io::read_matrix_market(path);
    ++loaded;
    EXPECT_EQ(a.rows, m.rows);
    EXPECT_EQ(a.cols, m.cols);
    EXPECT_TRUE(aijp::test::valid_csr(a));

    const bool symmetric = m.symmetry == "symmetric";
    const auto ref = parse_reference(path, symmetric, m.field == "pattern");
    EXPECT_EQ(ref.stored, m.nnz_stored);
    // The files hold no duplicates, so the expanded count is exact by the formula ...
    if (symmetric) {
      EXPECT_EQ(a.nnz(), 2 * m.nnz_stored - ref.diagonal);
      EXPECT_TRUE(aijp::test::exactly_symmetric(a));
    } else {
      EXPECT_EQ(a.nnz(), m.nnz_stored);
    }
    // ... and equals the independently expanded pattern, position by position.
    ASSERT_EQ(static_cast<std::size_t>(a.nnz()), ref.positions.size());
    std::size_t k = 0;
    bool same_pattern = true;
    for (size_type r = 0; r < a.rows && same_pattern; ++r) {
      for (auto q = a.row_ptr[static_cast<std::size_t>(r)]; q < a.row_ptr[static_cast<std::size_t>(r) + 1]; ++q, ++k) {
        same_pattern = same_pattern && ref.positions[k].first == r &&
                       ref.positions[k].second == a.col_idx[static_cast<std::size_t>(q)];
      }
    }
    EXPECT_TRUE(same_pattern);
    double sum = 0.0;
    for (double v : a.values) sum += v;
    EXPECT_NEAR(sum, ref.sum, 1e-12 * ref.abs_sum + 1e-300);
  }
  EXPECT_EQ(loaded + complex_rejected, static_cast<int>(manifest.size()));
  EXPECT_EQ(complex_rejected, 5);
}

// ------------------------------------------------------------------------------------------------
// Malformed input: every case names the file, the line and the reason

const std::string banner = "%%MatrixMarket matrix coordinate real general\n";

struct bad_case {
  const char* name;
  std::string content;
  size_type line;
  const char* what;
};

TEST(io_matrix_market, malformed_files_throw_bad_input_with_path_and_line)
{
  const std::vector<bad_case> cases = {
      {"empty", "", 1, "empty file"},
      {"no_banner", "3 3 1\n1 1 1.0\n", 1, "missing '%%MatrixMarket' banner"},
      {"banner_typo", "%%MatrixMarkt matrix coordinate real general\n1 1 0\n", 1, "missing '%%MatrixMarket'"},
      {"incomplete_banner", "%%MatrixMarket matrix coordinate real\n1 1 0\n", 1, "missing the symmetry"},
      {"banner_extra", "%%MatrixMarket matrix coordinate real general extra\n1 1 0\n", 1, "after the banner"},
      {"unknown_object", "%%MatrixMarket vector coordinate real general\n1 1 0\n", 1, "unknown object 'vector'"},
      {"unknown_format", "%%MatrixMarket matrix coordinat real general\n1 1 0\n", 1, "unknown format 'coordinat'"},
      {"unknown_field", "%%MatrixMarket matrix coordinate double general\n1 1 0\n", 1, "unknown field 'double'"},
      {"unknown_symmetry", "%%MatrixMarket matrix coordinate real symmetrical\n1 1 0\n", 1,
       "unknown symmetry 'symmetrical'"},
      {"pattern_array", "%%MatrixMarket matrix array pattern general\n1 1\n", 1, "not valid with the 'array'"},
      {"pattern_skew", "%%MatrixMarket matrix coordinate pattern skew-symmetric\n1 1 0\n", 1, "not valid with"},
      {"real_hermitian", "%%MatrixMarket matrix coordinate real hermitian\n1 1 0\n", 1, "requires the 'complex'"},
      {"no_size_line", banner + "% only comments\n\n", 4, "missing size line"},
      {"size_line_text", banner + "% comment\n3 x 3\n1 1 1\n", 3, "bad size line '3 x 3'"},
      {"size_line_two_numbers", banner + "3 3\n1 1 1\n", 2, "bad size line"},
      {"size_line_four_numbers", banner + "3 3 1 7\n1 1 1\n", 2, "bad size line"},
      {"size_line_fraction", banner + "3 3.5 1\n", 2, "bad size line"},
      {"negative_rows", banner + "-3 3 1\n1 1 1\n", 2, "negative size"},
      {"negative_entries", banner + "3 3 -1\n", 2, "negative size"},
      {"huge_negative", banner + "-99999999999999999999 3 1\n", 2, "negative size"},
      {"symmetric_not_square", "%%MatrixMarket matrix coordinate real symmetric\n3 4 1\n1 1 1\n", 2,
       "must be square"},
      {"fewer_entries", banner + "3 3 3\n1 1 1.0\n2 2 2.0\n", 5, "declares 3 entries, found 2"},
      {"fewer_entries_blank_tail", banner + "3 3 3\n1 1 1.0\n\n% c\n", 6, "found 1"},
      {"no_entries", banner + "% c\n3 3 2\n", 4, "found 0"},
      {"extra_entries", banner + "3 3 1\n1 1 1.0\n2 2 2.0\n", 4, "beyond the 1 entries declared"},
      {"extra_after_comment", banner + "3 3 1\n1 1 1.0\n% c\n\n3 3 2.0\n", 6, "extra entry '3 3 2.0'"},
      {"row_out_of_range", banner + "3 3 2\n1 1 1.0\n4 1 1.0\n", 4, "row index '4' out of range [1, 3]"},
      {"row_zero", banner + "3 3 1\n0 1 1.0\n", 3, "row index '0' out of range [1, 3]"},
      {"col_out_of_range", banner + "3 5 1\n1 6 1.0\n", 3, "column index '6' out of range [1, 5]"},
      {"col_negative", banner + "3 5 1\n1 -2 1.0\n", 3, "column index '-2' out of range [1, 5]"},
      {"index_overflow", banner + "3 3 1\n1 99999999999999999999 1.0\n", 3, "column index '99999999999999999999'"},
      {"bad_row_index", banner + "3 3 1\n1.5 1 1.0\n", 3, "bad row index '1.5'"},
      {"bad_col_index", banner + "3 3 1\n1 b 1.0\n", 3, "bad column index 'b'"},
      {"missing_col", banner + "3 3 1\n1\n", 3, "missing column index"},
      {"missing_value", banner + "3 3 1\n1 1\n", 3, "missing value"},
      {"non_numeric_value", banner + "3 3 2\n1 1 1.0\n2 2 abc\n", 4, "value 'abc' is not a number"},
      {"value_trailing_garbage", banner + "3 3 1\n1 1 1.0x\n", 3, "value '1.0x' is not a number"},
      {"fortran_exponent", banner + "3 3 1\n1 1 1.0D+00\n", 3, "is not a number"},
      {"nan_value", banner + "3 3 1\n1 1 nan\n", 3, "value 'nan' is not finite"},
      {"inf_value", banner + "3 3 1\n1 1 -inf\n", 3, "value '-inf' is not finite"},
      {"overflow_value", banner + "3 3 1\n1 1 1e999\n", 3, "value '1e999' overflows double"},
      {"extra_token", banner + "3 3 1\n1 1 1.0 2.0\n", 3, "unexpected text '2.0'"},
      {"pattern_with_value", "%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 1 1.0\n", 3,
       "unexpected text '1.0'"},
      {"integer_fraction", "%%MatrixMarket matrix coordinate integer general\n3 3 1\n1 1 1.5\n", 3,
       "value '1.5' is not an integer"},
      {"skew_diagonal", "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 1.0\n2 2 4.0\n", 4,
       "nonzero diagonal entry (2, 2) in a skew-symmetric matrix"},
      {"array_too_few", "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n", 6,
       "the array needs 4 values, found 3"},
      {"array_too_many", "%%MatrixMarket matrix array real symmetric\n2 2\n1\n2\n3\n4\n", 6, "extra entry '4'"},
      {"array_two_per_line", "%%MatrixMarket matrix array real general\n2 1\n1 2\n", 3, "unexpected text '2'"},
      {"array_nan", "%%MatrixMarket matrix array real general\n2 1\n1\nNaN\n", 4, "not finite"},
      {"duplicates_overflow", banner + "1 1 2\n1 1 1e308\n1 1 1e308\n", 0, "sum to a non-finite value"},
  };
  temp_dir tmp;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    expect_bad_input(tmp.write(std::string(c.name) + ".mtx", c.content), c.line, c.what);
  }
  // The same through gzip, and a CRLF file: the line numbers do not change.
  expect_bad_input(tmp.write_gz("gz_fewer.mtx.gz", banner + "3 3 3\n1 1 1.0\n2 2 2.0\n"), 5, "found 2");
  expect_bad_input(tmp.write_gz("gz_nan", banner + "% c\n3 3 1\n1 1 NaN\n"), 4, "not finite");
  expect_bad_input(tmp.write("crlf.mtx", "%%MatrixMarket matrix coordinate real general\r\n3 3 1\r\n1 4 1.0\r\n"), 3,
                   "column index '4' out of range [1, 3]");
}

TEST(io_matrix_market, unreadable_files_throw_bad_input_with_reason)
{
  temp_dir tmp;
  const std::string missing = tmp.path() + "/does_not_exist.mtx";
  expect_bad_input(missing, 0, "No such file or directory");
  expect_bad_input(tmp.path(), 0, "Is a directory");
  try {
    (void)aijp::io::read_matrix_market_header(missing);
    ADD_FAILURE() << "no exception";
  } catch (const aijp::bad_input& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos);
  }

  // A gzip stream cut short: zlib reports it, the reader does not return a partial matrix.
  std::string body = banner + "200 200 200\n";
  for (int k = 1; k <= 200; ++k) body += std::to_string(k) + " " + std::to_string(k) + " 0.5\n";
  const auto full = tmp.write_gz("full.mtx.gz", body);
  std::ifstream in(full, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto cut = tmp.write("cut.mtx.gz", bytes.substr(0, bytes.size() / 2));
  try {
    (void)aijp::io::read_matrix_market(cut);
    ADD_FAILURE() << "no exception for a truncated gzip file";
  } catch (const aijp::bad_input& e) {
    // Reported after the last intact line, which depends on where the cut falls in the stream.
    const std::string msg = e.what();
    EXPECT_NE(msg.find(cut + ": line "), std::string::npos) << msg;
    EXPECT_NE(msg.find("read error: unexpected end of file"), std::string::npos) << msg;
    EXPECT_EQ(msg.find(": line 1:"), std::string::npos) << msg;
  }
  EXPECT_EQ(aijp::io::read_matrix_market(full).nnz(), 200);
}

TEST(io_matrix_market, unsupported_files_throw_not_supported)
{
  temp_dir tmp;
  expect_not_supported(tmp.write("complex.mtx", "%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1 0\n"),
                       "complex matrices are not supported (real scalars only)");
  expect_not_supported(tmp.write("hermitian.mtx", "%%MatrixMarket matrix coordinate complex hermitian\n2 2 0\n"),
                       "complex matrices are not supported");
  expect_not_supported(tmp.write("wide.mtx", banner + "3 3000000000 1\n1 1 1\n"), "32-bit local index range");
  expect_not_supported(tmp.write("tall.mtx", banner + "2147483648 3 0\n"), "line 2:");
  expect_not_supported(tmp.write("big_array.mtx", "%%MatrixMarket matrix array real general\n100000 100000\n"),
                       "more than 2147483647 entries");
  // The header of a complex file is readable (callers may inspect it).
  const auto info =
      aijp::io::read_matrix_market_header(tmp.write("c2.mtx", "%%MatrixMarket matrix coordinate complex hermitian\n4 4 3\n"));
  EXPECT_EQ(info.field, "complex");
  EXPECT_EQ(info.symmetry, "hermitian");
  EXPECT_EQ(info.entries, 3);
}

// ------------------------------------------------------------------------------------------------
// Semantics

TEST(io_matrix_market, duplicates_are_summed_and_rows_sorted)
{
  temp_dir tmp;
  const auto path = tmp.write("dup.mtx", banner +
                                             "% out of order, with duplicates\n"
                                             "3 4 7\n"
                                             "2 4 1.0\n"
                                             "1 3 0.5\n"
                                             "2 1 -1.0\n"
                                             "1 3 0.25\n"
                                             "3 2 0\n"
                                             "2 4 2.0\n"
                                             "1 1 7\n");
  const auto a = aijp::io::read_matrix_market(path);
  ASSERT_TRUE(aijp::test::valid_csr(a));
  EXPECT_EQ(a.rows, 3);
  EXPECT_EQ(a.cols, 4);
  EXPECT_EQ(a.row_ptr, (std::vector<index_type>{0, 2, 4, 5}));
  EXPECT_EQ(a.col_idx, (std::vector<index_type>{0, 2, 0, 3, 1}));
  EXPECT_EQ(a.values, (std::vector<double>{7.0, 0.75, -1.0, 3.0, 0.0}));  // explicit zero kept
}

TEST(io_matrix_market, symmetric_and_skew_symmetric_expansion)
{
  temp_dir tmp;
  const auto sym = aijp::io::read_matrix_market(tmp.write("sym.mtx",
                                                          "%%MatrixMarket matrix coordinate real symmetric\n"
                                                          "3 3 4\n1 1 2.0\n2 1 -1.0\n3 2 -3.0\n3 3 5.0\n"));
  EXPECT_EQ(dense(sym), (std::vector<std::vector<double>>{{2, -1, 0}, {-1, 0, -3}, {0, -3, 5}}));
  EXPECT_EQ(sym.nnz(), 6);

  // Entries given in the upper triangle are mirrored as well.
  const auto skew = aijp::io::read_matrix_market(tmp.write("skew.mtx",
                                                           "%%MatrixMarket matrix coordinate real skew-symmetric\n"
                                                           "3 3 3\n2 1 1.5\n3 1 -2.0\n2 3 4.0\n"));
  EXPECT_EQ(dense(skew), (std::vector<std::vector<double>>{{0, -1.5, 2}, {1.5, 0, 4}, {-2, -4, 0}}));
  EXPECT_EQ(skew.nnz(), 6);
  EXPECT_TRUE(aijp::test::exactly_symmetric(skew, true));

  const auto pat = aijp::io::read_matrix_market(tmp.write("pat.mtx",
                                                          "%%MatrixMarket matrix coordinate pattern symmetric\n"
                                                          "3 3 3\n1 1\n3 1\n3 3\n"));
  EXPECT_EQ(dense(pat), (std::vector<std::vector<double>>{{1, 0, 1}, {0, 0, 0}, {1, 0, 1}}));

  const auto intm = aijp::io::read_matrix_market(tmp.write("int.mtx",
                                                           "%%MatrixMarket matrix coordinate integer general\n"
                                                           "2 2 2\n1 2 -7\n2 1 +9007199254740993\n"));
  EXPECT_EQ(dense(intm), (std::vector<std::vector<double>>{{0, -7}, {9007199254740992.0, 0}}));
}

TEST(io_matrix_market, array_format)
{
  temp_dir tmp;
  const auto gen = aijp::io::read_matrix_market(tmp.write("ag.mtx",
                                                          "%%MatrixMarket matrix array real general\n"
                                                          "% column-major\n2 3\n1\n4\n2\n5\n0\n6\n"));
  EXPECT_EQ(dense(gen), (std::vector<std::vector<double>>{{1, 2, 0}, {4, 5, 6}}));
  EXPECT_EQ(gen.nnz(), 6);  // dense: the zero is stored
  const auto sym = aijp::io::read_matrix_market(tmp.write("as.mtx",
                                                          "%%MatrixMarket matrix array real symmetric\n"
                                                          "3 3\n1\n2\n3\n4\n5\n6\n"));
  EXPECT_EQ(dense(sym), (std::vector<std::vector<double>>{{1, 2, 3}, {2, 4, 5}, {3, 5, 6}}));
  const auto skew = aijp::io::read_matrix_market(tmp.write("ak.mtx",
                                                           "%%MatrixMarket matrix array integer skew-symmetric\n"
                                                           "3 3\n1\n2\n3\n"));
  EXPECT_EQ(dense(skew), (std::vector<std::vector<double>>{{0, -1, -2}, {1, 0, -3}, {2, 3, 0}}));
  const auto info = aijp::io::read_matrix_market_header(tmp.file("as.mtx"));
  EXPECT_EQ(info.format, "array");
  EXPECT_EQ(info.entries, 6);
}

TEST(io_matrix_market, lenient_where_the_format_allows)
{
  temp_dir tmp;
  // Case-insensitive banner, comments and blank lines anywhere after it, tabs, CRLF, no final newline,
  // a leading '+', subnormal and underflowing values.
  const auto a = aijp::io::read_matrix_market(tmp.write("ok.mtx",
                                                        "%%MATRIXMARKET Matrix COORDINATE Real GENERAL\r\n"
                                                        "% comment\r\n"
                                                        "\r\n"
                                                        "  2\t2  4 \r\n"
                                                        "% between entries\n"
                                                        "\n"
                                                        "1 1 +1.5e0\n"
                                                        "  2\t2 -2.5E-1\n"
                                                        "1 2 4.9e-324\n"
                                                        "2 1 1e-400"));
  EXPECT_EQ(dense(a), (std::vector<std::vector<double>>{{1.5, 4.9e-324}, {0.0, -0.25}}));
  EXPECT_EQ(a.nnz(), 4);
  const auto info = aijp::io::read_matrix_market_header(tmp.file("ok.mtx"));
  EXPECT_EQ(info.rows, 2);
  EXPECT_EQ(info.entries, 4);
  EXPECT_EQ(info.field, "real");
  EXPECT_EQ(info.symmetry, "general");

  const auto empty = aijp::io::read_matrix_market(tmp.write("empty.mtx", banner + "0 0 0\n"));
  EXPECT_EQ(empty.rows, 0);
  EXPECT_EQ(empty.nnz(), 0);
  EXPECT_EQ(empty.row_ptr, std::vector<index_type>{0});
}

// ------------------------------------------------------------------------------------------------
// Writer

TEST(io_matrix_market, write_read_round_trip_is_exact)
{
  temp_dir tmp;
  auto a = aijp::gen::row_length_distribution(300, 170, aijp::gen::row_length_dist::uniform, 6, 6, 42);
  ASSERT_GT(a.nnz(), 1000);
  // Values that need all 17 digits or sit at the ends of the double range.
  const double awkward[] = {1.0 / 3.0, -2.0 / 7.0, 0.1, 1e-300, 4.9e-324, 2.2250738585072014e-308,
                            std::numeric_limits<double>::max(), -std::numeric_limits<double>::max(), 0.0, -0.0,
                            123456789012345678.0};
  for (std::size_t k = 0; k < std::size(awkward); ++k) a.values[k * 7] = awkward[k];
  for (const char* name : {"rt.mtx", "rt.mtx.gz"}) {
    SCOPED_TRACE(name);
    const auto path = tmp.file(name);
    aijp::io::write_matrix_market(path, a);
    const auto b = aijp::io::read_matrix_market(path);
    EXPECT_TRUE(aijp::test::same_matrix(a, b));
    EXPECT_TRUE(std::signbit(b.values[9 * 7]));
    const auto info = aijp::io::read_matrix_market_header(path);
    EXPECT_EQ(info.entries, a.nnz());
    EXPECT_EQ(info.symmetry, "general");
  }
  // Empty rows, rectangular, no rows at all.
  csr_matrix<double> r;
  r.rows = 4;
  r.cols = 2;
  r.row_ptr = {0, 0, 2, 2, 3};
  r.col_idx = {0, 1, 1};
  r.values = {1, 2, 3};
  aijp::io::write_matrix_market(tmp.file("r.mtx"), r);
  EXPECT_TRUE(aijp::test::same_matrix(r, aijp::io::read_matrix_market(tmp.file("r.mtx"))));
  csr_matrix<double> none;
  aijp::io::write_matrix_market(tmp.file("none.mtx"), none);
  EXPECT_TRUE(aijp::test::same_matrix(none, aijp::io::read_matrix_market(tmp.file("none.mtx"))));
}

TEST(io_matrix_market, write_rejects_invalid_matrices_and_paths)
{
  temp_dir tmp;
  csr_matrix<double> bad;
  bad.rows = 2;
  bad.cols = 2;
  bad.row_ptr = {0, 1, 2};
  bad.col_idx = {0, 2};
  bad.values = {1, 1};
  EXPECT_THROW(aijp::io::write_matrix_market(tmp.file("bad1.mtx"), bad), aijp::bad_input);
  bad.col_idx = {0, 1};
  bad.values = {1, std::nan("")};
  EXPECT_THROW(aijp::io::write_matrix_market(tmp.file("bad2.mtx"), bad), aijp::bad_input);
  bad.values = {1};
  EXPECT_THROW(aijp::io::write_matrix_market(tmp.file("bad3.mtx"), bad), aijp::bad_input);
  bad.values = {1, 1};
  bad.row_ptr = {0, 2};
  EXPECT_THROW(aijp::io::write_matrix_market(tmp.file("bad4.mtx"), bad), aijp::bad_input);
  try {
    aijp::io::write_matrix_market(tmp.path() + "/no/such/dir/x.mtx", aijp::gen::banded(3, 1));
    ADD_FAILURE() << "no exception";
  } catch (const aijp::bad_input& e) {
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos) << e.what();
  }
}

TEST(io_matrix_market, generated_matrices_survive_a_file)
{
  temp_dir tmp;
  for (const char* spec : {"fem3:3x4x2,seed=5", "circuit:rows=500,dense=3,len=200", "powerlaw:rows=400,deg=5,exp=2.2"}) {
    SCOPED_TRACE(spec);
    const auto a = aijp::gen::from_spec(spec);
    const auto path = tmp.file("g.mtx.gz");
    aijp::io::write_matrix_market(path, a);
    EXPECT_TRUE(aijp::test::same_matrix(a, aijp::io::read_matrix_market(path)));
  }
}

}  // namespace
