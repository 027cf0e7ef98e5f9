//===- ImageResize.cpp - PIL-compatible bilinear resampling and cropping ----===//
//
// The arithmetic of PIL 9.4's Resample.c for the BILINEAR filter, so that the
// results are PIL's bit for bit:
//  - per axis, output pixel i is centred at (i + 0.5) * scale in the input,
//    scale = in / out; the triangle filter's support is 1 input pixel,
//    widened to `scale` when downscaling (filterscale = max(scale, 1));
//  - the taps [xmin, xmax) are the input pixels within the support (bounds
//    rounded as PIL rounds them), weighted triangle((x - center + 0.5) /
//    filterscale) and normalised to sum 1, all in double as PIL computes
//    them, then rounded to 22-bit fixed point;
//  - each pass sums sample * weight in int32 from 2^21 (one half) and keeps
//    bits 22..29, clamped to 0..255; the horizontal pass runs first, over
//    only the input rows the vertical pass reads; a pass whose size does not
//    change is skipped.
// The sums are integers, exact in any order, so the SSE2 loops below (the
// weights split into 11-bit halves for pmaddwd's 16-bit products) give PIL's
// bits too; tests/unit/ImageDecodeTest.cpp holds them to a plain
// transcription of PIL's loops, tests/data/check_images_vs_pil.py to PIL.
// This file is compiled with -ffp-contract=off: a fused multiply-add in the
// coefficient tables would round differently from PIL's build.
//
//===----------------------------------------------------------------------===//
#include "runtime/data/ImageResize.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

// x86-64: AVX2 copies of the SIMD loops, chosen at run time.
#if defined(__SSE2__) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define AMPC_RESIZE_AVX2 1
#define AMPC_RESIZE_AVX2_TARGET __attribute__((target("avx2")))
#else
#define AMPC_RESIZE_AVX2 0
#endif

namespace ampc::data {

namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

/// One axis's taps, PIL's coefficients rearranged for a branch-free inner
/// loop: every output reads the same number of inputs, `window` (the most
/// taps any output has), from `first[i]` on; the weights outside an output's
/// own taps are zero, and a window that would pass the end starts earlier.
struct AxisTaps {
  int window = 0;
  std::vector<int32_t> first;   // per output
  std::vector<int32_t> weights; // window per output, 22-bit fixed point
  /// The same weights for pmaddwd (16-bit products summed in pairs):
  /// w = high * 2^11 + low, taps 2j and 2j+1 packed as two int16 in one
  /// int32 (the second zero past an odd window), repeated for the 4 lanes
  /// of an SSE2 vector; (window + 1) / 2 such vectors per output, those of
  /// outputs 2g and 2g + 1 interleaved (tap pair j of both in one AVX2
  /// vector). The sums are then exactly PIL's.
  std::vector<int32_t> lowPairs, highPairs;
};

constexpr int kSplitBits = 11;
constexpr int kLanes = 4;
/// From one tap pair's vector to the next in lowPairs / highPairs.
constexpr int kPairStride = 2 * kLanes;

/// Output i's first tap pair vector in lowPairs or highPairs.
inline const int32_t *pairsOf(const std::vector<int32_t> &pairs, int window, int64_t i) {
  const int64_t count = (window + 1) / 2;
  return &pairs[static_cast<size_t>(((i / 2) * count) * kPairStride + (i % 2) * kLanes)];
}

int32_t packPair(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint16_t>(a) | (static_cast<uint32_t>(b) << 16));
}

