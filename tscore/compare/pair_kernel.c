/*
 * The compare kernel in C: every PairStats sum of two arrays in one pass over their memory, and the
 * four statistics of one array that a dump records (tscore_array_stats), in one pass too.
 *
 * hatch_build.py compiles this file into the wheel (tscore/compare/_pair_kernel.so) when a C
 * compiler is there; tscore/native_kernel.py loads it with ctypes, which lets go of the GIL
 * during the call, so threads share big pairs without worker processes. Nothing here uses
 * Python's C API.
 *
 * The arrays are read in blocks of BLOCK elements, each converted to float64 into a buffer that
 * stays in the first-level cache. One loop without branches then updates every sum (SIMD
 * reductions, the only reordering of floating-point work allowed: the file is compiled with
 * -ffp-contract=off and no fast-math). A block whose sums come out NaN or inf held a NaN or an
 * inf (or values too large to square) and is done again element by element, NaN and inf
 * compared by position. The conventions are those of tscore/compare/pair_stats.py, and the
 * tests run every metric through this kernel and numpy's.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Element types, in the order of c_kernel.DTYPE_CODES. */
enum {
    CODE_F64,
    CODE_F32,
    CODE_F16,
    CODE_BF16,
    CODE_I8,
    CODE_I16,
    CODE_I32,
    CODE_I64,
    CODE_U8,
    CODE_U16,
    CODE_U32,
    CODE_U64,
    CODE_BOOL,
    CODE_COUNT
};

/* The accumulator's slots, in the order of pair_stats.ACCUMULATOR_FIELDS; counts are held as doubles. */
enum {
    CLOSE,
    FINITE,
    SUM_ABS,
    MAX_ABS,
    MAX_REL,
    DOT_AB,
    DOT_AA,
    DOT_BB,
    ORIG_NAN,
    ORIG_INF,
    TARGET_NAN,
    TARGET_INF,
    SUM_SQ,
    REL_1E3,
    REL_5E3,
    ACCUMULATOR_SIZE
};

#define BLOCK 2048

/*
 * The wheel is built for the baseline of its platform, but most x86-64 machines of the last decade
 * have AVX2, on which the quick loop runs about three times as fast as on SSE2: with GCC 11 or
 * newer on glibc (whose loader picks the clone when the library loads) the exported function is
 * compiled twice, and everything below is inlined into each copy. TSCORE_NO_CLONES builds the
 * baseline alone (the build retries so when the clones do not compile; the tests check it).
 */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11 && defined(__x86_64__) && \
    defined(__GLIBC__) && !defined(TSCORE_NO_CLONES)
#define CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CLONES
#endif
#define INLINE static inline __attribute__((always_inline))

