// Internal helpers shared by the cache translation units; not installed, not part of the API.
#pragma once

#include <optional>
#include <string>

#include <aijpredict/cache.hpp>

namespace aijp {
namespace cache {
namespace detail {

/// One field of `device_fingerprint`: exactly one of `text` / `number` is set. `fingerprint_fields`
/// lists all fields in declaration order; hashing, comparison and (de)serialisation all iterate it, so a
/// new field needs one line here (and a schema version bump).
struct fingerprint_field {
  const char* key;
  std::string device_fingerprint::*text;
  int device_fingerprint::*number;
};

inline constexpr fingerprint_field fingerprint_fields[] = {
    {"name", &device_fingerprint::name, nullptr},
    {"uuid", &device_fingerprint::uuid, nullptr},
    {"cc_major", nullptr, &device_fingerprint::cc_major},
    {"cc_minor", nullptr, &device_fingerprint::cc_minor},
    {"sm_count", nullptr, &device_fingerprint::sm_count},
    {"mem_bus_width_bits", nullptr, &device_fingerprint::mem_bus_width_bits},
    {"mem_clock_khz", nullptr, &device_fingerprint::mem_clock_khz},
    {"l2_bytes", nullptr, &device_fingerprint::l2_bytes},
    {"driver_version", nullptr, &device_fingerprint::driver_version},
    {"runtime_version", nullptr, &device_fingerprint::runtime_version},
    {"cusparse_version", nullptr, &device_fingerprint::cusparse_version},
    {"kernel_set_hash", &device_fingerprint::kernel_set_hash, nullptr},
};

/// Serialises `entry` as pretty-printed JSON (indent 2, trailing newline). Throws aijp::bad_input if the
/// entry cannot be represented (non-finite value, invalid UTF-8, schema version other than current).
std::string to_json_text(const cache_entry& entry);

/// What parsing the text of a cache file found. `status` is ok, corrupt or wrong_schema (the device is
/// not compared here); `entry` is set iff ok; `problem` completes "ignoring cache file X: ..." otherwise.
struct parse_outcome {
  load_status status = load_status::corrupt;
  std::optional<cache_entry> entry;
  std::string problem;
};

parse_outcome parse_json_text(const std::string& text);

/// Describes the first field in which `in_file` and `requested` differ, e.g.
/// "sm_count is 114 in the file but 132 on this device"; empty if they are the same device.
std::string first_difference(const device_fingerprint& in_file, const device_fingerprint& requested);

}  // namespace detail
}  // namespace cache
}  // namespace aijp