inline double triangle(double x) {
  if (x < 0.0)
    x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

/// precompute_coeffs + normalize_coeffs_8bpc for the box [0, inSize).
AxisTaps computeTaps(int inSize, int outSize) {
  const float in0 = 0.0f, in1 = static_cast<float>(inSize);
  const double scale = static_cast<double>(in1 - in0) / outSize;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = 1.0 * filterscale; // the triangle's support is 1
  const int ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  std::vector<int32_t> bounds(static_cast<size_t>(outSize) * 2);
  std::vector<int32_t> fixed(static_cast<size_t>(outSize) * ksize, 0);
  std::vector<double> k(ksize);
  int window = 1;
  for (int xx = 0; xx < outSize; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0)
      xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > inSize)
      xmax = inSize;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      double w = triangle((x + xmin - center + 0.5) * ss);
      k[x] = w;
      ww += w;
    }
    int32_t *row = &fixed[static_cast<size_t>(xx) * ksize];
    for (int x = 0; x < xmax; ++x) {
      double w = ww != 0.0 ? k[x] / ww : k[x];
      row[x] = w < 0 ? static_cast<int32_t>(-0.5 + w * (1 << kPrecisionBits))
                     : static_cast<int32_t>(0.5 + w * (1 << kPrecisionBits));
    }
    bounds[2 * xx] = xmin;
    bounds[2 * xx + 1] = xmax;
    window = std::max(window, xmax);
  }
  AxisTaps taps;
  taps.window = window;
  taps.first.resize(static_cast<size_t>(outSize));
  taps.weights.assign(static_cast<size_t>(outSize) * window, 0);
  for (int xx = 0; xx < outSize; ++xx) {
    const int xmin = bounds[2 * xx], count = bounds[2 * xx + 1];
    const int first = std::min(xmin, inSize - window);
    taps.first[xx] = first;
    for (int x = 0; x < count; ++x)
      taps.weights[static_cast<size_t>(xx) * window + (xmin - first) + x] =
          fixed[static_cast<size_t>(xx) * ksize + x];
  }
  const int pairs = (window + 1) / 2;
  const size_t groups = (static_cast<size_t>(outSize) + 1) / 2;
  taps.lowPairs.assign(groups * pairs * kPairStride, 0);
  taps.highPairs.assign(groups * pairs * kPairStride, 0);
  for (int xx = 0; xx < outSize; ++xx) {
    const int32_t *w = &taps.weights[static_cast<size_t>(xx) * window];
    for (int j = 0; j < pairs; ++j) {
      int32_t a = w[2 * j], b = 2 * j + 1 < window ? w[2 * j + 1] : 0;
      // Arithmetic shift and mask: a == (a >> 11) * 2^11 + (a & 2047) for
      // negative weights too (none with this filter).
      const size_t at =
          ((static_cast<size_t>(xx) / 2) * pairs + j) * kPairStride + (xx % 2) * kLanes;
      std::fill_n(&taps.lowPairs[at], kLanes,
                  packPair(a & ((1 << kSplitBits) - 1), b & ((1 << kSplitBits) - 1)));
      std::fill_n(&taps.highPairs[at], kLanes, packPair(a >> kSplitBits, b >> kSplitBits));
    }
  }
  return taps;
}

inline uint8_t clip8(int32_t sum) {
  int32_t v = sum >> kPrecisionBits;
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

/// Row `r` of a horizontal pass, scalar: PIL's loop.
void horizontalRowScalar(const uint8_t *in, const AxisTaps &taps, uint8_t *out) {
  const int window = taps.window;
  const int64_t dstWidth = static_cast<int64_t>(taps.first.size());
  const int32_t *k = taps.weights.data();
  for (int64_t xx = 0; xx < dstWidth; ++xx, k += window, out += 3) {
    const uint8_t *p = in + static_cast<int64_t>(taps.first[xx]) * 3;
    int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
    for (int x = 0; x < window; ++x) {
      s0 += p[3 * x] * k[x];
      s1 += p[3 * x + 1] * k[x];
      s2 += p[3 * x + 2] * k[x];
    }
    out[0] = clip8(s0);
    out[1] = clip8(s1);
    out[2] = clip8(s2);
  }
}

/// Samples [begin, n) of one output row of a vertical pass (input rows `n`
/// samples apart), scalar.
void verticalRowScalar(const uint8_t *in, int64_t begin, int64_t n, const int32_t *k, int window,
                       uint8_t *out) {
  for (int64_t i = begin; i < n; ++i) {
    int32_t s = 1 << (kPrecisionBits - 1);
    for (int y = 0; y < window; ++y)
      s += in[y * n + i] * k[y];
    out[i] = clip8(s);
  }
}

#if defined(__SSE2__)
// With the split weights, every product is at most 255 * 2048 and the low
// sums at most window * 255 * 2047 < 2^31 for windows up to 4096; larger
// windows (downscaling by more than 2000x) take the scalar loops.
constexpr int kMaxSimdWindow = 4096;

/// (high << 11) + low + one half, >> 22, clamped to 0..255 and packed: the
/// low 4 lanes' bytes in the result's low 32 bits (packs/packus saturate,
/// which is the clamp).
inline __m128i finish(__m128i low, __m128i high) {
  __m128i sum = _mm_add_epi32(_mm_add_epi32(_mm_slli_epi32(high, kSplitBits), low),
                              _mm_set1_epi32(1 << (kPrecisionBits - 1)));
  return _mm_srai_epi32(sum, kPrecisionBits);
}

/// The 4 bytes at p in the low lane (one pixel and the next one's first byte).
inline __m128i load4(const uint8_t *p) { return _mm_loadu_si32(p); }

inline __m128i loadPair(const int32_t *pairs) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i *>(pairs));
}

