// The cache store: POSIX file reading, atomic replacement (temp file + fsync + rename) and writer locking
// (process-local mutex + flock(2) on `<stem>.lock`).
#include <aijpredict/cache.hpp>

#include <atomic>
#include <cstdlib>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <memory>
#include <mutex>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <aijpredict/error.hpp>

#include "detail.hpp"

namespace aijp {
namespace cache {
namespace {

namespace fs = std::filesystem;

// Cache files are a few KiB; anything much larger was not written by us and is not worth reading.
constexpr off_t max_file_bytes = 64 << 20;

std::string errno_text(int err) { return std::system_category().message(err); }

std::string display(const fs::path& path) { return path.string(); }

// Closes a file descriptor on scope exit.
class fd_guard {
 public:
  explicit fd_guard(int fd) : fd_(fd) {}
  ~fd_guard()
  {
    if (fd_ >= 0) ::close(fd_);
  }
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;

  int get() const { return fd_; }
  /// Closes now and reports close()'s errno (0 on success): on some file systems a write error shows
  /// up only here.
  int close_now()
  {
    const int fd = std::exchange(fd_, -1);
    return ::close(fd) == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

template <typename Call>
auto retry_on_eintr(Call call)
{
  decltype(call()) result;
  do {
    result = call();
  } while (result == -1 && errno == EINTR);
  return result;
}

// ---------------------------------------------------------------------------------------------------------
// Reading

load_result make_result(const fs::path& path, load_status status, const std::string& problem)
{
  load_result result;
  result.status = status;
  result.path = path;
  switch (status) {
    case load_status::ok: break;
    case load_status::missing:
      result.message = "aijpredict: cache file " + display(path) + " does not exist";
      break;
    case load_status::unreadable:
      result.message = "aijpredict: cannot read cache file " + display(path) + ": " + problem;
      break;
    default: result.message = "aijpredict: ignoring cache file " + display(path) + ": " + problem;
  }
  return result;
}

file_bytes read_bytes_of(const fs::path& path)
{
  file_bytes out;
  const int fd = retry_on_eintr([&] { return ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY); });
  if (fd < 0) {
    const int err = errno;
    // ENOTDIR: some component of the directory is a plain file, so this file cannot exist either.
    if (err == ENOENT || err == ENOTDIR) return out;  // missing
    out.status = load_status::unreadable;
    out.problem = errno_text(err);
    return out;
  }
  fd_guard guard(fd);
  const auto fail = [&](load_status status, std::string problem) {
    out.status = status;
    out.problem = std::move(problem);
    out.text.clear();
    return out;
  };
  struct stat info {};
  if (::fstat(fd, &info) != 0) return fail(load_status::unreadable, errno_text(errno));
  if (S_ISDIR(info.st_mode)) return fail(load_status::unreadable, "it is a directory");
  if (!S_ISREG(info.st_mode)) return fail(load_status::unreadable, "it is not a regular file");
  if (info.st_size > max_file_bytes) {
    return fail(load_status::corrupt,
                "it is " + std::to_string(info.st_size) + " bytes long, far larger than any cache file aijpredict writes");
  }
  out.text.assign(static_cast<std::size_t>(info.st_size), '\0');
  std::size_t filled = 0;
  while (filled < out.text.size()) {
    const ssize_t got = retry_on_eintr([&] { return ::read(fd, &out.text[filled], out.text.size() - filled); });
    if (got < 0) return fail(load_status::unreadable, errno_text(errno));
    if (got == 0) break;  // shrank since fstat: cannot happen with our atomic renames; parse what we got
    filled += static_cast<std::size_t>(got);
  }
  out.text.resize(filled);
  out.status = load_status::ok;
  return out;
}

load_result parse_cache_bytes(const fs::path& path, const file_bytes& bytes, const device_fingerprint* device)
{
  if (bytes.status != load_status::ok) return make_result(path, bytes.status, bytes.problem);
  if (bytes.text.size() > static_cast<std::size_t>(max_file_bytes)) {
    return make_result(path, load_status::corrupt,
                       "it is " + std::to_string(bytes.text.size()) + " bytes long, far larger than any cache file aijpredict writes");
  }
  detail::parse_outcome parsed = detail::parse_json_text(bytes.text);
  if (parsed.status != load_status::ok) return make_result(path, parsed.status, parsed.problem);
  const std::string difference = device ? detail::first_difference(parsed.entry->device, *device) : std::string();
  if (!difference.empty()) {
    return make_result(path, load_status::other_device,
                       "it was written for another device (" + difference + ")");
  }
  load_result result = make_result(path, load_status::ok, "");
  result.entry = std::move(parsed.entry);
  return result;
}

load_result read_cache_file(const fs::path& path, const device_fingerprint* device)
{
  return parse_cache_bytes(path, read_bytes_of(path), device);
}

// ---------------------------------------------------------------------------------------------------------
// Writing

void ensure_directory(const fs::path& dir)
{
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!ec && !fs::is_directory(dir, ec)) ec = std::make_error_code(std::errc::not_a_directory);
  if (ec) {
    AIJP_THROW(error, "aijpredict: cannot create cache directory " + display(dir) + ": " + ec.message());
  }
}

std::string utc_stamp()
{
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%dT%H%M%SZ", &utc);
  return text;
}

// Temporary files of `target` are named `.<target file name>.tmp-<pid>-<sequence>-<clock>`.
std::string temp_prefix(const fs::path& target) { return "." + target.filename().string() + ".tmp-"; }

// Unique within the directory: pid + per-process sequence + clock, and O_EXCL rejects the rare clash
// (e.g. two containers with equal pids sharing a directory).
std::pair<int, fs::path> create_temp_next_to(const fs::path& target)
{
  static std::atomic<unsigned long long> sequence{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
    const fs::path candidate =
        target.parent_path() / (temp_prefix(target) + std::to_string(::getpid()) + "-" +
                                std::to_string(sequence++) + "-" + std::to_string(ticks % 1000000));
    // 0666 filtered by the umask, like any file the user creates.
    const int fd = retry_on_eintr(
        [&] { return ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666); });
    if (fd >= 0) return {fd, candidate};
    if (errno != EEXIST) {
      const int err = errno;
      AIJP_THROW(error, "aijpredict: cannot write cache file " + display(target) +
                            ": cannot create a temporary file in " + display(target.parent_path()) + ": " +
                            errno_text(err));
    }
  }
  AIJP_THROW(error, "aijpredict: cannot write cache file " + display(target) +
                        ": no unused temporary file name found");
}

// Best effort: makes the rename itself durable. Some file systems refuse fsync on directories.
void sync_directory(const fs::path& dir)
{
  const int fd = retry_on_eintr([&] { return ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); });
  if (fd < 0) return;
  fd_guard guard(fd);
  ::fsync(fd);
}

/// Removes temporary files of `target` left by a writer that was killed between creating and renaming
/// one. Safe because every writer creates its temporary file only while holding the writer lock, which
/// the caller holds now: any such file that exists belongs to a writer that is gone. Best effort.
void remove_stale_temps(const fs::path& target)
{
  const std::string prefix = temp_prefix(target);
  std::error_code ec;
  for (fs::directory_iterator it(target.parent_path(), ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().rfind(prefix, 0) == 0) {
      std::error_code ignored;
      fs::remove(it->path(), ignored);
    }
  }
}

/// Replaces `target` by a file holding `text` so that readers see either the old or the new content.
/// The caller holds the writer lock and has created the directory.
void write_atomically(const fs::path& target, const std::string& text)
{
  remove_stale_temps(target);
  const auto created = create_temp_next_to(target);
  const int fd = created.first;
  const fs::path& temp = created.second;
  fd_guard guard(fd);
  auto fail = [&](const std::string& step, int err) {
    guard.close_now();
    ::unlink(temp.c_str());
    AIJP_THROW(error, "aijpredict: cannot write cache file " + display(target) + ": " + step + ": " +
                          errno_text(err));
  };
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t put =
        retry_on_eintr([&] { return ::write(fd, text.data() + written, text.size() - written); });
    if (put < 0) fail("write failed", errno);
    written += static_cast<std::size_t>(put);
  }
  // Data must be on disk before the rename publishes it, or a crash can leave an empty file behind.
  if (::fsync(fd) != 0) fail("fsync failed", errno);
  if (const int err = guard.close_now(); err != 0) fail("close failed", err);
  if (::rename(temp.c_str(), target.c_str()) != 0) fail("rename failed", errno);
  sync_directory(target.parent_path());
}

