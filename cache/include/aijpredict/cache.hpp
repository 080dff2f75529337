// Per-device coefficient cache: one small JSON file per GPU (and driver / toolkit / kernel set) that holds
// the measured device metrics and the fitted cost-model coefficients, so that a process pays the warm-up
// measurements once per machine instead of once per run.
//
// Host-only C++17: no CUDA, no PETSc, and no JSON library in this header (nlohmann/json stays inside the
// implementation). Filling a `device_fingerprint` from the CUDA runtime is the job of kernels/.
//
// Robustness contract
//   * Reading never throws for a bad file: a missing, truncated, hand-mangled, foreign or unreadable file
//     yields a `load_result` with a status and one sentence naming the file, and no entry. The caller falls
//     back to built-in defaults; a bad cache must never stop a solve.
//   * Writing is atomic: the new content goes to a unique temporary file in the same directory, is
//     fsync()ed and then rename()d over the target, so a reader sees either the old or the new file, never
//     a half-written one, even if the writer is killed (the next writer removes the killed one's
//     temporary file).
//   * Writers exclude each other: an advisory lock file `<stem>.lock` (flock(2), exclusive) next to the
//     cache file serialises writers across processes (e.g. all MPI ranks of a node), and a process-local
//     mutex per lock file serialises the threads of one process. Readers take no lock. The lock file is
//     never deleted (deleting lock files reopens the race they close); it is empty and harmless.
//   * A file this library cannot use is never silently destroyed: `load_or_create` leaves it untouched and
//     `update` moves it aside (`<file>.corrupt-<timestamp>`, ...) before writing a fresh one.
//
// Thread and process safety: all `store` member functions are const and may be called concurrently from
// any number of threads and processes on the same or different files. As with any mutex, do not fork()
// while another thread of the process is inside a `store` call.
//
// Network file systems: flock(2) is advisory and works across processes of one host; on NFS it is
// emulated with POSIX byte-range locks (Linux >= 2.6.12) and works across hosts only if the NFS lock
// service does. Point AIJPREDICT_CACHE_DIR at node-local storage if in doubt.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace aijp {
namespace cache {

/// Version of the on-disk layout written and read by this build. A file with another version is reported
/// as `load_status::wrong_schema` and ignored; bump it whenever the meaning or layout of a field changes.
constexpr int schema_version = 1;

/// Everything that can make previously measured coefficients invalid. Two fingerprints that differ in
/// any field describe different "devices" for the cache: a driver, CUDA runtime or cuSPARSE update, or a
/// rebuilt kernel set, starts a fresh file (cuSPARSE algorithm enums have changed meaning across
/// releases, and our own kernels change with the build).
struct device_fingerprint {
  /// cudaDeviceProp::name, e.g. "NVIDIA H200".
  std::string name;
  /// Device UUID as text (e.g. "GPU-4f3c..."); distinguishes boards of one model in one machine.
  std::string uuid;
  /// Compute capability (cudaDeviceProp::major / minor).
  int cc_major = 0;
  int cc_minor = 0;
  /// Number of streaming multiprocessors (may be reduced under MIG).
  int sm_count = 0;
  /// Global memory bus width in bits and memory clock in kHz (cudaDevAttr{GlobalMemoryBusWidth,
  /// MemoryClockRate}).
  int mem_bus_width_bits = 0;
  int mem_clock_khz = 0;
  /// L2 cache size in bytes.
  int l2_bytes = 0;
  /// cudaDriverGetVersion / cudaRuntimeGetVersion / cusparseGetVersion, as the integers they return.
  int driver_version = 0;
  int runtime_version = 0;
  int cusparse_version = 0;
  /// Identifies the compiled set of aijpredict kernels (a hash of the kernel sources and build flags).
  std::string kernel_set_hash;

