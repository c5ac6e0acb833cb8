// Tests for nvfp4/io/atomic_directory.hpp: a checkpoint directory appears whole or not at all. A
// write into an existing sharded checkpoint that fails (an exception, the file size limit in a
// child process, SIGTERM in the middle of the write) leaves the old checkpoint byte for byte and
// no temporary; a failed write into a new path leaves no directory; a replaced directory keeps
// the files beside its checkpoint and loses its old shards (issue 34: new shards beside old ones
// made a silently wrong weight).
#include "nvfp4/io/atomic_directory.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "nvfp4/io/sharded_safetensors.hpp"
#include "test_support.hpp"

namespace nvfp4::io {
namespace {
namespace io_atomic_directory_test {

namespace fs = std::filesystem;

class AtomicDirectory : public nvfp4::test::temp_dir_test {
 protected:
  /// Every file under `dir` (relative name -> bytes).
  static std::map<std::string, std::string> snapshot(const fs::path& dir) {
    std::map<std::string, std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (!e.is_regular_file()) continue;
      std::ifstream in(e.path(), std::ios::binary);
      out[fs::relative(e.path(), dir).string()] = std::string(std::istreambuf_iterator<char>(in), {});
    }
    return out;
  }
  /// The entries of dir_ other than `keep` (temporaries left behind would show here).
  std::vector<std::string> others(const std::string& keep) const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().filename() != keep) out.push_back(e.path().filename().string());
    return out;
  }
};

/// `n` tensors of `bytes` bytes each, every byte `fill`.
safetensors_file tensors(int n, std::size_t bytes, std::uint8_t fill) {
  safetensors_file f;
  for (int i = 0; i < n; ++i)
    f.add({"t" + std::to_string(i), safetensors_dtype::u8, {static_cast<std::int64_t>(bytes)}, std::vector<std::uint8_t>(bytes, fill)});
  return f;
}

/// Runs `body` in a child process; returns its wait status.
template <class Body>
int in_child(Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST_F(AtomicDirectory, NewDirectoryAppearsWhole) {
  const fs::path out = dir_ / "new" / "ckpt";
  write_safetensors_checkpoint(out, tensors(4, 100, 1), /*max_shard_bytes=*/200);
  EXPECT_EQ(read_safetensors_checkpoint(out).tensors.size(), 4u);
  EXPECT_TRUE(fs::exists(out / safetensors_index_name));
  EXPECT_TRUE(others("new").empty());
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "new"), fs::directory_iterator()), 1);
}

TEST_F(AtomicDirectory, FailedWriteLeavesNoDirectoryAndNoParents) {
  const fs::path out = dir_ / "a" / "b" / "ckpt";
  EXPECT_THROW(write_directory_atomically(out,
                                          [](const fs::path& dir) {
                                            write_safetensors(dir / "model.safetensors", tensors(1, 10, 1));
                                            throw error(errc::invalid_argument, "refused midway");
                                          }),
               error);
  EXPECT_FALSE(fs::exists(dir_ / "a"));
  EXPECT_TRUE(others("").empty());
}

TEST_F(AtomicDirectory, ReplacingDropsOldShardsAndKeepsFilesBesideThem) {
  const fs::path out = dir_ / "ckpt";
  write_safetensors_checkpoint(out, tensors(6, 100, 1), /*max_shard_bytes=*/200);  // 3 shards + index
  { std::ofstream(out / "tokenizer.json") << "{\"kept\": true}"; }
  write_safetensors_checkpoint(out, tensors(2, 100, 2));  // one model.safetensors
  const auto now = snapshot(out);
  EXPECT_EQ(now.size(), 2u);  // model.safetensors and the tokenizer: no old shard, no old index
  EXPECT_TRUE(now.contains("model.safetensors"));
  EXPECT_EQ(now.at("tokenizer.json"), "{\"kept\": true}");
  const auto back = read_safetensors_checkpoint(out);
  ASSERT_EQ(back.tensors.size(), 2u);
  EXPECT_EQ(back.tensors[0].bytes[0], 2);
  EXPECT_TRUE(others("ckpt").empty());
}