/// Renames an unusable file to `<file>.<status>-<timestamp>[-n]` so that update() never destroys data
/// silently. The caller holds the writer lock, so no other aijpredict writer races for the name.
void move_aside(const fs::path& path, load_status status)
{
  const std::string base = path.string() + "." + to_string(status) + "-" + utc_stamp();
  for (int n = 0; n < 1000; ++n) {
    const std::string candidate = n == 0 ? base : base + "-" + std::to_string(n);
    struct stat info {};
    if (::lstat(candidate.c_str(), &info) == 0) continue;
    if (::rename(path.c_str(), candidate.c_str()) == 0) return;
    const int err = errno;
    if (err == ENOENT) return;  // removed by someone outside aijpredict meanwhile: nothing to keep
    AIJP_THROW(error, "aijpredict: cannot move unusable cache file " + display(path) + " aside to " +
                          candidate + ": " + errno_text(err));
  }
  AIJP_THROW(error, "aijpredict: cannot move unusable cache file " + display(path) +
                        " aside: too many earlier copies named " + base + "-*");
}

// ---------------------------------------------------------------------------------------------------------
// Locking

// One mutex per lock file, created on first use and kept for the life of the process (a handful of
// devices per process). Intentionally leaked so that no static destruction order can bite a late writer.
std::mutex& process_mutex_for(const fs::path& lock_path)
{
  static auto* registry_mutex = new std::mutex;
  static auto* registry = new std::map<std::string, std::unique_ptr<std::mutex>>;
  std::error_code ec;
  fs::path key = fs::absolute(lock_path, ec);
  if (ec) key = lock_path;
  std::lock_guard<std::mutex> guard(*registry_mutex);
  auto& slot = (*registry)[key.lexically_normal().string()];
  if (!slot) slot = std::make_unique<std::mutex>();
  return *slot;
}

