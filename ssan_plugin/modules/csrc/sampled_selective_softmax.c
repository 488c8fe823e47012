/* Fused CPU kernels of SSAN's training attention (ssan_plugin/modules/native.py loads them).
 *
 * The maths are _SampledSelectiveSoftmax's in selective_weights.py (docs/design.md 1.4), row
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
#include "thread_rows.h"

/* Every pass over a row runs over blocks of LANES floats, each block an inner loop of exactly
 * LANES iterations (one 64-byte vector with AVX-512, two with AVX2), reductions kept per lane.
 * A plain `omp simd` loop over the row's P keys is vectorised too, but behind run-time checks
 * (trip count, aliasing) that sent rows of translation length to its scalar version: a profile
 * showed scalar code and a call to fmaxf per element taking most of the forward's time. */
#define LANES 16
#define ALIGN 64

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

/* H(sigmoid(x)) = log1p(e) + a e / (1 + e), a = |x|, e = exp(-a) given: two positive terms (no
 * cancellation where the policy is sure); log1p(e) = log(v) - ((v - 1) - e) / v, v = 1 + e,
 * corrects the rounding of v (exact to float32 where 1 + e rounds to 1). */
static inline float binary_entropy(float a, float e) {
    float v = 1.0f + e;
    float inv_v = 1.0f / v;
    return log_poly(v) - ((v - 1.0f) - e) * inv_v + a * e * inv_v;
}

/* The uniform draw of element i: u = (k + 1/2) / 2^23 with k the top 23 bits of a two-round
 * integer hash (lowbias32) of i under the 64-bit key. u and 1 - u are exact in float32 (24
 * significant bits), so u is never 0 or 1 and logit(u) lies within +-16.6. */
static inline float uniform_draw(uint64_t key, uint64_t i) {
    uint32_t x = (uint32_t)i ^ (uint32_t)key;
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    x += (uint32_t)(key >> 32) ^ (uint32_t)(i >> 32) * 0x9e3779b9u;
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    return ((float)(int32_t)(x >> 9) + 0.5f) * 1.1920928955078125e-7f; /* 2^-23 */
}

/* One row's scratch: the inputs padded to P = S rounded up to LANES (E = -inf, E_p = 0 and
 * KEEP = 0 in the extra lanes, written once), the intermediates, and the outputs when they
 * cannot be written in place. */
typedef struct {
    float *E, *EP, *L, *KEEP, *A, *Q, *U, *O, *W, *SL;
    uint8_t *C;
} Scratch;

/* Pass 1 over a row of P lanes: the sample, its exp(-z / tau) and the row maximum of E over the
 * chosen keys; with want_h the sum of the policy's entropy over kept keys into *h_sum.
 *   drawn_half: the noise is drawn here and tau = 1/2; then exp(-z) = exp(-E_p) (1 - u) / u
 *     with no log (L = logit(u)), exp(-|E_p|) shared with the entropy, q = exp(-z)^2, and
 *     A = 1[exp(-z) < 1]. Otherwise z = E_p + L with L given (tests) or logit(u), A = 1[z > 0],
 *     q = exp(-z / tau), the argument capped at 80 (q finite).
 * Writes A (0/1 at kept keys), Q = q. */
static inline __attribute__((always_inline)) float pass_sample(const float *restrict E, const float *restrict EP,
                                const float *restrict L, const float *restrict KEEP,
                                float *restrict A, float *restrict Q, int64_t P, uint64_t key,
                                uint64_t base, float inv_tau, int drawn_half, int given,
                                int want_h, float *h_sum) {
    float mv[LANES] __attribute__((aligned(ALIGN))), hv[LANES] __attribute__((aligned(ALIGN))); /* per-lane running maximum and entropy sum */
    for (int l = 0; l < LANES; ++l) { mv[l] = -INFINITY; hv[l] = 0.0f; }
    for (int64_t b = 0; b < P; b += LANES) {
#pragma omp simd aligned(mv, hv : ALIGN)
        for (int l = 0; l < LANES; ++l) {
            const int64_t j = b + l;
            const float ep = EP[j], abs_ep = fabsf(ep);
            float e_abs = 0.0f, a, q;
            if (drawn_half || want_h) e_abs = exp_poly(-abs_ep);
            if (drawn_half) {
                const float u = uniform_draw(key, base + (uint64_t)j), v = 1.0f - u;
                const int pos = ep >= 0.0f; /* exp(-E_p) = e_abs or 1 / e_abs */
                float r = (pos ? e_abs * v : v) / (pos ? u : u * e_abs);
                r = r > 1e18f ? 1e18f : r; /* e_abs = 0 (E_p < -87): never chosen, slope 0 */
                a = r < 1.0f ? KEEP[j] : 0.0f;
                q = r * r;
            } else {
                float lg;
                if (given) {
                    lg = L[j];
                } else { /* L = logit(u) */
                    const float u = uniform_draw(key, base + (uint64_t)j);
                    lg = log_poly(u / (1.0f - u));
                }
                const float z = ep + lg;
                a = z > 0.0f ? KEEP[j] : 0.0f;
                const float x = -z * inv_tau;
                q = exp_poly(x > 80.0f ? 80.0f : x);
            }
            A[j] = a;
            Q[j] = q;
            const float cand = a != 0.0f ? E[j] : -INFINITY;
            mv[l] = cand > mv[l] ? cand : mv[l];
            if (want_h) hv[l] += KEEP[j] != 0.0f ? binary_entropy(abs_ep, e_abs) : 0.0f;
        }
    }
    float m = -INFINITY, h = 0.0f;
    for (int l = 0; l < LANES; ++l) { m = mv[l] > m ? mv[l] : m; h += hv[l]; }
    *h_sum = h;
    return m;
}

