// nvfp4/detail/scratch.hpp: per-thread working memory that the hot paths reuse from call to call.
// A GEMM's packed operand rows (2 bytes per element of A: 32 MiB at 4096 x 4096) and its
// per-thread panels were fresh std::vectors on every call; the allocator hands large blocks back
// to the OS, so each call paid a zero-fill and a page fault per 4 KiB page. A scratch buffer is
// borrowed from the calling thread's pool instead, uninitialised, and goes back to the pool when
// it goes out of scope. Each thread keeps at most pool_slots buffers (the largest ones) until it
// exits or calls nvfp4::release_thread_scratch(). A buffer is lent to one borrower at a time: a
// borrow that finds no free pooled buffer large enough gets a new one, so borrows never alias.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace nvfp4 {

namespace detail {

/// The calling thread's pooled buffers (64-byte aligned, uninitialised bytes).
class scratch_pool {
 public:
  static constexpr int pool_slots = 8;
  static constexpr std::align_val_t alignment{64};

  static scratch_pool& of_this_thread() {
    static thread_local scratch_pool pool;
    return pool;
  }

  /// The smallest pooled buffer of at least `bytes` bytes (taken out of the pool), or a new one.
  std::byte* take(std::size_t bytes, std::size_t& capacity) {
    slot* best = nullptr;
    for (slot& s : slots_)
      if (s.memory && s.bytes >= bytes && (!best || s.bytes < best->bytes)) best = &s;
    if (!best) {
      // Nothing fits: the largest pooled buffer that is too small is not worth keeping.
      slot* too_small = nullptr;
      for (slot& s : slots_)
        if (s.memory && (!too_small || s.bytes > too_small->bytes)) too_small = &s;
      if (too_small) free_slot(*too_small);
      capacity = bytes;
      return static_cast<std::byte*>(::operator new(bytes, alignment));
    }
    capacity = best->bytes;
    return std::exchange(best->memory, nullptr);
  }

  /// Takes `memory` back: into a free slot, else in place of the smallest pooled buffer if it is
  /// larger, else it is freed.
  void give(std::byte* memory, std::size_t capacity) {
    slot* target = nullptr;
    for (slot& s : slots_)
      if (!s.memory) {
        target = &s;
        break;
      }
    if (!target) {
      target = &slots_[0];
      for (slot& s : slots_)
        if (s.bytes < target->bytes) target = &s;
      if (target->bytes >= capacity) {
        ::operator delete(memory, alignment);
        return;
      }
      free_slot(*target);
    }
    target->memory = memory;
    target->bytes = capacity;
  }

  void release() {
    for (slot& s : slots_) free_slot(s);
  }

  scratch_pool() = default;
  scratch_pool(const scratch_pool&) = delete;
  scratch_pool& operator=(const scratch_pool&) = delete;
  ~scratch_pool() { release(); }

 private:
  struct slot {
    std::byte* memory = nullptr;
    std::size_t bytes = 0;
  };
  static void free_slot(slot& s) {
    if (s.memory) ::operator delete(s.memory, alignment);
    s = slot{};
  }
  slot slots_[pool_slots];
};

/// `count` elements of T borrowed from the calling thread's scratch_pool, contents unspecified
/// (whatever an earlier borrower left): the user writes before it reads.
template <class T>
class scratch {
  static_assert(std::is_trivially_default_constructible_v<T> && std::is_trivially_destructible_v<T>,
                "scratch memory is handed out uninitialised: T must need no constructor or destructor");
  static_assert(alignof(T) <= static_cast<std::size_t>(scratch_pool::alignment));

 public:
  scratch() = default;
  explicit scratch(std::size_t count) : size_(count) {
    if (count == 0) return;
    std::byte* memory = scratch_pool::of_this_thread().take(count * sizeof(T), capacity_);
    // An array of trivial T begins its lifetime in the storage that operator new returned.
    data_ = std::launder(reinterpret_cast<T*>(memory));
  }
  scratch(scratch&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), capacity_(std::exchange(other.capacity_, 0)), size_(std::exchange(other.size_, 0)) {}
  scratch& operator=(scratch&& other) noexcept {
    if (this != &other) {
      give_back();
      data_ = std::exchange(other.data_, nullptr);
      capacity_ = std::exchange(other.capacity_, 0);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;
  ~scratch() { give_back(); }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }

 private:
  void give_back() {
    if (data_) scratch_pool::of_this_thread().give(reinterpret_cast<std::byte*>(data_), capacity_);
    data_ = nullptr;
    capacity_ = size_ = 0;
  }
  T* data_ = nullptr;
  std::size_t capacity_ = 0;  ///< bytes
  std::size_t size_ = 0;      ///< elements
};

}  // namespace detail

/// Frees the working memory the calling thread keeps between GEMM calls (detail/scratch.hpp):
/// up to a few buffers, the largest about 2 bytes per element of the largest A it multiplied.
/// Buffers of OpenMP worker threads (a few hundred KiB each) stay with those threads.
inline void release_thread_scratch() { detail::scratch_pool::of_this_thread().release(); }

}  // namespace nvfp4