/// Exclusive writer lock for one cache file: the process-local mutex first, then flock(2) on the lock
/// file, which orders processes. The mutex is not redundant: where flock is emulated by POSIX record
/// locks (NFS), those belong to the process, so two threads of one process would both get in. Both are
/// released by the destructor; the kernel drops the flock if the process dies.
class writer_lock {
 public:
  explicit writer_lock(const fs::path& lock_path) : thread_lock_(process_mutex_for(lock_path))
  {
    fd_ = retry_on_eintr(
        [&] { return ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0666); });
    if (fd_ < 0) {
      const int err = errno;
      AIJP_THROW(error,
                 "aijpredict: cannot open cache lock file " + display(lock_path) + ": " + errno_text(err));
    }
    if (retry_on_eintr([&] { return ::flock(fd_, LOCK_EX); }) != 0) {
      const int err = errno;
      ::close(fd_);
      AIJP_THROW(error,
                 "aijpredict: cannot lock cache lock file " + display(lock_path) + ": " + errno_text(err));
    }
  }
  ~writer_lock() { ::close(fd_); }  // closing the last descriptor releases the flock
  writer_lock(const writer_lock&) = delete;
  writer_lock& operator=(const writer_lock&) = delete;

 private:
  std::unique_lock<std::mutex> thread_lock_;
  int fd_ = -1;
};