/* Forward, rows [row_begin, row_end) of (rows, S) float32 tensors.
 *   logits E, policy E_p: inputs. noise: Logistic noise to use, or NULL (drawn from key).
 *   pad: bytes, 1 at the keys a row may not use, or NULL; row r reads pad row
 *     (r / rows_per_pad_row) * pad_inner + r % pad_inner: a (B, S) pad mask has
 *     rows_per_pad_row = h T and pad_inner = 1, a (B, T, S) mask of pads and each query's
 *     future (decoder self-attention) rows_per_pad_row = h T and pad_inner = T.
 * Outputs: out = A u / Z, weight = u / Z s (1 - s) / tau, chosen = A (0/1 bytes, pads 0), and
 * slope = s (1 - s) / tau when not NULL; s = sigmoid((E_p + L) / tau) = 1 / (1 + q),
 * s (1 - s) = q s^2, u = exp(min(E - m, cap)), m the row maximum of E over chosen keys (over
 * finite keys, or 0, for a row with none), Z = sum_j A_j u_j (1 for an empty row); pads have
 * u = 0. entropy (rows floats, or NULL): each row's sum over non-pad keys of H(sigmoid(E_p)),
 * the policy's entropy (no noise).
 * Rows whose length S is not a multiple of LANES (or tensors not 64-byte aligned) go through
 * scratch rows padded to whole blocks: rows of translation length (S about 30) would otherwise
 * spend most of their time in scalar prologues and epilogues. Others are read and written in
 * place. Returns 0, or 1 if the scratch could not be allocated (nothing written then). */
