// Deterministic sparse matrix generators: PDE stencils, FEM-like block matrices, the row-length
// distribution families of the format-selection literature, heavy-tailed and circuit-like patterns.
//
// Large test and benchmark matrices come from here (the shared SuiteSparse set stops at 1M nonzeros).
// Every generator
//   - is a pure function of its arguments: the same arguments (seed included) give a bit-identical matrix
//     on every platform, because the random numbers come from aijp::gen::prng below, not from <random>
//     (whose distributions are implementation-defined). Row lengths drawn from a normal or power-law
//     distribution go through libm's log/pow, then are rounded to integers;
//   - returns rows whose column indices are strictly ascending (no duplicates);
//   - computes the number of nonzeros before allocating and fills the arrays in place (no per-row
//     allocation), so ~100M nonzeros take seconds and 12 bytes per nonzero;
//   - throws aijp::bad_input for invalid arguments (negative sizes, mean > cols, ...) and
//     aijp::not_supported when rows, columns or nonzeros exceed 2^31 - 1 (32-bit row_ptr / col_idx).
//
// Each random row r draws from its own prng stream (seed, purpose, r), so a row does not depend on the
// rows before it.
#pragma once

#include <aijpredict/csr.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace aijp {
namespace gen {

/// Bijective 64-bit mixing function (the splitmix64 finalizer, Steele, Lea & Flood 2014).
inline std::uint64_t mix64(std::uint64_t x)
{
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// xoshiro256** (Blackman & Vigna, "Scrambled linear pseudorandom number generators", 2018), seeded with
/// splitmix64 from (seed, stream, index). Small, fast and identical on every platform; not for
/// cryptography.
class prng {
 public:
  /// Independent generators for each (seed, stream, index): e.g. stream = purpose, index = row.
  explicit prng(std::uint64_t seed, std::uint64_t stream = 0, std::uint64_t index = 0)
  {
    std::uint64_t x = mix64(seed + 0x9e3779b97f4a7c15ULL);
    x = mix64(x ^ mix64(stream + 0x632be59bd9b4e019ULL));
    x = mix64(x ^ mix64(index + 0x85157af5ULL));
    for (auto& s : s_) {
      x += 0x9e3779b97f4a7c15ULL;  // splitmix64 sequence: never all four zero
      s = mix64(x);
    }
  }

  /// Next 64 random bits.
  std::uint64_t next()
  {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  /// Uniform double in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  /// Uniform double in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

  /// Integer in [0, n) for n > 0 (multiply-high mapping; bias below 2^-64 * n, irrelevant here).
  std::uint64_t below(std::uint64_t n)
  {
    __extension__ using wide = unsigned __int128;  // GCC/Clang extension, also under -pedantic
    return static_cast<std::uint64_t>((static_cast<wide>(next()) * n) >> 64);
  }

  /// Standard normal deviate (Marsaglia polar method).
  double normal();

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

/// 2D 5-point Laplacian on an nx x ny grid, Dirichlet boundary (out-of-domain neighbours omitted):
/// diagonal 4, neighbours -1; symmetric positive definite. Row of grid point (x, y) is x + nx*y.
/// rows = nx*ny, nnz = 5 nx ny - 2 (nx + ny) for nx, ny >= 1.
csr_matrix<double> laplacian_2d_5pt(size_type nx, size_type ny);

/// 3D 7-point Laplacian on an nx x ny x nz grid, Dirichlet: diagonal 6, the 6 face neighbours -1; SPD.
/// Row of (x, y, z) is x + nx*(y + ny*z). nnz = 7 n - 2 (nx ny + ny nz + nx nz) with n = nx ny nz.
csr_matrix<double> laplacian_3d_7pt(size_type nx, size_type ny, size_type nz);

/// 3D 27-point stencil (all 26 neighbours of the 3x3x3 cube) on an nx x ny x nz grid, Dirichlet:
/// diagonal 26, neighbours -1; SPD. nnz = (3 nx - 2)(3 ny - 2)(3 nz - 2) for dimensions >= 1.
csr_matrix<double> laplacian_3d_27pt(size_type nx, size_type ny, size_type nz);

/// FEM-like elasticity pattern: the 7-point grid graph on nx x ny x nz nodes with 3 degrees of freedom
/// per node (dof d of node m is row 3 m + d) and a dense 3x3 block for every coupled node pair.
/// Off-diagonal values are uniform in [-1, 1) with block(m, k) = block(k, m)^T, so the matrix is
/// symmetric; each diagonal entry is 1 + the sum of |off-diagonal| of its row (strictly diagonally
/// dominant, hence SPD). rows = 3 n, nnz = 9 * nnz(laplacian_3d_7pt(nx, ny, nz)).
csr_matrix<double> fem_blocks_3dof(size_type nx, size_type ny, size_type nz, std::uint64_t seed);

/// Row-length distributions of row_length_distribution().
enum class row_length_dist {
  constant,  ///< every row has round(mean) nonzeros (Guo-Wang constant-P_NZ instrumenting matrices)
  normal,    ///< round(mean + param * N(0, 1)), param = standard deviation sigma
  uniform,   ///< floor(mean - param + (2 param + 1) U), U in [0, 1): integers mean-param..mean+param for
             ///< integral mean and param; param = half width
};

/// A rows x cols matrix whose row lengths are drawn independently from `dist` (clamped to [0, cols])
/// with distinct, uniformly random columns per row and values uniform in [-1, 1) (the synthetic
/// benchmark family of Wang, Gu & Li and the constant-length matrices of Guo & Wang). The expected mean
/// row length is `mean` up to the effect of the clamp (tails below 0 or above cols).
/// @throws bad_input  negative sizes, mean or param negative or not finite.
csr_matrix<double> row_length_distribution(size_type rows, size_type cols, row_length_dist dist, double mean,
                                           double param, std::uint64_t seed);

/// A square matrix with heavy-tailed row lengths (Chung-Lu style): row weights w_r are i.i.d. Pareto with
/// tail exponent `exponent` (P(w > t) ~ t^(1 - exponent)), scaled by the factor that makes
/// sum_r min(s w_r, rows) = avg_degree * rows, then rounded stochastically; columns are distinct and
/// uniformly random, values uniform in [-1, 1). The mean row length is avg_degree up to the noise of the
/// rounding; for exponents near 2 (web and social graphs) the longest rows hold a large share of all
/// columns (rows = 10^6, avg_degree = 16, exponent = 2.1: the longest row is full).
/// @throws bad_input  exponent <= 1, avg_degree negative, not finite or larger than rows.
csr_matrix<double> power_law(size_type rows, double avg_degree, double exponent, std::uint64_t seed);

/// Circuit-simulation-like square matrix: rows dense_rows..rows-1 hold the diagonal plus 1 to 5 distinct
/// off-diagonal entries within 16 columns of the diagonal (2 to 6 nonzeros, fewer near the corners of a
/// tiny matrix); the first `dense_rows` rows (supply and ground nets) hold `dense_row_length` nonzeros at
/// distinct random columns, the diagonal included. Off-diagonal values are uniform in [-1, 1), each
/// diagonal is 1 + the sum of |off-diagonal| of its row (nonsingular, diagonally dominant by rows).
/// @throws bad_input  dense_rows > rows, or dense_rows > 0 and dense_row_length outside [1, rows].
csr_matrix<double> circuit_like(size_type rows, std::uint64_t seed, size_type dense_rows,
                                size_type dense_row_length);

/// Banded square matrix: row r holds columns max(0, r - b) .. min(rows - 1, r + b), b = half_bandwidth;
/// diagonal 2 b + 1, off-diagonal -1 (symmetric, strictly diagonally dominant, SPD).
csr_matrix<double> banded(size_type rows, size_type half_bandwidth);

/// Block-diagonal stack: part k occupies rows and columns after those of parts 0..k-1 (rows = sum of the
/// parts' rows, cols = sum of their columns), its entries unchanged. Heterogeneous test matrices: a stencil
/// block above a power-law block, etc. @throws not_supported  the sums exceed the 32-bit index range.
csr_matrix<double> block_diagonal(const std::vector<csr_matrix<double>>& parts);

/// Generator families of the spec strings.
enum class generator_kind { lap5, lap7, lap27, fem3, constant, normal, uniform, powerlaw, circuit, banded };

/// A parsed generator spec: the kind and the arguments of the matching generator function (fields a
/// kind does not use stay at their defaults).
struct generator_spec {
  generator_kind kind = generator_kind::lap7;
  size_type nx = 0;              ///< grid kinds (lap5: nz = 1)
  size_type ny = 0;
  size_type nz = 0;
  size_type rows = 0;            ///< all other kinds
  size_type cols = 0;            ///< constant, normal, uniform: columns (the spec's default: rows)
  double mean = 0.0;             ///< constant: len; normal, uniform: mean; powerlaw: deg
  double spread = 0.0;           ///< normal: sigma; uniform: half width
  double exponent = 0.0;         ///< powerlaw: exp
  size_type dense_rows = 0;      ///< circuit: dense
  size_type dense_row_length = 0;///< circuit: len
  size_type half_bandwidth = 0;  ///< banded: bw
  std::uint64_t seed = 1;        ///< random kinds (fem3, constant, normal, uniform, powerlaw, circuit)

  bool operator==(const generator_spec& other) const;
  bool operator!=(const generator_spec& other) const { return !(*this == other); }
};

/// Parses a compact spec (the forms listed by spec_help()), e.g. "lap7:200x200x200",
/// "normal:rows=1000000,mean=32,sigma=8,seed=1". Integer arguments accept "1000000" or "1e6".
/// Optional keys: cols (constant, normal, uniform; default rows), seed (random kinds; default 1).
/// @throws bad_input  unknown kind, malformed grid or key=value list, unknown/duplicate/missing key,
///   a value that is not a (non-negative) number; the message lists the accepted forms.
generator_spec parse_spec(const std::string& spec);

/// The canonical spec string of `spec`, with every argument spelled out (e.g.
/// "uniform:rows=1000000,cols=1000000,mean=32,width=16,seed=1"); parse_spec(to_string(s)) == s.
std::string to_string(const generator_spec& spec);

/// Runs the generator `spec` describes.
csr_matrix<double> generate(const generator_spec& spec);

/// generate(parse_spec(spec)); also accepts "stack:SPEC+SPEC[+...]", the block_diagonal() of the parts
/// (which parse_spec does not represent), e.g. "stack:lap7:64x64x64+powerlaw:rows=262144,deg=16,exp=2.1".
csr_matrix<double> from_spec(const std::string& spec);

/// The accepted spec forms, one per line, for command-line help and error messages.
std::string spec_help();

}  // namespace gen
}  // namespace aijp
