// Row-partitioned plans: one child format per block of rows. The blocks write disjoint rows of y, so they run
// concurrently: the caller's stream forks to one side stream per further block (events, no host wait) and
// joins them before it goes on. A block of a few long rows then runs beside the body instead of after it.
#include <aijpredict/gpu_matrix.hpp>

#include "../format_impl.hpp"
#include "../vector_ops.hpp"

#include <algorithm>
#include <vector>

namespace aijp::detail {

namespace {

__global__ void rebase_row_ptr(size_type n, const index_type* __restrict__ in, index_type* __restrict__ out)
{
  const size_type i = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] - in[0];
}

template <typename Value>
class partitioned final : public format_impl<Value> {
 public:
  struct part {
    size_type row_begin = 0;
    index_type entry_begin = 0;  // offset of the block's first entry in the parent's arrays
    format_id format = format_id::cusparse_csr;
    std::unique_ptr<device_csr<Value>> sub;  // heap: children keep pointers into it
    std::unique_ptr<format_impl<Value>> child;  // null for a block without nonzeros
  };

  explicit partitioned(std::vector<part> parts) : parts_(std::move(parts))
  {
    size_type most = -1;
    for (const auto& p : parts_) {
      if (p.sub->nnz > most) {
        most = p.sub->nnz;
        id_ = p.format;
      }
    }
    // Launch order: the blocks with children by ascending nonzeros, the largest last and on the caller's
    // stream. A small block launched first takes a few SMs and the body fills the rest; launched after the
    // body it would wait for the body's tail.
    for (std::size_t k = 0; k < parts_.size(); ++k) {
      if (parts_[k].child) order_.push_back(k);
    }
    std::stable_sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) { return parts_[a].sub->nnz < parts_[b].sub->nnz; });
    // Streams and events exist before the first product, which may be captured into a CUDA graph.
    try {
      if (order_.size() > 1) {
        AIJP_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
        for (std::size_t k = 0; k + 1 < order_.size(); ++k) {
          cudaStream_t st = nullptr;
          AIJP_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
          side_.push_back(st);
          cudaEvent_t ev = nullptr;
          AIJP_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
          join_.push_back(ev);
        }
      }
    } catch (...) {
      release();
      throw;
    }
  }
  ~partitioned() override { release(); }
  partitioned(const partitioned&) = delete;
  partitioned& operator=(const partitioned&) = delete;
  format_id id() const override { return id_; }
  void refresh_values(const device_csr<Value>& a, cudaStream_t stream) override
  {
    for (auto& p : parts_) {
      if (p.sub->nnz == 0) continue;
      AIJP_CUDA_CHECK(cudaMemcpyAsync(p.sub->values.data(), a.values.data() + p.entry_begin, p.sub->nnz * sizeof(Value),
                                      cudaMemcpyDeviceToDevice, stream));
      p.child->refresh_values(*p.sub, stream);
    }
  }
  void apply(Value alpha, const Value* x, Value beta, Value* y, cudaStream_t stream) override
  {
    for (auto& p : parts_) {  // blocks without nonzeros: y = beta y on the caller's stream
      if (!p.child) scale_or_zero(p.sub->rows, beta, y + p.row_begin, stream);
    }
    if (order_.size() == 1) {
      auto& p = parts_[order_[0]];
      p.child->apply(alpha, x, beta, y + p.row_begin, stream);
      return;
    }
    if (order_.empty()) return;
    AIJP_CUDA_CHECK(cudaEventRecord(fork_, stream));
    for (std::size_t k = 0; k + 1 < order_.size(); ++k) {
      auto& p = parts_[order_[k]];
      AIJP_CUDA_CHECK(cudaStreamWaitEvent(side_[k], fork_, 0));
      p.child->apply(alpha, x, beta, y + p.row_begin, side_[k]);
      AIJP_CUDA_CHECK(cudaEventRecord(join_[k], side_[k]));
    }
    auto& last = parts_[order_.back()];
    last.child->apply(alpha, x, beta, y + last.row_begin, stream);
    for (auto ev : join_) AIJP_CUDA_CHECK(cudaStreamWaitEvent(stream, ev, 0));
  }
  size_type device_bytes() const override
  {
    size_type bytes = 0;
    for (const auto& p : parts_) {
      bytes += static_cast<size_type>(p.sub->row_ptr.bytes() + p.sub->col_idx.bytes() + p.sub->values.bytes());
      if (p.child) bytes += p.child->device_bytes();
    }
    return bytes;
  }

 private:
  void release() noexcept
  {
    // Work still queued on a side stream completes after cudaStreamDestroy; the layouts it reads are freed
    // afterwards with the parts, by cudaFree, which waits for the device (device_buffer.hpp).
    for (auto st : side_) (void)cudaStreamDestroy(st);
    for (auto ev : join_) (void)cudaEventDestroy(ev);
    if (fork_) (void)cudaEventDestroy(fork_);
    side_.clear();
    join_.clear();
    fork_ = nullptr;
  }

  std::vector<part> parts_;
  format_id id_ = format_id::cusparse_csr;
  std::vector<std::size_t> order_;   // parts with children, launch order (the last on the caller's stream)
  cudaEvent_t fork_ = nullptr;       // recorded on the caller's stream before the blocks
  std::vector<cudaStream_t> side_;   // one per block but the last of order_
  std::vector<cudaEvent_t> join_;    // recorded on side_[k] after its block
};

}  // namespace

