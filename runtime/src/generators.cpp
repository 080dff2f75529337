// Deterministic matrix generators (see generators.hpp for the contract).
//
// Every generator goes through build_rows(): a first pass computes each row's length into row_ptr (with
// the 32-bit overflow check), then col_idx/values are sized once and a second pass fills each row in
// place. Random rows use one prng per (seed, purpose, row), so both passes see the same draws without
// storing them.
#include <aijpredict/error.hpp>
#include <aijpredict/generators.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace aijp {
namespace gen {

double prng::normal()
{
  while (true) {
    const double u = uniform(-1.0, 1.0);
    const double v = uniform(-1.0, 1.0);
    const double s = u * u + v * v;
    if (s > 0.0 && s < 1.0) return u * std::sqrt(-2.0 * std::log(s) / s);
  }
}

namespace {

constexpr size_type max_index = std::numeric_limits<index_type>::max();

/// prng stream ids: one per purpose, so the length pass and the fill pass draw independent numbers.
constexpr std::uint64_t stream_length = 1;
constexpr std::uint64_t stream_fill = 2;
constexpr std::uint64_t stream_weight = 3;

/// Half width of the near-diagonal window of circuit_like's sparse rows.
constexpr size_type circuit_window = 16;

void check_dim(size_type v, const char* what, const char* generator)
{
  if (v < 0) {
    AIJP_THROW(bad_input, std::string(generator) + ": " + what + " must be non-negative, got " + std::to_string(v));
  }
  if (v > max_index) {
    AIJP_THROW(not_supported, std::string(generator) + ": " + what + " = " + std::to_string(v) +
                                  " exceeds the 32-bit index range (" + std::to_string(max_index) + ")");
  }
}

/// rows = product of the grid dimensions, or not_supported if it leaves the 32-bit range.
size_type grid_points(size_type nx, size_type ny, size_type nz, const char* generator)
{
  check_dim(nx, "nx", generator);
  check_dim(ny, "ny", generator);
  check_dim(nz, "nz", generator);
  const size_type nxy = nx * ny;  // < 2^62
  if (nxy > max_index || (nz != 0 && nxy > max_index / nz)) {
    AIJP_THROW(not_supported, std::string(generator) + ": grid " + std::to_string(nx) + " x " + std::to_string(ny) +
                                  " x " + std::to_string(nz) + " has more than " + std::to_string(max_index) +
                                  " points (32-bit row index)");
  }
  return nxy * nz;
}

void check_nnz(long double nnz, const char* generator)
{
  if (nnz > static_cast<long double>(max_index)) {
    char count[64];
    std::snprintf(count, sizeof(count), "%.0Lf", nnz);
    AIJP_THROW(not_supported, std::string(generator) + ": " + count + " nonzeros exceed the 32-bit row_ptr range (" +
                                  std::to_string(max_index) + ")");
  }
}

/// Two-pass CSR construction: length(r) gives row r's length, fill(r, col, val, len) writes the row.
template <typename Length, typename Fill>
csr_matrix<double> build_rows(size_type rows, size_type cols, const char* generator, Length&& length, Fill&& fill)
{
  csr_matrix<double> a;
  a.rows = rows;
  a.cols = cols;
  a.row_ptr.resize(static_cast<std::size_t>(rows) + 1);
  a.row_ptr[0] = 0;
  size_type nnz = 0;
  for (size_type r = 0; r < rows; ++r) {
    nnz += length(r);
    check_nnz(static_cast<long double>(nnz), generator);
    a.row_ptr[static_cast<std::size_t>(r) + 1] = static_cast<index_type>(nnz);
  }
  a.col_idx.resize(static_cast<std::size_t>(nnz));
  a.values.resize(static_cast<std::size_t>(nnz));
  for (size_type r = 0; r < rows; ++r) {
    const auto begin = static_cast<std::size_t>(a.row_ptr[static_cast<std::size_t>(r)]);
    const auto end = static_cast<std::size_t>(a.row_ptr[static_cast<std::size_t>(r) + 1]);
    fill(r, a.col_idx.data() + begin, a.values.data() + begin, static_cast<size_type>(end - begin));
  }
  return a;
}

/// Writes k distinct integers of [0, n) in ascending order to out (k <= n). Dense picks (16 k >= n) use
/// selection sampling (Knuth, TAOCP 3.4.2, Algorithm S), O(n); sparse ones draw, sort and redraw the
/// duplicates, O(k log k) expected.
void sample_distinct(prng& g, index_type* out, size_type k, size_type n)
{
  if (k <= 0) return;
  if (k * 16 >= n) {
    size_type needed = k;
    for (size_type c = 0; needed > 0; ++c) {
      if (static_cast<size_type>(g.below(static_cast<std::uint64_t>(n - c))) < needed) {
        *out++ = static_cast<index_type>(c);
        --needed;
      }
    }
    return;
  }
  size_type have = 0;
  while (have < k) {
    for (size_type i = have; i < k; ++i) out[i] = static_cast<index_type>(g.below(static_cast<std::uint64_t>(n)));
    std::sort(out, out + k);
    have = std::unique(out, out + k) - out;
  }
}

/// Grid stencils: offsets sorted by (dz, dy, dx), which orders their columns ascending.
struct offset {
  int dx;
  int dy;
  int dz;
};

constexpr offset offsets_5pt[] = {{0, -1, 0}, {-1, 0, 0}, {0, 0, 0}, {1, 0, 0}, {0, 1, 0}};
constexpr offset offsets_7pt[] = {{0, 0, -1}, {0, -1, 0}, {-1, 0, 0}, {0, 0, 0},
                                  {1, 0, 0},  {0, 1, 0},  {0, 0, 1}};

struct grid {
  size_type nx;
  size_type ny;
  size_type nz;

