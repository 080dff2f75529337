// PLACEHOLDER until the format is implemented: the factory reports not_supported, so the runtime falls back
// to cuSPARSE CSR. Replace with the real layout, conversion and kernel.
#include "../format_impl.hpp"

namespace aijp::detail {

template <typename Value>
std::unique_ptr<format_impl<Value>> make_cusparse_csr_alg2(const build_args<Value>&)
{
  AIJP_THROW(not_supported, "make_cusparse_csr_alg2: format not implemented yet");
}
AIJP_INSTANTIATE_FORMAT_FACTORY(make_cusparse_csr_alg2)

template <typename Value>
std::unique_ptr<format_impl<Value>> make_cusparse_sell(const build_args<Value>&)
{
  AIJP_THROW(not_supported, "make_cusparse_sell: format not implemented yet");
}
AIJP_INSTANTIATE_FORMAT_FACTORY(make_cusparse_sell)

}  // namespace aijp::detail