template <typename Value>
std::unique_ptr<format_impl<Value>> make_partitioned(const device_csr<Value>& a, const std::vector<built_block>& blocks,
                                                     const format_factory<Value>& factory, const cusparse_handle& handle,
                                                     cudaStream_t stream, std::vector<built_block>* built)
{
  AIJP_ENSURE(!blocks.empty() && blocks.front().row_begin == 0 && blocks.back().row_end == a.rows, bad_input,
              "a partition must cover rows [0, " + std::to_string(a.rows) + ")");
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    AIJP_ENSURE(blocks[k].row_end > blocks[k].row_begin && (k == 0 || blocks[k].row_begin == blocks[k - 1].row_end),
                bad_input, "partition blocks must be non-empty and contiguous");
  }
  // The entry offsets at the block boundaries: blocks.size() + 1 integers, not the row pointers.
  std::vector<index_type> bounds(blocks.size() + 1);
  for (std::size_t k = 0; k <= blocks.size(); ++k) {
    const size_type r = k < blocks.size() ? blocks[k].row_begin : a.rows;
    AIJP_CUDA_CHECK(cudaMemcpyAsync(&bounds[k], a.row_ptr.data() + r, sizeof(index_type), cudaMemcpyDeviceToHost, stream));
  }
  AIJP_CUDA_CHECK(cudaStreamSynchronize(stream));

  std::vector<typename partitioned<Value>::part> parts;
  if (built) built->clear();
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    typename partitioned<Value>::part p;
    built_block out = blocks[k];
    p.row_begin = out.row_begin;
    p.entry_begin = bounds[k];
    p.sub = std::make_unique<device_csr<Value>>();
    device_csr<Value>& s = *p.sub;
    s.rows = out.row_end - out.row_begin;
    s.cols = a.cols;
    s.nnz = bounds[k + 1] - bounds[k];
    s.row_ptr.resize(s.rows + 1);
    rebase_row_ptr<<<static_cast<unsigned>((s.rows + 1 + 255) / 256), 256, 0, stream>>>(s.rows + 1, a.row_ptr.data() + out.row_begin,
                                                                                      s.row_ptr.data());
    AIJP_CHECK_LAUNCH();
    s.col_idx.resize(s.nnz);
    s.values.resize(s.nnz);
    if (s.nnz > 0) {
      AIJP_CUDA_CHECK(cudaMemcpyAsync(s.col_idx.data(), a.col_idx.data() + p.entry_begin, s.nnz * sizeof(index_type),
                                      cudaMemcpyDeviceToDevice, stream));
      AIJP_CUDA_CHECK(cudaMemcpyAsync(s.values.data(), a.values.data() + p.entry_begin, s.nnz * sizeof(Value),
                                      cudaMemcpyDeviceToDevice, stream));
      // The block's exact statistics (formats size their layouts from them).
      const row_stats stats = compute_row_stats_device(s.rows, s.cols, s.row_ptr.data(), stream);
      const build_args<Value> args{s, stats, handle, stream};
      try {
        p.child = factory(out.format, args);
      } catch (const not_supported& e) {
        if (out.format == format_id::cusparse_csr) throw;
        out.note = std::string(format_name(out.format)) + " cannot hold this block (" + e.what() + ")";
      } catch (const device_out_of_memory& e) {
        if (out.format == format_id::cusparse_csr) throw;
        out.note = std::string("out of device memory building ") + format_name(out.format) + " (" + e.what() + ")";
      }
      if (!p.child) {
        out.format = format_id::cusparse_csr;
        p.child = make_cusparse_csr(s, handle.get());
      }
    }
    p.format = out.format;
    parts.push_back(std::move(p));
    if (built) built->push_back(out);
  }
  return std::make_unique<partitioned<Value>>(std::move(parts));
}

AIJP_IF_DOUBLE(template std::unique_ptr<format_impl<double>> make_partitioned<double>(
    const device_csr<double>&, const std::vector<built_block>&, const format_factory<double>&, const cusparse_handle&, cudaStream_t,
    std::vector<built_block>*);)
AIJP_IF_FLOAT(template std::unique_ptr<format_impl<float>> make_partitioned<float>(
    const device_csr<float>&, const std::vector<built_block>&, const format_factory<float>&, const cusparse_handle&, cudaStream_t,
    std::vector<built_block>*);)

}  // namespace aijp::detail