/* IEEE half precision to double, exactly (subnormals, infinities and NaN included). */
INLINE double half_to_double(uint16_t half) {
    uint64_t sign = (uint64_t)(half >> 15) << 63;
    uint32_t exponent = (half >> 10) & 0x1fu;
    uint64_t mantissa = half & 0x3ffu;
    uint64_t bits;
    double value;
    if (exponent == 0) {
        value = (double)mantissa * 0x1p-24;
        return sign ? -value : value;
    }
    if (exponent == 31)
        bits = sign | 0x7ff0000000000000ull | (mantissa << 42);
    else
        bits = sign | ((uint64_t)(exponent + 1008) << 52) | (mantissa << 42);
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* bfloat16 is the upper half of a float32. */
INLINE double bfloat16_to_double(uint16_t half) {
    uint32_t bits = (uint32_t)half << 16;
    float value;
    memcpy(&value, &bits, sizeof value);
    return (double)value;
}

#define CONVERT(type, expression)                          \
    do {                                                   \
        const type *in = (const type *)data + start;       \
        for (int i = 0; i < count; i++) out[i] = (expression); \
    } while (0)

/* Elements start:start+count of data as doubles: the data itself for float64, else out, filled. */
INLINE const double *load(const void *data, int code, int64_t start, int count, double *out) {
    switch (code) {
    case CODE_F64: return (const double *)data + start;
    case CODE_F32: CONVERT(float, (double)in[i]); break;
    case CODE_F16: CONVERT(uint16_t, half_to_double(in[i])); break;
    case CODE_BF16: CONVERT(uint16_t, bfloat16_to_double(in[i])); break;
    case CODE_I8: CONVERT(int8_t, (double)in[i]); break;
    case CODE_I16: CONVERT(int16_t, (double)in[i]); break;
    case CODE_I32: CONVERT(int32_t, (double)in[i]); break;
    case CODE_I64: CONVERT(int64_t, (double)in[i]); break;
    case CODE_U8: CONVERT(uint8_t, (double)in[i]); break;
    case CODE_U16: CONVERT(uint16_t, (double)in[i]); break;
    case CODE_U32: CONVERT(uint32_t, (double)in[i]); break;
    case CODE_U64: CONVERT(uint64_t, (double)in[i]); break;
    case CODE_BOOL: CONVERT(uint8_t, in[i] ? 1.0 : 0.0); break;
    }
    return out;
}

/* One block without branches; returns 0, adding nothing, when a sum is not finite. */
INLINE int quick_block(const double *x, const double *y, int count, double rtol, double atol, double *acc) {
    int64_t close = 0, rel_1e3 = 0, rel_5e3 = 0;
    double sum_abs = 0.0, max_abs = 0.0, max_rel = 0.0, dot_ab = 0.0, dot_aa = 0.0, dot_bb = 0.0, sum_sq = 0.0;
#pragma omp simd reduction(+ : close, rel_1e3, rel_5e3, sum_abs, dot_ab, dot_aa, dot_bb, sum_sq) \
    reduction(max : max_abs, max_rel)
    for (int i = 0; i < count; i++) {
        double xi = x[i], yi = y[i];
        double d = fabs(xi - yi), ay = fabs(yi);
        sum_abs += d;
        max_abs = d > max_abs ? d : max_abs;
        close += d <= atol + rtol * ay;
        dot_ab += xi * yi;
        dot_aa += xi * xi;
        dot_bb += yi * yi;
        sum_sq += d * d;
        double rel = d == 0.0 ? 0.0 : d / ay; /* equal values, zeros included, differ by 0; x/0 is inf */
        rel_1e3 += rel < 0.001;
        rel_5e3 += rel < 0.005;
        max_rel = rel > max_rel ? rel : max_rel;
    }
    if (!(isfinite(dot_aa) && isfinite(dot_bb) && isfinite(sum_abs))) return 0;
    acc[CLOSE] += (double)close;
    acc[FINITE] += count;
    acc[SUM_ABS] += sum_abs;
    acc[MAX_ABS] = fmax(acc[MAX_ABS], max_abs);
    acc[MAX_REL] = fmax(acc[MAX_REL], max_rel);
    acc[DOT_AB] += dot_ab;
    acc[DOT_AA] += dot_aa;
    acc[DOT_BB] += dot_bb;
    acc[SUM_SQ] += sum_sq;
    acc[REL_1E3] += (double)rel_1e3;
    acc[REL_5E3] += (double)rel_5e3;
    return 1;
}

/* One block element by element: NaN and inf counted and compared by position, left out of the sums. */
static void careful_block(const double *x, const double *y, int count, double rtol, double atol,
                          int equal_nan, double *acc) {
    for (int i = 0; i < count; i++) {
        double xi = x[i], yi = y[i];
        if (isfinite(xi) && isfinite(yi)) {
            double d = fabs(xi - yi), ay = fabs(yi);
            acc[FINITE] += 1.0;
            acc[SUM_ABS] += d;
            acc[MAX_ABS] = fmax(acc[MAX_ABS], d);
            acc[CLOSE] += d <= atol + rtol * ay;
            acc[DOT_AB] += xi * yi;
            acc[DOT_AA] += xi * xi;
            acc[DOT_BB] += yi * yi;
            acc[SUM_SQ] += d * d;
            double rel = d == 0.0 ? 0.0 : d / ay;
            acc[REL_1E3] += rel < 0.001;
            acc[REL_5E3] += rel < 0.005;
            acc[MAX_REL] = fmax(acc[MAX_REL], rel);
            continue;
        }
        if (isnan(xi))
            acc[ORIG_NAN] += 1.0;
        else if (!isfinite(xi))
            acc[ORIG_INF] += 1.0;
        if (isnan(yi))
            acc[TARGET_NAN] += 1.0;
        else if (!isfinite(yi))
            acc[TARGET_INF] += 1.0;
        if (xi == yi || (equal_nan && isnan(xi) && isnan(yi))) acc[CLOSE] += 1.0;
    }
}

/*
 * Add the comparison of a[0:count] (element type code_a) with b[0:count] (code_b) into acc
 * (ACCUMULATOR_SIZE doubles). Returns 0, or -1 for an element code this kernel does not know.
 */
CLONES int tscore_pair_stats(const void *a, int code_a, const void *b, int code_b, int64_t count, double rtol,
                      double atol, int equal_nan, double *acc) {
    double x_buffer[BLOCK], y_buffer[BLOCK];
    if (code_a < 0 || code_a >= CODE_COUNT || code_b < 0 || code_b >= CODE_COUNT) return -1;
    for (int64_t start = 0; start < count; start += BLOCK) {
        int size = (int)(count - start < BLOCK ? count - start : BLOCK);
        const double *x = load(a, code_a, start, size, x_buffer);
        const double *y = load(b, code_b, start, size, y_buffer);
        if (!quick_block(x, y, size, rtol, atol, acc)) careful_block(x, y, size, rtol, atol, equal_nan, acc);
    }
    return 0;
}

/*
 * The statistics of one array, as a dump records them (tscore/array_stats.py): acc[0] the largest and
 * acc[1] the smallest value, NaN left out; acc[2] the sum and acc[3] the sum of squares, in float64;
 * acc[4] the count of NaN. float32 is read as it is (the common case: eight lanes for the largest and
 * smallest), every other type a block of doubles at a time.
 */
INLINE void float_stats_block(const float *x, int count, double *acc) {
    float high = -INFINITY, low = INFINITY;
    double sum = 0.0, squares = 0.0;
    int nans = 0;
#pragma omp simd reduction(+ : sum, squares, nans) reduction(max : high) reduction(min : low)
    for (int i = 0; i < count; i++) {
        float v = x[i];
        high = v > high ? v : high; /* a NaN compares false: it never becomes the largest */
        low = v < low ? v : low;
        nans += v != v;
        double w = (double)v;
        sum += w;
        squares += w * w;
    }
    acc[0] = fmax(acc[0], (double)high);
    acc[1] = fmin(acc[1], (double)low);
    acc[2] += sum;
    acc[3] += squares;
    acc[4] += (double)nans;
}

INLINE void double_stats_block(const double *x, int count, double *acc) {
    double high = -INFINITY, low = INFINITY, sum = 0.0, squares = 0.0;
    int nans = 0;
#pragma omp simd reduction(+ : sum, squares, nans) reduction(max : high) reduction(min : low)
    for (int i = 0; i < count; i++) {
        double v = x[i];
        high = v > high ? v : high;
        low = v < low ? v : low;
        nans += v != v;
        sum += v;
        squares += v * v;
    }
    acc[0] = fmax(acc[0], high);
    acc[1] = fmin(acc[1], low);
    acc[2] += sum;
    acc[3] += squares;
    acc[4] += (double)nans;
}

/* Write the statistics of data[0:count] (element type code) into acc (5 doubles). Returns 0, or -1 for
 * an element code this kernel does not know. */
CLONES int tscore_array_stats(const void *data, int code, int64_t count, double *acc) {
    double buffer[BLOCK];
    if (code < 0 || code >= CODE_COUNT) return -1;
    acc[0] = -INFINITY;
    acc[1] = INFINITY;
    acc[2] = acc[3] = acc[4] = 0.0;
    for (int64_t start = 0; start < count; start += BLOCK) {
        int size = (int)(count - start < BLOCK ? count - start : BLOCK);
        if (code == CODE_F32)
            float_stats_block((const float *)data + start, size, acc);
        else
            double_stats_block(load(data, code, start, size, buffer), size, acc);
    }
    return 0;
}

/*
 * The SHA-256 of this file as the build read it (hatch_build.py passes it): native_kernel.py uses a
 * library only when it matches the pair_kernel.c beside it, so a library left by an older build or
 * another checkout is never used.
 */
#ifndef TSCORE_KERNEL_SOURCE
#define TSCORE_KERNEL_SOURCE ""
#endif
const char *tscore_pair_kernel_source(void) { return TSCORE_KERNEL_SOURCE; }