  /// Index of the neighbour of point p = (x, y, z) at offset o, or -1 outside the domain.
  size_type neighbour(size_type x, size_type y, size_type z, const offset& o) const
  {
    const size_type xx = x + o.dx;
    const size_type yy = y + o.dy;
    const size_type zz = z + o.dz;
    if (xx < 0 || xx >= nx || yy < 0 || yy >= ny || zz < 0 || zz >= nz) return -1;
    return xx + nx * (yy + ny * zz);
  }

  /// Number of points whose neighbour at offset o lies inside: prod over dimensions of (n_d - |o_d|)+.
  long double pairs(const offset& o) const
  {
    const auto f = [](size_type n, int d) { return static_cast<long double>(std::max<size_type>(0, n - std::abs(d))); };
    return f(nx, o.dx) * f(ny, o.dy) * f(nz, o.dz);
  }
};

csr_matrix<double> stencil(const grid& g, const offset* offs, int count, double diag, const char* generator)
{
  const size_type n = grid_points(g.nx, g.ny, g.nz, generator);
  long double nnz = 0;
  for (int k = 0; k < count; ++k) nnz += g.pairs(offs[k]);
  check_nnz(nnz, generator);
  const auto decode = [&g](size_type r, size_type& x, size_type& y, size_type& z) {
    x = r % g.nx;
    y = (r / g.nx) % g.ny;
    z = r / (g.nx * g.ny);
  };
  return build_rows(
      n, n, generator,
      [&](size_type r) {
        size_type x, y, z;
        decode(r, x, y, z);
        size_type len = 0;
        for (int k = 0; k < count; ++k) len += g.neighbour(x, y, z, offs[k]) >= 0;
        return len;
      },
      [&](size_type r, index_type* col, double* val, size_type) {
        size_type x, y, z;
        decode(r, x, y, z);
        for (int k = 0; k < count; ++k) {
          const size_type c = g.neighbour(x, y, z, offs[k]);
          if (c < 0) continue;
          *col++ = static_cast<index_type>(c);
          *val++ = c == r ? diag : -1.0;
        }
      });
}

/// Entry [p][q] of the 3x3 coupling block of nodes a <= b (for a == b only p <= q is used), uniform in
/// [-1, 1): a counter-based draw, so both triangles compute the same value independently.
double fem_value(std::uint64_t seed, size_type a, size_type b, int p, int q)
{
  std::uint64_t h = mix64(seed ^ 0x5fe3a1c9d2b74e01ULL);
  h = mix64(h ^ static_cast<std::uint64_t>(a));
  h = mix64(h ^ (static_cast<std::uint64_t>(b) + 0x9e3779b97f4a7c15ULL));
  h = mix64(h ^ static_cast<std::uint64_t>(3 * p + q + 1));
  return static_cast<double>(h >> 11) * 0x1.0p-52 - 1.0;
}

/// Row length: clamp a real draw to [0, cols] before converting it.
size_type clamp_length(double x, size_type cols)
{
  if (!(x > 0.0)) return 0;
  if (x >= static_cast<double>(cols)) return cols;
  return static_cast<size_type>(x);
}

/// A random row: `len` distinct columns of [0, cols), values uniform in [-1, 1).
void fill_random_row(prng& g, index_type* col, double* val, size_type len, size_type cols)
{
  sample_distinct(g, col, len, cols);
  for (size_type k = 0; k < len; ++k) val[k] = g.uniform(-1.0, 1.0);
}

void check_real(double v, const char* what, const char* generator)
{
  if (!std::isfinite(v) || v < 0.0) {
    AIJP_THROW(bad_input, std::string(generator) + ": " + what + " must be finite and non-negative, got " +
                              std::to_string(v));
  }
}

}  // namespace

csr_matrix<double> laplacian_2d_5pt(size_type nx, size_type ny)
{
  return stencil({nx, ny, 1}, offsets_5pt, 5, 4.0, "laplacian_2d_5pt");
}

csr_matrix<double> laplacian_3d_7pt(size_type nx, size_type ny, size_type nz)
{
  return stencil({nx, ny, nz}, offsets_7pt, 7, 6.0, "laplacian_3d_7pt");
}

csr_matrix<double> laplacian_3d_27pt(size_type nx, size_type ny, size_type nz)
{
  offset offs[27];
  int k = 0;
  for (int dz = -1; dz <= 1; ++dz) {
    for (int dy = -1; dy <= 1; ++dy) {
      for (int dx = -1; dx <= 1; ++dx) offs[k++] = {dx, dy, dz};
    }
  }
  return stencil({nx, ny, nz}, offs, 27, 26.0, "laplacian_3d_27pt");
}

csr_matrix<double> fem_blocks_3dof(size_type nx, size_type ny, size_type nz, std::uint64_t seed)
{
  const char* name = "fem_blocks_3dof";
  const size_type nodes = grid_points(nx, ny, nz, name);
  if (nodes > max_index / 3) {
    AIJP_THROW(not_supported, std::string(name) + ": " + std::to_string(3 * nodes) +
                                  " degrees of freedom exceed the 32-bit row index range");
  }
  const grid g{nx, ny, nz};
  long double pairs = 0;
  for (const auto& o : offsets_7pt) pairs += g.pairs(o);
  check_nnz(9 * pairs, name);
  const auto neighbours = [&g](size_type node, size_type* out) {
    const size_type x = node % g.nx;
    const size_type y = (node / g.nx) % g.ny;
    const size_type z = node / (g.nx * g.ny);
    int count = 0;
    for (const auto& o : offsets_7pt) {
      const size_type m = g.neighbour(x, y, z, o);
      if (m >= 0) out[count++] = m;
    }
    return count;
  };
  return build_rows(
      3 * nodes, 3 * nodes, name,
      [&](size_type row) {
        size_type nb[7];
        return 3 * static_cast<size_type>(neighbours(row / 3, nb));
      },
      [&](size_type row, index_type* col, double* val, size_type) {
        const size_type node = row / 3;
        const int r = static_cast<int>(row % 3);
        size_type nb[7];
        const int count = neighbours(node, nb);
        double off_sum = 0.0;
        double* diag = nullptr;
        for (int k = 0; k < count; ++k) {
          const size_type m = nb[k];
          for (int c = 0; c < 3; ++c) {
            *col++ = static_cast<index_type>(3 * m + c);
            if (m == node && c == r) {
              diag = val++;
              continue;
            }
            const double v = m == node  ? fem_value(seed, node, node, std::min(r, c), std::max(r, c))
                              : node < m ? fem_value(seed, node, m, r, c)
                                         : fem_value(seed, m, node, c, r);  // block(node, m) = block(m, node)^T
            off_sum += std::abs(v);
            *val++ = v;
          }
        }
        *diag = 1.0 + off_sum;
      });
}

csr_matrix<double> row_length_distribution(size_type rows, size_type cols, row_length_dist dist, double mean,
                                           double param, std::uint64_t seed)
{
  const char* name = "row_length_distribution";
  check_dim(rows, "rows", name);
  check_dim(cols, "cols", name);
  check_real(mean, "mean", name);
  check_real(param, "param", name);
  if (mean > static_cast<double>(cols)) {
    AIJP_THROW(bad_input, std::string(name) + ": mean row length " + std::to_string(mean) + " exceeds cols = " +
                              std::to_string(cols));
  }
  if (dist == row_length_dist::constant) {
    check_nnz(static_cast<long double>(rows) * std::llround(mean), name);
  }
  return build_rows(
      rows, cols, name,
      [&](size_type r) {
        prng g(seed, stream_length, static_cast<std::uint64_t>(r));
        switch (dist) {
          case row_length_dist::constant: return clamp_length(std::round(mean), cols);
          case row_length_dist::normal: return clamp_length(std::round(mean + param * g.normal()), cols);
          case row_length_dist::uniform:
          default: return clamp_length(std::floor(mean - param + (2.0 * param + 1.0) * g.uniform()), cols);
        }
      },
      [&](size_type r, index_type* col, double* val, size_type len) {
        prng g(seed, stream_fill, static_cast<std::uint64_t>(r));
        fill_random_row(g, col, val, len, cols);
      });
}

csr_matrix<double> power_law(size_type rows, double avg_degree, double exponent, std::uint64_t seed)
{
  const char* name = "power_law";
  check_dim(rows, "rows", name);
  check_real(avg_degree, "avg_degree", name);
  if (!std::isfinite(exponent) || exponent <= 1.0) {
    AIJP_THROW(bad_input, std::string(name) + ": exponent must be > 1, got " + std::to_string(exponent));
  }
  if (avg_degree > static_cast<double>(rows)) {
    AIJP_THROW(bad_input, std::string(name) + ": avg_degree " + std::to_string(avg_degree) + " exceeds rows = " +
                              std::to_string(rows));
  }
  check_nnz(static_cast<long double>(rows) * avg_degree, name);
  // Pareto(1, exponent - 1) weights, capped so that their sum stays finite; the cap is far above any
  // row length reachable with 32-bit indices.
  std::vector<double> w(static_cast<std::size_t>(rows));
  const double inv_tail = -1.0 / (exponent - 1.0);
  for (size_type r = 0; r < rows; ++r) {
    prng g(seed, stream_weight, static_cast<std::uint64_t>(r));
    const double u = static_cast<double>((g.next() >> 11) + 1) * 0x1.0p-53;  // (0, 1]
    w[static_cast<std::size_t>(r)] = std::min(std::pow(u, inv_tail), 0x1.0p60);
  }
  // Scale s with sum_r min(s w_r, cap) = target. For the rows clamped at s, the exact s solving the
  // equation is (target - cap * clamped) / unclamped_weight; iterating that grows s and the clamped set
  // monotonically and stops when the set is stable (a few steps).
  const double cap = static_cast<double>(rows);
  const double target = avg_degree * static_cast<double>(rows);
  double s = 0.0;
  if (target >= cap * cap) {
    s = std::numeric_limits<double>::infinity();
  } else if (target > 0.0) {
    double total = 0.0;
    for (double x : w) total += x;
    s = target / total;
    for (int iter = 0; iter < 200; ++iter) {
      double clamped = 0.0;
      double free_weight = 0.0;
      for (double x : w) {
        if (s * x >= cap) {
          clamped += 1.0;
        } else {
          free_weight += x;
        }
      }
      const double next = free_weight > 0.0 ? (target - cap * clamped) / free_weight : s;
      if (!(next > s)) break;
      s = next;
    }
  }
  return build_rows(
      rows, rows, name,
      [&](size_type r) {
        const double x = s * w[static_cast<std::size_t>(r)];
        if (x >= cap) return rows;
        prng g(seed, stream_length, static_cast<std::uint64_t>(r));
        return clamp_length(std::floor(x + g.uniform()), rows);
      },
      [&](size_type r, index_type* col, double* val, size_type len) {
        prng g(seed, stream_fill, static_cast<std::uint64_t>(r));
        fill_random_row(g, col, val, len, rows);
      });
}

csr_matrix<double> circuit_like(size_type rows, std::uint64_t seed, size_type dense_rows,
                                size_type dense_row_length)
{
  const char* name = "circuit_like";
  check_dim(rows, "rows", name);
  check_dim(dense_rows, "dense_rows", name);
  check_dim(dense_row_length, "dense_row_length", name);
  if (dense_rows > rows) {
    AIJP_THROW(bad_input, std::string(name) + ": dense_rows = " + std::to_string(dense_rows) + " exceeds rows = " +
                              std::to_string(rows));
  }
  if (dense_rows > 0 && (dense_row_length < 1 || dense_row_length > rows)) {
    AIJP_THROW(bad_input, std::string(name) + ": dense_row_length must be in [1, rows = " + std::to_string(rows) +
                              "], got " + std::to_string(dense_row_length));
  }
  check_nnz(static_cast<long double>(dense_rows) * dense_row_length, name);
  const auto window = [rows](size_type r, size_type& lo, size_type& others) {
    lo = std::max<size_type>(0, r - circuit_window);
    others = std::min(rows - 1, r + circuit_window) - lo;  // window without the diagonal
  };
  return build_rows(
      rows, rows, name,
      [&](size_type r) {
        if (r < dense_rows) return dense_row_length;
        prng g(seed, stream_length, static_cast<std::uint64_t>(r));
        const auto off = static_cast<size_type>(1 + g.below(5));  // 1..5 off-diagonals
        size_type lo, others;
        window(r, lo, others);
        return 1 + std::min(off, others);
      },
      [&](size_type r, index_type* col, double* val, size_type len) {
        prng g(seed, stream_fill, static_cast<std::uint64_t>(r));
        size_type lo = 0;
        size_type others = rows - 1;
        if (r >= dense_rows) window(r, lo, others);
        // Pick len - 1 of the `others` columns (the range [lo, lo + others] minus the diagonal), then
        // insert the diagonal at its sorted place.
        sample_distinct(g, col, len - 1, others);
        size_type diag = len - 1;
        for (size_type k = 0; k < len - 1; ++k) {
          size_type c = lo + col[k];
          if (c >= r) {
            ++c;
            if (diag == len - 1) diag = k;
          }
          col[k] = static_cast<index_type>(c);
        }
        std::memmove(col + diag + 1, col + diag, static_cast<std::size_t>(len - 1 - diag) * sizeof(index_type));
        col[diag] = static_cast<index_type>(r);
        double off_sum = 0.0;
        for (size_type k = 0; k < len; ++k) {
          if (k == diag) continue;
          val[k] = g.uniform(-1.0, 1.0);
          off_sum += std::abs(val[k]);
        }
        val[diag] = 1.0 + off_sum;
      });
}

csr_matrix<double> banded(size_type rows, size_type half_bandwidth)
{
  const char* name = "banded";
  check_dim(rows, "rows", name);
  if (half_bandwidth < 0) {
    AIJP_THROW(bad_input, std::string(name) + ": half_bandwidth must be non-negative, got " +
                              std::to_string(half_bandwidth));
  }
  const size_type b = rows > 0 ? std::min(half_bandwidth, rows - 1) : 0;
  check_nnz(static_cast<long double>(rows) * (2 * b + 1) - static_cast<long double>(b) * (b + 1), name);
  const double diag = 2.0 * static_cast<double>(half_bandwidth) + 1.0;
  return build_rows(
      rows, rows, name,
      [&](size_type r) { return std::min(rows - 1, r + b) - std::max<size_type>(0, r - b) + 1; },
      [&](size_type r, index_type* col, double* val, size_type) {
        for (size_type c = std::max<size_type>(0, r - b); c <= std::min(rows - 1, r + b); ++c) {
          *col++ = static_cast<index_type>(c);
          *val++ = c == r ? diag : -1.0;
        }
      });
}

// ---------------------------------------------------------------------------------------------------
// Spec strings

bool generator_spec::operator==(const generator_spec& o) const
{
  return kind == o.kind && nx == o.nx && ny == o.ny && nz == o.nz && rows == o.rows && cols == o.cols &&
         mean == o.mean && spread == o.spread && exponent == o.exponent && dense_rows == o.dense_rows &&
         dense_row_length == o.dense_row_length && half_bandwidth == o.half_bandwidth && seed == o.seed;
}

std::string spec_help()
{
  return "generator specs (integers also as 1e6; seed defaults to 1, cols to rows; grid N means NxN(xN)):\n"
         "  lap5:NXxNY                                       2D 5-point Laplacian\n"
         "  lap7:NXxNYxNZ                                    3D 7-point Laplacian\n"
         "  lap27:NXxNYxNZ                                   3D 27-point stencil\n"
         "  fem3:NXxNYxNZ[,seed=S]                           7-point grid graph, 3x3 blocks (3 dof/node)\n"
         "  constant:rows=R,len=L[,cols=C][,seed=S]          L random columns in every row\n"
         "  normal:rows=R,mean=M,sigma=D[,cols=C][,seed=S]   row lengths round(N(M, D^2))\n"
         "  uniform:rows=R,mean=M,width=W[,cols=C][,seed=S]  row lengths uniform in M-W..M+W\n"
         "  powerlaw:rows=R,deg=D,exp=E[,seed=S]             heavy-tailed row lengths, mean D, tail exp. E\n"
         "  circuit:rows=R,dense=D,len=L[,seed=S]            2-6 nonzeros near the diagonal, D dense rows of L\n"
         "  banded:rows=R,bw=B                               band of half width B\n"
         "  stack:SPEC+SPEC[+...]                            block-diagonal stack of the parts, top to bottom\n";
}

namespace {

[[noreturn]] void bad_spec(const std::string& spec, const std::string& why)
{
  AIJP_THROW(bad_input, "bad generator spec '" + spec + "': " + why + "\n" + spec_help());
}

/// A non-negative integer: "123" or an integral floating-point literal such as "1e6".
size_type parse_count(const std::string& spec, const std::string& key, const std::string& text)
{
  const char* b = text.data();
  const char* e = b + text.size();
  long long v = 0;
  auto res = std::from_chars(b, e, v);
  if (res.ec == std::errc() && res.ptr == e && v >= 0) return v;
  double d = 0.0;
  auto dres = std::from_chars(b, e, d);
  if (dres.ec == std::errc() && dres.ptr == e && std::isfinite(d) && d >= 0.0 && d <= 0x1.0p62 &&
      d == std::floor(d)) {
    return static_cast<size_type>(d);
  }
  bad_spec(spec, key + " = '" + text + "' is not a non-negative integer");
}

double parse_nonneg_real(const std::string& spec, const std::string& key, const std::string& text)
{
  double d = 0.0;
  auto res = std::from_chars(text.data(), text.data() + text.size(), d);
  if (res.ec != std::errc() || res.ptr != text.data() + text.size() || !std::isfinite(d) || d < 0.0) {
    bad_spec(spec, key + " = '" + text + "' is not a finite non-negative number");
  }
  return d;
}

std::uint64_t parse_seed(const std::string& spec, const std::string& text)
{
  unsigned long long v = 0;
  auto res = std::from_chars(text.data(), text.data() + text.size(), v);
  if (res.ec != std::errc() || res.ptr != text.data() + text.size()) {
    bad_spec(spec, "seed = '" + text + "' is not an unsigned 64-bit integer");
  }
  return v;
}

std::vector<std::string> split(const std::string& s, char sep)
{
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const auto pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos) return parts;
    start = pos + 1;
  }
}

