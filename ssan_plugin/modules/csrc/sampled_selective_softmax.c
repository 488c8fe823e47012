/* Fused CPU kernels of SSAN's training attention (ssan_plugin/modules/native.py loads them).
 *
 * The maths are _SampledSelectiveSoftmax's in selective_attention.py (docs/design.md 1.4), row
 * by row: a row is one (sentence, head, query), its S keys contiguous in float32, so every pass
 * over a row stays in L1 and the whole sample + selective softmax is one sweep over memory
 * instead of about fifteen. Plain C, no torch headers: the compiler vectorises the inner loops
 * (-O3 -march=native); exp and log are polynomial (Cephes) so that they vectorise too.
 * Threads: ssan_sampled_forward / _backward split the rows evenly between OpenMP threads;
 * results do not depend on the split (the noise of element i is a hash of (key, i)).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* exp(x), Cephes expf: 2^n p(r), about 1 ulp for x in [-87.3, 88]; 0 below (torch gives
 * denormals down to -103.9; -inf gives 0 in both), exp(88) above (no inf). */
static inline float exp_poly(float x_in) {
    float x = x_in < -87.33654f ? -87.33654f : x_in;
    x = x > 88.0f ? 88.0f : x;
    float n = floorf(x * 1.44269504088896341f + 0.5f);
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23; /* n in [-126, 128) here */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x_in < -87.33654f ? 0.0f : p * scale;
}

/* log(x) for a positive normal x, Cephes logf, about 1 ulp. */
static inline float log_poly(float x) {
    int32_t bits;
    memcpy(&bits, &x, sizeof bits);
    float e = (float)(((bits >> 23) & 0xff) - 126);
    bits = (bits & 0x007fffff) | 0x3f000000; /* mantissa in [0.5, 1) */
    float m;
    memcpy(&m, &bits, sizeof m);
    int small = m < 0.707106781186547524f;
    e = small ? e - 1.0f : e;
    m = small ? m + m - 1.0f : m - 1.0f;
    float z = m * m;
    float y = 7.0376836292e-2f;
    y = y * m - 1.1514610310e-1f;
    y = y * m + 1.1676998740e-1f;
    y = y * m - 1.2420140846e-1f;
    y = y * m + 1.4249322787e-1f;
    y = y * m - 1.6668057665e-1f;
    y = y * m + 2.0000714765e-1f;
    y = y * m - 2.4999993993e-1f;
    y = y * m + 3.3333331174e-1f;
    y = y * m * z;
    y += e * -2.12194440e-4f;
    y -= 0.5f * z;
    return m + y + e * 0.693359375f;
}

/* H(sigmoid(x)) = log1p(e) + a e / (1 + e), a = |x|, e = exp(-a): two positive terms (no
 * cancellation where the policy is sure); log1p(e) = log(u) e / (u - 1), u = 1 + e, keeps its
 * relative accuracy where 1 + e rounds (Goldberg). */
static inline float binary_entropy(float x) {
    float a = fabsf(x);
    float e = exp_poly(-a);
    float u = 1.0f + e;
    float log1p_e = u == 1.0f ? e : log_poly(u) * (e / (u - 1.0f));
    return log1p_e + a * e / u;
}

/* Logistic(0, 1) noise of element i: logit(u), u = (k + 1/2) / 2^24 with k the top 24 bits of
 * a two-round integer hash (lowbias32) of i under the 64-bit key; u is never 0 or 1. */
static inline float logistic_noise(uint64_t key, uint64_t i) {
    uint32_t x = (uint32_t)i ^ (uint32_t)key;
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    x += (uint32_t)(key >> 32) ^ (uint32_t)(i >> 32) * 0x9e3779b9u;
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    float u = ((float)(int32_t)(x >> 8) + 0.5f) * 5.9604644775390625e-8f; /* 2^-24 */
    return log_poly(u) - log_poly(1.0f - u);
}