TEST_F(AtomicDirectory, FifosLinksAndSubdirectoriesBesideACheckpointAreCarriedOver) {
  // Issue 39: a FIFO beside the checkpoint made every replacement fail ("Invalid argument").
  const fs::path out = dir_ / "ckpt";
  write_safetensors_checkpoint(out, tensors(2, 100, 1));
  ASSERT_EQ(::mkfifo((out / "pipe").c_str(), 0640), 0);
  fs::create_symlink("tokenizer.json", out / "link");
  fs::create_directory(out / "extra");
  ASSERT_EQ(::mkfifo((out / "extra" / "inner_pipe").c_str(), 0600), 0);
  { std::ofstream(out / "extra" / "notes.txt") << "kept"; }
  struct stat before {};
  ASSERT_EQ(::stat((out / "pipe").c_str(), &before), 0);
  write_safetensors_checkpoint(out, tensors(2, 100, 2));
  struct stat after {};
  ASSERT_EQ(::stat((out / "pipe").c_str(), &after), 0);
  EXPECT_TRUE(S_ISFIFO(after.st_mode));
  EXPECT_EQ(after.st_ino, before.st_ino);  // the same FIFO (a hard link), not a new one
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(out / "link")));
  EXPECT_EQ(fs::read_symlink(out / "link"), "tokenizer.json");
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(out / "extra" / "inner_pipe")));
  std::ifstream notes(out / "extra" / "notes.txt");
  std::string text;
  notes >> text;
  EXPECT_EQ(text, "kept");
  EXPECT_EQ(read_safetensors_checkpoint(out).tensors[0].bytes[0], 2);
  EXPECT_TRUE(others("ckpt").empty());
}

TEST_F(AtomicDirectory, FileSizeLimitLeavesOldCheckpointWhole) {
  const fs::path out = dir_ / "ckpt";
  write_safetensors_checkpoint(out, tensors(6, 1000, 1), /*max_shard_bytes=*/2000);
  const auto before = snapshot(out);
  // The child may write 8 KiB per file: the first new shards fit, a later one does not.
  const int status = in_child([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{8192, 8192};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      safetensors_file file = tensors(4, 3000, 2);  // two shards of 6000 bytes, then one of 9000
      file.add({"t4", safetensors_dtype::u8, {9000}, std::vector<std::uint8_t>(9000, 2)});
      write_safetensors_checkpoint(out, std::move(file), /*max_shard_bytes=*/6000);
    } catch (const error& e) {
      ::_exit(e.code() == errc::io_error ? 17 : 3);
    }
    ::_exit(0);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 17);
  EXPECT_EQ(snapshot(out), before);
  EXPECT_TRUE(others("ckpt").empty());
}

TEST_F(AtomicDirectory, SigtermMidWriteLeavesOldCheckpointWhole) {
  const fs::path out = dir_ / "ckpt";
  write_safetensors_checkpoint(out, tensors(6, 1000, 1), /*max_shard_bytes=*/2000);
  const auto before = snapshot(out);
  const int status = in_child([&] {
    install_temporary_file_cleanup();
    write_directory_atomically(out, [](const fs::path& dir) {
      write_safetensors(dir / "model-00001-of-00002.safetensors", tensors(1, 1000, 2));
      ::raise(SIGTERM);  // the signal arrives between two shards
      write_safetensors(dir / "model-00002-of-00002.safetensors", tensors(1, 1000, 2));
    });
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_EQ(snapshot(out), before);
  EXPECT_TRUE(others("ckpt").empty());
  EXPECT_EQ(read_safetensors_checkpoint(out).tensors.size(), 6u);
}

TEST_F(AtomicDirectory, SigtermIntoNewPathLeavesNothing) {
  const fs::path out = dir_ / "ckpt";
  const int status = in_child([&] {
    install_temporary_file_cleanup();
    write_directory_atomically(out, [](const fs::path& dir) {
      fs::create_directories(dir / "sub");
      write_safetensors(dir / "sub" / "model.safetensors", tensors(1, 100, 2));
      ::raise(SIGTERM);
    });
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(others("").empty());
}

TEST_F(AtomicDirectory, TemporaryOfAKilledWriterIsRemovedByTheNextWrite) {
  const fs::path out = dir_ / "ckpt";
  const int status = in_child([&] {
    write_directory_atomically(out, [](const fs::path& dir) {
      write_safetensors(dir / "model.safetensors", tensors(1, 100, 2));
      ::raise(SIGKILL);
    });
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_EQ(others("").size(), 1u);  // the killed writer's temporary
  write_safetensors_checkpoint(out, tensors(1, 100, 3));
  EXPECT_TRUE(others("ckpt").empty());
}

TEST_F(AtomicDirectory, RefusesAFileAtThePath) {
  const fs::path out = dir_ / "ckpt";
  { std::ofstream(out) << "not a directory"; }
  try {
    write_safetensors_checkpoint(out, tensors(1, 10, 1));
    ADD_FAILURE() << "accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::io_error);
    EXPECT_NE(std::string(e.what()).find("is not a directory"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(others("ckpt").empty());
}

TEST_F(AtomicDirectory, FollowsASymbolicLinkToADirectory) {
  const fs::path real = dir_ / "real";
  write_safetensors_checkpoint(real, tensors(1, 10, 1));
  fs::create_directory_symlink("real", dir_ / "link");
  write_safetensors_checkpoint(dir_ / "link", tensors(1, 10, 5));
  EXPECT_TRUE(fs::is_symlink(dir_ / "link"));
  EXPECT_EQ(read_safetensors_checkpoint(real).tensors[0].bytes[0], 5);
}

}  // namespace io_atomic_directory_test
}  // namespace
}  // namespace nvfp4::io
