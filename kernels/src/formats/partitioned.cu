// Row-partitioned plans: one child format per block of rows. The blocks write disjoint rows of y, so they run
// concurrently: the caller's stream forks to one side stream per further block (events, no host wait) and
// joins them before it goes on. A block of a few long rows then runs beside the body instead of after it.
#include <aijpredict/gpu_matrix.hpp>

#include "../analysis_jobs.hpp"
#include "../async_ops.hpp"
#include "../format_impl.hpp"
#include "../vector_ops.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
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
      // The block borrows the parent's entries (make_block_part): nothing to copy from the parent it was
      // built on; borrowed again from another one.
      auto* values = const_cast<Value*>(a.values.data()) + p.entry_begin;
      if (p.sub->values.data() != values) {
        p.sub->col_idx = device_buffer<index_type>::borrow(const_cast<index_type*>(a.col_idx.data()) + p.entry_begin,
                                                           static_cast<std::size_t>(p.sub->nnz));
        p.sub->values = device_buffer<Value>::borrow(values, static_cast<std::size_t>(p.sub->nnz));
      }
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
      bytes += static_cast<size_type>(p.sub->row_ptr.bytes());  // its entries are the parent's (borrowed)
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

namespace {

// The notes of a block whose format failed there (it becomes cuSPARSE CSR; make_partitioned, partition_builder).
std::string cannot_hold(format_id f, const not_supported& e)
{
  return std::string(format_name(f)) + " cannot hold this block (" + e.what() + ")";
}
std::string out_of_memory(format_id f, const device_out_of_memory& e)
{
  return std::string("out of device memory building ") + format_name(f) + " (" + e.what() + ")";
}

// A block's part with its sub-CSR: rows [block.row_begin, block.row_end) of `a`, entries [entry_begin,
// entry_end) (row_ptr rebased to 0 on `stream`; the entries borrowed from `a`; columns stay global); no
// child yet.
template <typename Value>
typename partitioned<Value>::part make_block_part(const device_csr<Value>& a, const built_block& block, index_type entry_begin,
                                                  index_type entry_end, cudaStream_t stream)
{
  typename partitioned<Value>::part p;
  p.row_begin = block.row_begin;
  p.entry_begin = entry_begin;
  p.sub = std::make_unique<device_csr<Value>>();
  device_csr<Value>& s = *p.sub;
  s.rows = block.row_end - block.row_begin;
  s.cols = a.cols;
  s.nnz = entry_end - entry_begin;
  s.reserve = a.reserve;
  s.row_ptr.resize(s.rows + 1, a.layout_memory());
  rebase_row_ptr<<<static_cast<unsigned>((s.rows + 1 + 255) / 256), 256, 0, stream>>>(s.rows + 1, a.row_ptr.data() + block.row_begin,
                                                                                    s.row_ptr.data());
  AIJP_CHECK_LAUNCH();
  // The block's entries are contiguous in the parent's arrays: borrowed, not copied (the parent, the
  // matrix's CSR copy, outlives every format built on it). Copies cost two cudaMalloc of ~0.1-0.3 ms each
  // in a staged part, the bandwidth of moving them, and the memory.
  s.col_idx = device_buffer<index_type>::borrow(const_cast<index_type*>(a.col_idx.data()) + entry_begin, static_cast<std::size_t>(s.nnz));
  s.values = device_buffer<Value>::borrow(const_cast<Value*>(a.values.data()) + entry_begin, static_cast<std::size_t>(s.nnz));
  return p;
}

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
  detail::wait_stream(stream);