/// One output pixel of a horizontal pass with SSE2, `p` at its first tap:
/// the 3 channels (and a 4th, ignored lane) in one vector, two taps per
/// pmaddwd; finished (shifted, not yet packed). Window: as
/// horizontalRowSse2's (the pairs and full pairs given then ignored). Reads
/// one byte past the last tap's pixel.
template <int Window>
inline __m128i horizontalPixel(const uint8_t *p, const int32_t *low, const int32_t *high, int pairs,
                               int fullPairs) {
  if (Window) {
    pairs = (Window + 1) / 2;
    fullPairs = Window / 2;
  }
  const __m128i zero = _mm_setzero_si128();
  __m128i lowSum = zero, highSum = zero;
#pragma GCC unroll 8
  for (int j = 0; j < pairs; ++j, p += 6, low += kPairStride, high += kPairStride) {
    __m128i a = load4(p);
    __m128i b = j < fullPairs ? load4(p + 3) : zero;
    // r_a r_b g_a g_b b_a b_b x x as int16.
    __m128i samples = _mm_unpacklo_epi8(_mm_unpacklo_epi8(a, b), zero);
    lowSum = _mm_add_epi32(lowSum, _mm_madd_epi16(samples, loadPair(low)));
    highSum = _mm_add_epi32(highSum, _mm_madd_epi16(samples, loadPair(high)));
  }
  return finish(lowSum, highSum);
}

inline void storePixel(__m128i v, uint8_t *out) {
  v = _mm_packus_epi16(_mm_packs_epi32(v, v), _mm_setzero_si128());
  uint32_t rgbx = static_cast<uint32_t>(_mm_cvtsi128_si32(v));
  std::memcpy(out, &rgbx, 3);
}

/// A horizontal row with SSE2. Window: the taps' window when a compile-time
/// constant (the loop unrolled), else 0. Reads one byte past
/// the last pixel of the row: not for the buffer's last row.
template <int Window>
void horizontalRowSse2(const uint8_t *in, const AxisTaps &taps, uint8_t *out) {
  const int pairs = (taps.window + 1) / 2;
  const int fullPairs = taps.window / 2; // the rest: one tap, when odd
  const int64_t dstWidth = static_cast<int64_t>(taps.first.size());
  const int32_t *first = taps.first.data();
  for (int64_t xx = 0; xx < dstWidth; ++xx, out += 3)
    storePixel(horizontalPixel<Window>(in + static_cast<int64_t>(first[xx]) * 3,
                                       pairsOf(taps.lowPairs, taps.window, xx),
                                       pairsOf(taps.highPairs, taps.window, xx), pairs, fullPairs),
               out);
}

#if AMPC_RESIZE_AVX2

bool useAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

/// finish() for 8 lanes.
AMPC_RESIZE_AVX2_TARGET inline __m256i finish8(__m256i low, __m256i high) {
  __m256i sum = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(high, kSplitBits), low),
                                 _mm256_set1_epi32(1 << (kPrecisionBits - 1)));
  return _mm256_srai_epi32(sum, kPrecisionBits);
}

