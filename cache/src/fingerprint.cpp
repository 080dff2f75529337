// Device fingerprints (stable file stems, comparison), default directory, small shared helpers.
#include <aijpredict/cache.hpp>

#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <system_error>

#include <unistd.h>

#include "detail.hpp"

namespace aijp {
namespace cache {
namespace {

// 64-bit FNV-1a: tiny, well specified and identical on every platform, unlike std::hash. Collisions
// only matter if two devices share a stem, and load() then reports other_device instead of mixing data.
constexpr std::uint64_t fnv_offset = 14695981039346656037ull;
constexpr std::uint64_t fnv_prime = 1099511628211ull;

void fnv_mix(std::uint64_t& hash, const std::string& bytes)
{
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= fnv_prime;
  }
}

// Length-prefixed canonical encoding so that no two different fingerprints encode alike
// ("ab"+"c" vs "a"+"bc").
std::uint64_t fingerprint_hash(const device_fingerprint& fp)
{
  std::uint64_t hash = fnv_offset;
  for (const auto& field : detail::fingerprint_fields) {
    std::string encoded = field.key;
    if (field.text) {
      const std::string& value = fp.*field.text;
      encoded += '=' + std::to_string(value.size()) + ':' + value + ';';
    } else {
      encoded += '=' + std::to_string(fp.*field.number) + ';';
    }
    fnv_mix(hash, encoded);
  }
  return hash;
}

std::string name_slug(const std::string& name)
{
  constexpr std::size_t max_length = 40;
  std::string slug;
  for (unsigned char c : name) {
    if (c >= 'A' && c <= 'Z') c = static_cast<unsigned char>(c - 'A' + 'a');
    const bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (keep) {
      slug += static_cast<char>(c);
    } else if (!slug.empty() && slug.back() != '-') {
      slug += '-';
    }
  }
  const std::string vendor = "nvidia-";
  if (slug.compare(0, vendor.size(), vendor) == 0) slug.erase(0, vendor.size());
  if (slug.size() > max_length) slug.resize(max_length);
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  return slug.empty() ? "gpu" : slug;
}

std::string env_or_empty(const char* name)
{
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

std::string device_fingerprint::file_stem() const
{
  static const char digits[] = "0123456789abcdef";
  const std::uint64_t hash = fingerprint_hash(*this);
  std::string hex;
  for (int shift = 60; shift >= 16; shift -= 4) hex += digits[(hash >> shift) & 0xf];
  return name_slug(name) + "-sm" + std::to_string(cc_major) + std::to_string(cc_minor) + "-" + hex;
}

bool device_fingerprint::same_device(const device_fingerprint& other) const
{
  return detail::first_difference(*this, other).empty();
}

bool operator==(const device_fingerprint& a, const device_fingerprint& b) { return a.same_device(b); }
bool operator!=(const device_fingerprint& a, const device_fingerprint& b) { return !(a == b); }

bool operator==(const cache_entry& a, const cache_entry& b)
{
  return a.schema_version == b.schema_version && a.device == b.device && a.created_by == b.created_by &&
         a.created_at == b.created_at && a.device_metrics == b.device_metrics &&
         a.coefficients == b.coefficients && a.provenance == b.provenance;
}
bool operator!=(const cache_entry& a, const cache_entry& b) { return !(a == b); }

const char* to_string(load_status status)
{
  switch (status) {
    case load_status::ok: return "ok";
    case load_status::missing: return "missing";
    case load_status::corrupt: return "corrupt";
    case load_status::wrong_schema: return "wrong_schema";
    case load_status::other_device: return "other_device";
    case load_status::unreadable: return "unreadable";
  }
  return "unknown";
}

std::filesystem::path default_directory()
{
  const std::string explicit_dir = env_or_empty("AIJPREDICT_CACHE_DIR");
  if (!explicit_dir.empty()) return explicit_dir;
  const std::filesystem::path xdg = env_or_empty("XDG_CACHE_HOME");
  if (xdg.is_absolute()) return xdg / "aijpredict";
  const std::string home = env_or_empty("HOME");
  if (!home.empty()) return std::filesystem::path(home) / ".cache" / "aijpredict";
  std::error_code ec;
  std::filesystem::path temp = std::filesystem::temp_directory_path(ec);
  if (ec || temp.empty()) temp = "/tmp";
  // Per-user name: a shared temp directory must not mix (or let others plant) cache files of two users.
  return temp / ("aijpredict-" + std::to_string(static_cast<unsigned long>(::getuid())));
}

std::string iso8601_utc_now()
{
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

namespace detail {

std::string first_difference(const device_fingerprint& in_file, const device_fingerprint& requested)
{
  for (const auto& field : fingerprint_fields) {
    if (field.text) {
      const std::string& a = in_file.*field.text;
      const std::string& b = requested.*field.text;
      if (a != b) return std::string(field.key) + " is \"" + a + "\" in the file but \"" + b + "\" here";
    } else {
      const int a = in_file.*field.number;
      const int b = requested.*field.number;
      if (a != b) {
        return std::string(field.key) + " is " + std::to_string(a) + " in the file but " + std::to_string(b) +
               " here";
      }
    }
  }
  return {};
}

}  // namespace detail
}  // namespace cache
}  // namespace aijp
