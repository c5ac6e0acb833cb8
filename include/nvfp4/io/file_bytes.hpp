// nvfp4/io/file_bytes.hpp: whole-file reads and atomic writes (a temporary file in the target's
// directory, renamed over the target only once every byte is written), so a failed or interrupted
// write never leaves a partial output file. Used by the .npy and safetensors readers/writers.
// POSIX (Linux): the temporaries carry the writer's process id so that a later write can remove
// those a killed process left, and a signal handler (install_temporary_file_cleanup) removes them
// when the process is interrupted.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "nvfp4/error.hpp"

namespace nvfp4::io {

/// Reads a whole file into memory. Throws io_error when it cannot be opened or read, or is not a
/// regular file (a directory, a device).
inline std::vector<std::uint8_t> read_file_bytes(const std::filesystem::path& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(status)) throw error(errc::io_error, "cannot read " + path.string() + ": it is a directory");
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw error(errc::io_error, "cannot read " + path.string() + ": it is not a regular file");
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    // The reason the system gave ("No such file or directory", "Permission denied").
    const int reason = errno;
    throw error(errc::io_error, "cannot open " + path.string() + (reason != 0 ? std::string(": ") + std::strerror(reason) : std::string()));
  }
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw error(errc::io_error, "cannot determine the size of " + path.string());
  in.seekg(0, std::ios::beg);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  errno = 0;
  if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size)) {
    const int reason = errno;
    throw error(errc::io_error, "cannot read " + path.string() + (reason != 0 ? std::string(": ") + std::strerror(reason) : std::string()));
  }
  return bytes;
}

/// A regular file opened for reading parts of it (a safetensors header, then one tensor at a
/// time) instead of the whole. Refuses what read_file_bytes refuses, with its messages; read()
/// throws io_error when the file no longer holds the bytes asked for (truncated since it was
/// opened). Move-only; closes the file when destroyed.
class file_reader {
 public:
  explicit file_reader(const std::filesystem::path& path) : path_(path.string()) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (std::filesystem::is_directory(status)) throw error(errc::io_error, "cannot read " + path_ + ": it is a directory");
    if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
      throw error(errc::io_error, "cannot read " + path_ + ": it is not a regular file");
    // O_NONBLOCK: a FIFO put in the file's place since the check must not block the open.
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) {
      const int reason = errno;
      // (a path too long to open is too long to repeat whole: its first 200 bytes)
      throw error(errc::io_error,
                  "cannot open " +
                      (path_.size() > 200 ? path_.substr(0, 200) + "... (" + std::to_string(path_.size()) + " bytes)" : path_) + ": " +
                      std::strerror(reason));
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      const int reason = errno;
      ::close(fd_);
      fd_ = -1;
      throw error(errc::io_error,
                  "cannot read " + path_ + (reason != 0 ? std::string(": ") + std::strerror(reason) : ": it is not a regular file"));
    }
    size_ = static_cast<std::uint64_t>(st.st_size);
  }
  file_reader(file_reader&& other) noexcept : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), size_(other.size_) {}
  file_reader& operator=(file_reader&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      path_ = std::move(other.path_);
      fd_ = std::exchange(other.fd_, -1);
      size_ = other.size_;
    }
    return *this;
  }
  file_reader(const file_reader&) = delete;
  file_reader& operator=(const file_reader&) = delete;
  ~file_reader() {
    if (fd_ >= 0) ::close(fd_);
  }

  /// The file's size when it was opened.
  std::uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

  /// Reads `count` bytes at `offset` into `out`.
  void read(std::uint64_t offset, std::uint64_t count, std::uint8_t* out) const {
    std::uint64_t done = 0;
    while (done < count) {
      const std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(count - done, std::uint64_t{1} << 30));
      const ssize_t n = ::pread(fd_, out + done, chunk, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw error(errc::io_error, "cannot read " + path_ + ": " + std::strerror(errno));
      if (n == 0)
        throw error(errc::io_error, "cannot read " + path_ + ": it ends at byte " + std::to_string(offset + done) + ", before byte " +
                                        std::to_string(offset + count) + " (truncated since it was opened?)");
      done += static_cast<std::uint64_t>(n);
    }
  }
  std::vector<std::uint8_t> read(std::uint64_t offset, std::uint64_t count) const {
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(count));
    read(offset, count, bytes.data());
    return bytes;
  }

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

