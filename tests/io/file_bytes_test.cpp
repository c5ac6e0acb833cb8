// Tests for nvfp4/io/file_bytes.hpp: the atomic writer follows symbolic links, refuses read-only
// and non-regular targets, keeps a replaced file's permissions, removes the temporaries killed
// writers left, and (with install_temporary_file_cleanup) leaves none when interrupted by a signal
// or stopped by the file size limit. Child processes are forked for the signal cases.
#include "nvfp4/io/file_bytes.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace nvfp4::io {
namespace {
namespace io_file_bytes_test {

namespace fs = std::filesystem;

class FileBytes : public nvfp4::test::temp_dir_test {
 protected:
  static std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static void put(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }
  static void write(const fs::path& p, const std::string& text) {
    write_file_atomically(p, std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  static errc code_of_write(const fs::path& p, const std::string& text) {
    try {
      write(p, text);
    } catch (const error& e) {
      return e.code();
    }
    return errc{};
  }
};

TEST_F(FileBytes, ASymbolicLinkIsFollowedAndStaysALink) {
  put(dir_ / "real.npy", "old");
  fs::create_symlink("real.npy", dir_ / "link.npy");
  write(dir_ / "link.npy", "new");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir_ / "link.npy")));
  EXPECT_EQ(slurp(dir_ / "real.npy"), "new");
  // A link to a file not there yet creates that file.
  fs::create_symlink("later.npy", dir_ / "dangling.npy");
  write(dir_ / "dangling.npy", "made");
  EXPECT_EQ(slurp(dir_ / "later.npy"), "made");
  EXPECT_EQ(names(), (std::vector<std::string>{"dangling.npy", "later.npy", "link.npy", "real.npy"}));
}

TEST_F(FileBytes, AReadOnlyOrNonRegularTargetIsRefusedAndLeftAsItWas) {
  put(dir_ / "locked.npy", "keep");
  fs::permissions(dir_ / "locked.npy", fs::perms::owner_read | fs::perms::group_read);
  try {
    write(dir_ / "locked.npy", "new");
    ADD_FAILURE() << "a read-only file was replaced";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::io_error);
    EXPECT_NE(std::string(e.what()).find("read-only"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(dir_ / "locked.npy"), "keep");
  fs::create_directory(dir_ / "sub");
  EXPECT_EQ(code_of_write(dir_ / "sub", "x"), errc::io_error);
  EXPECT_EQ(names(), (std::vector<std::string>{"locked.npy", "sub"}));
}

TEST_F(FileBytes, AReplacedFileKeepsItsPermissions) {
  put(dir_ / "a.npy", "old");
  const auto mode = fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read;
  fs::permissions(dir_ / "a.npy", mode);
  write(dir_ / "a.npy", "new");
  EXPECT_EQ(fs::status(dir_ / "a.npy").permissions(), mode);
  EXPECT_EQ(slurp(dir_ / "a.npy"), "new");
}

TEST_F(FileBytes, TemporariesOfDeadWritersAreRemovedOthersKept) {
  // A process id that no longer runs: a child that has exited and been reaped.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);
  const std::string stale = ".a.npy.nvfp4-tmp." + std::to_string(child) + ".123";
  const std::string live = ".a.npy.nvfp4-tmp." + std::to_string(::getppid()) + ".456";
  const std::string other_target = ".b.npy.nvfp4-tmp." + std::to_string(child) + ".789";
  for (const auto& n : {stale, live, other_target}) put(dir_ / n, "partial");
  write(dir_ / "a.npy", "done");
  EXPECT_EQ(names(), (std::vector<std::string>{live, other_target, "a.npy"}));
}

TEST_F(FileBytes, ASignalRemovesTheTemporaryBeingWritten) {
  const fs::path temporary = dir_ / ".x.npy.nvfp4-tmp.1.1";
  const pid_t child = ::fork();
  if (child == 0) {
    install_temporary_file_cleanup();
    put(temporary, "half");
    detail_file::register_temporary(temporary.string());
    ::raise(SIGTERM);
    ::_exit(3);  // not reached: the handler re-raises with the default action
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  EXPECT_FALSE(fs::exists(temporary));
}

TEST_F(FileBytes, TheFileSizeLimitIsAnIoErrorWithNoTemporaryLeft) {
  put(dir_ / "big.npy", "previous");
  const pid_t child = ::fork();
  if (child == 0) {
    install_temporary_file_cleanup();  // ignores SIGXFSZ: the write fails instead of killing
    const rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      write(dir_ / "big.npy", std::string(1 << 20, 'x'));
    } catch (const error& e) {
      ::_exit(e.code() == errc::io_error ? 0 : 1);
    }
    ::_exit(2);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(names(), (std::vector<std::string>{"big.npy"}));
  EXPECT_EQ(slurp(dir_ / "big.npy"), "previous");
}

TEST_F(FileBytes, StreamedWriteAppearsWholeOrNotAtAll) {
  put(dir_ / "out.bin", "old");
  write_file_atomically(dir_ / "out.bin", [](const byte_sink& sink) {
    const std::string parts[] = {"ab", "", "cde"};
    for (const auto& p : parts) sink(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(p.data()), p.size()));
  });
  EXPECT_EQ(slurp(dir_ / "out.bin"), "abcde");
  // A producer that throws mid-way: its error comes out as it is, the old file stays, no temporary.
  try {
    write_file_atomically(dir_ / "out.bin", [](const byte_sink& sink) {
      const std::string first = "partial";
      sink(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(first.data()), first.size()));
      throw error(errc::overflow, "producer failed");
    });
    ADD_FAILURE() << "written";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::overflow);
  }
  EXPECT_EQ(slurp(dir_ / "out.bin"), "abcde");
  EXPECT_EQ(names(), std::vector<std::string>{"out.bin"});
}

TEST_F(FileBytes, ReaderReadsPartsAndRefusesWhatReadFileBytesRefuses) {
  put(dir_ / "f.bin", "0123456789");
  const file_reader reader(dir_ / "f.bin");
  EXPECT_EQ(reader.size(), 10u);
  const auto part = reader.read(3, 4);
  EXPECT_EQ(std::string(part.begin(), part.end()), "3456");
  try {
    (void)reader.read(8, 4);
    ADD_FAILURE() << "read past the end";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::io_error);
  }
  for (const fs::path& bad : {dir_ / "missing", fs::path(dir_)}) {
    try {
      file_reader r(bad);
      ADD_FAILURE() << "opened " << bad;
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::io_error);
    }
  }
  // A FIFO is refused, not waited on.
  ASSERT_EQ(::mkfifo((dir_ / "pipe").c_str(), 0600), 0);
  EXPECT_THROW(file_reader r(dir_ / "pipe"), error);
}

}  // namespace io_file_bytes_test
}  // namespace
}  // namespace nvfp4::io