/// key=value arguments of a spec; every key must be consumed by take() or the spec is rejected.
class key_values {
 public:
  key_values(const std::string& spec, const std::vector<std::string>& items) : spec_(spec)
  {
    for (const auto& item : items) {
      const auto eq = item.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
        bad_spec(spec_, "expected key=value, got '" + item + "'");
      }
      std::string key = item.substr(0, eq);
      for (const auto& kv : items_) {
        if (kv.first == key) bad_spec(spec_, "duplicate key '" + key + "'");
      }
      items_.emplace_back(std::move(key), item.substr(eq + 1));
    }
    used_.assign(items_.size(), false);
  }

  /// The value of `key`, or nullptr if absent (an error if `required`).
  const std::string* take(const char* key, bool required)
  {
    for (std::size_t k = 0; k < items_.size(); ++k) {
      if (items_[k].first == key) {
        used_[k] = true;
        return &items_[k].second;
      }
    }
    if (required) bad_spec(spec_, std::string("missing key '") + key + "'");
    return nullptr;
  }

  void finish() const
  {
    for (std::size_t k = 0; k < items_.size(); ++k) {
      if (!used_[k]) bad_spec(spec_, "unknown key '" + items_[k].first + "'");
    }
  }

 private:
  const std::string& spec_;
  std::vector<std::pair<std::string, std::string>> items_;
  std::vector<bool> used_;
};

