// Unit tests of aijp::cache: fingerprints, file format, every load_status, atomic saves, locking across
// processes and threads, and the environment lookup of the default directory.
//
// Suite names contain "cache" so that `ctest -R cache` selects them.
#include <aijpredict/cache.hpp>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <aijpredict/error.hpp>

namespace {

namespace fs = std::filesystem;
using aijp::cache::cache_entry;
using aijp::cache::device_fingerprint;
using aijp::cache::load_result;
using aijp::cache::load_status;
using aijp::cache::store;

device_fingerprint h200()
{
  device_fingerprint fp;
  fp.name = "NVIDIA H200";
  fp.uuid = "GPU-6d1c5a3e-0f3b-2a49-8c1e-7b2f0d9e4a11";
  fp.cc_major = 9;
  fp.cc_minor = 0;
  fp.sm_count = 132;
  fp.mem_bus_width_bits = 6144;
  fp.mem_clock_khz = 3201000;
  fp.l2_bytes = 52428800;
  fp.driver_version = 12040;
  fp.runtime_version = 12040;
  fp.cusparse_version = 12300;
  fp.kernel_set_hash = "0123456789abcdef";
  return fp;
}

device_fingerprint a100()
{
  device_fingerprint fp = h200();
  fp.name = "NVIDIA A100-SXM4-80GB";
  fp.uuid = "GPU-00000000-1111-2222-3333-444444444444";
  fp.cc_major = 8;
  fp.sm_count = 108;
  return fp;
}

cache_entry sample_entry(const device_fingerprint& fp)
{
  cache_entry entry;
  entry.device = fp;
  entry.created_by = "test_cache";
  entry.created_at = "2024-05-01T12:34:56Z";
  entry.device_metrics = {{"stream_read_gbs", 4312.75}, {"launch_overhead_us", 2.1}};
  // Values that a lossy printer (%g, %.15g, float) would not reproduce exactly.
  entry.coefficients["spmv_time"]["csr"] = {
      {"alpha", 0.1},          {"beta", 1.0 / 3.0},  {"denormal", 5e-324},
      {"dbl_min", DBL_MIN},    {"dbl_max", DBL_MAX}, {"integral", 3.0},
      {"negative_zero", -0.0}, {"large", 1e21},      {"digits", 123456789.12345678}};
  entry.coefficients["spmv_time"]["sell32"] = {{"alpha", -2.5e-300}, {"per_slice_ns", 17.0 / 7.0}};
  entry.coefficients["conversion_time"]["ell"] = {};
  entry.provenance = {{"benchmark", "warm-up on 12 synthetic matrices"},
                      {"quoting", "a \"quoted\" value, a back\\slash and a tab\t"},
                      {"unicode",
                       "Gr\xc3\xbc\xc3\x9f"
                       "e \xe2\x9c\x93"}};
  return entry;
}

std::string read_bytes(const fs::path& path)
{
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& path, const std::string& bytes)
{
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  ASSERT_TRUE(out.good()) << path;
}

std::vector<std::string> file_names(const fs::path& dir)
{
  std::vector<std::string> names;
  for (const auto& item : fs::directory_iterator(dir)) names.push_back(item.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool contains(const std::string& text, const std::string& part)
{
  return text.find(part) != std::string::npos;
}

/// Each test gets a fresh directory under the temp dir, removed afterwards.
class cache_store : public ::testing::Test {
 protected:
  void SetUp() override
  {
    std::string pattern = (fs::temp_directory_path() / "aijp-cache-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }

  void TearDown() override
  {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    EXPECT_FALSE(ec) << "cannot remove " << dir_ << ": " << ec.message();
  }

  /// Saves a valid entry for `fp`, then rewrites its file through `edit` (on the parsed JSON).
  fs::path save_and_edit(const store& s, const device_fingerprint& fp,
                         const std::function<void(nlohmann::json&)>& edit)
  {
    s.save(sample_entry(fp));
    const fs::path path = s.path_for(fp);
    nlohmann::json doc = nlohmann::json::parse(read_bytes(path));
    edit(doc);
    write_bytes(path, doc.dump(2));
    return path;
  }

  void expect_rejected(const load_result& result, load_status expected, const fs::path& path)
  {
    EXPECT_EQ(result.status, expected) << "got " << to_string(result.status) << ": " << result.message;
    EXPECT_FALSE(result.entry.has_value());
    EXPECT_EQ(result.path, path);
    EXPECT_TRUE(contains(result.message, path.string())) << result.message;
    EXPECT_EQ(std::count(result.message.begin(), result.message.end(), '\n'), 0) << result.message;
  }

  fs::path dir_;
};

// -------------------------------------------------------------------------------------------------------
// Fingerprints

TEST(cache_fingerprint, FileStemIsStable)
{
  // Golden value: the stem names the file on disk, so a change orphans every user's cache. If this fails
  // on purpose (new hash, new field), bump aijp::cache::schema_version as well.
  EXPECT_EQ(h200().file_stem(), "h200-sm90-9a8f3530d19f");
  EXPECT_EQ(h200().file_stem(), h200().file_stem());
}

TEST(cache_fingerprint, FileStemIsFileSystemSafe)
{
  device_fingerprint fp = h200();
  const std::vector<std::string> names = {"../../etc/passwd",
                                          "",
                                          "  ",
                                          "NVIDIA GeForce RTX 4090 (MIG 3g.40gb)",
                                          std::string("A\0B/C", 5),
                                          std::string(300, 'x'),
                                          "Gr\xc3\xbc\xc3\x9f"
                                          "e"};
  for (const std::string& name : names) {
    fp.name = name;
    const std::string stem = fp.file_stem();
    SCOPED_TRACE("name '" + name + "' -> stem '" + stem + "'");
    EXPECT_FALSE(stem.empty());
    EXPECT_LE(stem.size(), 40u + 20u);
    EXPECT_TRUE(std::all_of(stem.begin(), stem.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    }));
    EXPECT_NE(stem.front(), '-');
    EXPECT_FALSE(contains(stem, "--"));
  }
  fp.name = "NVIDIA GeForce RTX 4090";
  EXPECT_EQ(fp.file_stem().rfind("geforce-rtx-4090-sm90-", 0), 0u) << fp.file_stem();
  fp.name = "";
  EXPECT_EQ(fp.file_stem().rfind("gpu-sm90-", 0), 0u) << fp.file_stem();
}

TEST(cache_fingerprint, EveryFieldDistinguishesDevices)
{
  const std::vector<std::pair<const char*, std::function<void(device_fingerprint&)>>> changes = {
      {"name", [](device_fingerprint& f) { f.name += " "; }},
      {"uuid", [](device_fingerprint& f) { f.uuid = "GPU-other"; }},
      {"cc_major", [](device_fingerprint& f) { f.cc_major++; }},
      {"cc_minor", [](device_fingerprint& f) { f.cc_minor++; }},
      {"sm_count", [](device_fingerprint& f) { f.sm_count--; }},
      {"mem_bus_width_bits", [](device_fingerprint& f) { f.mem_bus_width_bits /= 2; }},
      {"mem_clock_khz", [](device_fingerprint& f) { f.mem_clock_khz++; }},
      {"l2_bytes", [](device_fingerprint& f) { f.l2_bytes++; }},
      {"driver_version", [](device_fingerprint& f) { f.driver_version++; }},
      {"runtime_version", [](device_fingerprint& f) { f.runtime_version++; }},
      {"cusparse_version", [](device_fingerprint& f) { f.cusparse_version++; }},
      {"kernel_set_hash", [](device_fingerprint& f) { f.kernel_set_hash = "fedcba9876543210"; }},
  };
  const device_fingerprint base = h200();
  EXPECT_TRUE(base.same_device(h200()));
  for (const auto& [field, change] : changes) {
    SCOPED_TRACE(field);
    device_fingerprint other = base;
    change(other);
    EXPECT_FALSE(base.same_device(other));
    EXPECT_FALSE(other.same_device(base));
    EXPECT_NE(base.file_stem(), other.file_stem());
  }
}

TEST(cache_fingerprint, StemsDoNotCollideOnShiftedStrings)
{
  device_fingerprint a = h200();
  device_fingerprint b = h200();
  a.uuid = "ab";
  a.kernel_set_hash = "c";
  b.uuid = "a";
  b.kernel_set_hash = "bc";
  EXPECT_NE(a.file_stem(), b.file_stem());
}

// -------------------------------------------------------------------------------------------------------
// Reading and writing

TEST_F(cache_store, PathIsStemInDirectory)
{
  const store s(dir_);
  EXPECT_EQ(s.directory(), dir_);
  EXPECT_EQ(s.path_for(h200()), dir_ / (h200().file_stem() + ".json"));
  EXPECT_THROW(store{fs::path()}, aijp::bad_input);
}

TEST_F(cache_store, RoundTripPreservesEveryValueExactly)
{
  const store s(dir_);
  const cache_entry saved = sample_entry(h200());
  s.save(saved);

  const load_result loaded = s.load(h200());
  ASSERT_EQ(loaded.status, load_status::ok) << loaded.message;
  ASSERT_TRUE(loaded.entry.has_value());
  EXPECT_TRUE(loaded.message.empty());
  EXPECT_EQ(loaded.path, s.path_for(h200()));
  EXPECT_TRUE(*loaded.entry == saved);
  // operator== on double cannot see these; compare the bits.
  const auto& csr = loaded.entry->coefficients.at("spmv_time").at("csr");
  EXPECT_TRUE(std::signbit(csr.at("negative_zero")));
  EXPECT_EQ(csr.at("denormal"), 5e-324);
  EXPECT_EQ(csr.at("beta"), 1.0 / 3.0);
  EXPECT_TRUE(loaded.entry->coefficients.at("conversion_time").at("ell").empty());
}

TEST_F(cache_store, FileIsPrettyPrintedInDocumentedLayout)
{
  const store s(dir_);
  s.save(sample_entry(h200()));
  const std::string text = read_bytes(s.path_for(h200()));
  EXPECT_EQ(text.rfind("{\n  \"schema_version\": 1,\n  \"device\": {\n    \"name\": \"NVIDIA H200\",", 0), 0u)
      << text;
  const auto doc = nlohmann::json::parse(text);
  for (const char* key : {"schema_version", "device", "created_by", "created_at", "device_metrics",
                          "coefficients", "provenance"}) {
    EXPECT_TRUE(doc.contains(key)) << key;
  }
  for (const char* key :
       {"name", "uuid", "cc_major", "cc_minor", "sm_count", "mem_bus_width_bits", "mem_clock_khz", "l2_bytes",
        "driver_version", "runtime_version", "cusparse_version", "kernel_set_hash"}) {
    EXPECT_TRUE(doc["device"].contains(key)) << key;
  }
  EXPECT_EQ(doc["coefficients"]["spmv_time"]["sell32"]["alpha"].get<double>(), -2.5e-300);
}

TEST_F(cache_store, MissingFileIsMissing)
{
  const store s(dir_ / "not" / "yet");
  const load_result result = s.load(h200());
  expect_rejected(result, load_status::missing, s.path_for(h200()));
  EXPECT_FALSE(fs::exists(dir_ / "not")) << "load must not create anything";
}

TEST_F(cache_store, DirectoryThatIsAFileMeansMissing)
{
  write_bytes(dir_ / "plain", "x");
  const store s(dir_ / "plain");
  expect_rejected(s.load(h200()), load_status::missing, s.path_for(h200()));
}

TEST_F(cache_store, LoadOrCreateCreatesTheFile)
{
  const store s(dir_ / "a" / "b");
  const cache_entry initial = sample_entry(h200());
  const load_result created = s.load_or_create(h200(), initial);
  ASSERT_EQ(created.status, load_status::ok) << created.message;
  ASSERT_TRUE(created.entry.has_value());
  EXPECT_TRUE(*created.entry == initial);
  EXPECT_TRUE(created.message.empty());
  ASSERT_TRUE(fs::is_regular_file(s.path_for(h200())));

  const load_result reloaded = s.load(h200());
  ASSERT_EQ(reloaded.status, load_status::ok) << reloaded.message;
  EXPECT_TRUE(*reloaded.entry == initial);

  // An existing file wins over a different initial entry.
  cache_entry other = initial;
  other.created_by = "someone else";
  const load_result again = s.load_or_create(h200(), other);
  ASSERT_EQ(again.status, load_status::ok);
  EXPECT_EQ(again.entry->created_by, "test_cache");

  EXPECT_THROW(s.load_or_create(a100(), initial), aijp::bad_input);
}

TEST_F(cache_store, TruncatedFileIsCorrupt)
{
  const store s(dir_);
  s.save(sample_entry(h200()));
  const fs::path path = s.path_for(h200());
  const std::string full = read_bytes(path);
  write_bytes(path, full.substr(0, full.size() / 2));
  const load_result result = s.load(h200());
  expect_rejected(result, load_status::corrupt, path);
  EXPECT_TRUE(contains(result.message, "not valid JSON at byte")) << result.message;
  EXPECT_TRUE(contains(result.message, "truncated")) << result.message;
}

TEST_F(cache_store, GarbageAndEmptyFilesAreCorrupt)
{
  const store s(dir_);
  const fs::path path = s.path_for(h200());
  fs::create_directories(dir_);
  for (const std::string& bytes :
       {std::string("\x00\x01\xff\xfe garbage \x7f", 14), std::string(""), std::string(" \n\t"),
        std::string("{\"schema_version\": 1} trailing"), std::string("{\"schema_version\": 1e400}"),
        std::string("[1, 2, 3]"), std::string("null")}) {
    SCOPED_TRACE("content: " + bytes);
    write_bytes(path, bytes);
    expect_rejected(s.load(h200()), load_status::corrupt, path);
  }
}

TEST_F(cache_store, WrongFieldTypesAreCorrupt)
{
  const store s(dir_);
  const std::vector<std::pair<const char*, std::function<void(nlohmann::json&)>>> edits = {
      {"device.sm_count", [](nlohmann::json& d) { d["device"]["sm_count"] = "132"; }},
      {"device.cc_major", [](nlohmann::json& d) { d["device"]["cc_major"] = 9.5; }},
      {"device.l2_bytes", [](nlohmann::json& d) { d["device"]["l2_bytes"] = 1000000000000LL; }},
      {"device.name", [](nlohmann::json& d) { d["device"]["name"] = 42; }},
      {"device.uuid", [](nlohmann::json& d) { d["device"].erase("uuid"); }},
      {"device", [](nlohmann::json& d) { d["device"] = nlohmann::json::array(); }},
      {"schema_version", [](nlohmann::json& d) { d["schema_version"] = "1"; }},
      {"schema_version", [](nlohmann::json& d) { d.erase("schema_version"); }},
      {"created_at", [](nlohmann::json& d) { d["created_at"] = nullptr; }},
      {"device_metrics.stream_read_gbs",
       [](nlohmann::json& d) { d["device_metrics"]["stream_read_gbs"] = nullptr; }},
      {"device_metrics",
       [](nlohmann::json& d) {
         d["device_metrics"] = {1, 2};
       }},
      {"coefficients.spmv_time.csr.alpha",
       [](nlohmann::json& d) { d["coefficients"]["spmv_time"]["csr"]["alpha"] = "0.1"; }},
      {"coefficients.spmv_time", [](nlohmann::json& d) { d["coefficients"]["spmv_time"] = 3; }},
      {"coefficients", [](nlohmann::json& d) { d.erase("coefficients"); }},
      {"provenance.benchmark", [](nlohmann::json& d) { d["provenance"]["benchmark"] = 5; }},
  };
  for (const auto& [field, edit] : edits) {
    SCOPED_TRACE(field);
    const fs::path path = save_and_edit(s, h200(), edit);
    const load_result result = s.load(h200());
    expect_rejected(result, load_status::corrupt, path);
    EXPECT_TRUE(contains(result.message, field)) << result.message;
  }
}

TEST_F(cache_store, UnknownMembersAreIgnored)
{
  const store s(dir_);
  save_and_edit(s, h200(), [](nlohmann::json& d) {
    d["comment"] = "added by a later writer";
    d["device"]["pci_bus_id"] = "0000:17:00.0";
  });
  const load_result result = s.load(h200());
  ASSERT_EQ(result.status, load_status::ok) << result.message;
  EXPECT_TRUE(*result.entry == sample_entry(h200()));
}

TEST_F(cache_store, OtherSchemaVersionIsWrongSchema)
{
  const store s(dir_);
  for (const long long version : {999LL, 0LL, -1LL, 2LL}) {
    SCOPED_TRACE(version);
    // A future layout may differ in anything but schema_version: strip the rest to prove it is not read.
    const fs::path path = save_and_edit(s, h200(), [&](nlohmann::json& d) {
      d = nlohmann::json{{"schema_version", version}, {"something", "else"}};
    });
    const load_result result = s.load(h200());
    expect_rejected(result, load_status::wrong_schema, path);
    EXPECT_TRUE(contains(result.message, std::to_string(version))) << result.message;
  }
}

TEST_F(cache_store, OtherDevicesFileIsOtherDevice)
{
  const store s(dir_);
  s.save(sample_entry(a100()));
  const fs::path path = s.path_for(h200());
  fs::copy_file(s.path_for(a100()), path);
  const std::string before = read_bytes(path);

  const load_result result = s.load(h200());
  expect_rejected(result, load_status::other_device, path);
  EXPECT_TRUE(contains(result.message, "name")) << result.message;

  // load_or_create must not overwrite it.
  const load_result created = s.load_or_create(h200(), sample_entry(h200()));
  expect_rejected(created, load_status::other_device, path);
  EXPECT_EQ(read_bytes(path), before);
}

TEST_F(cache_store, LoadOrCreateLeavesUnusableFilesAlone)
{
  const store s(dir_);
  fs::create_directories(dir_);
  const fs::path path = s.path_for(h200());
  for (const std::string& bytes :
       {std::string("{\"schema_version\": 1, \"device\": "), std::string("{\"schema_version\": 999}")}) {
    write_bytes(path, bytes);
    const load_result result = s.load_or_create(h200(), sample_entry(h200()));
    EXPECT_NE(result.status, load_status::ok);
    EXPECT_FALSE(result.entry.has_value());
    EXPECT_EQ(read_bytes(path), bytes);
  }
}

TEST_F(cache_store, UnreadableFileIsUnreadable)
{
  if (::geteuid() == 0) GTEST_SKIP() << "running as root, which ignores file permissions";
  const store s(dir_);
  s.save(sample_entry(h200()));
  const fs::path path = s.path_for(h200());
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  const load_result result = s.load(h200());
  ::chmod(path.c_str(), 0644);
  expect_rejected(result, load_status::unreadable, path);
}

TEST_F(cache_store, DirectoryInPlaceOfFileIsUnreadable)
{
  // Works as root too, unlike the permission test.
  const store s(dir_);
  const fs::path path = s.path_for(h200());
  fs::create_directories(path);
  const load_result result = s.load(h200());
  expect_rejected(result, load_status::unreadable, path);
  EXPECT_TRUE(contains(result.message, "directory")) << result.message;
}

// Bytes read by one process and handed to another (the PETSc plugin's rank-0 read and broadcast) get every
// check of a file read in place, with the same statuses and messages.
TEST_F(cache_store, LoadFromBytesReadElsewhereMatchesLoad)
{
  const store s(dir_);
  s.save(sample_entry(h200()));
  const fs::path path = s.path_for(h200());

  const aijp::cache::file_bytes bytes = aijp::cache::read_file_bytes(path);
  ASSERT_EQ(bytes.status, load_status::ok) << bytes.problem;
  EXPECT_EQ(bytes.text, read_bytes(path));
  const load_result from = s.load_from(h200(), bytes);
  ASSERT_EQ(from.status, load_status::ok) << from.message;
  EXPECT_EQ(*from.entry, *s.load(h200()).entry);
  EXPECT_EQ(from.path, path);

  // The same bytes for another device: rejected as the file itself would be.
  const fs::path other = s.path_for(a100());
  expect_rejected(s.load_from(a100(), bytes), load_status::other_device, other);

  // Truncated in transit, or garbage.
  aijp::cache::file_bytes cut = bytes;
  cut.text.resize(cut.text.size() / 2);
  expect_rejected(s.load_from(h200(), cut), load_status::corrupt, path);
  cut.text = "\x01\x02 not json";
  expect_rejected(s.load_from(h200(), cut), load_status::corrupt, path);

  // A reader's failure is passed through with its reason.
  aijp::cache::file_bytes failed;
  failed.status = load_status::unreadable;
  failed.problem = "Permission denied";
  const load_result unreadable = s.load_from(h200(), failed);
  expect_rejected(unreadable, load_status::unreadable, path);
  EXPECT_TRUE(contains(unreadable.message, "Permission denied")) << unreadable.message;
  EXPECT_EQ(s.load_from(h200(), aijp::cache::file_bytes{}).status, load_status::missing);
}

TEST_F(cache_store, ReadFileBytesReportsMissingAndDirectories)
{
  const fs::path path = dir_ / "absent.json";
  EXPECT_EQ(aijp::cache::read_file_bytes(path).status, load_status::missing);
  fs::create_directories(path);
  const aijp::cache::file_bytes dir = aijp::cache::read_file_bytes(path);
  EXPECT_EQ(dir.status, load_status::unreadable);
  EXPECT_TRUE(dir.text.empty());
  EXPECT_TRUE(contains(dir.problem, "directory")) << dir.problem;
}

TEST_F(cache_store, SaveRejectsValuesJsonCannotHold)
{
  const store s(dir_ / "sub");
  const auto expect_bad = [&](const cache_entry& entry, const std::string& mentions) {
    try {
      s.save(entry);
      ADD_FAILURE() << "save did not throw";
    } catch (const aijp::bad_input& err) {
      EXPECT_TRUE(contains(err.what(), mentions)) << err.what();
    }
    EXPECT_FALSE(fs::exists(dir_ / "sub")) << "a rejected entry must not touch the file system";
  };
  cache_entry entry = sample_entry(h200());
  entry.coefficients["spmv_time"]["csr"]["alpha"] = std::numeric_limits<double>::quiet_NaN();
  expect_bad(entry, "coefficients.spmv_time.csr.alpha is NaN");

  entry = sample_entry(h200());
  entry.device_metrics["stream_read_gbs"] = -std::numeric_limits<double>::infinity();
  expect_bad(entry, "device_metrics.stream_read_gbs is infinite");

  entry = sample_entry(h200());
  entry.provenance["bad"] = "\xff\xfe";
  expect_bad(entry, "UTF-8");

  entry = sample_entry(h200());
  entry.schema_version = 2;
  expect_bad(entry, "schema_version");

  // bad_input is an aijp::error, as documented.
  entry = sample_entry(h200());
  entry.device_metrics["x"] = std::nan("");
  EXPECT_THROW(s.save(entry), aijp::error);
}

TEST_F(cache_store, SaveReportsDirectoryThatCannotBeCreated)
{
  write_bytes(dir_ / "plain", "not a directory");
  const store s(dir_ / "plain" / "sub");
  try {
    s.save(sample_entry(h200()));
    ADD_FAILURE() << "save did not throw";
  } catch (const aijp::error& err) {
    EXPECT_TRUE(contains(err.what(), (dir_ / "plain" / "sub").string())) << err.what();
  }
}

TEST_F(cache_store, SaveReplacesAtomicallyAndLeavesNoTemporaryFiles)
{
  const store s(dir_);
  cache_entry entry = sample_entry(h200());
  s.save(entry);
  // What a writer killed between creating and renaming its temporary file leaves behind.
  const fs::path stale = dir_ / ("." + h200().file_stem() + ".json.tmp-12345-0-678");
  write_bytes(stale, "{\"schema_version\": 1, \"dev");
  entry.created_by = "second";
  s.save(entry);
  EXPECT_FALSE(fs::exists(stale)) << "the next writer removes stale temporary files";
  const load_result result = s.load(h200());
  ASSERT_EQ(result.status, load_status::ok) << result.message;
  EXPECT_EQ(result.entry->created_by, "second");
  const std::string stem = h200().file_stem();
  EXPECT_EQ(file_names(dir_), (std::vector<std::string>{stem + ".json", stem + ".lock"}));
}

TEST_F(cache_store, UpdateStartsFromInitialThenFromFile)
{
  const store s(dir_);
  const auto add_one = [](cache_entry& e) { e.coefficients["m"]["f"]["n"] += 1.0; };
  s.update(h200(), add_one, sample_entry(h200()));
  s.update(h200(), add_one, sample_entry(h200()));
  const load_result result = s.load(h200());
  ASSERT_EQ(result.status, load_status::ok) << result.message;
  EXPECT_EQ(result.entry->coefficients.at("m").at("f").at("n"), 2.0);
  EXPECT_EQ(result.entry->created_by, "test_cache");

  EXPECT_THROW(s.update(h200(), add_one, sample_entry(a100())), aijp::bad_input);
  EXPECT_THROW(s.update(
                   h200(), [](cache_entry& e) { e.device.sm_count = 1; }, sample_entry(h200())),
               aijp::bad_input);
}

TEST_F(cache_store, UpdateThatThrowsWritesNothingAndReleasesTheLock)
{
  const store s(dir_);
  s.save(sample_entry(h200()));
  const std::string before = read_bytes(s.path_for(h200()));
  struct refused {};
  EXPECT_THROW(s.update(
                   h200(),
                   [](cache_entry& e) {
                     e.created_by = "half done";
                     throw refused{};
                   },
                   sample_entry(h200())),
               refused);
  EXPECT_EQ(read_bytes(s.path_for(h200())), before);
  // Would deadlock if the lock had leaked.
  s.update(
      h200(), [](cache_entry& e) { e.created_by = "after"; }, sample_entry(h200()));
  EXPECT_EQ(s.load(h200()).entry->created_by, "after");
}

TEST_F(cache_store, UpdateKeepsACopyOfAnUnusableFile)
{
  const store s(dir_);
  fs::create_directories(dir_);
  const fs::path path = s.path_for(h200());
  const std::string stem = h200().file_stem();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"corrupt", std::string("\x01garbage{", 9)}, {"wrong_schema", "{\"schema_version\": 999}"}};
  for (const auto& [status, bytes] : cases) {
    SCOPED_TRACE(status);
    write_bytes(path, bytes);
    s.update(
        h200(), [](cache_entry& e) { e.created_by = "repaired"; }, sample_entry(h200()));

    const load_result result = s.load(h200());
    ASSERT_EQ(result.status, load_status::ok) << result.message;
    EXPECT_EQ(result.entry->created_by, "repaired");

    std::vector<fs::path> copies;
    for (const auto& item : fs::directory_iterator(dir_)) {
      if (item.path().filename().string().rfind(stem + ".json." + status + "-", 0) == 0) {
        copies.push_back(item.path());
      }
    }
    ASSERT_EQ(copies.size(), 1u);
    EXPECT_EQ(read_bytes(copies[0]), bytes);
  }
}

// -------------------------------------------------------------------------------------------------------
// Concurrency: processes (flock) and threads (mutex) hammering one file through update().

TEST_F(cache_store, ConcurrentWritersFromProcessesAndThreadsLoseNothing)
{
  constexpr int processes = 8;
  constexpr int threads = 8;
  constexpr int rounds = 50;
  const store s(dir_);
  const device_fingerprint fp = h200();
  const cache_entry initial = sample_entry(fp);
  const auto add_one = [&](const std::string& writer) {
    s.update(
        fp,
        [&](cache_entry& e) {
          e.coefficients["test"]["counter"]["total"] += 1.0;
          e.coefficients["test"]["writers"][writer] += 1.0;
        },
        initial);
  };

  // Fork before starting any thread: a child must not inherit a mutex held by another thread.
  std::vector<pid_t> children;
  for (int p = 0; p < processes; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0) << "fork failed";
    if (pid == 0) {
      int rc = 0;
      try {
        for (int r = 0; r < rounds; ++r) add_one("process-" + std::to_string(p));
      } catch (...) {
        rc = 1;
      }
      ::_exit(rc);  // no gtest teardown, no atexit handlers in the child
    }
    children.push_back(pid);
  }

  // A reader must never observe a half-written file while all this goes on.
  std::atomic<bool> writers_done{false};
  std::atomic<int> reads{0};
  std::mutex bad_reads_mutex;
  std::vector<std::string> bad_reads;
  std::thread reader([&] {
    while (!writers_done.load()) {
      const load_result r = s.load(fp);
      if (r.status != load_status::ok && r.status != load_status::missing) {
        std::lock_guard<std::mutex> guard(bad_reads_mutex);
        bad_reads.push_back(r.message);
      }
      ++reads;
    }
  });
  std::vector<std::thread> writers;
  std::atomic<int> thread_failures{0};
  for (int t = 0; t < threads; ++t) {
    writers.emplace_back([&, t] {
      try {
        for (int r = 0; r < rounds; ++r) add_one("thread-" + std::to_string(t));
      } catch (const std::exception& err) {
        ++thread_failures;
        std::lock_guard<std::mutex> guard(bad_reads_mutex);
        bad_reads.push_back(std::string("writer threw: ") + err.what());
      }
    });
  }
  for (auto& w : writers) w.join();
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << pid << " status " << status;
  }
  writers_done = true;
  reader.join();

