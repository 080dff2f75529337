// Matrix Market reader and writer (see matrix_market.hpp for the contract).
//
// The reader streams the (possibly gzip-compressed) file through zlib in large chunks, splits lines with
// memchr and parses numbers with std::from_chars, which is locale-independent and avoids a stream
// extraction per token. Entries are collected as triplets and turned into CSR by two stable counting
// sorts (by column, then by row), so rows come out with ascending columns without a comparison sort and
// duplicates end up adjacent, where they are summed.
#include <aijpredict/error.hpp>
#include <aijpredict/matrix_market.hpp>

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <system_error>
#include <vector>

namespace aijp {
namespace io {
namespace {

constexpr size_type max_index = std::numeric_limits<index_type>::max();

/// Longest line accepted; a longer one is not a Matrix Market file (it would only exhaust memory).
constexpr std::size_t max_line_bytes = std::size_t{64} << 20;

/// Cap of the up-front reservation from the declared entry count, so a lying header cannot make the
/// reader allocate more than the file can fill; the vectors grow normally past it.
constexpr size_type max_reserve = size_type{1} << 22;

std::string at_line(const std::string& path, size_type line)
{
  return path + ": line " + std::to_string(line) + ": ";
}

[[noreturn]] void fail_input(const std::string& path, size_type line, const std::string& what)
{
  AIJP_THROW(bad_input, at_line(path, line) + what);
}

[[noreturn]] void fail_unsupported(const std::string& path, size_type line, const std::string& what)
{
  AIJP_THROW(not_supported, at_line(path, line) + what);
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

const char* skip_space(const char* p, const char* end)
{
  while (p != end && is_space(*p)) ++p;
  return p;
}

const char* token_end(const char* p, const char* end)
{
  while (p != end && !is_space(*p)) ++p;
  return p;
}

/// The token starting at `p` (after spaces), shortened for messages.
std::string quote_token(const char* p, const char* end)
{
  p = skip_space(p, end);
  const char* e = token_end(p, end);
  std::string tok(p, std::min<std::size_t>(static_cast<std::size_t>(e - p), 40));
  if (e - p > 40) tok += "...";
  return "'" + tok + "'";
}

std::string quote_line(const char* p, const char* end)
{
  std::string s(p, std::min<std::size_t>(static_cast<std::size_t>(end - p), 80));
  if (end - p > 80) s += "...";
  return "'" + s + "'";
}

bool is_blank_or_comment(const char* p, const char* end)
{
  p = skip_space(p, end);
  return p == end || *p == '%';
}

std::string to_lower(std::string s)
{
  for (auto& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

enum class parse_status { ok, missing, malformed, out_of_range };

/// Parses one whitespace-delimited integer token at `p` (after spaces); advances `p` past it.
parse_status parse_integer(const char*& p, const char* end, long long& value)
{
  p = skip_space(p, end);
  if (p == end) return parse_status::missing;
  const char* first = p;
  if (*first == '+' && first + 1 != end && first[1] != '-') ++first;
  const auto res = std::from_chars(first, end, value);
  const char* e = token_end(p, end);
  if (res.ec == std::errc::result_out_of_range && res.ptr == e) {
    p = e;
    return parse_status::out_of_range;
  }
  if (res.ec != std::errc() || res.ptr != e) return parse_status::malformed;
  p = e;
  return parse_status::ok;
}

/// Parses one whitespace-delimited floating-point token at `p`; advances `p` past it. Values that
/// underflow are accepted (they round to a subnormal or zero, like strtod); overflow is out_of_range.
parse_status parse_real(const char*& p, const char* end, double& value)
{
  p = skip_space(p, end);
  if (p == end) return parse_status::missing;
  const char* first = p;
  if (*first == '+' && first + 1 != end && first[1] != '-') ++first;
  const auto res = std::from_chars(first, end, value);
  const char* e = token_end(p, end);
  if (res.ptr != e || (res.ec != std::errc() && res.ec != std::errc::result_out_of_range)) {
    return parse_status::malformed;
  }
  p = e;
  if (res.ec == std::errc::result_out_of_range) {
    // from_chars leaves `value` unset on under- and overflow; strtod tells them apart.
    const std::string tok(first, e);
    value = std::strtod(tok.c_str(), nullptr);
    if (!std::isfinite(value)) return parse_status::out_of_range;
  }
  return parse_status::ok;
}

/// The text of a zlib error without the "<path>: " prefix gzerror puts in front of it.
std::string zlib_message(int errnum, const char* msg, int saved_errno)
{
  if (errnum == Z_ERRNO) return saved_errno != 0 ? std::strerror(saved_errno) : "I/O error";
  std::string m = msg != nullptr ? msg : "";
  const auto colon = m.rfind(": ");
  if (colon != std::string::npos) m = m.substr(colon + 2);
  return m.empty() ? "zlib error " + std::to_string(errnum) : m;
}

/// Reads a plain or gzip-compressed file line by line (zlib reads plain files transparently).
class line_reader {
 public:
  explicit line_reader(const std::string& path) : path_(path), buf_(std::size_t{1} << 20)
  {
    errno = 0;
    file_ = gzopen(path.c_str(), "rb");
    if (file_ == nullptr) {
      const int err = errno;
      AIJP_THROW(bad_input, path + ": cannot open: " +
                                (err != 0 ? std::string(std::strerror(err)) : std::string("out of memory")));
    }
    gzbuffer(file_, 1u << 18);
  }
  ~line_reader() { gzclose(file_); }
  line_reader(const line_reader&) = delete;
  line_reader& operator=(const line_reader&) = delete;

  /// The next line as [begin, end) without its terminator; false at the end of the file. The range stays
  /// valid until the next call.
  bool next(const char*& begin, const char*& end)
  {
    while (true) {
      const auto* nl = static_cast<const char*>(std::memchr(buf_.data() + pos_, '\n', len_ - pos_));
      if (nl != nullptr) {
        begin = buf_.data() + pos_;
        end = nl;
        pos_ = static_cast<std::size_t>(nl - buf_.data()) + 1;
        ++line_;
        return true;
      }
      if (eof_) {
        // A read error ends the data: report it where the intact lines end, without the partial line.
        if (!error_.empty()) fail_input(path_, line_ + 1, "read error: " + error_);
        if (pos_ == len_) return false;
        begin = buf_.data() + pos_;
        end = buf_.data() + len_;
        pos_ = len_;
        ++line_;
        return true;
      }
      fill();
    }
  }

  /// Number of lines returned so far (the 1-based number of the last one).
  size_type line() const { return line_; }

 private:
  void fill()
  {
    if (pos_ > 0) {
      std::memmove(buf_.data(), buf_.data() + pos_, len_ - pos_);
      len_ -= pos_;
      pos_ = 0;
    }
    if (len_ == buf_.size()) {
      if (buf_.size() >= max_line_bytes) {
        fail_input(path_, line_ + 1, "line longer than " + std::to_string(max_line_bytes) + " bytes");
      }
      buf_.resize(buf_.size() * 2);
    }
    const auto want = static_cast<unsigned>(std::min<std::size_t>(buf_.size() - len_, 1u << 30));
    errno = 0;
    const int got = gzread(file_, buf_.data() + len_, want);
    const int saved_errno = errno;
    int errnum = Z_OK;
    const char* msg = gzerror(file_, &errnum);
    if (got > 0) len_ += static_cast<std::size_t>(got);
    if (got < 0 || errnum != Z_OK) {
      error_ = zlib_message(errnum, msg, saved_errno);
      eof_ = true;
    } else if (got == 0) {
      eof_ = true;
    }
  }

  std::string path_;
  gzFile file_ = nullptr;
  std::vector<char> buf_;
  std::size_t pos_ = 0;
  std::size_t len_ = 0;
  bool eof_ = false;
  std::string error_;  ///< zlib or system error that ended the data, reported after the intact lines
  size_type line_ = 0;
};

/// Parses the banner (line 1) and the size line; leaves `in` just after the size line.
mm_info parse_header(line_reader& in, const std::string& path)
{
  const char* b = nullptr;
  const char* e = nullptr;
  if (!in.next(b, e)) fail_input(path, 1, "empty file (expected a '%%MatrixMarket' banner)");

  static const char banner[] = "%%matrixmarket";
  const std::size_t banner_len = sizeof(banner) - 1;
  const char* p = b;
  const char* t = token_end(p, e);
  if (static_cast<std::size_t>(t - p) != banner_len || to_lower(std::string(p, t)) != banner) {
    fail_input(path, 1, "missing '%%MatrixMarket' banner, got " + quote_line(b, e));
  }
  std::string words[4];
  const char* names[4] = {"object", "format", "field", "symmetry"};
  p = t;
  for (int k = 0; k < 4; ++k) {
    p = skip_space(p, e);
    t = token_end(p, e);
    if (p == t) {
      fail_input(path, 1, std::string("incomplete banner: missing the ") + names[k] +
                              " (expected '%%MatrixMarket matrix <format> <field> <symmetry>')");
    }
    words[k] = to_lower(std::string(p, t));
    p = t;
  }
  if (skip_space(p, e) != e) fail_input(path, 1, "unexpected text " + quote_token(p, e) + " after the banner");

  mm_info info;
  if (words[0] != "matrix") fail_input(path, 1, "unknown object '" + words[0] + "' (expected 'matrix')");
  info.format = words[1];
  info.field = words[2];
  info.symmetry = words[3];
  if (info.format != "coordinate" && info.format != "array") {
    fail_input(path, 1, "unknown format '" + info.format + "' (expected 'coordinate' or 'array')");
  }
  if (info.field != "real" && info.field != "integer" && info.field != "pattern" && info.field != "complex") {
    fail_input(path, 1,
               "unknown field '" + info.field + "' (expected 'real', 'integer', 'pattern' or 'complex')");
  }
  if (info.symmetry != "general" && info.symmetry != "symmetric" && info.symmetry != "skew-symmetric" &&
      info.symmetry != "hermitian") {
    fail_input(path, 1, "unknown symmetry '" + info.symmetry +
                            "' (expected 'general', 'symmetric', 'skew-symmetric' or 'hermitian')");
  }
  if (info.format == "array" && info.field == "pattern") {
    fail_input(path, 1, "the 'pattern' field is not valid with the 'array' format");
  }
  if (info.field == "pattern" && (info.symmetry == "skew-symmetric" || info.symmetry == "hermitian")) {
    fail_input(path, 1, "the 'pattern' field is not valid with '" + info.symmetry + "' symmetry");
  }
  if (info.symmetry == "hermitian" && info.field != "complex") {
    fail_input(path, 1, "'hermitian' symmetry requires the 'complex' field");
  }

  bool found = false;
  while (in.next(b, e)) {
    if (!is_blank_or_comment(b, e)) {
      found = true;
      break;
    }
  }
  if (!found) fail_input(path, in.line() + 1, "missing size line (file ends after the header)");

  const size_type line = in.line();
  const bool coordinate = info.format == "coordinate";
  const std::string expected =
      coordinate ? "expected 'rows cols entries'" : "expected 'rows cols' for the array format";
  long long sizes[3] = {0, 0, 0};
  const int count = coordinate ? 3 : 2;
  p = b;
  for (int k = 0; k < count; ++k) {
    const char* tok = skip_space(p, e);
    const auto st = parse_integer(p, e, sizes[k]);
    if (st == parse_status::out_of_range) {
      if (*tok == '-') fail_input(path, line, "negative size in size line " + quote_line(b, e));
      fail_unsupported(path, line, "size " + quote_token(tok, e) + " exceeds the 32-bit local index range");
    }
    if (st != parse_status::ok) fail_input(path, line, "bad size line " + quote_line(b, e) + ": " + expected);
  }
  if (skip_space(p, e) != e) fail_input(path, line, "bad size line " + quote_line(b, e) + ": " + expected);
  for (int k = 0; k < count; ++k) {
    if (sizes[k] < 0) fail_input(path, line, "negative size in size line " + quote_line(b, e));
  }
  info.rows = sizes[0];
  info.cols = sizes[1];
  if (info.rows > max_index || info.cols > max_index) {
    fail_unsupported(path, line,
                     "matrix of " + std::to_string(info.rows) + " x " + std::to_string(info.cols) +
                         " exceeds the 32-bit local index range (at most " + std::to_string(max_index) +
                         " rows and columns)");
  }
  if (info.symmetry != "general" && info.rows != info.cols) {
    fail_input(path, line, "a " + info.symmetry + " matrix must be square, the size line gives " +
                               std::to_string(info.rows) + " x " + std::to_string(info.cols));
  }
  if (coordinate) {
    info.entries = sizes[2];
  } else if (info.symmetry == "general") {
    info.entries = info.rows * info.cols;
  } else if (info.symmetry == "skew-symmetric") {
    info.entries = info.rows * (info.rows - 1) / 2;
  } else {
    info.entries = info.rows * (info.rows + 1) / 2;
  }
  return info;
}

void check_real_field(const mm_info& info, const std::string& path)
{
  if (info.field == "complex" || info.symmetry == "hermitian") {
    fail_unsupported(path, 1, "complex matrices are not supported (real scalars only)");
  }
}

/// Parses the value token of an entry line for a real or integer field.
double parse_value(const char*& p, const char* e, const mm_info& info, const std::string& path,
                   size_type line)
{
  const char* start = p;
  double v = 0.0;
  if (info.field == "integer") {
    long long iv = 0;
    const auto st = parse_integer(p, e, iv);
    if (st == parse_status::missing) fail_input(path, line, "missing value");
    if (st == parse_status::out_of_range) {
      fail_input(path, line, "integer value " + quote_token(start, e) + " out of the 64-bit range");
    }
    if (st != parse_status::ok) {
      fail_input(path, line, "value " + quote_token(start, e) + " is not an integer (field 'integer')");
    }
    v = static_cast<double>(iv);
  } else {
    const auto st = parse_real(p, e, v);
    if (st == parse_status::missing) fail_input(path, line, "missing value");
    if (st == parse_status::out_of_range) {
      fail_input(path, line, "value " + quote_token(start, e) + " overflows double");
    }
    if (st != parse_status::ok) fail_input(path, line, "value " + quote_token(start, e) + " is not a number");
    if (!std::isfinite(v)) {
      fail_input(path, line, "value " + quote_token(start, e) + " is not finite (NaN and Inf are rejected)");
    }
  }
  return v;
}

index_type parse_entry_index(const char*& p, const char* e, const char* which, size_type bound,
                             const std::string& path, size_type line)
{
  const char* start = p;
  long long idx = 0;
  const auto st = parse_integer(p, e, idx);
  if (st == parse_status::missing) {
    fail_input(path, line, std::string("missing ") + which + " index (expected 'row col value')");
  }
  if (st == parse_status::malformed) {
    fail_input(path, line, std::string("bad ") + which + " index " + quote_token(start, e));
  }
  if (st == parse_status::out_of_range || idx < 1 || idx > bound) {
    fail_input(path, line, std::string(which) + " index " + quote_token(start, e) + " out of range [1, " +
                               std::to_string(bound) + "]");
  }
  return static_cast<index_type>(idx - 1);
}

/// Triplets (0-based, in file order; fewer than 2^31) to CSR: a stable counting sort by row, then a
/// stable sort by column of the rows that are not already ascending (rows of a column-major file, the
/// usual SuiteSparse order, are), so duplicates become adjacent and are summed in file order, like
/// sequential ADD_VALUES calls. The only per-row storage is the result's row_ptr.
csr_matrix<double> triplets_to_csr(size_type rows, size_type cols, std::vector<index_type>& ti,
                                   std::vector<index_type>& tj, std::vector<double>& tv,
                                   const std::string& path)
{
  struct entry {
    index_type col;
    double value;
  };
  const std::size_t n = ti.size();
  csr_matrix<double> a;
  a.rows = rows;
  a.cols = cols;
  auto& ptr = a.row_ptr;
  ptr.assign(static_cast<std::size_t>(rows) + 1, 0);
  for (std::size_t k = 0; k < n; ++k) ++ptr[static_cast<std::size_t>(ti[k]) + 1];
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) ptr[r + 1] += ptr[r];
  // Scatter with ptr[r] as the cursor of row r; afterwards ptr[r] is the end of row r.
  std::vector<entry> sorted(n);
  for (std::size_t k = 0; k < n; ++k) {
    sorted[static_cast<std::size_t>(ptr[static_cast<std::size_t>(ti[k])]++)] = {tj[k], tv[k]};
  }
  std::vector<index_type>().swap(ti);
  std::vector<index_type>().swap(tj);
  std::vector<double>().swap(tv);

  // Sort, merge duplicates and compact; ptr[r + 1] becomes the end of row r in the compacted arrays.
  const auto by_col = [](const entry& x, const entry& y) { return x.col < y.col; };
  std::size_t out = 0;
  std::size_t begin = 0;
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    const auto end = static_cast<std::size_t>(ptr[r]);
    const auto first = sorted.begin() + static_cast<std::ptrdiff_t>(begin);
    const auto last = sorted.begin() + static_cast<std::ptrdiff_t>(end);
    if (!std::is_sorted(first, last, by_col)) std::stable_sort(first, last, by_col);
    const std::size_t row_begin = out;
    for (std::size_t k = begin; k < end; ++k) {
      if (out > row_begin && sorted[out - 1].col == sorted[k].col) {
        sorted[out - 1].value += sorted[k].value;
        if (!std::isfinite(sorted[out - 1].value)) {
          AIJP_THROW(bad_input, path + ": duplicate entries of (" + std::to_string(r + 1) + ", " +
                                    std::to_string(sorted[k].col + 1) + ") sum to a non-finite value");
        }
      } else {
        sorted[out++] = sorted[k];
      }
    }
    begin = end;
    ptr[r] = static_cast<index_type>(row_begin);
  }
  // ptr[r] now holds the compacted start of row r; shift in the total.
  ptr[static_cast<std::size_t>(rows)] = static_cast<index_type>(out);
  a.col_idx.resize(out);
  a.values.resize(out);
  for (std::size_t k = 0; k < out; ++k) {
    a.col_idx[k] = sorted[k].col;
    a.values[k] = sorted[k].value;
  }
  return a;
}

csr_matrix<double> read_coordinate(line_reader& in, const mm_info& info, const std::string& path)
{
  const bool pattern = info.field == "pattern";
  const bool symmetric = info.symmetry == "symmetric";
  const bool skew = info.symmetry == "skew-symmetric";
  const size_type mirror = (symmetric || skew) ? 2 : 1;
  std::vector<index_type> ti;
  std::vector<index_type> tj;
  std::vector<double> tv;
  const auto reserve = static_cast<std::size_t>(std::min(info.entries, max_reserve) * mirror);
  ti.reserve(reserve);
  tj.reserve(reserve);
  tv.reserve(reserve);

  size_type found = 0;
  const char* b = nullptr;
  const char* e = nullptr;
  while (in.next(b, e)) {
    if (is_blank_or_comment(b, e)) continue;
    const size_type line = in.line();
    if (found == info.entries) {
      fail_input(path, line, "extra entry " + quote_line(b, e) + " beyond the " + std::to_string(info.entries) +
                                 " entries declared in the size line");
    }
    const char* p = b;
    const index_type i = parse_entry_index(p, e, "row", info.rows, path, line);
    const index_type j = parse_entry_index(p, e, "column", info.cols, path, line);
    const double v = pattern ? 1.0 : parse_value(p, e, info, path, line);
    if (skip_space(p, e) != e) {
      fail_input(path, line, "unexpected text " + quote_token(p, e) + " after the entry" +
                                 (pattern ? " (a 'pattern' entry is 'row col')" : ""));
    }
    if (skew && i == j && v != 0.0) {
      fail_input(path, line, "nonzero diagonal entry (" + std::to_string(i + 1) + ", " + std::to_string(j + 1) +
                                 ") in a skew-symmetric matrix");
    }
    if (ti.size() + 2 > static_cast<std::size_t>(max_index)) {
      fail_unsupported(path, line, "more than " + std::to_string(max_index) +
                                       " entries (after symmetric expansion) exceed the 32-bit row_ptr range");
    }
    ti.push_back(i);
    tj.push_back(j);
    tv.push_back(v);
    if (mirror == 2 && i != j) {
      ti.push_back(j);
      tj.push_back(i);
      tv.push_back(skew ? -v : v);
    }
    ++found;
  }
  if (found < info.entries) {
    fail_input(path, in.line() + 1,
               "file ends early: the size line declares " + std::to_string(info.entries) + " entries, found " +
                   std::to_string(found));
  }
  return triplets_to_csr(info.rows, info.cols, ti, tj, tv, path);
}

csr_matrix<double> read_array(line_reader& in, const mm_info& info, const std::string& path)
{
  const size_type rows = info.rows;
  const size_type cols = info.cols;
  if (rows * cols > max_index) {
    fail_unsupported(path, in.line(), "dense " + std::to_string(rows) + " x " + std::to_string(cols) +
                                  " array has more than " + std::to_string(max_index) + " entries");
  }
  const bool symmetric = info.symmetry == "symmetric";
  const bool skew = info.symmetry == "skew-symmetric";
  std::vector<double> dense(static_cast<std::size_t>(rows * cols), 0.0);  // row-major
  // Column-major traversal of the stored part: general all (i, j); symmetric i >= j; skew i > j.
  size_type i = 0;
  size_type j = 0;
  const auto first_row = [&](size_type col) { return symmetric ? col : (skew ? col + 1 : 0); };
  i = first_row(0);
  while (j < cols && i >= rows) {
    ++j;
    i = first_row(j);
  }
  size_type found = 0;
  const char* b = nullptr;
  const char* e = nullptr;
  while (in.next(b, e)) {
    if (is_blank_or_comment(b, e)) continue;
    const size_type line = in.line();
    if (found == info.entries) {
      fail_input(path, line, "extra entry " + quote_line(b, e) + " beyond the " + std::to_string(info.entries) +
                                 " values of the " + std::to_string(rows) + " x " + std::to_string(cols) +
                                 " " + info.symmetry + " array");
    }
    const char* p = b;
    const double v = parse_value(p, e, info, path, line);
    if (skip_space(p, e) != e) {
      fail_input(path, line, "unexpected text " + quote_token(p, e) + " after the value (one value per line)");
    }
    dense[static_cast<std::size_t>(i * cols + j)] = v;
    if (symmetric) dense[static_cast<std::size_t>(j * cols + i)] = v;
    if (skew) dense[static_cast<std::size_t>(j * cols + i)] = -v;
    ++found;
    ++i;
    while (j < cols && i >= rows) {
      ++j;
      i = first_row(j);
    }
  }
  if (found < info.entries) {
    fail_input(path, in.line() + 1,
               "file ends early: the array needs " + std::to_string(info.entries) + " values, found " +
                   std::to_string(found));
  }
  csr_matrix<double> a;
  a.rows = rows;
  a.cols = cols;
  a.row_ptr.resize(static_cast<std::size_t>(rows) + 1);
  a.col_idx.resize(dense.size());
  for (size_type r = 0; r <= rows; ++r) a.row_ptr[static_cast<std::size_t>(r)] = static_cast<index_type>(r * cols);
  for (std::size_t k = 0; k < dense.size(); ++k) {
    a.col_idx[k] = static_cast<index_type>(static_cast<size_type>(k) % cols);
  }
  a.values = std::move(dense);
  return a;
}

bool ends_with(const std::string& s, const std::string& suffix)
{
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void check_csr(const csr_matrix<double>& a, const std::string& path)
{
  const std::string where = path + ": cannot write: ";
  if (a.rows < 0 || a.cols < 0 || a.rows > max_index || a.cols > max_index) {
    AIJP_THROW(bad_input, where + "invalid size " + std::to_string(a.rows) + " x " + std::to_string(a.cols));
  }
  if (a.row_ptr.size() != static_cast<std::size_t>(a.rows) + 1) {
    AIJP_THROW(bad_input, where + "row_ptr has " + std::to_string(a.row_ptr.size()) + " entries, expected " +
                              std::to_string(a.rows + 1));
  }
  if (a.values.size() != a.col_idx.size()) {
    AIJP_THROW(bad_input, where + "col_idx and values differ in size");
  }
  if (a.row_ptr[0] != 0 || static_cast<std::size_t>(a.row_ptr.back()) != a.col_idx.size()) {
    AIJP_THROW(bad_input, where + "row_ptr must start at 0 and end at nnz");
  }
  for (std::size_t r = 0; r < static_cast<std::size_t>(a.rows); ++r) {
    if (a.row_ptr[r + 1] < a.row_ptr[r]) {
      AIJP_THROW(bad_input, where + "row_ptr decreases at row " + std::to_string(r));
    }
    for (auto k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) {
      const auto c = a.col_idx[static_cast<std::size_t>(k)];
      if (c < 0 || c >= a.cols) {
        AIJP_THROW(bad_input, where + "column index " + std::to_string(c) + " out of range in row " +
                                  std::to_string(r));
      }
      if (!std::isfinite(a.values[static_cast<std::size_t>(k)])) {
        AIJP_THROW(bad_input, where + "non-finite value in row " + std::to_string(r));
      }
    }
  }
}

}  // namespace

mm_info read_matrix_market_header(const std::string& path)
{
  line_reader in(path);
  return parse_header(in, path);
}

csr_matrix<double> read_matrix_market(const std::string& path)
{
  line_reader in(path);
  const mm_info info = parse_header(in, path);
  check_real_field(info, path);
  return info.format == "array" ? read_array(in, info, path) : read_coordinate(in, info, path);
}

void write_matrix_market(const std::string& path, const csr_matrix<double>& a)
{
  check_csr(a, path);
  const bool compress = ends_with(path, ".gz");
  errno = 0;
  gzFile f = gzopen(path.c_str(), compress ? "wb1" : "wbT");
  if (f == nullptr) {
    const int err = errno;
    AIJP_THROW(bad_input, path + ": cannot create: " +
                              (err != 0 ? std::string(std::strerror(err)) : std::string("out of memory")));
  }
  std::string buf;
  buf.reserve(std::size_t{1} << 20);
  const auto flush = [&]() {
    if (buf.empty()) return;
    const int wrote = gzwrite(f, buf.data(), static_cast<unsigned>(buf.size()));
    if (wrote <= 0 || static_cast<std::size_t>(wrote) != buf.size()) {
      const int saved_errno = errno;
      int errnum = Z_OK;
      const char* msg = gzerror(f, &errnum);
      const std::string why = zlib_message(errnum, msg, saved_errno);
      gzclose(f);
      AIJP_THROW(bad_input, path + ": write error: " + why);
    }
    buf.clear();
  };
  char line[96];
  buf += "%%MatrixMarket matrix coordinate real general\n% written by aijpredict\n";
  std::snprintf(line, sizeof(line), "%lld %lld %lld\n", static_cast<long long>(a.rows),
                static_cast<long long>(a.cols), static_cast<long long>(a.nnz()));
  buf += line;
  for (std::size_t r = 0; r < static_cast<std::size_t>(a.rows); ++r) {
    for (auto k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k) {
      const int n = std::snprintf(line, sizeof(line), "%lld %d %.17g\n", static_cast<long long>(r + 1),
                                  a.col_idx[static_cast<std::size_t>(k)] + 1,
                                  a.values[static_cast<std::size_t>(k)]);
      buf.append(line, static_cast<std::size_t>(n));
      if (buf.size() > (std::size_t{1} << 20) - sizeof(line)) flush();
    }
  }
  flush();
  errno = 0;
  const int rc = gzclose(f);
  if (rc != Z_OK) {
    const std::string why = rc == Z_ERRNO ? std::string(std::strerror(errno)) : "zlib error " + std::to_string(rc);
    AIJP_THROW(bad_input, path + ": write error on close: " + why);
  }
}

}  // namespace io
}  // namespace aijp