void require_device(const cache_entry& entry, const device_fingerprint& device, const char* what)
{
  const std::string difference = detail::first_difference(entry.device, device);
  if (!difference.empty()) {
    AIJP_THROW(bad_input, std::string("aijpredict: cache ") + what +
                              " is for another device than the one requested (" + difference + ")");
  }
}

}  // namespace

store::store(std::filesystem::path dir) : directory_(std::move(dir))
{
  AIJP_ENSURE(!directory_.empty(), bad_input, "aijpredict: cache directory path is empty");
}

const std::filesystem::path& store::directory() const { return directory_; }

std::filesystem::path store::path_for(const device_fingerprint& device) const
{
  return directory_ / (device.file_stem() + ".json");
}

load_result store::load(const device_fingerprint& device) const
{
  return read_cache_file(path_for(device), &device);
}

load_result store::load_from(const device_fingerprint& device, const file_bytes& bytes) const
{
  return parse_cache_bytes(path_for(device), bytes, &device);
}

file_bytes read_file_bytes(const std::filesystem::path& path) { return read_bytes_of(path); }

void store::save(const cache_entry& entry) const
{
  const std::string text = detail::to_json_text(entry);
  ensure_directory(directory_);
  writer_lock lock(directory_ / (entry.device.file_stem() + ".lock"));
  write_atomically(path_for(entry.device), text);
}

load_result store::load_or_create(const device_fingerprint& device, const cache_entry& initial) const
{
  require_device(initial, device, "initial entry");
  load_result result = load(device);
  if (result.status != load_status::missing) return result;
  const std::string text = detail::to_json_text(initial);
  ensure_directory(directory_);
  writer_lock lock(directory_ / (device.file_stem() + ".lock"));
  // Another writer may have created the file between the unlocked look and taking the lock.
  result = load(device);
  if (result.status != load_status::missing) return result;
  write_atomically(result.path, text);
  result = make_result(result.path, load_status::ok, "");
  result.entry = initial;
  return result;
}

void store::update(const device_fingerprint& device, const std::function<void(cache_entry&)>& modify,
                   const cache_entry& initial_if_missing) const
{
  require_device(initial_if_missing, device, "initial entry");
  ensure_directory(directory_);
  writer_lock lock(directory_ / (device.file_stem() + ".lock"));
  load_result current = load(device);
  cache_entry entry = current.status == load_status::ok ? std::move(*current.entry) : initial_if_missing;
  modify(entry);
  require_device(entry, device, "entry after update");
  const std::string text = detail::to_json_text(entry);
  // Only now, with the replacement ready, keep the unusable file for inspection.
  if (current.status != load_status::ok && current.status != load_status::missing) {
    move_aside(current.path, current.status);
  }
  write_atomically(current.path, text);
}

load_result read_file_any_device(const std::filesystem::path& path) { return read_cache_file(path, nullptr); }

std::optional<load_result> nearest_default(const std::filesystem::path& dir, const device_fingerprint& device)
{
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  std::optional<load_result> best;
  long best_score = 0;
  for (const auto& item : fs::directory_iterator(dir, ec)) {
    if (item.path().extension() != ".json") continue;
    load_result r = read_cache_file(item.path(), nullptr);
    if (r.status != load_status::ok) continue;
    const device_fingerprint& d = r.entry->device;
    // Same product first, then the same architecture, then the closest SM count.
    const long score = (d.name == device.name ? 0 : 1000000) +
                       (d.cc_major == device.cc_major && d.cc_minor == device.cc_minor ? 0 : 100000) +
                       std::labs(static_cast<long>(d.sm_count) - device.sm_count);
    if (!best || score < best_score) {
      best = std::move(r);
      best_score = score;
    }
  }
  return best;
}

}  // namespace cache
}  // namespace aijp