/// horizontalRowSse2 two output pixels at a time, one per 128-bit half.
template <int Window>
AMPC_RESIZE_AVX2_TARGET void horizontalRowAvx2(const uint8_t *in, const AxisTaps &taps,
                                               uint8_t *out) {
  const int window = Window ? Window : taps.window;
  const int pairs = (window + 1) / 2, fullPairs = window / 2;
  const int64_t dstWidth = static_cast<int64_t>(taps.first.size());
  const int32_t *low = taps.lowPairs.data(), *high = taps.highPairs.data();
  const int32_t *first = taps.first.data();
  const int step = pairs * kPairStride; // one pair of outputs
  const __m128i zero = _mm_setzero_si128();
  int64_t xx = 0;
  for (; xx + 2 <= dstWidth; xx += 2, out += 6, low += step, high += step) {
    const uint8_t *p0 = in + static_cast<int64_t>(first[xx]) * 3;
    const uint8_t *p1 = in + static_cast<int64_t>(first[xx + 1]) * 3;
    __m256i lowSum = _mm256_setzero_si256(), highSum = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int j = 0; j < pairs; ++j) {
      __m128i a0 = load4(p0 + 6 * j);
      __m128i a1 = load4(p1 + 6 * j);
      __m128i b0 = zero, b1 = zero;
      if (j < fullPairs) {
        b0 = load4(p0 + 6 * j + 3);
        b1 = load4(p1 + 6 * j + 3);
      }
      __m256i samples = _mm256_cvtepu8_epi16(
          _mm_unpacklo_epi64(_mm_unpacklo_epi8(a0, b0), _mm_unpacklo_epi8(a1, b1)));
      __m256i kLow = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(low + j * kPairStride));
      __m256i kHigh = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(high + j * kPairStride));
      lowSum = _mm256_add_epi32(lowSum, _mm256_madd_epi16(samples, kLow));
      highSum = _mm256_add_epi32(highSum, _mm256_madd_epi16(samples, kHigh));
    }
    __m256i v = finish8(lowSum, highSum);
    v = _mm256_packus_epi16(_mm256_packs_epi32(v, v), _mm256_setzero_si256());
    uint32_t rgbx0 = static_cast<uint32_t>(_mm_cvtsi128_si32(_mm256_castsi256_si128(v)));
    uint32_t rgbx1 = static_cast<uint32_t>(_mm_cvtsi128_si32(_mm256_extracti128_si256(v, 1)));
    std::memcpy(out, &rgbx0, 3);
    std::memcpy(out + 3, &rgbx1, 3);
  }
  if (xx < dstWidth)
    storePixel(horizontalPixel<Window>(in + static_cast<int64_t>(first[xx]) * 3, low, high, pairs,
                                       fullPairs),
               out); // low, high: the last output's (the first of its group)
}
#endif

/// The row loops by window: [w] unrolled for window w, [0] for any.
using HorizontalRow = void (*)(const uint8_t *, const AxisTaps &, uint8_t *);
constexpr int kUnrolledWindows = 10;

template <size_t... W> constexpr auto sse2Rows(std::index_sequence<W...>) {
  return std::array<HorizontalRow, sizeof...(W)>{&horizontalRowSse2<static_cast<int>(W)>...};
}
constexpr auto kSse2Rows = sse2Rows(std::make_index_sequence<kUnrolledWindows + 1>());
#if AMPC_RESIZE_AVX2
template <size_t... W> constexpr auto avx2Rows(std::index_sequence<W...>) {
  return std::array<HorizontalRow, sizeof...(W)>{&horizontalRowAvx2<static_cast<int>(W)>...};
}
constexpr auto kAvx2Rows = avx2Rows(std::make_index_sequence<kUnrolledWindows + 1>());
#endif

HorizontalRow horizontalRowFor(int window, bool avx2) {
  const size_t index = window <= kUnrolledWindows ? static_cast<size_t>(window) : 0;
#if AMPC_RESIZE_AVX2
  if (avx2)
    return kAvx2Rows[index];
#endif
  return kSse2Rows[index];
}

/// The first `count` samples of one output row of a vertical pass with
/// SSE2 (input rows `n` samples apart): 16 samples at a time, two input rows
/// per pmaddwd; the tail scalar.
void verticalRowSse2(const uint8_t *in, int64_t n, const AxisTaps &taps, int64_t yy, uint8_t *out,
                     int64_t count) {
  const int window = taps.window, pairs = (window + 1) / 2;
  const int32_t *lowPairs = pairsOf(taps.lowPairs, window, yy);
  const int32_t *highPairs = pairsOf(taps.highPairs, window, yy);
  const __m128i zero = _mm_setzero_si128();
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    __m128i low[4] = {zero, zero, zero, zero}, high[4] = {zero, zero, zero, zero};
    for (int j = 0; j < pairs; ++j) {
      const uint8_t *rowA = in + (2 * j) * n + i;
      __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(rowA));
      __m128i b =
          2 * j + 1 < window ? _mm_loadu_si128(reinterpret_cast<const __m128i *>(rowA + n)) : zero;
      __m128i lo = _mm_unpacklo_epi8(a, b), hi = _mm_unpackhi_epi8(a, b);
      __m128i samples[4] = {_mm_unpacklo_epi8(lo, zero), _mm_unpackhi_epi8(lo, zero),
                            _mm_unpacklo_epi8(hi, zero), _mm_unpackhi_epi8(hi, zero)};
      __m128i kLow = loadPair(lowPairs + j * kPairStride);
      __m128i kHigh = loadPair(highPairs + j * kPairStride);
      for (int q = 0; q < 4; ++q) {
        low[q] = _mm_add_epi32(low[q], _mm_madd_epi16(samples[q], kLow));
        high[q] = _mm_add_epi32(high[q], _mm_madd_epi16(samples[q], kHigh));
      }
    }
    __m128i v01 = _mm_packs_epi32(finish(low[0], high[0]), finish(low[1], high[1]));
    __m128i v23 = _mm_packs_epi32(finish(low[2], high[2]), finish(low[3], high[3]));
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out + i), _mm_packus_epi16(v01, v23));
  }
  for (; i < count; ++i) {
    int32_t sum = 1 << (kPrecisionBits - 1);
    for (int y = 0; y < window; ++y)
      sum += in[y * n + i] * taps.weights[yy * window + y];
    out[i] = clip8(sum);
  }
}
#endif

