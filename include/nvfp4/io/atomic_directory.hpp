// nvfp4/io/atomic_directory.hpp: a checkpoint directory written as a whole. The files go into an
// empty temporary sibling ".<name>.nvfp4-tmp.<pid>.<random>", which then takes the target's place
// in one step (Linux renameat2 RENAME_EXCHANGE swaps it with an existing directory; a new target
// is a plain rename), so at every instant the target is either the old checkpoint, whole, or the
// new one. A failure, or a signal under install_temporary_file_cleanup, removes the temporary and
// leaves no new directory; a temporary left by a killed process is removed by the next write to
// the same target. POSIX (Linux).
#pragma once

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/io/file_bytes.hpp"

namespace nvfp4::io {

namespace detail_directory {

/// Whether the file `name` of a directory being replaced belongs to the checkpoint (and so is
/// dropped: the new checkpoint brings its own) rather than sitting beside it (a tokenizer, a
/// README, which are carried over into the new directory).
inline bool belongs_to_checkpoint(const std::string& name) {
  const auto ends = [&](const char* suffix) { return name.ends_with(suffix); };
  return ends(".safetensors") || ends(".gguf") || name == "model.safetensors.index.json" || name == "hf_quant_config.json" ||
         name == "config.json" || (name.starts_with(".") && name.find(".nvfp4-tmp.") != std::string::npos);
}

/// Carries one entry `from` (a file, link, FIFO, ... or a directory, recursively) to `to`, which
/// does not exist: anything but a directory as a hard link to the same inode (so a FIFO or a
/// socket stays the one its users hold open), and where the file system refuses a link (another
/// device) a copy: a regular file's bytes, a symbolic link as a link, a FIFO as a new FIFO of its
/// mode; a socket or a device file cannot be copied and is refused by name. `fs::copy` knew none
/// but files, links and directories (issue 39: a FIFO beside a checkpoint made every --force
/// write fail with "Invalid argument").
inline void carry_entry(const std::filesystem::path& from, const std::filesystem::path& to, int depth) {
  namespace fs = std::filesystem;
  std::error_code step;
  const fs::file_status status = fs::symlink_status(from, step);
  if (step) throw error(errc::io_error, "cannot carry " + from.string() + " over into the new directory: " + step.message());
  if (fs::is_directory(status)) {
    if (depth > 32)
      throw error(errc::io_error, "cannot carry " + from.string() + " over into the new directory: nested more than 32 levels deep");
    fs::create_directory(to, from, step);
    for (fs::directory_iterator it(from, step), end; !step && it != end; it.increment(step))
      carry_entry(it->path(), to / it->path().filename(), depth + 1);
    if (step) throw error(errc::io_error, "cannot carry " + from.string() + " over into the new directory: " + step.message());
    return;
  }
  if (::link(from.c_str(), to.c_str()) == 0) return;  // (link() does not follow a symbolic link: the link itself is linked)
  const int link_error = errno;
  if (fs::is_regular_file(status)) {
    fs::copy_file(from, to, step);
  } else if (fs::is_symlink(status)) {
    fs::copy_symlink(from, to, step);
  } else if (fs::is_fifo(status)) {
    if (::mkfifo(to.c_str(), static_cast<mode_t>(status.permissions())) != 0) step = std::error_code(errno, std::generic_category());
  } else {
    throw error(errc::io_error, "cannot carry " + from.string() + " over into the new directory: it is " +
                                    (fs::is_socket(status) ? "a socket" : "a device file") + ", which cannot be copied (" +
                                    std::strerror(link_error) + " for a link); move it out of the directory");
  }
  if (step) throw error(errc::io_error, "cannot carry " + from.string() + " over into the new directory: " + step.message());
}

/// Carries the entries of `from` that do not belong to the checkpoint into `to` (carry_entry).
inline void carry_over(const std::filesystem::path& from, const std::filesystem::path& to) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::directory_iterator it(from, ec), end; it != end; it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    std::error_code exists;
    if (belongs_to_checkpoint(name) || fs::exists(fs::symlink_status(to / name, exists))) continue;
    carry_entry(it->path(), to / name, 0);
  }
  if (ec) throw error(errc::io_error, "cannot list " + from.string() + ": " + ec.message());
}

/// Removes the temporary directories for `target` that a process no longer running left behind.
/// Best effort, never throws.
inline void remove_stale_directories(const std::filesystem::path& parent, const std::filesystem::path& target) {
  namespace fs = std::filesystem;
  const std::string prefix = detail_file::temporary_prefix(target);
  std::error_code ec;
  std::vector<fs::path> stale;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    long long pid = 0;
    std::size_t i = prefix.size();
    for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && pid < (1LL << 40); ++i) pid = pid * 10 + (name[i] - '0');
    if (i == prefix.size() || i >= name.size() || name[i] != '.' || pid == static_cast<long long>(::getpid())) continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.push_back(it->path());
  }
  for (const auto& p : stale) {
    std::error_code ignored;
    fs::remove_all(p, ignored);
  }
}