namespace detail_file {

/// The temporaries being written right now, for the signal handler: a fixed table (no allocation
/// in the handler), each slot free (0), being filled (1) or holding a path to remove (2).
inline constexpr int temporary_slots = 8;
inline constexpr std::size_t temporary_path_max = 4096;
inline std::atomic<int> temporary_state[temporary_slots] = {};
inline char temporary_path[temporary_slots][temporary_path_max] = {};

/// Registers `path` for removal on a signal; returns its slot, or -1 when the table is full or the
/// path too long (the write then goes on without that safety net).
inline int register_temporary(const std::string& path) {
  if (path.size() >= temporary_path_max) return -1;
  for (int slot = 0; slot < temporary_slots; ++slot) {
    int expected = 0;
    if (temporary_state[slot].compare_exchange_strong(expected, 1)) {
      std::memcpy(temporary_path[slot], path.c_str(), path.size() + 1);
      temporary_state[slot].store(2);
      return slot;
    }
  }
  return -1;
}

inline void unregister_temporary(int slot) {
  if (slot >= 0) temporary_state[slot].store(0);
}

/// The temporary directories being filled right now (io/atomic_directory.hpp), the same way.
inline constexpr int temporary_directory_slots = 4;
inline std::atomic<int> temporary_directory_state[temporary_directory_slots] = {};
inline char temporary_directory_path[temporary_directory_slots][temporary_path_max] = {};

inline int register_temporary_directory(const std::string& path) {
  if (path.size() >= temporary_path_max) return -1;
  for (int slot = 0; slot < temporary_directory_slots; ++slot) {
    int expected = 0;
    if (temporary_directory_state[slot].compare_exchange_strong(expected, 1)) {
      std::memcpy(temporary_directory_path[slot], path.c_str(), path.size() + 1);
      temporary_directory_state[slot].store(2);
      return slot;
    }
  }
  return -1;
}

inline void unregister_temporary_directory(int slot) {
  if (slot >= 0) temporary_directory_state[slot].store(0);
}

/// Removes `name` (relative to the directory `parent_fd`) and, when it is a directory, everything
/// in it, `depth` levels at most. Async-signal-safe (system calls only, no allocation), for the
/// signal handler: our temporary directories hold files and, carried over from a replaced
/// directory, rarely a subdirectory.
inline void remove_tree_at(int parent_fd, const char* name, int depth) {
  if (::unlinkat(parent_fd, name, 0) == 0 || (errno != EISDIR && errno != EPERM)) return;
  if (depth > 16) return;
  const int fd = ::openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  alignas(8) char buffer[2048];
  // Entries removed while the directory is read may shift its offsets: read it again from the
  // start until a pass finds nothing left.
  for (int pass = 0; pass < 64; ++pass) {
    bool found = false;
    ::lseek(fd, 0, SEEK_SET);
    for (;;) {
      const ssize_t n = ::getdents64(fd, buffer, sizeof buffer);
      if (n <= 0) break;
      for (ssize_t at = 0; at < n;) {
        const auto* entry = reinterpret_cast<const struct dirent64*>(buffer + at);
        at += entry->d_reclen;
        if (std::strcmp(entry->d_name, ".") == 0 || std::strcmp(entry->d_name, "..") == 0) continue;
        found = true;
        remove_tree_at(fd, entry->d_name, depth + 1);
      }
    }
    if (!found) break;
  }
  ::close(fd);
  ::unlinkat(parent_fd, name, AT_REMOVEDIR);
}

/// Removes every registered temporary file and directory, then lets the signal do what it would
/// have done. Async-signal-safe: only atomics, system calls, signal and raise.
inline void remove_temporaries_and_reraise(int signal_number) {
  for (int slot = 0; slot < temporary_slots; ++slot)
    if (temporary_state[slot].load() == 2) ::unlink(temporary_path[slot]);
  for (int slot = 0; slot < temporary_directory_slots; ++slot)
    if (temporary_directory_state[slot].load() == 2) remove_tree_at(AT_FDCWD, temporary_directory_path[slot], 0);
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

/// The name prefix of the temporaries written for `target`: ".<name>.nvfp4-tmp.".
inline std::string temporary_prefix(const std::filesystem::path& target) {
  std::string prefix = ".";  // appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "." + string
  prefix += target.filename().string();
  prefix += ".nvfp4-tmp.";
  return prefix;
}

/// The temporaries of dead writers found in each directory this process writes into, listed by
/// one scan on the first write there: a scan per write made writing N files into a directory
/// quadratic in N (issue 34). Temporaries left by processes killed after that scan are found by
/// the next process.
struct stale_listing {
  std::mutex mutex;
  std::map<std::string, std::vector<std::filesystem::path>> by_directory;
};
inline stale_listing& stale_temporaries() {
  static stale_listing listing;
  return listing;
}

/// The process id in a temporary's name ".<name>.nvfp4-tmp.<pid>.<random>", or 0.
inline long long temporary_writer(const std::string& name) {
  const auto at = name.find(".nvfp4-tmp.");
  if (name.empty() || name[0] != '.' || at == std::string::npos) return 0;
  const std::string rest = name.substr(at + 11);  // "<pid>.<random>"
  const auto dot = rest.find('.');
  if (dot == 0 || dot == std::string::npos) return 0;
  long long pid = 0;
  for (std::size_t i = 0; i < dot; ++i) {
    if (rest[i] < '0' || rest[i] > '9' || pid >= (1LL << 40)) return 0;
    pid = pid * 10 + (rest[i] - '0');
  }
  return pid;
}

/// Removes the temporaries for `target` that a process no longer running left behind (killed by
/// SIGKILL, a power cut): their names carry the writer's process id. Best effort, never throws.
inline void remove_stale_temporaries(const std::filesystem::path& directory, const std::filesystem::path& target) {
  namespace fs = std::filesystem;
  const std::string prefix = temporary_prefix(target);
  auto& listing = stale_temporaries();
  const std::lock_guard lock(listing.mutex);
  std::error_code ec;
  const std::string key = fs::absolute(directory, ec).lexically_normal().string();
  auto found = listing.by_directory.find(key);
  if (found == listing.by_directory.end()) {
    std::vector<fs::path> stale;
    for (fs::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec)) {
      const long long pid = temporary_writer(it->path().filename().string());
      // kill(pid, 0) fails with ESRCH only when no such process exists.
      if (pid > 0 && pid != static_cast<long long>(::getpid()) && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
        stale.push_back(it->path());
    }
    found = listing.by_directory.emplace(key, std::move(stale)).first;
  }
  auto& stale = found->second;
  std::erase_if(stale, [&](const fs::path& p) {
    if (p.filename().string().rfind(prefix, 0) != 0) return false;
    std::error_code ignored;
    fs::remove(p, ignored);
    return true;
  });
}

/// Where a write to `path` goes: a symbolic link is followed (up to 40 links) to the file it names,
/// so the link stays a link.
inline std::filesystem::path resolve_output(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  fs::path target = path;
  for (int hops = 0; hops < 40; ++hops) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(target, ec))) return target;
    const fs::path link = fs::read_symlink(target, ec);
    if (ec) throw error(errc::io_error, "cannot read the symbolic link " + target.string() + ": " + ec.message());
    target = link.is_absolute() ? link : target.parent_path() / link;
  }
  throw error(errc::io_error, "cannot write " + path.string() + ": too many levels of symbolic links");
}

}  // namespace detail_file