/* Forward, rows [row_begin, row_end) of (rows, S) float32 tensors.
 *   logits E, policy E_p: inputs. noise: Logistic noise to use, or NULL (drawn from key).
 *   pad: (rows / rows_per_pad_row, S) bytes, 1 at pad keys, or NULL.
 * Outputs: out = A u / Z, weight = u / Z s (1 - s) / tau, chosen = A (0/1 bytes, pads 0), and
 * slope = s (1 - s) / tau when not NULL; s = sigmoid((E_p + L) / tau), u = exp(min(E - m, cap)),
 * m the row maximum of E over chosen keys (over finite keys, or 0, for a row with none),
 * Z = sum_j A_j u_j (1 for an empty row); pads have u = 0. entropy (rows floats, or NULL):
 * each row's sum over non-pad keys of H(sigmoid(E_p)), the policy's entropy (no noise).
 * Each row is copied into aligned scratch rows of P = S rounded up to LANES (the extra lanes
 * neutral: E = -inf, kept 0), so that every loop runs whole vectors: rows of translation length
 * (S about 30) would otherwise spend most of their time in scalar prologues and epilogues.
 * Returns 0, or 1 if the scratch rows could not be allocated (nothing written then). */
#define LANES 16
int ssan_sampled_forward_rows(const float *restrict logits, const float *restrict policy,
                               const float *restrict noise, const uint8_t *restrict pad,
                               int64_t rows_per_pad_row, int64_t S, int64_t row_begin,
                               int64_t row_end, uint64_t key, float tau, float cap,
                               float *restrict out, float *restrict weight,
                               uint8_t *restrict chosen, float *restrict slope,
                               float *restrict entropy) {
    const float inv_tau = 1.0f / tau;
    const int64_t P = (S + LANES - 1) / LANES * LANES;
    float *scratch = aligned_alloc(64, (size_t)P * 7 * sizeof(float));
    if (!scratch) return 1;
    float *restrict E = scratch, *restrict EP = E + P, *restrict L = EP + P, *restrict KEEP = L + P;
    float *restrict Z = KEEP + P, *restrict U = Z + P, *restrict C = U + P;
    for (int64_t j = S; j < P; ++j) { E[j] = -INFINITY; EP[j] = 0.0f; L[j] = 0.0f; }
    int64_t pad_row = -1;
    for (int64_t r = row_begin; r < row_end; ++r) {
        const int64_t base = r * S;
        if (pad_row != r / rows_per_pad_row) {
            pad_row = r / rows_per_pad_row;
            const uint8_t *pr = pad ? pad + pad_row * S : NULL;
            for (int64_t j = 0; j < P; ++j) KEEP[j] = j < S && !(pr && pr[j]) ? 1.0f : 0.0f;
        }
        memcpy(E, logits + base, (size_t)S * sizeof(float));
        memcpy(EP, policy + base, (size_t)S * sizeof(float));
        if (noise) {
            memcpy(L, noise + base, (size_t)S * sizeof(float));
        } else {
#pragma omp simd aligned(L : 64)
            for (int64_t j = 0; j < P; ++j) L[j] = logistic_noise(key, (uint64_t)(base + j));
        }
        /* z = E_p + L, A = 1[z > 0] at kept keys, the row maximum of E over A */
        float m = -INFINITY;
#pragma omp simd aligned(E, EP, L, KEEP, Z, C : 64) reduction(max : m)
        for (int64_t j = 0; j < P; ++j) {
            float z = EP[j] + L[j];
            float a = z > 0.0f ? KEEP[j] : 0.0f;
            Z[j] = z;
            C[j] = a;
            m = fmaxf(m, a != 0.0f ? E[j] : -INFINITY);
        }
        if (m == -INFINITY) { /* no key chosen (or only -inf ones): the maximum over finite keys */
            for (int64_t j = 0; j < S; ++j) m = isfinite(E[j]) ? fmaxf(m, E[j]) : m;
            if (m == -INFINITY) m = 0.0f;
        }
        /* u = exp(min(E - m, cap)) at kept keys, Z = sum A u */
        float z_sum = 0.0f;
#pragma omp simd aligned(E, KEEP, U, C : 64) reduction(+ : z_sum)
        for (int64_t j = 0; j < P; ++j) {
            float d = E[j] - m;
            float u = KEEP[j] != 0.0f ? exp_poly(d > cap ? cap : d) : 0.0f;
            U[j] = u;
            z_sum += C[j] != 0.0f ? u : 0.0f;
        }
        if (entropy) { /* before EP is overwritten */
            float h_sum = 0.0f;
#pragma omp simd aligned(EP, KEEP : 64) reduction(+ : h_sum)
            for (int64_t j = 0; j < P; ++j) h_sum += KEEP[j] != 0.0f ? binary_entropy(EP[j]) : 0.0f;
            entropy[r] = h_sum;
        }
        const float inv_z = z_sum == 0.0f ? 1.0f : 1.0f / z_sum;
        const float w_scale = inv_z * inv_tau;
        /* the sigmoid's slope; out and weight (written over E and EP, no longer needed) */
#pragma omp simd aligned(E, EP, Z, U, C, L : 64)
        for (int64_t j = 0; j < P; ++j) {
            float s = 1.0f / (1.0f + exp_poly(-Z[j] * inv_tau));
            float sl = s - s * s;
            float u = U[j];
            E[j] = C[j] != 0.0f ? u * inv_z : 0.0f;
            EP[j] = u * sl * w_scale;
            L[j] = sl * inv_tau;
        }
        memcpy(out + base, E, (size_t)S * sizeof(float));
        memcpy(weight + base, EP, (size_t)S * sizeof(float));
        if (slope) memcpy(slope + base, L, (size_t)S * sizeof(float));
        uint8_t *restrict c = chosen + base;
        for (int64_t j = 0; j < S; ++j) c[j] = C[j] != 0.0f;
        for (int64_t j = S; j < P; ++j) { E[j] = -INFINITY; EP[j] = 0.0f; L[j] = 0.0f; }
    }
    free(scratch);
    return 0;
}

