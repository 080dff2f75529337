// Experiment (host only, session 27): the x locality of the rows that bound the thread-per-row chain, for the
// matrices named in sample files. For each matrix (one name per line on stdin, as in the samples' "matrix" field:
// a file of --matrices DIR, gen:SPEC, or a warm-up name such as constant:rows=...,seed=N, generated here exactly as
// kernels/src/device_generate.cu generates it on the GPU) it prints one line of tab-separated values:
//
//   name rows nnz max_len chain_warp_nnz d1 c1 r4 dg row offset first_col gaps
//
// over the chain group (the 32-row group of natural order holding the longest row; ties to the most nonzeros, as
// row_stats::chain_warp_nnz) and at most `sample` (4096) leading entries of a row, x sectors of 32 bytes at
// --value-bytes (8):
//   d1: distinct x sectors per entry of the group's first longest row,
//   c1: sector changes per entry along that row (the first entry counts as one),
//   r4: share of its unroll-by-4 rounds (4 consecutive entries) that touch a sector no earlier entry touched,
//   dg: distinct sectors per entry over the rows of the group at least half as long as the longest (sampled
//       entries split evenly between them);
// then the longest row itself: its index, the offset of its first entry, its first column and the steps of more
// than one column between its sampled entries.
// rows, nnz, max_len and chain_warp_nnz repeat the row statistics so that the reproduction can be checked
// against the samples' own. Warm-up block names with "placed=hashed" are placed as block_layout places them;
// block names without it (warm-ups before it) have their long rows at rows 0 .. long_rows - 1, as they had.
#include <aijpredict/device_generate.hpp>
#include <aijpredict/generators.hpp>
#include <aijpredict/matrix_market.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

