#include <aijpredict/formats.hpp>

#include <aijpredict/error.hpp>

#include <sstream>

namespace aijp {

namespace {
struct format_entry {
  format_id id;
  const char* name;
  const char* description;
};
constexpr format_entry format_table[format_count] = {
    {format_id::cusparse_csr, "cusparse_csr", "cuSPARSE CSR SpMV (ALG1), the aijcusparse baseline"},
    {format_id::sell_c_sigma, "sell", "SELL-C-sigma, C = 32 rows per slice, thread per row"},
};
}  // namespace

const char* format_name(format_id f) { return format_table[static_cast<int>(f)].name; }
const char* format_description(format_id f) { return format_table[static_cast<int>(f)].description; }

std::vector<format_id> all_formats()
{
  std::vector<format_id> out;
  for (const auto& e : format_table) out.push_back(e.id);
  return out;
}

format_id parse_format(const std::string& name)
{
  for (const auto& e : format_table) {
    if (name == e.name) return e.id;
  }
  std::string valid;
  for (const auto& e : format_table) valid += std::string(valid.empty() ? "" : ", ") + e.name;
  AIJP_THROW(bad_input, "unknown storage format '" + name + "' (valid: " + valid + ")");
}

std::vector<format_id> parse_format_list(const std::string& list)
{
  if (list.empty()) return all_formats();
  std::vector<format_id> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const format_id f = parse_format(item);
    bool seen = false;
    for (auto g : out) seen = seen || g == f;
    if (!seen) out.push_back(f);
  }
  AIJP_ENSURE(!out.empty(), bad_input, "empty storage format list");
  return out;
}

}  // namespace aijp
