// ELLPACK, ELLPACK-R and PELLR (Wang & Gu 2020, sections 2.3.1, 2.3.2, 3): one thread per row over the
// padded column-major layout of ell_common.cuh, width K = the longest row.
//   ELL:   every thread walks all K slots (padding multiplies x[0] by 0), no per-row data.
//   ELLR:  plus row_len[r]; each thread stops at its own row's end, so a warp costs its longest row (Eq. 1,
//          natural order: row_stats::n_iter_natural).
//   PELLR: rows sorted by decreasing length on the device (stable CUB radix sort of (length, row)), ELLR
//          layout over the sorted order plus perm; thread i walks sorted row i and writes y[perm[i]], so a
//          warp costs the longest of 32 similar rows (row_stats::n_iter_sorted).
// Conversion: at most one sort and one fill kernel, no host round trip (sizes come from row_stats).
#include "ell_common.cuh"

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>

namespace aijp::detail {

namespace ell_family {

// The sort (shared with jad, declared in ell_common.cuh) is defined once: in the translation unit of ELL's
// double part (kernels/CMakeLists.txt compiles this file once per value type and part).
#if AIJP_FORMAT_DOUBLE && AIJP_FORMAT_PART_ENABLED(1)
namespace {

__global__ void __launch_bounds__(block_size)
    row_lengths_and_indices(size_type rows, const index_type* __restrict__ row_ptr, index_type* __restrict__ len,
                            index_type* __restrict__ idx)
{
  const size_type r = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  len[r] = row_ptr[r + 1] - row_ptr[r];
  idx[r] = static_cast<index_type>(r);
}

int bit_width(index_type v)
{
  int bits = 0;
  for (; v > 0; v >>= 1) ++bits;
  return bits;
}

}  // namespace

void sort_rows_by_length(size_type rows, const index_type* row_ptr, index_type max_len, index_type* sorted_len,
                         index_type* perm, cudaStream_t stream)
{
  if (rows == 0) return;
  // Only the bits that can be set: one 8-bit radix pass for rows up to 255 long instead of four.
  const int end_bit = std::max(1, bit_width(max_len));
  const int n = static_cast<int>(rows);  // rows fit index_type; 32-bit offsets select CUB's onesweep path
  std::size_t cub_bytes = 0;
  AIJP_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(nullptr, cub_bytes, static_cast<const index_type*>(nullptr),
                                                            sorted_len, static_cast<const index_type*>(nullptr), perm,
                                                            n, 0, end_bit, stream));
  scratch temp;
  const std::size_t len_at = temp.reserve<index_type>(rows);
  const std::size_t idx_at = temp.reserve<index_type>(rows);
  const std::size_t cub_at = temp.reserve<unsigned char>(static_cast<size_type>(cub_bytes));
  temp.allocate();
  index_type* len = temp.at<index_type>(len_at);
  index_type* idx = temp.at<index_type>(idx_at);
  row_lengths_and_indices<<<grid_for(rows), block_size, 0, stream>>>(rows, row_ptr, len, idx);
  AIJP_CHECK_LAUNCH();
  AIJP_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(temp.at<unsigned char>(cub_at), cub_bytes, len, sorted_len,
                                                            idx, perm, n, 0, end_bit, stream));
}
#endif

}  // namespace ell_family

namespace {

using namespace ell_family;

enum class ell_variant { ell, ellr, pellr };

template <ell_variant variant>
constexpr const char* variant_name = variant == ell_variant::ell ? "ell" : variant == ell_variant::ellr ? "ellr" : "pellr";

template <typename Value, ell_variant variant>
class ell_format final : public format_impl<Value> {
  static constexpr bool own_length = variant != ell_variant::ell;
  static constexpr bool permuted = variant == ell_variant::pellr;

 public:
  explicit ell_format(const build_args<Value>& args) : rows_(args.a.rows), width_(args.stats.max_len)
  {
    const device_csr<Value>& a = args.a;
    AIJP_ENSURE(args.stats.rows == a.rows && args.stats.nnz == a.nnz, error,
                std::string(variant_name<variant>) + ": statistics do not describe this matrix");
    const size_type slots = padded_slots(rows_, width_, variant_name<variant>);
    col_.resize(static_cast<std::size_t>(slots), a.layout_memory());
    val_.resize(static_cast<std::size_t>(slots), a.layout_memory());
    if (own_length) row_len_.resize(static_cast<std::size_t>(rows_), a.layout_memory());
    if (permuted) {
      perm_.resize(static_cast<std::size_t>(rows_), a.layout_memory());
      sort_rows_by_length(rows_, a.row_ptr.data(), width_, row_len_.data(), perm_.data(), args.stream);
    }
    if (variant == ell_variant::ell) {
      launch_ell_fill<Value, true, true>(rows_, width_, a, nullptr, nullptr, col_.data(), val_.data(), args.stream);
    } else {
      // ELLR stores its row lengths in the fill; PELLR has them, sorted, from the sort.
      launch_ell_fill<Value, true, false>(rows_, width_, a, perm_ptr(), permuted ? nullptr : row_len_.data(), col_.data(),
                                          val_.data(), args.stream);
    }
  }

  format_id id() const override
  {
    return variant == ell_variant::ell ? format_id::ell : variant == ell_variant::ellr ? format_id::ellr : format_id::pellr;
  }

  void refresh_values(const device_csr<Value>& a, cudaStream_t stream) override
  {
    launch_ell_fill<Value, false, false>(rows_, width_, a, perm_ptr(), nullptr, nullptr, val_.data(), stream);
  }

  void apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream) override
  {
    launch_ell_spmv<Value, own_length>(rows_, width_, own_length ? row_len_.data() : nullptr, perm_ptr(), col_.data(),
                                       val_.data(), alpha, x, beta, y, stream);
  }

  size_type device_bytes() const override
  {
    return static_cast<size_type>(col_.bytes() + val_.bytes() + row_len_.bytes() + perm_.bytes());
  }

 private:
  const index_type* perm_ptr() const { return permuted ? perm_.data() : nullptr; }

  size_type rows_;
  index_type width_;
  device_buffer<index_type> col_;
  device_buffer<Value> val_;
  device_buffer<index_type> row_len_;  // ELLR: natural order; PELLR: sorted order
  device_buffer<index_type> perm_;     // PELLR: perm_[i] = matrix row of sorted row i
};

}  // namespace

template <typename Value>
std::unique_ptr<format_impl<Value>> make_ell(const build_args<Value>& args)
{
  return std::make_unique<ell_format<Value, ell_variant::ell>>(args);
}
#if AIJP_FORMAT_PART_ENABLED(1)
AIJP_INSTANTIATE_FORMAT_FACTORY(make_ell)
#endif

template <typename Value>
std::unique_ptr<format_impl<Value>> make_ellr(const build_args<Value>& args)
{
  return std::make_unique<ell_format<Value, ell_variant::ellr>>(args);
}
#if AIJP_FORMAT_PART_ENABLED(2)
AIJP_INSTANTIATE_FORMAT_FACTORY(make_ellr)
#endif

template <typename Value>
std::unique_ptr<format_impl<Value>> make_pellr(const build_args<Value>& args)
{
  return std::make_unique<ell_format<Value, ell_variant::pellr>>(args);
}
#if AIJP_FORMAT_PART_ENABLED(3)
AIJP_INSTANTIATE_FORMAT_FACTORY(make_pellr)
#endif

}  // namespace aijp::detail