  /// File-system-safe base name of this device's cache file: `<name>-sm<major><minor>-<hash>`, where
  /// `<name>` is `name` lower-cased with every run of characters other than [a-z0-9] turned into one
  /// '-', a leading "nvidia-" dropped and at most 40 characters kept ("gpu" if nothing remains), and
  /// `<hash>` is the first 12 hex digits of the 64-bit FNV-1a hash of all fields encoded in declaration
  /// order as `key=<value>;` (integers in decimal, strings as `key=<byte length>:<bytes>;`). Example:
  /// "h200-sm90-9a8f3530d19f". The hash is stable across compilers, platforms and runs (it is part of
  /// the on-disk format: changing it orphans every existing cache file). Only [a-z0-9-] characters.
  std::string file_stem() const;

  /// True if every field equals the corresponding field of `other`.
  bool same_device(const device_fingerprint& other) const;
};

bool operator==(const device_fingerprint& a, const device_fingerprint& b);
bool operator!=(const device_fingerprint& a, const device_fingerprint& b);

/// Content of one cache file. Values are plain data; the cost models in runtime/ give them meaning.
struct cache_entry {
  /// Layout version; `store::save` accepts only the current `aijp::cache::schema_version`.
  int schema_version = ::aijp::cache::schema_version;
  /// The device the data were measured on; decides the file name (`device.file_stem()`).
  device_fingerprint device;
  /// Free text naming the writer, e.g. "aijpredict 0.1.0 warm-up".
  std::string created_by;
  /// Creation time, ISO-8601 UTC ("2024-05-01T12:34:56Z"); see `iso8601_utc_now`.
  std::string created_at;
  /// Measured device characteristics, e.g. "stream_read_gbs", "launch_overhead_us". Must be finite.
  std::map<std::string, double> device_metrics;
  /// Fitted coefficients: model -> format -> coefficient name -> value. Must be finite.
  std::map<std::string, std::map<std::string, std::map<std::string, double>>> coefficients;
  /// Where the numbers came from (benchmark, matrix set, date, tool versions...): free key/value text.
  std::map<std::string, std::string> provenance;
};

/// Field-wise equality (doubles compared with ==).
bool operator==(const cache_entry& a, const cache_entry& b);
bool operator!=(const cache_entry& a, const cache_entry& b);

/// Outcome of reading a cache file.
enum class load_status {
  ok,            ///< the file was read and describes the requested device; `entry` holds it
  missing,       ///< no file at that path (the normal first-run case)
  corrupt,       ///< truncated, not JSON, missing required fields or fields of the wrong type
  wrong_schema,  ///< valid JSON with a `schema_version` other than `aijp::cache::schema_version`
  other_device,  ///< a valid file, but its fingerprint is not `same_device` as the one requested
  unreadable     ///< the file exists but cannot be read (permissions, not a regular file, I/O error)
};

/// "ok", "missing", "corrupt", "wrong_schema", "other_device" or "unreadable".
const char* to_string(load_status status);

/// Result of `store::load` and `store::load_or_create`. `entry` is set if and only if `status` is ok.
struct load_result {
  load_status status = load_status::missing;
  std::optional<cache_entry> entry;
  /// Empty when ok; otherwise one human-readable sentence that names the file and what is wrong, e.g.
  /// "aijpredict: ignoring cache file /x/h200-sm90-....json: not valid JSON at byte 123". Suitable for
  /// printing as is (the caller decides whether and how loudly: a missing file is routine).
  std::string message;
  /// The file that was (or would have been) read.
  std::filesystem::path path;
};

/// The raw contents of a cache file: read from the file system by `read_file_bytes`, or by one process and
/// passed on to others (the PETSc plugin's rank-0 read and broadcast), then checked by `store::load_from`.
struct file_bytes {
  /// ok (then `text` holds the contents), missing, unreadable, or corrupt (far too large to be ours).
  load_status status = load_status::missing;
  std::string text;
  std::string problem;  ///< why not, when not ok and not missing (e.g. "Permission denied")
};

/// Reads `path` whole, with the same checks as `store::load` before parsing; never throws for a bad or
/// absent file (only std::bad_alloc can escape).
file_bytes read_file_bytes(const std::filesystem::path& path);

/// Directory for cache files, first match wins:
///   1. `$AIJPREDICT_CACHE_DIR` if set and non-empty (used verbatim),
///   2. `$XDG_CACHE_HOME/aijpredict` if XDG_CACHE_HOME is set to an absolute path (the XDG base
///      directory specification says relative values are to be ignored),
///   3. `$HOME/.cache/aijpredict` if HOME is set and non-empty,
///   4. `<temp dir>/aijpredict-<uid>` (std::filesystem::temp_directory_path(), or /tmp if that fails).
/// Reads the environment on every call; creates nothing.
std::filesystem::path default_directory();

/// Current time as ISO-8601 UTC with second resolution, e.g. "2024-05-01T12:34:56Z".
std::string iso8601_utc_now();

/// Reads and writes the cache files of one directory. Holds only the directory path: cheap to create
/// and copy; it touches the file system only when a member function is called.
class store {
 public:
  /// Throws aijp::bad_input if `dir` is empty. The directory need not exist yet.
  explicit store(std::filesystem::path dir = default_directory());