struct kind_name {
  generator_kind kind;
  const char* name;
};

constexpr kind_name kind_names[] = {
    {generator_kind::lap5, "lap5"},         {generator_kind::lap7, "lap7"},
    {generator_kind::lap27, "lap27"},       {generator_kind::fem3, "fem3"},
    {generator_kind::constant, "constant"}, {generator_kind::normal, "normal"},
    {generator_kind::uniform, "uniform"},   {generator_kind::powerlaw, "powerlaw"},
    {generator_kind::circuit, "circuit"},   {generator_kind::banded, "banded"}};

const char* name_of(generator_kind kind)
{
  for (const auto& kn : kind_names) {
    if (kn.kind == kind) return kn.name;
  }
  return "?";
}

std::string real_to_string(double v)
{
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, res.ptr);
}

}  // namespace

generator_spec parse_spec(const std::string& spec)
{
  const auto colon = spec.find(':');
  if (colon == std::string::npos) bad_spec(spec, "expected '<kind>:<arguments>'");
  const std::string kind = spec.substr(0, colon);
  const std::string args = spec.substr(colon + 1);
  generator_spec s;
  bool known = false;
  for (const auto& kn : kind_names) {
    if (kind == kn.name) {
      s.kind = kn.kind;
      known = true;
    }
  }
  if (!known) bad_spec(spec, "unknown kind '" + kind + "'");
  if (args.empty()) bad_spec(spec, "missing arguments after '" + kind + ":'");
  auto items = split(args, ',');

  const bool grid_kind = s.kind == generator_kind::lap5 || s.kind == generator_kind::lap7 ||
                         s.kind == generator_kind::lap27 || s.kind == generator_kind::fem3;
  if (grid_kind) {
    const int dims = s.kind == generator_kind::lap5 ? 2 : 3;
    const auto sizes = split(items[0], 'x');
    if (sizes.size() != 1 && sizes.size() != static_cast<std::size_t>(dims)) {
      bad_spec(spec, "expected a grid " + std::string(dims == 2 ? "NXxNY" : "NXxNYxNZ") + " or N, got '" +
                         items[0] + "'");
    }
    size_type n[3] = {1, 1, 1};
    for (int d = 0; d < dims; ++d) {
      n[d] = parse_count(spec, "grid size", sizes[sizes.size() == 1 ? 0 : static_cast<std::size_t>(d)]);
    }
    s.nx = n[0];
    s.ny = n[1];
    s.nz = n[2];
    items.erase(items.begin());
    key_values kv(spec, items);
    if (s.kind == generator_kind::fem3) {
      if (const auto* v = kv.take("seed", false)) s.seed = parse_seed(spec, *v);
    }
    kv.finish();
    return s;
  }

  key_values kv(spec, items);
  const auto count = [&](const char* key, bool required, size_type fallback) {
    const auto* v = kv.take(key, required);
    return v ? parse_count(spec, key, *v) : fallback;
  };
  const auto real = [&](const char* key) { return parse_nonneg_real(spec, key, *kv.take(key, true)); };
  s.rows = count("rows", true, 0);
  switch (s.kind) {
    case generator_kind::constant:
      s.mean = static_cast<double>(count("len", true, 0));
      s.cols = count("cols", false, s.rows);
      break;
    case generator_kind::normal:
      s.mean = real("mean");
      s.spread = real("sigma");
      s.cols = count("cols", false, s.rows);
      break;
    case generator_kind::uniform:
      s.mean = real("mean");
      s.spread = real("width");
      s.cols = count("cols", false, s.rows);
      break;
    case generator_kind::powerlaw:
      s.mean = real("deg");
      s.exponent = real("exp");
      break;
    case generator_kind::circuit:
      s.dense_rows = count("dense", true, 0);
      s.dense_row_length = count("len", true, 0);
      break;
    case generator_kind::banded:
    default:
      s.half_bandwidth = count("bw", true, 0);
      break;
  }
  if (s.kind != generator_kind::banded) {
    if (const auto* v = kv.take("seed", false)) s.seed = parse_seed(spec, *v);
  }
  kv.finish();
  return s;
}

