// nvfp4/transforms/hadamard_transform.hpp: hadamard_transform, the descriptor of a random
// Hadamard transform T = diag(s) * H_n / sqrt(n) (docs/numerics_spec.md §4): size n and sign vector s.
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/random/philox.hpp"

namespace nvfp4 {

/// TransformerEngine's fixed sign vector of its 16-point RHT (the "wgrad" signs, docs/numerics_spec.md §4).
inline constexpr std::array<int, 16> te_rht_signs = {+1, +1, +1, -1, +1, -1, -1, -1, -1, -1, -1, +1, -1, +1, -1, -1};

/// Which way a transform is applied to a row block x: forward y = x * T, inverse x = y * Tᵀ.
enum class hadamard_direction { forward, inverse };

/// A random Hadamard transform of size n (a power of two, 16 to 256): T[i][j] = s_i * H[i][j] /
/// sqrt(n) with the Sylvester Hadamard matrix H[i][j] = (-1)^popcount(i & j). T is orthogonal.
class hadamard_transform {
 public:
  static constexpr int min_size = 16;
  static constexpr int max_size = 256;

  /// TransformerEngine's transform: n = 16, its fixed sign vector, scale 1/4.
  static hadamard_transform te_default() { return with_signs(std::vector<int>(te_rht_signs.begin(), te_rht_signs.end())); }

  /// Size n with signs drawn from the Philox stream of `seed`: s_i = +1 or -1 as bit 0 of
  /// random_byte(seed, i). Throws invalid_argument unless n is a power of two in [16, 256].
  static hadamard_transform random(int size, std::uint64_t seed) {
    check_size(size);
    std::vector<int> signs(static_cast<std::size_t>(size));
    for (int i = 0; i < size; ++i) signs[static_cast<std::size_t>(i)] = (random_byte(seed, static_cast<std::uint64_t>(i)) & 1) ? -1 : +1;
    return with_signs(signs);
  }

  /// Size n = signs.size() with the given signs (each +1 or -1).
  static hadamard_transform with_signs(const std::vector<int>& signs) {
    check_size(static_cast<long long>(signs.size()));
    hadamard_transform t;
    for (int s : signs)
      detail::require(s == 1 || s == -1, errc::invalid_argument, "hadamard_transform: a sign is " + std::to_string(s) + ", not +1 or -1");
    t.signs_.assign(signs.begin(), signs.end());
    return t;
  }

  int size() const { return static_cast<int>(signs_.size()); }
  int sign(int i) const { return signs_[static_cast<std::size_t>(i)]; }
  const std::vector<int>& signs() const { return signs_; }

  /// s_i * H[i][j] (+1 or -1), the entry of sqrt(n) * T.
  int unscaled_entry(int i, int j) const { return (std::popcount(static_cast<unsigned>(i & j)) & 1) ? -sign(i) : sign(i); }

  /// True when 1 / sqrt(n) is a power of two (n = 16, 64, 256): the scaling is then exact.
  bool exact_scale() const { return (std::countr_zero(static_cast<unsigned>(size())) & 1) == 0; }
  /// log2(n) / 2 rounded down: 1 / sqrt(n) = 2^-half_log2 (times 1/sqrt(2) when not exact_scale).
  int half_log2_size() const { return std::countr_zero(static_cast<unsigned>(size())) / 2; }
  /// 1 / sqrt(n) as a double (rounded to nearest for n = 32 and 128).
  double scale() const { return 1.0 / std::sqrt(static_cast<double>(size())); }

  /// Throws invalid_argument unless `size` is a power of two in [16, 256].
  static void check_size(long long size) {
    detail::require(size >= min_size && size <= max_size && std::has_single_bit(static_cast<unsigned long long>(size)),
                    errc::invalid_argument, "hadamard_transform: size " + std::to_string(size) + " is not a power of two in [16, 256]");
  }

 private:
  hadamard_transform() = default;
  std::vector<int> signs_;
};

}  // namespace nvfp4