#if AMPC_RESIZE_AVX2
/// verticalRowSse2 with 32 samples at a time: the unpacks and packs work
/// within 128-bit halves, so the samples come back in order.
AMPC_RESIZE_AVX2_TARGET void verticalRowAvx2(const uint8_t *in, int64_t n, const AxisTaps &taps,
                                             int64_t yy, uint8_t *out) {
  const int window = taps.window, pairs = (window + 1) / 2;
  const int32_t *lowPairs = pairsOf(taps.lowPairs, window, yy);
  const int32_t *highPairs = pairsOf(taps.highPairs, window, yy);
  const __m256i zero = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i low[4] = {zero, zero, zero, zero}, high[4] = {zero, zero, zero, zero};
    for (int j = 0; j < pairs; ++j) {
      const uint8_t *rowA = in + (2 * j) * n + i;
      __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(rowA));
      __m256i b = 2 * j + 1 < window
                      ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(rowA + n))
                      : zero;
      __m256i lo = _mm256_unpacklo_epi8(a, b), hi = _mm256_unpackhi_epi8(a, b);
      __m256i samples[4] = {_mm256_unpacklo_epi8(lo, zero), _mm256_unpackhi_epi8(lo, zero),
                            _mm256_unpacklo_epi8(hi, zero), _mm256_unpackhi_epi8(hi, zero)};
      __m256i kLow = _mm256_broadcastsi128_si256(loadPair(lowPairs + j * kPairStride));
      __m256i kHigh = _mm256_broadcastsi128_si256(loadPair(highPairs + j * kPairStride));
      for (int q = 0; q < 4; ++q) {
        low[q] = _mm256_add_epi32(low[q], _mm256_madd_epi16(samples[q], kLow));
        high[q] = _mm256_add_epi32(high[q], _mm256_madd_epi16(samples[q], kHigh));
      }
    }
    __m256i v01 = _mm256_packs_epi32(finish8(low[0], high[0]), finish8(low[1], high[1]));
    __m256i v23 = _mm256_packs_epi32(finish8(low[2], high[2]), finish8(low[3], high[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + i), _mm256_packus_epi16(v01, v23));
  }
  if (i < n)
    verticalRowSse2(in + i, n, taps, yy, out + i, n - i);
}
#endif

/// Which loops a resize runs: SIMD at all (SSE2), and AVX2.
struct LoopChoice {
  bool simd = false, avx2 = false;
};

LoopChoice chooseLoops(ResizeLoops loops) {
  LoopChoice choice;
#if defined(__SSE2__)
  choice.simd = loops != ResizeLoops::Scalar;
#if AMPC_RESIZE_AVX2
  choice.avx2 = loops == ResizeLoops::Fastest && useAvx2();
#endif
#endif
  return choice;
}

/// Rows [rowFirst, rowFirst + rows) of `src` (srcWidth x srcHeight)
/// resampled along x into `dst` (taps.first.size() wide, `rows` high).
void horizontal(const uint8_t *src, int64_t srcWidth, int64_t srcHeight, int64_t rowFirst,
                int64_t rows, const AxisTaps &taps, LoopChoice loops, uint8_t *dst) {
  const int64_t dstWidth = static_cast<int64_t>(taps.first.size());
#if defined(__SSE2__)
  const HorizontalRow simdRow = horizontalRowFor(taps.window, loops.avx2);
#endif
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t *in = src + (rowFirst + r) * srcWidth * 3;
    uint8_t *out = dst + r * dstWidth * 3;
#if defined(__SSE2__)
    if (loops.simd && rowFirst + r + 1 < srcHeight && taps.window <= kMaxSimdWindow) {
      simdRow(in, taps, out);
      continue;
    }
#endif
    horizontalRowScalar(in, taps, out);
  }
}

