// PLACEHOLDER until the format is implemented: the factory reports not_supported, so the runtime falls back
// to cuSPARSE CSR. Replace with the real layout, conversion and kernel.
#include "../format_impl.hpp"

namespace aijp::detail {

template <typename Value>
std::unique_ptr<format_impl<Value>> make_ell(const build_args<Value>&)
{
  AIJP_THROW(not_supported, "make_ell: format not implemented yet");
}
AIJP_INSTANTIATE_FORMAT_FACTORY(make_ell)

template <typename Value>
std::unique_ptr<format_impl<Value>> make_ellr(const build_args<Value>&)
{
  AIJP_THROW(not_supported, "make_ellr: format not implemented yet");
}
AIJP_INSTANTIATE_FORMAT_FACTORY(make_ellr)

template <typename Value>
std::unique_ptr<format_impl<Value>> make_pellr(const build_args<Value>&)
{
  AIJP_THROW(not_supported, "make_pellr: format not implemented yet");
}
AIJP_INSTANTIATE_FORMAT_FACTORY(make_pellr)

}  // namespace aijp::detail