std::string to_string(const generator_spec& s)
{
  const std::string name = name_of(s.kind);
  const auto n = [](size_type v) { return std::to_string(v); };
  const std::string seed = ",seed=" + std::to_string(s.seed);
  switch (s.kind) {
    case generator_kind::lap5: return name + ":" + n(s.nx) + "x" + n(s.ny);
    case generator_kind::lap7:
    case generator_kind::lap27: return name + ":" + n(s.nx) + "x" + n(s.ny) + "x" + n(s.nz);
    case generator_kind::fem3: return name + ":" + n(s.nx) + "x" + n(s.ny) + "x" + n(s.nz) + seed;
    case generator_kind::constant:
      return name + ":rows=" + n(s.rows) + ",cols=" + n(s.cols) + ",len=" + real_to_string(s.mean) + seed;
    case generator_kind::normal:
      return name + ":rows=" + n(s.rows) + ",cols=" + n(s.cols) + ",mean=" + real_to_string(s.mean) +
             ",sigma=" + real_to_string(s.spread) + seed;
    case generator_kind::uniform:
      return name + ":rows=" + n(s.rows) + ",cols=" + n(s.cols) + ",mean=" + real_to_string(s.mean) +
             ",width=" + real_to_string(s.spread) + seed;
    case generator_kind::powerlaw:
      return name + ":rows=" + n(s.rows) + ",deg=" + real_to_string(s.mean) + ",exp=" + real_to_string(s.exponent) +
             seed;
    case generator_kind::circuit:
      return name + ":rows=" + n(s.rows) + ",dense=" + n(s.dense_rows) + ",len=" + n(s.dense_row_length) + seed;
    case generator_kind::banded:
    default: return name + ":rows=" + n(s.rows) + ",bw=" + n(s.half_bandwidth);
  }
}