  const std::filesystem::path& directory() const;

  /// `directory() / (device.file_stem() + ".json")`.
  std::filesystem::path path_for(const device_fingerprint& device) const;

  /// Reads the file for `device`. Never throws for a bad or absent file (see `load_status`); only
  /// std::bad_alloc can escape. Takes no lock: atomic renames by writers make that safe.
  load_result load(const device_fingerprint& device) const;

  /// `load` from bytes read elsewhere (`read_file_bytes(path_for(device))`, possibly by another process):
  /// every check of `load`, the same statuses and messages.
  load_result load_from(const device_fingerprint& device, const file_bytes& bytes) const;

  /// Writes `entry` to `path_for(entry.device)` atomically, replacing any existing file, under the
  /// writer lock. Creates the directory (like mkdir -p) if needed.
  /// Throws aijp::bad_input, without touching the file system, if the entry cannot be represented:
  /// a non-finite value (JSON has no NaN or infinity), a string that is not valid UTF-8, or a
  /// `schema_version` other than the current one. Throws aijp::error if the directory cannot be created
  /// or the file cannot be written; the previous file, if any, is then left intact and no temporary file
  /// remains.
  void save(const cache_entry& entry) const;

  /// Loads the file for `device`; if it is missing, saves `initial` (under the writer lock, re-checking
  /// that no other writer created the file meanwhile) and returns ok with it. A corrupt, foreign-schema,
  /// other-device or unreadable file is NOT overwritten: its status and message are returned so that the
  /// caller can use defaults and tell the user. Throws aijp::bad_input if `initial.device` is not
  /// `same_device(device)`, and whatever `save` throws if the file must be created but cannot be.
  load_result load_or_create(const device_fingerprint& device, const cache_entry& initial) const;

  /// Read-modify-write under the writer lock: loads the file for `device`, calls `modify` on its entry
  /// (or on a copy of `initial_if_missing` if the file is missing or unusable) and saves the result.
  /// An unusable existing file (corrupt, wrong schema, other device, unreadable) is first moved aside to
  /// `<file>.corrupt-<timestamp>` (or `.wrong_schema-`, `.other_device-`, `.unreadable-`; timestamp
  /// like 20240501T123456Z, with a "-<n>" suffix if that name is taken) so that it can be inspected.
  /// If `modify` throws, nothing is written and the exception propagates (the lock is released).
  /// Throws aijp::bad_input if `initial_if_missing.device` or the modified entry's device is not
  /// `same_device(device)`, and whatever `save` throws.
  void update(const device_fingerprint& device, const std::function<void(cache_entry&)>& modify,
              const cache_entry& initial_if_missing) const;

 private:
  std::filesystem::path directory_;
};

/// Reads a cache file written for any device (the shipped defaults in cache/defaults): every check of
/// store::load() except the device comparison.
load_result read_file_any_device(const std::filesystem::path& path);

/// The usable cache file in `dir` closest to `device`: the same GPU name first, then the same compute
/// capability, then the nearest SM count. nullopt when `dir` holds none.
std::optional<load_result> nearest_default(const std::filesystem::path& dir, const device_fingerprint& device);

}  // namespace cache
}  // namespace aijp