int ssan_sampled_forward_rows(const float *restrict logits, const float *restrict policy,
                              const float *restrict noise, const uint8_t *restrict pad,
                              int64_t rows_per_pad_row, int64_t pad_inner, int64_t S,
                              int64_t row_begin, int64_t row_end, uint64_t key, float tau,
                              float cap,
                              float *restrict out, float *restrict weight,
                              uint8_t *restrict chosen, float *restrict slope,
                              float *restrict entropy) {
    const float inv_tau = 1.0f / tau;
    const int given = noise != NULL, drawn_half = !given && inv_tau == 2.0f;
    const int64_t P = (S + LANES - 1) / LANES * LANES;
#define ALIGNED(p) (((uintptr_t)(p) & (ALIGN - 1)) == 0)
    const int direct = P == S && ALIGNED(logits) && ALIGNED(policy) && ALIGNED(out) &&
                       ALIGNED(weight) && (!slope || ALIGNED(slope)) && (!noise || ALIGNED(noise));
    float *scratch = aligned_alloc(ALIGN, (size_t)P * 11 * sizeof(float));
    if (!scratch) return 1;
    Scratch s = {scratch, scratch + P, scratch + 2 * P, scratch + 3 * P, scratch + 4 * P,
                 scratch + 5 * P, scratch + 6 * P, scratch + 7 * P, scratch + 8 * P,
                 scratch + 9 * P, (uint8_t *)(scratch + 10 * P)};
    for (int64_t j = S; j < P; ++j) { s.E[j] = -INFINITY; s.EP[j] = 0.0f; s.L[j] = 0.0f; }
    int64_t pad_row = -1;
    for (int64_t r = row_begin; r < row_end; ++r) {
        const int64_t base = r * S;
        const int64_t this_pad_row = r / rows_per_pad_row * pad_inner + r % pad_inner;
        if (pad_row != this_pad_row) {
            pad_row = this_pad_row;
            const uint8_t *pr = pad ? pad + pad_row * S : NULL;
            for (int64_t j = 0; j < P; ++j) s.KEEP[j] = j < S && !(pr && pr[j]) ? 1.0f : 0.0f;
        }
        const float *restrict E = s.E, *restrict EP = s.EP, *restrict L = s.L;
        float *restrict O = s.O, *restrict W = s.W, *restrict SL = s.SL;
        if (direct) {
            E = logits + base; EP = policy + base; L = noise ? noise + base : s.L;
            O = out + base; W = weight + base; SL = slope ? slope + base : s.SL;
        } else {
            memcpy(s.E, logits + base, (size_t)S * sizeof(float));
            memcpy(s.EP, policy + base, (size_t)S * sizeof(float));
            if (noise) memcpy(s.L, noise + base, (size_t)S * sizeof(float));
        }
        /* pass 1: the sample, q and the row maximum over chosen keys (+ the entropy) */
        float h = 0.0f, m;
        const uint64_t at = (uint64_t)base;
        if (drawn_half)
            m = entropy ? pass_sample(E, EP, L, s.KEEP, s.A, s.Q, P, key, at, inv_tau, 1, 0, 1, &h)
                        : pass_sample(E, EP, L, s.KEEP, s.A, s.Q, P, key, at, inv_tau, 1, 0, 0, &h);
        else if (given)
            m = entropy ? pass_sample(E, EP, L, s.KEEP, s.A, s.Q, P, key, at, inv_tau, 0, 1, 1, &h)
                        : pass_sample(E, EP, L, s.KEEP, s.A, s.Q, P, key, at, inv_tau, 0, 1, 0, &h);
        else
            m = entropy ? pass_sample(E, EP, L, s.KEEP, s.A, s.Q, P, key, at, inv_tau, 0, 0, 1, &h)
                        : pass_sample(E, EP, L, s.KEEP, s.A, s.Q, P, key, at, inv_tau, 0, 0, 0, &h);
        if (entropy) entropy[r] = h;
        if (m == -INFINITY) { /* no key chosen (or only -inf ones): the maximum over finite keys */
            for (int64_t j = 0; j < S; ++j) m = isfinite(E[j]) ? fmaxf(m, E[j]) : m;
            if (m == -INFINITY) m = 0.0f;
        }
        /* pass 2: u = exp(min(E - m, cap)) at kept keys, Z = sum A u */
        const float *restrict KEEP = s.KEEP, *restrict A = s.A, *restrict Q = s.Q;
        float *restrict U = s.U;
        float zv[LANES] __attribute__((aligned(ALIGN)));
        for (int l = 0; l < LANES; ++l) zv[l] = 0.0f;
        for (int64_t b = 0; b < P; b += LANES) {
#pragma omp simd aligned(zv : ALIGN)
            for (int l = 0; l < LANES; ++l) {
                const int64_t j = b + l;
                const float d = E[j] - m;
                const float u = KEEP[j] != 0.0f ? exp_poly(d > cap ? cap : d) : 0.0f;
                U[j] = u;
                zv[l] += A[j] * u;
            }
        }
        float z_sum = 0.0f;
        for (int l = 0; l < LANES; ++l) z_sum += zv[l];
        const float inv_z = z_sum == 0.0f ? 1.0f : 1.0f / z_sum;
        const float w_scale = inv_z * inv_tau;
        /* pass 3: the slope s (1 - s) = q s^2, s = 1 / (1 + q); out, weight, the sample */
        uint8_t *restrict CB = s.C;
        for (int64_t b = 0; b < P; b += LANES) {
#pragma omp simd
            for (int l = 0; l < LANES; ++l) {
                const int64_t j = b + l;
                const float q = Q[j], sg = 1.0f / (1.0f + q), sl = q * sg * sg, u = U[j];
                O[j] = A[j] * u * inv_z;
                W[j] = u * sl * w_scale;
                SL[j] = sl * inv_tau;
                CB[j] = (uint8_t)(A[j] != 0.0f);
            }
        }
        if (!direct) {
            memcpy(out + base, O, (size_t)S * sizeof(float));
            memcpy(weight + base, W, (size_t)S * sizeof(float));
            if (slope) memcpy(slope + base, SL, (size_t)S * sizeof(float));
        }
        memcpy(chosen + base, CB, (size_t)S);
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
 * are reused rather than competing with torch's spinning ones for the cores. The forward
 * returns the number of threads that ran it (a test checks it), or -1 if a thread could not
 * allocate its scratch rows. */
int ssan_sampled_forward(const float *logits, const float *policy, const float *noise,
                         const uint8_t *pad, int64_t rows_per_pad_row, int64_t pad_inner,
                         int64_t S, int64_t rows, int n_threads, uint64_t key, float tau,
                         float cap, float *out,
                         float *weight, uint8_t *chosen, float *slope, float *entropy) {
    int failed = 0, ran = 1;
#pragma omp parallel num_threads(n_threads) if (n_threads > 1) reduction(| : failed) \
    reduction(max : ran)
    {
        int64_t begin, end;
        ran = thread_rows(rows, &begin, &end);
        failed |= ssan_sampled_forward_rows(logits, policy, noise, pad, rows_per_pad_row,
                                            pad_inner, S, begin, end, key, tau, cap, out, weight,
                                            chosen, slope, entropy);
    }
    return failed ? -1 : ran;
}

void ssan_sampled_backward(const float *out, const float *weight, const float *slope,
                           const float *grad_out, const float *grad_select, int64_t S,
                           int64_t rows, int n_threads, float *grad_logits, float *grad_policy) {
#pragma omp parallel num_threads(n_threads) if (n_threads > 1)
    {
        int64_t begin, end;
        thread_rows(rows, &begin, &end);
        ssan_sampled_backward_rows(out, weight, slope, grad_out, grad_select, S, begin, end,
                                   grad_logits, grad_policy);
    }
}
