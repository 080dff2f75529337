#include "vector_ops.hpp"
#include "module_preload.hpp"

namespace aijp::detail {

namespace {
template <typename Value>
__global__ void scale_vector(size_type n, Value beta, Value* __restrict__ y)
{
  const size_type i = static_cast<size_type>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = beta * y[i];
}
}  // namespace

template <typename Value>
void scale_or_zero(size_type n, Value beta, Value* y, cudaStream_t stream)
{
  if (n == 0) return;
  if (beta == Value(0)) {
    AIJP_CUDA_CHECK(cudaMemsetAsync(y, 0, n * sizeof(Value), stream));
  } else if (beta != Value(1)) {
    scale_vector<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(n, beta, y);
    AIJP_CHECK_LAUNCH();
  }
}

template void scale_or_zero<double>(size_type, double, double*, cudaStream_t);
template void scale_or_zero<float>(size_type, float, float*, cudaStream_t);

}  // namespace aijp::detail

// The module of this unit is loaded at context creation (module_preload.hpp).
AIJP_MODULE_ANCHOR("vector_ops.cu", 0)