/// Swaps two directory entries in one step; false (errno set) where the file system cannot.
inline bool exchange(const std::filesystem::path& a, const std::filesystem::path& b) {
  return ::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0;
}

}  // namespace detail_directory

/// Writes the directory `path` as a whole: `fill` is called with an empty temporary directory
/// beside `path` and writes the files there; then the temporary takes `path`'s place. An existing
/// `path` is replaced at once (RENAME_EXCHANGE; on a file system without it, two renames with the
/// old directory restored if the second fails), and the files of its old content that do not
/// belong to a checkpoint (anything but *.safetensors, *.gguf, the index, config.json and
/// hf_quant_config.json: a tokenizer, a README) are carried over into the new one. When `fill`
/// throws, or writing fails, the temporary is removed, `path` is left as it was (no new
/// directory, parents created for it removed again), and the error propagates (io_error for
/// the file system's own failures). A symbolic link to a directory is followed (the link stays).
/// Refused with io_error: a `path` that exists and is not a directory, or is read-only.
inline void write_directory_atomically(const std::filesystem::path& path, const std::function<void(const std::filesystem::path&)>& fill) {
  namespace fs = std::filesystem;
  const fs::path target = detail_file::resolve_output(path);
  const std::string shown = target == path ? path.string() : path.string() + " (-> " + target.string() + ")";
  std::error_code ec;
  const fs::file_status existing = fs::status(target, ec);
  const bool replacing = fs::exists(existing);
  if (replacing) {
    if (!fs::is_directory(existing))
      throw error(errc::io_error, "cannot write the directory " + shown + ": it exists and is not a directory");
    if (::access(target.c_str(), W_OK) != 0)
      throw error(errc::io_error, "cannot write the directory " + shown + ": it is read-only; not replacing it");
  }
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // Parents that do not exist yet are created, and removed again should the write fail.
  std::vector<fs::path> created;
  for (fs::path p = parent; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    created.push_back(p);
    if (p == p.parent_path()) break;
  }
  const auto remove_created = [&] {
    for (const auto& p : created) {
      std::error_code ignored;
      fs::remove(p, ignored);  // only while empty
    }
  };
  for (auto it = created.rbegin(); it != created.rend(); ++it) {
    fs::create_directory(*it, ec);
    if (ec) {
      const std::string reason = ec.message();
      remove_created();
      throw error(errc::io_error, "cannot create directory " + it->string() + ": " + reason);
    }
  }
  detail_directory::remove_stale_directories(parent, target);
  std::random_device entropy;
  const fs::path staging = parent / (detail_file::temporary_prefix(target) + std::to_string(::getpid()) + "." + std::to_string(entropy()) +
                                     std::to_string(entropy()));
  if (!fs::create_directory(staging, ec) || ec) {
    remove_created();
    throw error(errc::io_error, "cannot create the temporary directory " + staging.string() + " to write " + shown + ": " +
                                    (ec ? ec.message() : std::string("it exists")));
  }
  const int slot = detail_file::register_temporary_directory(staging.string());
  const auto discard = [&] {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    detail_file::unregister_temporary_directory(slot);
    remove_created();
  };
  try {
    fill(staging);
    if (replacing) {
      detail_directory::carry_over(target, staging);
      fs::permissions(staging, existing.permissions(), ec);
      if (ec) throw error(errc::io_error, "cannot give " + staging.string() + " the permissions of " + shown + ": " + ec.message());
    }
  } catch (...) {
    discard();
    throw;
  }
  if (!replacing) {
    fs::rename(staging, target, ec);
    if (ec) {
      discard();
      throw error(errc::io_error, "cannot rename the finished directory onto " + shown + ": " + ec.message());
    }
    detail_file::unregister_temporary_directory(slot);
    return;
  }
  if (detail_directory::exchange(staging, target)) {
    // The temporary now holds the old checkpoint (still registered: a signal removes it too).
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    detail_file::unregister_temporary_directory(slot);
    return;
  }
  // No RENAME_EXCHANGE here: the old directory is moved aside, the new one moved in, the old one
  // restored should that fail.
  const fs::path aside =
      parent / (detail_file::temporary_prefix(target) + std::to_string(::getpid()) + ".old." + std::to_string(entropy()));
  fs::rename(target, aside, ec);
  if (ec) {
    discard();
    throw error(errc::io_error, "cannot move " + shown + " aside to replace it: " + ec.message());
  }
  fs::rename(staging, target, ec);
  if (ec) {
    std::error_code ignored;
    fs::rename(aside, target, ignored);
    discard();
    throw error(errc::io_error, "cannot rename the finished directory onto " + shown + ": " + ec.message());
  }
  detail_file::unregister_temporary_directory(slot);
  std::error_code ignored;
  fs::remove_all(aside, ignored);
}

}  // namespace nvfp4::io