  EXPECT_EQ(thread_failures.load(), 0);
  EXPECT_TRUE(bad_reads.empty()) << bad_reads.size() << " bad reads, first: " << bad_reads.front();
  EXPECT_GT(reads.load(), 0);

  const load_result result = s.load(fp);
  ASSERT_EQ(result.status, load_status::ok) << result.message;
  const auto& test = result.entry->coefficients.at("test");
  EXPECT_EQ(test.at("counter").at("total"), double((processes + threads) * rounds));
  const auto& per_writer = test.at("writers");
  EXPECT_EQ(per_writer.size(), std::size_t(processes + threads));
  for (int p = 0; p < processes; ++p) EXPECT_EQ(per_writer.at("process-" + std::to_string(p)), rounds);
  for (int t = 0; t < threads; ++t) EXPECT_EQ(per_writer.at("thread-" + std::to_string(t)), rounds);
  // The rest of the entry survived 800 read-modify-write cycles untouched.
  cache_entry expected = initial;
  expected.coefficients["test"] = test;
  EXPECT_TRUE(*result.entry == expected);
  // Parses as plain JSON too, and no temporary file was left behind.
  EXPECT_NO_THROW(nlohmann::json::parse(read_bytes(s.path_for(fp))));
  const std::string stem = fp.file_stem();
  EXPECT_EQ(file_names(dir_), (std::vector<std::string>{stem + ".json", stem + ".lock"}));
}