/// `src` (width wide; the taps' rows counted from its first row) resampled
/// along y into `dst` (taps.first.size() high).
void vertical(const uint8_t *src, int64_t width, const AxisTaps &taps, LoopChoice loops,
              uint8_t *dst) {
  const int64_t dstHeight = static_cast<int64_t>(taps.first.size());
  const int64_t n = width * 3;
  for (int64_t yy = 0; yy < dstHeight; ++yy) {
    const uint8_t *in = src + taps.first[yy] * n;
#if defined(__SSE2__)
    if (loops.simd && taps.window <= kMaxSimdWindow) {
#if AMPC_RESIZE_AVX2
      if (loops.avx2) {
        verticalRowAvx2(in, n, taps, yy, dst + yy * n);
        continue;
      }
#endif
      verticalRowSse2(in, n, taps, yy, dst + yy * n, n);
      continue;
    }
#endif
    verticalRowScalar(in, 0, n, &taps.weights[yy * taps.window], taps.window, dst + yy * n);
  }
}

} // namespace

RgbImage resizeBilinear(const RgbImage &src, int64_t outWidth, int64_t outHeight) {
  return resizeBilinear(src, outWidth, outHeight, ResizeLoops::Fastest);
}

RgbImage resizeBilinear(const RgbImage &src, int64_t outWidth, int64_t outHeight,
                        ResizeLoops which) {
  assert(src.width > 0 && src.height > 0 && "resizing an empty image");
  assert(outWidth > 0 && outHeight > 0 && "resizing to an empty image");
  assert(static_cast<int64_t>(src.pixels.size()) == src.width * src.height * 3 &&
         "image pixels do not match its size");
  assert(src.width <= INT32_MAX && src.height <= INT32_MAX && outWidth <= INT32_MAX &&
         outHeight <= INT32_MAX && "image too large to resize");
  const LoopChoice loops = chooseLoops(which);
  const bool needHorizontal = outWidth != src.width;
  const bool needVertical = outHeight != src.height;
  if (!needHorizontal && !needVertical)
    return src;

  RgbImage out;
  out.width = outWidth;
  out.height = outHeight;
  out.pixels.resize(static_cast<size_t>(outWidth * outHeight * 3));
  if (!needVertical) {
    AxisTaps rowTaps = computeTaps(static_cast<int>(src.width), static_cast<int>(outWidth));
    horizontal(src.pixels.data(), src.width, src.height, 0, src.height, rowTaps, loops,
               out.pixels.data());
    return out;
  }
  AxisTaps columnTaps = computeTaps(static_cast<int>(src.height), static_cast<int>(outHeight));
  if (!needHorizontal) {
    vertical(src.pixels.data(), src.width, columnTaps, loops, out.pixels.data());
    return out;
  }
  AxisTaps rowTaps = computeTaps(static_cast<int>(src.width), static_cast<int>(outWidth));
  // Only the rows the vertical pass reads go through the horizontal pass.
  const int64_t rowFirst = columnTaps.first.front();
  const int64_t rowLast = columnTaps.first.back() + columnTaps.window;
  for (int32_t &first : columnTaps.first)
    first -= static_cast<int32_t>(rowFirst);
  // Every byte is written by the horizontal pass: no zeroing.
  std::unique_ptr<uint8_t[]> temp(
      new uint8_t[static_cast<size_t>(outWidth * (rowLast - rowFirst) * 3)]);
  horizontal(src.pixels.data(), src.width, src.height, rowFirst, rowLast - rowFirst, rowTaps, loops,
             temp.get());
  vertical(temp.get(), outWidth, columnTaps, loops, out.pixels.data());
  return out;
}

RgbImage crop(const RgbImage &src, int64_t left, int64_t top, int64_t width, int64_t height) {
  assert(width > 0 && height > 0 && "empty crop");
  assert(left >= 0 && top >= 0 && left + width <= src.width && top + height <= src.height &&
         "crop outside the image");
  RgbImage out;
  out.width = width;
  out.height = height;
  out.pixels.resize(static_cast<size_t>(width * height * 3));
  for (int64_t y = 0; y < height; ++y)
    std::memcpy(out.pixels.data() + y * width * 3,
                src.pixels.data() + ((top + y) * src.width + left) * 3,
                static_cast<size_t>(width) * 3);
  return out;
}

} // namespace ampc::data