/// Installs handlers for SIGINT, SIGTERM, SIGHUP and SIGPIPE that remove the temporary files of
/// writes in progress before the signal takes its usual effect, and ignores SIGXFSZ so that a
/// write past the file size limit fails as io_error (its temporary removed) instead of killing
/// the process. For programs (the CLI calls it first thing); a library does not touch signals on
/// its own. A signal already ignored stays ignored.
inline void install_temporary_file_cleanup() {
  for (const int signal_number : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) {
    struct sigaction current {};
    if (::sigaction(signal_number, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) continue;
    struct sigaction action {};
    action.sa_handler = detail_file::remove_temporaries_and_reraise;
    sigemptyset(&action.sa_mask);
    ::sigaction(signal_number, &action, nullptr);
  }
  ::signal(SIGXFSZ, SIG_IGN);
}

/// Where a streamed write's bytes go: each call appends its bytes to the file being written.
using byte_sink = std::function<void(std::span<const std::uint8_t>)>;

/// Writes what `produce` gives its sink, in order, to `path` atomically: into `path`'s directory
/// as a temporary ".<name>.nvfp4-tmp.<pid>.<random>", then renamed over `path`; so a file of any
/// size is written holding one piece at a time (a dequantized tensor, row block by row block).
/// On any failure the temporary is removed and `path` is left as it was: io_error for the file
/// system's own failures, and whatever `produce` throws, unchanged. A symbolic link is followed
/// (the file it points to is replaced; the link stays). An existing target that is not a regular
/// file, or that is read-only (no write permission for this process, or no write bit at all,
/// which also stops root), is refused: never replaced silently. A replaced file keeps its
/// permission bits. Temporaries left by killed processes for the same target are removed first
/// (see install_temporary_file_cleanup for interrupted ones).
inline void write_file_atomically(const std::filesystem::path& path, const std::function<void(const byte_sink&)>& produce) {
  namespace fs = std::filesystem;
  const fs::path target = detail_file::resolve_output(path);
  const std::string shown = target == path ? path.string() : path.string() + " (-> " + target.string() + ")";
  std::error_code ec;
  const fs::file_status existing = fs::status(target, ec);
  const bool replacing = fs::exists(existing);
  if (replacing) {
    if (!fs::is_regular_file(existing)) throw error(errc::io_error, "cannot write " + shown + ": it exists and is not a regular file");
    const auto write_bits = fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write;
    if ((existing.permissions() & write_bits) == fs::perms::none || ::access(target.c_str(), W_OK) != 0)
      throw error(errc::io_error, "cannot write " + shown + ": the file is read-only; not replacing it");
  }
  const fs::path directory = target.has_parent_path() ? target.parent_path() : fs::path(".");
  detail_file::remove_stale_temporaries(directory, target);
  std::random_device entropy;
  const fs::path temporary = directory / (detail_file::temporary_prefix(target) + std::to_string(::getpid()) + "." +
                                          std::to_string(entropy()) + std::to_string(entropy()));
  const int slot = detail_file::register_temporary(temporary.string());
  const auto discard = [&] {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    detail_file::unregister_temporary(slot);
  };
  const auto give_up = [&](const std::string& what) {
    discard();
    throw error(errc::io_error, what);
  };
  {
    errno = 0;
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) {
      const int reason = errno;
      give_up("cannot create " + temporary.string() + " to write " + shown +
              (reason != 0 ? std::string(": ") + std::strerror(reason) : std::string()));
    }
    bool failed = false;
    try {
      produce([&](std::span<const std::uint8_t> part) {
        if (failed || part.empty()) return;
        out.write(reinterpret_cast<const char*>(part.data()), static_cast<std::streamsize>(part.size()));
        failed = !out;  // (the rest is not written; reported once `produce` returns)
      });
    } catch (...) {
      out.close();
      discard();
      throw;
    }
    out.flush();
    if (failed || !out) {
      out.close();
      give_up("cannot write " + shown + " (disk full or file size limit?)");
    }
  }
  if (replacing) {
    fs::permissions(temporary, existing.permissions(), ec);
    if (ec) give_up("cannot give " + temporary.string() + " the permissions of " + shown + ": " + ec.message());
  }
  fs::rename(temporary, target, ec);
  if (ec) give_up("cannot rename the finished file onto " + shown + ": " + ec.message());
  detail_file::unregister_temporary(slot);
}

/// Writes `parts` (concatenated) to `path` atomically, as the streamed form above does.
inline void write_file_atomically(const std::filesystem::path& path, std::span<const std::span<const std::uint8_t>> parts) {
  write_file_atomically(path, [&](const byte_sink& sink) {
    for (const auto part : parts) sink(part);
  });
}

/// write_file_atomically for one buffer.
inline void write_file_atomically(const std::filesystem::path& path, std::span<const std::uint8_t> bytes) {
  const std::span<const std::uint8_t> parts[] = {bytes};
  write_file_atomically(path, std::span<const std::span<const std::uint8_t>>(parts));
}

}  // namespace nvfp4::io