/* Backward, rows [row_begin, row_end): with c = g - sum_j out_j g_j per row,
 *   grad_logits = out c (if not NULL), grad_policy = c weight + grad_select slope (grad_select
 *   and slope may be NULL; grad_policy may be NULL). g may be NULL (no gradient reached the
 *   attention): then only grad_select slope. */
void ssan_sampled_backward_rows(const float *restrict out, const float *restrict weight,
                           const float *restrict slope, const float *restrict grad_out,
                           const float *restrict grad_select, int64_t S, int64_t row_begin,
                           int64_t row_end, float *restrict grad_logits,
                           float *restrict grad_policy) {
    for (int64_t r = row_begin; r < row_end; ++r) {
        const int64_t base = r * S;
        const float *o = out + base, *w = weight + base;
        if (grad_out) {
            const float *g = grad_out + base;
            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int64_t j = 0; j < S; ++j) dot += o[j] * g[j];
            if (grad_logits) {
                float *gl = grad_logits + base;
#pragma omp simd
                for (int64_t j = 0; j < S; ++j) gl[j] = o[j] * (g[j] - dot);
            }
            if (grad_policy) {
                float *gp = grad_policy + base;
#pragma omp simd
                for (int64_t j = 0; j < S; ++j) gp[j] = (g[j] - dot) * w[j];
            }
        } else if (grad_policy) {
            memset(grad_policy + base, 0, (size_t)S * sizeof(float));
        }
        if (grad_policy && grad_select && slope) {
            float *gp = grad_policy + base;
            const float *ga = grad_select + base, *sl = slope + base;
#pragma omp simd
            for (int64_t j = 0; j < S; ++j) gp[j] += ga[j] * sl[j];
        }
    }
}

/* The two kernels over all rows, split evenly between n_threads OpenMP threads: torch's own
 * libgomp (loaded by torch as libgomp.so.1, which this library then shares), so its threads
 * are reused rather than competing with torch's spinning ones for the cores. */
int ssan_sampled_forward(const float *logits, const float *policy, const float *noise,
                          const uint8_t *pad, int64_t rows_per_pad_row, int64_t S, int64_t rows,
                          int n_threads, uint64_t key, float tau, float cap, float *out,
                          float *weight, uint8_t *chosen, float *slope, float *entropy) {
    int failed = 0;
#pragma omp parallel num_threads(n_threads) if (n_threads > 1) reduction(| : failed)
    {
#ifdef _OPENMP
        int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
#else
        int64_t t = 0, n = 1;
#endif
        failed |= ssan_sampled_forward_rows(logits, policy, noise, pad, rows_per_pad_row, S,
                                            rows * t / n, rows * (t + 1) / n, key, tau, cap, out,
                                            weight, chosen, slope, entropy);
    }
    return failed;
}

void ssan_sampled_backward(const float *out, const float *weight, const float *slope,
                           const float *grad_out, const float *grad_select, int64_t S,
                           int64_t rows, int n_threads, float *grad_logits, float *grad_policy) {
#pragma omp parallel num_threads(n_threads) if (n_threads > 1)
    {
#ifdef _OPENMP
        int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
#else
        int64_t t = 0, n = 1;
#endif
        ssan_sampled_backward_rows(out, weight, slope, grad_out, grad_select, S, rows * t / n,
                                   rows * (t + 1) / n, grad_logits, grad_policy);
    }
}
