// PLACEHOLDER until the format is implemented: the factory reports not_supported, so the runtime falls back
// to cuSPARSE CSR. Replace with the real layout, conversion and kernel.
#include "../format_impl.hpp"

namespace aijp::detail {

template <typename Value>
std::unique_ptr<format_impl<Value>> make_jad(const build_args<Value>&)
{
  AIJP_THROW(not_supported, "make_jad: format not implemented yet");
}
AIJP_INSTANTIATE_FORMAT_FACTORY(make_jad)

}  // namespace aijp::detail