namespace {

using aijp::index_type;
using aijp::size_type;

constexpr int sample = 4096;
constexpr size_type group = 32;
constexpr double pi = 3.14159265358979323846;

// kernels/src/device_generate.cu, bit for bit (mix, unit) and formula for formula (the length draws: host libm,
// whose log / pow / cos may differ from the device's in the last place and so move a length at a .5 boundary).
std::uint64_t mix(std::uint64_t x)
{
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
double unit(std::uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

struct warmup_spec {
  std::string dist;
  size_type rows = 0, cols = 0, window = 0;
  double mean = 0, param = 0;
  std::uint64_t seed = 0;
  bool placed = false;  // block: "placed=hashed" (block_layout); without it the long rows are rows 0 .. param - 1
};

// Where a block's long rows lie: aijp::block_layout for names with "placed=hashed"; the former layout, rows
// 0 .. param - 1 from column 0, for names without it (the samples of earlier warm-ups).
struct block_placement {
  size_type first_row = 0, count = 0, first_col = 0;
  index_type pad = 0;
};

block_placement place_block(const warmup_spec& s)
{
  block_placement b;  // count 0: every row in its own centred window (the former block layout too)
  if (s.dist != "block" || !s.placed) return b;
  aijp::device_generator_spec d;  // the generator's own placement (a host function of the kernels library)
  d.dist = aijp::device_generator_spec::lengths::block;
  d.rows = s.rows;
  d.cols = s.cols;
  d.mean = s.mean;
  d.param = s.param;
  d.window = s.window;
  d.seed = s.seed;
  const aijp::device_block_layout l = aijp::block_layout(d);
  b.count = static_cast<size_type>(std::ceil(s.param));
  b.first_row = l.first_row;
  b.pad = l.pad;
  b.first_col = l.first_col;
  return b;
}

bool parse_warmup(const std::string& name, warmup_spec& s)
{
  const auto colon = name.find(':');
  if (colon == std::string::npos) return false;
  s.dist = name.substr(0, colon);
  if (s.dist != "constant" && s.dist != "normal" && s.dist != "uniform" && s.dist != "pareto" && s.dist != "block") return false;
  std::map<std::string, std::string> kv;
  std::size_t p = colon + 1;
  while (p < name.size()) {
    const auto comma = name.find(',', p);
    const std::string item = name.substr(p, comma == std::string::npos ? std::string::npos : comma - p);
    const auto eq = item.find('=');
    if (eq != std::string::npos) kv[item.substr(0, eq)] = item.substr(eq + 1);
    if (comma == std::string::npos) break;
    p = comma + 1;
  }
  s.rows = std::stoll(kv.at("rows"));
  s.cols = std::stoll(kv.at("cols"));
  s.mean = std::stod(kv.at("mean"));
  s.window = std::stoll(kv.at("window"));
  s.seed = std::stoull(kv.at("seed"));
  s.placed = kv.count("placed") && kv.at("placed") == "hashed";
  for (const char* k : {"sigma", "width", "exponent", "long_rows"}) {
    if (kv.count(k)) s.param = std::stod(kv.at(k));
  }
  return true;
}

index_type draw_length(const warmup_spec& s, const block_placement& b, size_type r, size_type max_len)
{
  const std::uint64_t h1 = mix(s.seed ^ mix(static_cast<std::uint64_t>(r) * 2 + 1));
  const std::uint64_t h2 = mix(h1 ^ 0x5bd1e995ULL);
  double l = s.mean;
  if (s.dist == "normal") {
    l = s.mean + s.param * std::sqrt(-2.0 * std::log(1.0 - unit(h1))) * std::cos(pi * 2.0 * unit(h2));
  } else if (s.dist == "uniform") {
    l = std::floor(s.mean - s.param + (2.0 * s.param + 1.0) * unit(h1));
  } else if (s.dist == "pareto") {
    l = s.mean * (s.param - 1.0) / s.param * std::pow(1.0 - unit(h1), -1.0 / s.param);
  } else if (s.dist == "block") {
    l = r >= b.first_row && static_cast<double>(r - b.first_row) < s.param ? static_cast<double>(max_len)
        : r + 1 == b.first_row                                               ? s.mean + b.pad
                                                                             : s.mean;
  }
  long long n = std::llrint(l);
  n = n < 0 ? 0 : (n > max_len ? max_len : n);
  return static_cast<index_type>(n);
}

// fill_rows of device_generate.cu for one row.
std::vector<index_type> warmup_row(const warmup_spec& s, const block_placement& b, size_type r, long long len)
{
  std::vector<index_type> col(len);
  const long long cols = s.cols, rows = s.rows;
  const long long w = s.window < s.cols ? s.window : s.cols;
  const long long centre = static_cast<long long>((static_cast<double>(r) + 0.5) * cols / rows);
  long long base = centre - w / 2;
  base = base < 0 ? 0 : (base > cols - w ? cols - w : base);
  if (r >= b.first_row && r - b.first_row < b.count) base = b.first_col;
  for (long long k = 0; k < len; ++k) {
    const long long lo = base + k * w / len, hi = base + (k + 1) * w / len;
    const std::uint64_t h = mix(s.seed ^ mix((static_cast<std::uint64_t>(r) << 20) ^ static_cast<std::uint64_t>(k)));
    col[k] = static_cast<index_type>(lo + static_cast<long long>(h % static_cast<std::uint64_t>(hi - lo)));
  }
  return col;
}

struct result {
  size_type rows = 0, nnz = 0, chain_warp_nnz = 0;
  index_type max_len = 0;
  double d1 = 0, c1 = 0, r4 = 0, dg = 0;
  size_type row = 0, offset = 0;  // the longest row and where its entries start
  index_type first_col = 0;
  size_type gaps = 0;  // steps of more than one column in its sampled entries
};

// The statistics from the row lengths and a way to read one row's columns.
result measure(const std::vector<index_type>& len, const std::function<std::vector<index_type>(size_type)>& row_cols,
               int value_bytes)
{
  result out;
  out.rows = len.size();
  unsigned long long best = 0;
  size_type best_group = 0;
  for (size_type g = 0; g * group < out.rows; ++g) {
    index_type m = 0;
    unsigned long long n = 0;
    for (size_type r = g * group; r < std::min(out.rows, (g + 1) * group); ++r) {
      m = std::max(m, len[r]);
      n += len[r];
    }
    out.nnz += n;
    const unsigned long long key = (static_cast<unsigned long long>(m) << 32) | std::min(n, 0xffffffffull);
    if (m > 0 && key > best) {
      best = key;
      best_group = g;
    }
  }
  out.max_len = static_cast<index_type>(best >> 32);
  out.chain_warp_nnz = best & 0xffffffffull;
  if (out.max_len == 0) return out;
  const auto sector = [&](index_type c) { return static_cast<long long>(c) * value_bytes / 32; };
  std::vector<size_type> long_rows;
  size_type longest = 0;
  bool found = false;
  for (size_type r = best_group * group; r < std::min(out.rows, (best_group + 1) * group); ++r) {
    if (!found && len[r] == out.max_len) {
      longest = r;
      found = true;
    }
    if (2 * static_cast<long long>(len[r]) >= out.max_len) long_rows.push_back(r);
  }
  {
    const std::vector<index_type> c = row_cols(longest);
    const std::size_t n = std::min<std::size_t>(c.size(), sample);
    std::unordered_set<long long> seen;
    std::size_t changes = 0, new_rounds = 0, rounds = 0;
    for (std::size_t k = 0; k < n; k += 4) {
      bool fresh = false;
      for (std::size_t j = k; j < std::min(n, k + 4); ++j) {
        const long long s = sector(c[j]);
        if (seen.insert(s).second) fresh = true;
        if (j == 0 || s != sector(c[j - 1])) ++changes;
      }
      ++rounds;
      if (fresh) ++new_rounds;
    }
    out.d1 = static_cast<double>(seen.size()) / n;
    out.c1 = static_cast<double>(changes) / n;
    out.r4 = static_cast<double>(new_rounds) / rounds;
    out.row = longest;
    for (size_type r = 0; r < longest; ++r) out.offset += len[r];
    out.first_col = c.empty() ? 0 : c[0];
    for (std::size_t k = 1; k < n; ++k) out.gaps += c[k] - c[k - 1] > 1 ? 1 : 0;
  }
  {
    const std::size_t per_row = std::max<std::size_t>(1, sample / long_rows.size());
    std::unordered_set<long long> seen;
    std::size_t n = 0;
    for (size_type r : long_rows) {
      const std::vector<index_type> c = row_cols(r);
      for (std::size_t k = 0; k < std::min(per_row, c.size()); ++k, ++n) seen.insert(sector(c[k]));
    }
    out.dg = static_cast<double>(seen.size()) / n;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv)
{
  std::string dir = ".";
  int value_bytes = 8;
  const char* usage =
      "usage: aijp_longrow_locality [--matrices DIR] [--value-bytes N] < names\n"
      "Reads matrix names (a sample file's \"matrix\" field: a Matrix Market file in DIR, gen:SPEC, or a warm-up\n"
      "name such as constant:rows=...,seed=N, generated as the GPU warm-up generates it) one per line on stdin\n"
      "and prints, tab-separated, the x locality of the rows that bound the thread-per-row chain (see the\n"
      "header of bench/experiments/longrow_locality.cpp for the columns; docs/models.md, session 27).\n"
      "  --matrices DIR     where Matrix Market names are read from (default .)\n"
      "  --value-bytes N    bytes per value for the 32-byte sector counts (default 8)\n"
      "  --help             this text\n";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << usage;
      return 0;
    }
    if (i + 1 < argc && a == "--matrices") {
      dir = argv[++i];
    } else if (i + 1 < argc && a == "--value-bytes") {
      value_bytes = std::atoi(argv[++i]);
      if (value_bytes <= 0) {
        std::cerr << "aijp_longrow_locality: --value-bytes must be a positive integer\n";
        return 2;
      }
    } else {
      std::cerr << "aijp_longrow_locality: unknown or incomplete option '" << a << "'\n" << usage;
      return 2;
    }
  }
  std::string name;
  std::printf("matrix\trows\tnnz\tmax_len\tchain_warp_nnz\td1\tc1\tr4\tdg\trow\toffset\tfirst_col\tgaps\n");
  while (std::getline(std::cin, name)) {
    if (name.empty()) continue;
    result r;
    warmup_spec w;
    if (parse_warmup(name, w)) {
      const size_type max_len = std::min(w.window, w.cols);
      const block_placement b = place_block(w);
      std::vector<index_type> len(w.rows);
      for (size_type k = 0; k < w.rows; ++k) len[k] = draw_length(w, b, k, max_len);
      r = measure(len, [&](size_type row) { return warmup_row(w, b, row, len[row]); }, value_bytes);
    } else {
      const aijp::csr_matrix<double> a = name.rfind("gen:", 0) == 0 ? aijp::gen::from_spec(name.substr(4))
                                                                      : aijp::io::read_matrix_market(dir + "/" + name);
      std::vector<index_type> len(a.rows);
      for (size_type k = 0; k < a.rows; ++k) len[k] = a.row_ptr[k + 1] - a.row_ptr[k];
      r = measure(len,
                  [&](size_type row) {
                    return std::vector<index_type>(a.col_idx.begin() + a.row_ptr[row], a.col_idx.begin() + a.row_ptr[row + 1]);
                  },
                  value_bytes);
    }
    std::printf("%s\t%lld\t%lld\t%d\t%lld\t%.4f\t%.4f\t%.4f\t%.4f\t%lld\t%lld\t%d\t%lld\n", name.c_str(),
                static_cast<long long>(r.rows), static_cast<long long>(r.nnz), static_cast<int>(r.max_len),
                static_cast<long long>(r.chain_warp_nnz), r.d1, r.c1, r.r4, r.dg, static_cast<long long>(r.row),
                static_cast<long long>(r.offset), static_cast<int>(r.first_col), static_cast<long long>(r.gaps));
    std::fflush(stdout);
  }
  return 0;
}