csr_matrix<double> generate(const generator_spec& s)
{
  switch (s.kind) {
    case generator_kind::lap5: return laplacian_2d_5pt(s.nx, s.ny);
    case generator_kind::lap7: return laplacian_3d_7pt(s.nx, s.ny, s.nz);
    case generator_kind::lap27: return laplacian_3d_27pt(s.nx, s.ny, s.nz);
    case generator_kind::fem3: return fem_blocks_3dof(s.nx, s.ny, s.nz, s.seed);
    case generator_kind::constant:
      return row_length_distribution(s.rows, s.cols, row_length_dist::constant, s.mean, 0.0, s.seed);
    case generator_kind::normal:
      return row_length_distribution(s.rows, s.cols, row_length_dist::normal, s.mean, s.spread, s.seed);
    case generator_kind::uniform:
      return row_length_distribution(s.rows, s.cols, row_length_dist::uniform, s.mean, s.spread, s.seed);
    case generator_kind::powerlaw: return power_law(s.rows, s.mean, s.exponent, s.seed);
    case generator_kind::circuit: return circuit_like(s.rows, s.seed, s.dense_rows, s.dense_row_length);
    case generator_kind::banded:
    default: return banded(s.rows, s.half_bandwidth);
  }
}

csr_matrix<double> block_diagonal(const std::vector<csr_matrix<double>>& parts)
{
  long double rows = 0, cols = 0, nnz = 0;
  for (const auto& p : parts) {
    rows += p.rows;
    cols += p.cols;
    nnz += p.nnz();
  }
  if (rows > max_index || cols > max_index) {
    AIJP_THROW(not_supported, "block_diagonal: the stack exceeds the 32-bit index range");
  }
  check_nnz(nnz, "block_diagonal");
  csr_matrix<double> a;
  a.row_ptr.reserve(static_cast<std::size_t>(rows) + 1);
  a.col_idx.reserve(static_cast<std::size_t>(nnz));
  a.values.reserve(static_cast<std::size_t>(nnz));
  for (const auto& p : parts) {
    const auto entry0 = static_cast<index_type>(a.col_idx.size());
    const auto col0 = static_cast<index_type>(a.cols);
    for (size_type r = 1; r <= p.rows; ++r) a.row_ptr.push_back(entry0 + p.row_ptr[r]);
    for (const index_type c : p.col_idx) a.col_idx.push_back(col0 + c);
    a.values.insert(a.values.end(), p.values.begin(), p.values.end());
    a.rows += p.rows;
    a.cols += p.cols;
  }
  return a;
}

csr_matrix<double> from_spec(const std::string& spec)
{
  if (spec.rfind("stack:", 0) != 0) return generate(parse_spec(spec));
  const auto items = split(spec.substr(6), '+');
  std::vector<csr_matrix<double>> parts;
  for (const auto& item : items) {
    if (item.empty()) bad_spec(spec, "empty part in a stack");
    if (item.rfind("stack:", 0) == 0) bad_spec(spec, "stacks do not nest");
    parts.push_back(generate(parse_spec(item)));
  }
  return block_diagonal(parts);
}

}  // namespace gen
}  // namespace aijp
