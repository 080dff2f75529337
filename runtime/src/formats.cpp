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
    {format_id::sell_c_sigma, "sell", "SELL-C-sigma, C = 32, sigma = 1: slices of 32 consecutive rows"},
    {format_id::cusparse_csr_alg2, "cusparse_csr_alg2", "cuSPARSE CSR SpMV ALG2 with cusparseSpMV_preprocess"},
    {format_id::cusparse_sell, "cusparse_sell", "cuSPARSE sliced ELL, slice 32"},
    {format_id::csr_scalar, "csr_scalar", "CSR, one thread per row"},
    {format_id::csr_vector, "csr_vector", "CSR, 2-32 lanes per row chosen from the row lengths"},
    {format_id::coo, "coo", "COO, one thread per nonzero"},
    {format_id::ell, "ell", "ELLPACK, column-major, padded to the longest row"},
    {format_id::ellr, "ellr", "ELLPACK-R: ELL plus row lengths"},
    {format_id::pellr, "pellr", "PELLR: length-sorted rows in ELLPACK-R layout"},
    {format_id::jad, "jad", "JAD: jagged diagonals of the length-sorted rows"},
    {format_id::hyb, "hyb", "HYB: ELL (Bell-Garland width) plus COO"},
    {format_id::sell_sigma, "sell_sigma", "SELL-C-sigma, C = 32, rows sorted within windows of sigma rows"},
    {format_id::sell_delta16, "sell_delta16", "SELL-32 with 16-bit column deltas"},
};
constexpr bool table_in_enum_order()
{
  for (int i = 0; i < format_count; ++i) {
    if (static_cast<int>(format_table[i].id) != i) return false;
  }
  return true;
}
static_assert(table_in_enum_order(), "format_table must list the formats in the order of format_id");
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
