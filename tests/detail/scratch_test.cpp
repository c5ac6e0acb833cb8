// Tests of nvfp4/detail/scratch.hpp: borrowed buffers are aligned and writable, a buffer handed
// back is lent again to the next borrow on the same thread (no new memory), buffers lent at the
// same time never overlap, a pool serves only its own thread, and release_thread_scratch() empties it.
#include "nvfp4/detail/scratch.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace nvfp4 {
namespace {
namespace detail_scratch_test {

using detail::scratch;

bool overlap(const std::byte* a, std::size_t a_bytes, const std::byte* b, std::size_t b_bytes) {
  return a < b + b_bytes && b < a + a_bytes;
}
template <class T>
const std::byte* bytes_of(const scratch<T>& s) {
  return reinterpret_cast<const std::byte*>(s.data());
}

TEST(Scratch, BorrowedBufferIsAlignedAndWritable) {
  release_thread_scratch();
  scratch<float> buffer(1000);
  ASSERT_NE(buffer.data(), nullptr);
  EXPECT_EQ(buffer.size(), 1000u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffer.data()) % 64, 0u);
  for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<float>(i);
  EXPECT_EQ(buffer[999], 999.0f);
  const scratch<float> empty(0);
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.size(), 0u);
}

TEST(Scratch, ABufferHandedBackIsLentAgainOnTheSameThread) {
  release_thread_scratch();
  const float* first;
  {
    scratch<float> big(1 << 20);
    first = big.data();
  }
  scratch<float> smaller(1000);  // fits in the pooled buffer: no new memory
  EXPECT_EQ(smaller.data(), first);
}

TEST(Scratch, BuffersLentAtTheSameTimeNeverOverlap) {
  release_thread_scratch();
  { scratch<double> warm(4096); }  // one pooled buffer, which only one of the borrows below can get
  scratch<double> a(4096);
  scratch<double> b(4096);  // the pool is empty now: a buffer of its own
  scratch<std::int32_t> c(100);
  EXPECT_FALSE(overlap(bytes_of(a), 4096 * sizeof(double), bytes_of(b), 4096 * sizeof(double)));
  EXPECT_FALSE(overlap(bytes_of(a), 4096 * sizeof(double), bytes_of(c), 100 * sizeof(std::int32_t)));
  EXPECT_FALSE(overlap(bytes_of(b), 4096 * sizeof(double), bytes_of(c), 100 * sizeof(std::int32_t)));
}

TEST(Scratch, MovingHandsTheBufferOverOnce) {
  release_thread_scratch();
  scratch<float> a(256);
  const float* memory = a.data();
  scratch<float> b(std::move(a));
  EXPECT_EQ(b.data(), memory);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  scratch<float> c;
  c = std::move(b);
  EXPECT_EQ(c.data(), memory);
  EXPECT_EQ(b.data(), nullptr);
}

TEST(Scratch, APoolServesOnlyItsOwnThread) {
  release_thread_scratch();
  { scratch<float> mine(5000); }  // now pooled on this thread, and still allocated
  scratch<float> again(5000);
  const float* pooled_here = again.data();
  const float* other = nullptr;
  std::thread([&] {
    scratch<float> theirs(5000);
    other = theirs.data();
  }).join();
  EXPECT_NE(other, pooled_here);
}

TEST(Scratch, ReleaseEmptiesThePoolAndBorrowingStillWorks) {
  { scratch<float> a(1 << 16); }
  release_thread_scratch();
  scratch<float> b(1 << 16);
  ASSERT_NE(b.data(), nullptr);
  b[(1 << 16) - 1] = 1.0f;
  EXPECT_EQ(b[(1 << 16) - 1], 1.0f);
}

}  // namespace detail_scratch_test
}  // namespace
}  // namespace nvfp4
