// nvfp4/simd/scalar/ops.hpp: the lane operations every kernel family is written in, one lane wide:
// the base case of the ISA Ops (simd/avx2/ops.hpp, simd/avx512/ops.hpp offer the same functions
// on 8 and 16 lanes), what builds without AVX2 run, and the documentation of each primitive.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "nvfp4/config.hpp"
#include "nvfp4/formats/bf16.hpp"

namespace nvfp4::simd::scalar {

struct ops {
  static constexpr const char* name = "scalar";
  /// 32-bit lanes per vector (vf, vi) and 64-bit lanes per double vector (vd).
  static constexpr int width = 1;
  static constexpr int double_width = 1;
  using vf = float;          ///< float lanes
  using vi = std::uint32_t;  ///< 32-bit integer lanes (signed or unsigned as each operation says)
  using vm = bool;           ///< a lane mask of vf / vi lanes
  using vd = double;         ///< double lanes
  using vdm = bool;          ///< a lane mask of vd lanes

  // ---- memory ------------------------------------------------------------------------------
  static NVFP4_ALWAYS_INLINE vf load(const float* p) { return *p; }
  static NVFP4_ALWAYS_INLINE void store(float* p, vf v) { *p = v; }
  /// Words of any storage (copied, so byte buffers may be read and written this way).
  static NVFP4_ALWAYS_INLINE vi load_bits(const std::uint32_t* p) {
    vi v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static NVFP4_ALWAYS_INLINE void store_bits(std::uint32_t* p, vi v) { std::memcpy(p, &v, sizeof v); }
  /// The first `count` lanes of v to p[0..count).
  static NVFP4_ALWAYS_INLINE void store_bits_partial(std::uint32_t* p, vi v, int count) {
    if (count > 0) store_bits(p, v);
  }
  /// `width` bf16 values as the bits of the floats they widen to (exact).
  static NVFP4_ALWAYS_INLINE vi load_bf16_bits(const bf16* p) { return static_cast<vi>(p->bits()) << 16; }
  /// `width` bytes, one per lane / the low byte of each lane to `width` bytes.
  static NVFP4_ALWAYS_INLINE vi load_bytes(const std::uint8_t* p) { return *p; }
  /// `width` signed bytes, each sign-extended to its lane.
  static NVFP4_ALWAYS_INLINE vi load_signed_bytes(const std::int8_t* p) { return static_cast<vi>(static_cast<std::int32_t>(*p)); }
  static NVFP4_ALWAYS_INLINE void store_bytes(std::uint8_t* p, vi codes) { *p = static_cast<std::uint8_t>(codes); }
  /// The 4-bit codes of elements [first, first + width) of a packed buffer (element 2i in the low
  /// nibble of byte i; `first` is a multiple of width), one per lane.
  static NVFP4_ALWAYS_INLINE vi load_nibbles(const std::uint8_t* packed, index_t first) {
    return (packed[first / 2] >> ((first & 1) * 4)) & 0xFu;
  }
  /// Codes 0..15 of elements [first, first + width) into a packed buffer. One lane wide, an even
  /// element writes its byte whole (high nibble zero) and an odd one keeps the low nibble, so
  /// elements stored in order fill every byte they touch, an odd count's last high nibble with
  /// zero, whatever the buffer held before (quantize_into writes over a kept tensor).
  static NVFP4_ALWAYS_INLINE void store_nibbles(std::uint8_t* packed, index_t first, vi codes) {
    std::uint8_t& byte = packed[first / 2];
    byte = static_cast<std::uint8_t>((first & 1) ? (byte & 0x0Fu) | (codes << 4) : codes);
  }
  /// a and b narrowed to 16-bit words (unsigned saturation), both in one vector: lane l of each
  /// into words of lane l (the x86 pack order: within each 128-bit lane, a's four, then b's four).
  static NVFP4_ALWAYS_INLINE vi narrow_to_words(vi a, vi b) { return narrow_word(a) | narrow_word(b) << 16; }
  /// The inverse of narrow_to_words for words below 2^16: a's words back into `first`'s lanes,
  /// b's into `second`'s.
  static NVFP4_ALWAYS_INLINE void widen_words(vi words, vi& first, vi& second) {
    first = words & 0xFFFFu;
    second = words >> 16;
  }
  /// The codes 0..15 of 8 * width consecutive elements, as narrow_to_words(codes of vectors 2p,
  /// 2p + 1) for p = 0..3, packed two per byte (element 2i in the low nibble of byte i) into
  /// packed[0 .. 4 * width): every byte written whole.
  static NVFP4_ALWAYS_INLINE void store_nibble_words_x4(std::uint8_t* packed, const vi (&words)[4]) {
    for (int p = 0; p < 4; ++p) packed[p] = static_cast<std::uint8_t>((words[p] & 0xFu) | (words[p] >> 16 & 0xFu) << 4);
  }
  // (An ISA may also offer dot_bf16_pairs(vf acc, vi a, vi b): each lane's acc plus the products
  // of the bf16 pairs in a and b's lanes (high element first), rounded as x86's VDPBF16PS does,
  // which fp8::mma::relaxed_step models. The FP8 GEMM's relaxed kernels take it where present.)
  // (An ISA may also offer e2m1_codes_as_words(vf a, vf b): the E2M1 codes, round to nearest
  // even and saturating, of a and b as narrow_to_words would hold them. Where it is absent,
  // block_kernels encodes each vector and narrows.)
  /// Lanes to rows: lane l's words of a, b (and c, d) go to out + l * stride as 8 (16) bytes,
  /// little-endian, in that order.
  static NVFP4_ALWAYS_INLINE void store_lanes2(std::uint8_t* out, index_t /*stride*/, vi a, vi b) {
    put_word(out, a);
    put_word(out + 4, b);
  }
  static NVFP4_ALWAYS_INLINE void store_lanes4(std::uint8_t* out, index_t /*stride*/, vi a, vi b, vi c, vi d) {
    put_word(out, a);
    put_word(out + 4, b);
    put_word(out + 8, c);
    put_word(out + 12, d);
  }

  /// Table lookup of nibbles: lane l gets table[n] for the four nibbles n of packed bytes 2l and
  /// 2l + 1 (low nibble first), as its four bytes in that order. Reads 2 * width bytes; `table`
  /// has 16 bytes.
  static NVFP4_ALWAYS_INLINE vi decode_nibbles(const std::uint8_t* packed, const std::uint8_t* table) {
    return static_cast<vi>(table[packed[0] & 15]) | static_cast<vi>(table[packed[0] >> 4]) << 8 |
           static_cast<vi>(table[packed[1] & 15]) << 16 | static_cast<vi>(table[packed[1] >> 4]) << 24;
  }

  // ---- constants and conversions -----------------------------------------------------------
  static NVFP4_ALWAYS_INLINE vf set(float v) { return v; }
  static NVFP4_ALWAYS_INLINE vi set_int(std::uint32_t v) { return v; }
  /// Lane l holds l.
  static NVFP4_ALWAYS_INLINE vi lane_index() { return 0; }
  static NVFP4_ALWAYS_INLINE vi as_int(vf v) { return std::bit_cast<vi>(v); }
  static NVFP4_ALWAYS_INLINE vf as_float(vi v) { return std::bit_cast<vf>(v); }
  /// Signed int32 -> float (RNE).
  static NVFP4_ALWAYS_INLINE vf to_float(vi v) { return static_cast<float>(static_cast<std::int32_t>(v)); }
  /// float -> int32 toward zero; |v| < 2^31.
  static NVFP4_ALWAYS_INLINE vi truncate(vf v) { return static_cast<vi>(static_cast<std::int32_t>(v)); }
  /// Signed int32 v (|v| < 2^24) times 2^e (e signed, |e| <= 1022), rounded once to float, to
  /// nearest even: exact where the result is a normal float, Inf beyond the range, a subnormal or 0
  /// below it.
  static NVFP4_ALWAYS_INLINE vf to_float_scaled(vi v, vi e) {
    return static_cast<float>(std::ldexp(static_cast<double>(signed_of(v)), static_cast<int>(signed_of(e))));
  }
  /// x * 2^e (e signed, |e| <= 1022) truncated toward zero to int32, for |x * 2^e| < 2^31 (else
  /// 0x80000000, as x86's conversion gives: kernels may compute lanes they later replace).
  static NVFP4_ALWAYS_INLINE vi truncate_scaled(vf x, vi e) {
    const double scaled = std::ldexp(static_cast<double>(x), static_cast<int>(signed_of(e)));
    return std::fabs(scaled) < 0x1p31 ? static_cast<vi>(static_cast<std::int32_t>(scaled)) : 0x80000000u;
  }

  // ---- 32-bit integer lanes ----------------------------------------------------------------
  static NVFP4_ALWAYS_INLINE vi bit_and(vi a, vi b) { return a & b; }
  static NVFP4_ALWAYS_INLINE vi bit_or(vi a, vi b) { return a | b; }
  static NVFP4_ALWAYS_INLINE vi bit_xor(vi a, vi b) { return a ^ b; }
  static NVFP4_ALWAYS_INLINE vi add(vi a, vi b) { return a + b; }
  static NVFP4_ALWAYS_INLINE vi sub(vi a, vi b) { return a - b; }
  /// Logical shifts.
  template <int Bits>
  static NVFP4_ALWAYS_INLINE vi shift_right(vi a) {
    return a >> Bits;
  }
  template <int Bits>
  static NVFP4_ALWAYS_INLINE vi shift_left(vi a) {
    return a << Bits;
  }
  /// Signed int32 max / min / compare.
  static NVFP4_ALWAYS_INLINE vi max(vi a, vi b) { return signed_of(a) > signed_of(b) ? a : b; }
  static NVFP4_ALWAYS_INLINE vi min(vi a, vi b) { return signed_of(a) < signed_of(b) ? a : b; }
  static NVFP4_ALWAYS_INLINE vm greater(vi a, vi b) { return signed_of(a) > signed_of(b); }
  static NVFP4_ALWAYS_INLINE vi max_unsigned(vi a, vi b) { return a > b ? a : b; }
  static NVFP4_ALWAYS_INLINE vi min_unsigned(vi a, vi b) { return a < b ? a : b; }
  /// Unsigned max of each 16-bit half.
  static NVFP4_ALWAYS_INLINE vi max_u16(vi a, vi b) {
    const vi low = (a & 0xFFFFu) > (b & 0xFFFFu) ? a & 0xFFFFu : b & 0xFFFFu;
    const vi high = (a >> 16) > (b >> 16) ? a >> 16 : b >> 16;
    return (high << 16) | low;
  }
  /// The sum of each lane's four bytes, read as signed, as a signed int32.
  static NVFP4_ALWAYS_INLINE vi sum_bytes(vi a) {
    std::int32_t sum = 0;
    for (int k = 0; k < 4; ++k) sum += static_cast<std::int8_t>(static_cast<std::uint8_t>(a >> (8 * k)));
    return static_cast<vi>(sum);
  }
  /// Both halves of the 64-bit unsigned products a * b, lane by lane.
  static NVFP4_ALWAYS_INLINE void mul_wide(vi a, vi b, vi& high, vi& low) {
    const std::uint64_t product = std::uint64_t{a} * b;
    high = static_cast<vi>(product >> 32);
    low = static_cast<vi>(product);
  }
  /// Signed max over the lanes (the kernels use it on values in [0, 2^31)).
  static NVFP4_ALWAYS_INLINE std::uint32_t reduce_max(vi a) { return a; }
  /// Lane i of the result: reduce_max(rows[i]), for all `width` rows at once (a max tree, not
  /// `width` separate reductions).
  static NVFP4_ALWAYS_INLINE vi reduce_max_each(const vi (&rows)[width]) { return rows[0]; }
  static NVFP4_ALWAYS_INLINE vi select(vm m, vi if_true, vi if_false) { return m ? if_true : if_false; }
  static NVFP4_ALWAYS_INLINE vf select(vm m, vf if_true, vf if_false) { return m ? if_true : if_false; }
  /// Bit l set when lane l of m is.
  static NVFP4_ALWAYS_INLINE unsigned mask_bits(vm m) { return m ? 1u : 0u; }

  // ---- float lanes (IEEE fp32, round to nearest even) ---------------------------------------
  static NVFP4_ALWAYS_INLINE vf add(vf a, vf b) { return a + b; }
  static NVFP4_ALWAYS_INLINE vf sub(vf a, vf b) { return a - b; }
  static NVFP4_ALWAYS_INLINE vf mul(vf a, vf b) { return a * b; }
  static NVFP4_ALWAYS_INLINE vf div(vf a, vf b) { return a / b; }
  /// a * b + c rounded once.
  static NVFP4_ALWAYS_INLINE vf fmadd(vf a, vf b, vf c) { return std::fma(a, b, c); }
  /// a, rounded to its lanes' type here: the compiler may not fuse the operation that made it
  /// into a following add (GCC's default -ffp-contract=fast would turn mul + add into an FMA).
  static NVFP4_ALWAYS_INLINE vf materialize(vf a) {
#if defined(__GNUC__) || defined(__clang__)
    __asm__("" : "+g"(a));
    return a;
#else
    volatile vf v = a;
    return v;
#endif
  }
  /// min / max as the x86 instructions: b when either is NaN.
  static NVFP4_ALWAYS_INLINE vf min(vf a, vf b) { return a < b ? a : b; }
  static NVFP4_ALWAYS_INLINE vf max(vf a, vf b) { return a > b ? a : b; }
  static NVFP4_ALWAYS_INLINE vf floor(vf a) { return std::floor(a); }
  static NVFP4_ALWAYS_INLINE vf abs(vf a) { return std::fabs(a); }
  /// Ordered compares: false where a lane is NaN.
  static NVFP4_ALWAYS_INLINE vm greater_equal(vf a, vf b) { return a >= b; }
  static NVFP4_ALWAYS_INLINE vm less(vf a, vf b) { return a < b; }

  // ---- tables ------------------------------------------------------------------------------
  /// table[code & 15] per lane, for a 16-entry table.
  static NVFP4_ALWAYS_INLINE vf lookup16(vi codes, const float* table) { return table[codes & 15]; }
  static NVFP4_ALWAYS_INLINE vi lookup16(vi codes, const std::uint32_t* table) { return table[codes & 15]; }
  /// table[code] per lane (any table size).
  static NVFP4_ALWAYS_INLINE vf gather(vi codes, const float* table) { return table[codes]; }

  // ---- the one transpose -------------------------------------------------------------------
  /// rows[i] lane j <-> rows[j] lane i: a width x width matrix of 32-bit words, in registers.
  static NVFP4_ALWAYS_INLINE void transpose(vi (&)[width]) {}

  // ---- double lanes ------------------------------------------------------------------------
  /// `double_width` consecutive floats or bf16 values widened to double (exact).
  static NVFP4_ALWAYS_INLINE vd load_double(const float* p) { return *p; }
  static NVFP4_ALWAYS_INLINE vd load_double(const bf16* p) { return p->to_float(); }
  static NVFP4_ALWAYS_INLINE vd set_double(double v) { return v; }
  /// The signed int32 lanes of v as doubles (exact): lanes [0, double_width) in `low`, the rest
  /// (where width > double_width) in `high`; one lane wide, `high` is 0.
  static NVFP4_ALWAYS_INLINE void widen_to_double(vi v, vd& low, vd& high) {
    low = static_cast<double>(signed_of(v));
    high = 0.0;
  }
  /// 2^e for each signed int32 lane e (|e| <= 1022), split as widen_to_double splits.
  static NVFP4_ALWAYS_INLINE void powers_of_two_double(vi e, vd& low, vd& high) {
    low = std::ldexp(1.0, static_cast<int>(signed_of(e)));
    high = 0.0;
  }
  /// The inverse split: `width` doubles (low's lanes, then high's) to floats rounded toward zero,
  /// magnitudes of 2^128 and above to Inf of their sign (a tensor core's fp32 conversion).
  static NVFP4_ALWAYS_INLINE vf narrow_toward_zero(vd low, vd /*high*/) {
    if (std::fabs(low) >= 0x1p128) return low > 0 ? INFINITY : -INFINITY;
    const float nearest = static_cast<float>(low);
    return std::fabs(static_cast<double>(nearest)) > std::fabs(low) ? std::nextafter(nearest, 0.0f) : nearest;
  }
  static NVFP4_ALWAYS_INLINE vd add(vd a, vd b) { return a + b; }
  static NVFP4_ALWAYS_INLINE vd sub(vd a, vd b) { return a - b; }
  static NVFP4_ALWAYS_INLINE vd mul(vd a, vd b) { return a * b; }
  static NVFP4_ALWAYS_INLINE vd min(vd a, vd b) { return a < b ? a : b; }
  static NVFP4_ALWAYS_INLINE vd max(vd a, vd b) { return a > b ? a : b; }
  static NVFP4_ALWAYS_INLINE vd abs(vd a) { return std::fabs(a); }
  static NVFP4_ALWAYS_INLINE vd bit_and(vd a, vd b) {
    return std::bit_cast<vd>(std::bit_cast<std::uint64_t>(a) & std::bit_cast<std::uint64_t>(b));
  }
  static NVFP4_ALWAYS_INLINE vd select(vdm m, vd if_true, vd if_false) { return m ? if_true : if_false; }
  static NVFP4_ALWAYS_INLINE vdm less(vd a, vd b) { return a < b; }
  static NVFP4_ALWAYS_INLINE vdm less_equal(vd a, vd b) { return a <= b; }
  static NVFP4_ALWAYS_INLINE vdm equal(vd a, vd b) { return a == b; }
  /// The bf16 codes of `double_width` doubles that are bf16 values (8 significant bits), or of
  /// magnitude 2^128 and above (Inf of their sign).
  static NVFP4_ALWAYS_INLINE void store_bf16_of_exact(std::uint16_t* out, vd v) {
    const float f = std::fabs(v) < 0x1p128 ? static_cast<float>(v) : (v > 0 ? INFINITY : -INFINITY);
    *out = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(f) >> 16);
  }

 private:
  static constexpr std::int32_t signed_of(vi v) { return static_cast<std::int32_t>(v); }
  static constexpr vi narrow_word(vi v) { return signed_of(v) < 0 ? 0u : (v > 0xFFFFu ? 0xFFFFu : v); }
  static NVFP4_ALWAYS_INLINE void put_word(std::uint8_t* out, vi word) {
    for (int k = 0; k < 4; ++k) out[k] = static_cast<std::uint8_t>(word >> (8 * k));
  }
};

}  // namespace nvfp4::simd::scalar
