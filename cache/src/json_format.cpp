// JSON (de)serialisation of cache entries. The only translation unit that includes nlohmann/json.
//
// Reading is strict about types (a wrong type means a hand-edited or foreign file whose numbers we must
// not trust) and lenient about unknown members (ignored), so that a later schema-1 writer may add
// informational fields without breaking older readers.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include <aijpredict/error.hpp>

#include "detail.hpp"

namespace aijp {
namespace cache {
namespace detail {
namespace {

// ordered_json keeps the members in the documented order (schema_version first, device next, ...).
using json = nlohmann::ordered_json;

// ---------------------------------------------------------------------------------------------------------
// Writing

void require_finite(double value, const std::string& where)
{
  if (std::isfinite(value)) return;
  AIJP_THROW(bad_input, "aijpredict: cannot save cache entry: " + where + " is " +
                            (std::isnan(value) ? "NaN" : "infinite") + ", which JSON cannot represent");
}

json fingerprint_to_json(const device_fingerprint& fp)
{
  json out = json::object();
  for (const auto& field : fingerprint_fields) {
    if (field.text) {
      out[field.key] = fp.*field.text;
    } else {
      out[field.key] = fp.*field.number;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// Reading: any problem throws format_problem, which parse_json_text turns into a corrupt outcome.

struct format_problem {
  std::string text;
};

[[noreturn]] void fail(std::string text) { throw format_problem{std::move(text)}; }

const json& member(const json& object, const char* key, const std::string& where)
{
  const auto it = object.find(key);
  if (it == object.end()) fail("required field \"" + where + key + "\" is missing");
  return *it;
}

const json& object_member(const json& object, const char* key, const std::string& where)
{
  const json& value = member(object, key, where);
  if (!value.is_object()) fail("field \"" + where + key + "\" must be an object");
  return value;
}

std::string read_string(const json& value, const std::string& where)
{
  if (!value.is_string()) fail("field \"" + where + "\" must be a string");
  return value.get<std::string>();
}

int read_int(const json& value, const std::string& where)
{
  if (!value.is_number_integer()) fail("field \"" + where + "\" must be an integer");
  const bool in_range =
      value.is_number_unsigned()
          ? value.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<int>::max())
          : value.get<std::int64_t>() >= std::numeric_limits<int>::min() &&
                value.get<std::int64_t>() <= std::numeric_limits<int>::max();
  if (!in_range) fail("field \"" + where + "\" is out of the range of int");
  return static_cast<int>(value.get<std::int64_t>());
}

double read_double(const json& value, const std::string& where)
{
  if (!value.is_number()) fail("field \"" + where + "\" must be a number");
  return value.get<double>();
}

std::map<std::string, double> read_number_map(const json& object, const std::string& where)
{
  std::map<std::string, double> out;
  for (const auto& item : object.items()) {
    out.emplace(item.key(), read_double(item.value(), where + "." + item.key()));
  }
  return out;
}

device_fingerprint read_fingerprint(const json& object)
{
  device_fingerprint fp;
  for (const auto& field : fingerprint_fields) {
    const json& value = member(object, field.key, "device.");
    const std::string where = std::string("device.") + field.key;
    if (field.text) {
      fp.*field.text = read_string(value, where);
    } else {
      fp.*field.number = read_int(value, where);
    }
  }
  return fp;
}

cache_entry read_entry(const json& root)
{
  cache_entry entry;
  entry.schema_version = schema_version;
  entry.device = read_fingerprint(object_member(root, "device", ""));
  entry.created_by = read_string(member(root, "created_by", ""), "created_by");
  entry.created_at = read_string(member(root, "created_at", ""), "created_at");
  entry.device_metrics = read_number_map(object_member(root, "device_metrics", ""), "device_metrics");
  for (const auto& model : object_member(root, "coefficients", "").items()) {
    const std::string model_where = "coefficients." + model.key();
    if (!model.value().is_object()) fail("field \"" + model_where + "\" must be an object");
    auto& formats = entry.coefficients[model.key()];
    for (const auto& format : model.value().items()) {
      const std::string format_where = model_where + "." + format.key();
      if (!format.value().is_object()) fail("field \"" + format_where + "\" must be an object");
      formats[format.key()] = read_number_map(format.value(), format_where);
    }
  }
  for (const auto& item : object_member(root, "provenance", "").items()) {
    entry.provenance[item.key()] = read_string(item.value(), "provenance." + item.key());
  }
  return entry;
}

}  // namespace

std::string to_json_text(const cache_entry& entry)
{
  if (entry.schema_version != schema_version) {
    AIJP_THROW(bad_input, "aijpredict: cannot save cache entry: its schema_version is " +
                              std::to_string(entry.schema_version) + ", but this build writes version " +
                              std::to_string(schema_version));
  }
  json root = json::object();
  root["schema_version"] = entry.schema_version;
  root["device"] = fingerprint_to_json(entry.device);
  root["created_by"] = entry.created_by;
  root["created_at"] = entry.created_at;
  json metrics = json::object();
  for (const auto& [name, value] : entry.device_metrics) {
    require_finite(value, "device_metrics." + name);
    metrics[name] = value;
  }
  root["device_metrics"] = std::move(metrics);
  json coefficients = json::object();
  for (const auto& [model, formats] : entry.coefficients) {
    json model_json = json::object();
    for (const auto& [format, values] : formats) {
      json format_json = json::object();
      for (const auto& [name, value] : values) {
        require_finite(value, "coefficients." + model + "." + format + "." + name);
        format_json[name] = value;
      }
      model_json[format] = std::move(format_json);
    }
    coefficients[model] = std::move(model_json);
  }
  root["coefficients"] = std::move(coefficients);
  json provenance = json::object();
  for (const auto& [key, value] : entry.provenance) provenance[key] = value;
  root["provenance"] = std::move(provenance);
  try {
    // dump() prints doubles with enough digits to parse back to the identical value.
    return root.dump(2) + "\n";
  } catch (const json::exception& err) {
    // type_error 316: a key or string value is not valid UTF-8.
    AIJP_THROW(bad_input, std::string("aijpredict: cannot save cache entry: ") + err.what());
  }
}

parse_outcome parse_json_text(const std::string& text)
{
  parse_outcome out;
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    out.problem = text.empty() ? "the file is empty" : "the file contains only white space";
    return out;
  }
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& err) {
    out.problem = "not valid JSON at byte " + std::to_string(err.byte);
    if (err.byte > text.size()) out.problem += " (the file ends early; truncated?)";
    return out;
  } catch (const json::exception& err) {
    // out_of_range 406: a number too large for a double.
    out.problem = std::string("not usable JSON: ") + err.what();
    return out;
  }
  try {
    if (!root.is_object()) fail("the top level is not a JSON object");
    const json& version = member(root, "schema_version", "");
    if (!version.is_number_integer()) fail("field \"schema_version\" must be an integer");
    if (!version.is_number_unsigned() ||
        version.get<std::uint64_t>() != static_cast<std::uint64_t>(schema_version)) {
      out.status = load_status::wrong_schema;
      out.problem = "it has schema version " + version.dump() + ", but this build reads version " +
                    std::to_string(schema_version);
      return out;
    }
    out.entry = read_entry(root);
    out.status = load_status::ok;
  } catch (const format_problem& problem) {
    out.status = load_status::corrupt;
    out.problem = problem.text;
  } catch (const json::exception& err) {
    out.status = load_status::corrupt;
    out.problem = std::string("unexpected content: ") + err.what();
  }
  return out;
}

}  // namespace detail
}  // namespace cache
}  // namespace aijp