// -------------------------------------------------------------------------------------------------------
// default_directory()

/// Saves the named environment variables and restores them (set or unset) on destruction.
class environment_guard {
 public:
  explicit environment_guard(std::vector<std::string> names) : names_(std::move(names))
  {
    for (const auto& name : names_) {
      const char* value = std::getenv(name.c_str());
      saved_.push_back(value ? std::optional<std::string>(value) : std::nullopt);
    }
  }
  ~environment_guard()
  {
    for (std::size_t i = 0; i < names_.size(); ++i) {
      if (saved_[i]) {
        ::setenv(names_[i].c_str(), saved_[i]->c_str(), 1);
      } else {
        ::unsetenv(names_[i].c_str());
      }
    }
  }
  environment_guard(const environment_guard&) = delete;
  environment_guard& operator=(const environment_guard&) = delete;

 private:
  std::vector<std::string> names_;
  std::vector<std::optional<std::string>> saved_;
};

TEST(cache_default_directory, FollowsTheEnvironmentInOrder)
{
  const std::vector<std::string> names = {"AIJPREDICT_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
  const auto snapshot = [&] {
    std::vector<std::optional<std::string>> values;
    for (const auto& name : names) {
      const char* value = std::getenv(name.c_str());
      values.push_back(value ? std::optional<std::string>(value) : std::nullopt);
    }
    return values;
  };
  const auto before = snapshot();
  {
    environment_guard guard(names);
    ::setenv("AIJPREDICT_CACHE_DIR", "/explicit/dir", 1);
    ::setenv("XDG_CACHE_HOME", "/xdg", 1);
    ::setenv("HOME", "/home/someone", 1);
    EXPECT_EQ(aijp::cache::default_directory(), fs::path("/explicit/dir"));
    EXPECT_EQ(store().directory(), fs::path("/explicit/dir"));

    ::setenv("AIJPREDICT_CACHE_DIR", "", 1);  // empty counts as unset
    EXPECT_EQ(aijp::cache::default_directory(), fs::path("/xdg/aijpredict"));
    ::unsetenv("AIJPREDICT_CACHE_DIR");
    EXPECT_EQ(aijp::cache::default_directory(), fs::path("/xdg/aijpredict"));

    ::setenv("XDG_CACHE_HOME", "relative/cache", 1);  // XDG spec: relative paths are invalid, ignore
    EXPECT_EQ(aijp::cache::default_directory(), fs::path("/home/someone/.cache/aijpredict"));
    ::unsetenv("XDG_CACHE_HOME");
    EXPECT_EQ(aijp::cache::default_directory(), fs::path("/home/someone/.cache/aijpredict"));

    ::setenv("HOME", "", 1);
    EXPECT_EQ(aijp::cache::default_directory(),
              fs::temp_directory_path() / ("aijpredict-" + std::to_string(::getuid())));
    ::unsetenv("HOME");
    EXPECT_EQ(aijp::cache::default_directory(),
              fs::temp_directory_path() / ("aijpredict-" + std::to_string(::getuid())));
  }
  EXPECT_EQ(snapshot(), before) << "the environment was not restored";
}

TEST(cache_load_status, HasReadableNames)
{
  EXPECT_STREQ(to_string(load_status::ok), "ok");
  EXPECT_STREQ(to_string(load_status::missing), "missing");
  EXPECT_STREQ(to_string(load_status::corrupt), "corrupt");
  EXPECT_STREQ(to_string(load_status::wrong_schema), "wrong_schema");
  EXPECT_STREQ(to_string(load_status::other_device), "other_device");
  EXPECT_STREQ(to_string(load_status::unreadable), "unreadable");
}

TEST(cache_time, Iso8601UtcNowHasTheDocumentedShape)
{
  const std::string now = aijp::cache::iso8601_utc_now();
  ASSERT_EQ(now.size(), 20u) << now;
  EXPECT_EQ(now[4], '-');
  EXPECT_EQ(now[10], 'T');
  EXPECT_EQ(now.back(), 'Z');
}

}  // namespace