  std::vector<typename partitioned<Value>::part> parts;
  if (built) built->clear();
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    built_block out = blocks[k];
    typename partitioned<Value>::part p = make_block_part(a, out, bounds[k], bounds[k + 1], stream);
    const device_csr<Value>& s = *p.sub;
    if (s.nnz > 0) {
      // The block's exact statistics (formats size their layouts from them).
      const row_stats stats = compute_row_stats_device(s.rows, s.cols, s.row_ptr.data(), stream);
      const build_args<Value> args{s, stats, handle, stream};
      try {
        p.child = factory(out.format, args);
      } catch (const not_supported& e) {
        if (out.format == format_id::cusparse_csr) throw;
        out.note = cannot_hold(out.format, e);
      } catch (const device_out_of_memory& e) {
        if (out.format == format_id::cusparse_csr) throw;
        out.note = out_of_memory(out.format, e);
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

namespace {

// make_partitioned in parts that never wait (staged steps): the block bounds are read back into pinned
// memory, then per block one part makes its sub-CSR and starts its statistics (polled), and one builds its
// child (a sell_delta16, sell_sigma or sell child through its own builder, in parts of rows_per_part rows);
// the last part makes the partitioned format.
template <typename Value>
class partition_builder final : public format_builder<Value> {
 public:
  partition_builder(const device_csr<Value>& a, std::vector<built_block> blocks, format_factory<Value> factory,
                    format_check<Value> check, const cusparse_handle& handle, size_type rows_per_part)
      : a_(a), blocks_(std::move(blocks)), factory_(std::move(factory)), check_(std::move(check)), handle_(handle),
        rows_per_part_(rows_per_part)
  {
    AIJP_ENSURE(!blocks_.empty() && blocks_.front().row_begin == 0 && blocks_.back().row_end == a.rows, bad_input,
                "a partition must cover rows [0, " + std::to_string(a.rows) + ")");
    for (std::size_t k = 0; k < blocks_.size(); ++k) {
      AIJP_ENSURE(blocks_[k].row_end > blocks_[k].row_begin && (k == 0 || blocks_[k].row_begin == blocks_[k - 1].row_end),
                  bad_input, "partition blocks must be non-empty and contiguous");
    }
  }
  ~partition_builder() override { event_.settle(); }  // the pinned bounds go back to the pool

  bool advance(cudaStream_t stream) override
  {
    stream_ = stream;
    last_.clear();
    switch (phase_) {
      case phase::bounds: {
        bounds_.resize(blocks_.size() + 1);
        for (std::size_t k = 0; k <= blocks_.size(); ++k) {
          const size_type r = k < blocks_.size() ? blocks_[k].row_begin : a_.rows;
          AIJP_CUDA_CHECK(cudaMemcpyAsync(&bounds_[k], a_.row_ptr.data() + r, sizeof(index_type), cudaMemcpyDeviceToHost, stream));
        }
        event_.record(stream);
        ++parts_;
        phase_ = phase::waiting_bounds;
        return false;
      }
      case phase::waiting_bounds:
        if (!event_.done()) return false;
        start_block(stream);
        return false;
      case phase::next_block:  // a part of its own: the previous block's child may have been built whole
        start_block(stream);
        return false;
      case phase::stats: {
        if (!stats_.poll(stream)) return false;
        auto& p = parts_built_.back();
        const build_args<Value> args{*p.sub, stats_.result(), handle_, stream};
        ++parts_;
        // A format with a builder (make_format_builder; making one issues no device work, it only takes a
        // pooled read-back block) converts in parts once the block passes its check; the others are built
        // whole here.
        if (auto child = make_format_builder<Value>(out_.format, *p.sub, stats_.result(), rows_per_part_)) {
          try {
            check_(out_.format, args);
            child_ = std::move(child);
            phase_ = phase::child;
            return false;
          } catch (const not_supported& e) {
            out_.note = cannot_hold(out_.format, e);
          } catch (const device_out_of_memory& e) {
            out_.note = out_of_memory(out_.format, e);
          }
        } else {
          const auto t0 = std::chrono::steady_clock::now();
          build_child(args);
          last_ = "block " + std::to_string(k_ + 1) + "/" + std::to_string(blocks_.size()) + ": " + format_name(out_.format) +
                  " built whole in " +
                  std::to_string(std::lround(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count())) + " us";
        }
        return finish_block();
      }
      case phase::child: {
        try {
          if (!child_->advance(stream)) return false;
          parts_built_.back().child = child_->take();
        } catch (const not_supported& e) {
          out_.note = cannot_hold(out_.format, e);
        } catch (const device_out_of_memory& e) {
          out_.note = out_of_memory(out_.format, e);
        }
        parts_ += child_->parts_issued();
        done_children_.push_back(std::move(child_));  // kept until the end: freeing its pinned memory synchronises
        return finish_block();
      }
      case phase::done: return true;
    }
    return true;
  }
  void wait() override
  {
    event_.wait();
    if (phase_ == phase::stats) (void)stats_.wait(stream_);
    if (phase_ == phase::child) child_->wait();
  }
  std::unique_ptr<format_impl<Value>> take() override { return std::move(result_); }
  int parts_issued() const override { return parts_; }
  std::string last_part() const override { return last_; }
  const std::vector<built_block>& built() const { return built_; }

 private:
  enum class phase { bounds, waiting_bounds, next_block, stats, child, done };

  // Makes block k_'s sub-CSR and starts its statistics (or finishes a block without nonzeros).
  void start_block(cudaStream_t stream)
  {
    last_ = "block " + std::to_string(k_ + 1) + "/" + std::to_string(blocks_.size()) + " started";
    out_ = blocks_[k_];
    parts_built_.push_back(make_block_part(a_, out_, bounds_[k_], bounds_[k_ + 1], stream));
    ++parts_;
    const device_csr<Value>& s = *parts_built_.back().sub;
    if (s.nnz == 0) {
      (void)finish_block();
      return;
    }
    stats_.start(s.rows, s.cols, s.row_ptr.data(), stream);
    phase_ = phase::stats;
  }
  void build_child(const build_args<Value>& args)
  {
    try {
      parts_built_.back().child = factory_(out_.format, args);
    } catch (const not_supported& e) {
      if (out_.format == format_id::cusparse_csr) throw;
      out_.note = cannot_hold(out_.format, e);
    } catch (const device_out_of_memory& e) {
      if (out_.format == format_id::cusparse_csr) throw;
      out_.note = out_of_memory(out_.format, e);
    }
  }
  // Falls back to cuSPARSE CSR where the child failed, then moves to the next block (started by the next
  // advance) or makes the format.
  bool finish_block()
  {
    auto& p = parts_built_.back();
    if (p.sub->nnz > 0 && !p.child) {
      out_.format = format_id::cusparse_csr;
      p.child = make_cusparse_csr(*p.sub, handle_.get());
    }
    p.format = out_.format;
    built_.push_back(out_);
    if (++k_ < blocks_.size()) {
      phase_ = phase::next_block;
      return false;
    }
    result_ = std::make_unique<partitioned<Value>>(std::move(parts_built_));
    phase_ = phase::done;
    return true;
  }

  const device_csr<Value>& a_;
  std::vector<built_block> blocks_;
  format_factory<Value> factory_;
  format_check<Value> check_;
  const cusparse_handle& handle_;
  size_type rows_per_part_;
  phase phase_ = phase::bounds;
  cudaStream_t stream_ = nullptr;  // of the last advance (wait issues what is left there)
  std::string last_;                // what the last advance did (last_part)
  pinned_buffer<index_type> bounds_;
  poll_event event_;
  std::size_t k_ = 0;
  built_block out_;
  row_stats_job stats_;
  std::unique_ptr<format_builder<Value>> child_;
  std::vector<std::unique_ptr<format_builder<Value>>> done_children_;
  std::vector<typename partitioned<Value>::part> parts_built_;
  std::vector<built_block> built_;
  std::unique_ptr<format_impl<Value>> result_;
  int parts_ = 0;
};

}  // namespace

template <typename Value>
std::unique_ptr<format_builder<Value>> make_partition_builder(const device_csr<Value>& a, const std::vector<built_block>& blocks,
                                                              const format_factory<Value>& factory, const format_check<Value>& check,
                                                              const cusparse_handle& handle, size_type rows_per_part,
                                                              const std::vector<built_block>** built)
{
  auto b = std::make_unique<partition_builder<Value>>(a, blocks, factory, check, handle, rows_per_part);
  if (built) *built = &b->built();
  return b;
}

AIJP_IF_DOUBLE(template std::unique_ptr<format_builder<double>> make_partition_builder<double>(
    const device_csr<double>&, const std::vector<built_block>&, const format_factory<double>&, const format_check<double>&,
    const cusparse_handle&, size_type, const std::vector<built_block>**);)
AIJP_IF_FLOAT(template std::unique_ptr<format_builder<float>> make_partition_builder<float>(
    const device_csr<float>&, const std::vector<built_block>&, const format_factory<float>&, const format_check<float>&,
    const cusparse_handle&, size_type, const std::vector<built_block>**);)

AIJP_IF_DOUBLE(template std::unique_ptr<format_impl<double>> make_partitioned<double>(
    const device_csr<double>&, const std::vector<built_block>&, const format_factory<double>&, const cusparse_handle&, cudaStream_t,
    std::vector<built_block>*);)
AIJP_IF_FLOAT(template std::unique_ptr<format_impl<float>> make_partitioned<float>(
    const device_csr<float>&, const std::vector<built_block>&, const format_factory<float>&, const cusparse_handle&, cudaStream_t,
    std::vector<built_block>*);)

}  // namespace aijp::detail
