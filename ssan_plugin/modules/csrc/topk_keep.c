/* Top-k's keep pattern on the CPU (ssan_plugin/modules/native.py loads it; the selector is
 * ssan_plugin/modules/selectors/topk.py).
 *
 * A row is one (sentence, head, query): its S ranking logits contiguous in float32 (hidden keys
 * already -inf, no NaN), and k, how many keys it keeps. The row's k largest logits are kept;
 * among equal logits the key of lower index first, as a stable descending sort orders them.
 *
 * Two passes a row. (1) The threshold t, the row's k-th largest value. For k up to BUBBLE_MAX,
 * GROUP rows at once, one row a SIMD lane: each value is bubbled through the lanes' sorted
 * lists of k values with max and min only, no branch (a branchy insertion spent most of its
 * time on mispredicted branches; torch's argsort and topk on per-row overhead at translation
 * lengths). Larger k: a sorted insertion of values, one row at a time. (2) The keys
 * above t and, in index order, as many keys equal to t as k still needs; a row without surplus
 * ties at t (the rule for real logits) takes one vector pass.
 * Threads: the rows are split evenly between OpenMP threads; the result does not depend on
 * the split.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "thread_rows.h"

#define GROUP 16      /* rows a bubble pass handles: one AVX-512 vector, two AVX2 ones */
#define BUBBLE_MAX 32 /* the largest k the bubble pass handles (its lists: 2 KB of stack) */

/* thr[l] = the k_l-th largest value of row r + l, for l < g, k_l in [1, K], K <= BUBBLE_MAX. */
static void group_kth_largest(const float *x, const int64_t *k, int64_t S, int64_t r, int g,
                              int64_t K, float *thr) {
    float top[BUBBLE_MAX][GROUP]; /* per lane, its K largest so far, largest first */
    for (int64_t p = 0; p < K; ++p)
        for (int l = 0; l < GROUP; ++l) top[p][l] = -INFINITY;
    for (int64_t j = 0; j < S; ++j) {
        float v[GROUP];
        for (int l = 0; l < GROUP; ++l) v[l] = l < g ? x[(r + l) * S + j] : -INFINITY;
        for (int64_t p = 0; p < K; ++p) {
#pragma omp simd
            for (int l = 0; l < GROUP; ++l) {
                float t = top[p][l];
                top[p][l] = t > v[l] ? t : v[l];
                v[l] = t > v[l] ? v[l] : t;
            }
        }
    }
    for (int l = 0; l < g; ++l) thr[l] = top[k[l] - 1][l];
}

/* The k-th largest value of a row, k in [1, S]; top: scratch of k floats. */
static float kth_largest(const float *row, int64_t S, int64_t k, float *top) {
    int64_t n = 0; /* top[0..n): the largest so far, largest first */
    for (int64_t j = 0; j < S; ++j) {
        float v = row[j];
        if (n == k) {
            if (!(v > top[k - 1])) continue;
            --n; /* the smallest is displaced */
        }
        int64_t p = n;
        while (p > 0 && v > top[p - 1]) {
            top[p] = top[p - 1];
            --p;
        }
        top[p] = v;
        ++n;
    }
    return top[k - 1];
}

/* out[j] = 1 for the k keys of the row at or above t, t its k-th largest value: those above
 * it, then those equal to it in index order. */
static void keep_row(const float *row, int64_t S, int64_t k, float t, uint8_t *out) {
    int64_t at_least = 0;
#pragma omp simd reduction(+ : at_least)
    for (int64_t j = 0; j < S; ++j) at_least += row[j] >= t;
    if (at_least == k) {
#pragma omp simd
        for (int64_t j = 0; j < S; ++j) out[j] = row[j] >= t;
        return;
    }
    int64_t above = 0;
    for (int64_t j = 0; j < S; ++j) above += row[j] > t;
    int64_t need = k - above; /* keys equal to t still kept */
    for (int64_t j = 0; j < S; ++j) {
        int equal = row[j] == t;
        out[j] = (uint8_t)((row[j] > t) | (equal & (need > 0)));
        need -= equal;
    }
}

/* Rows [begin, end); scratch: S floats. */
static void topk_keep_rows(const float *x, const int64_t *keys, int64_t S, int64_t begin,
                           int64_t end, float *scratch, uint8_t *keep) {
    for (int64_t r = begin; r < end; r += GROUP) {
        int g = end - r < GROUP ? (int)(end - r) : GROUP;
        int64_t k[GROUP], K = 0;
        float thr[GROUP];
        for (int l = 0; l < g; ++l) {
            k[l] = keys[r + l] < S ? keys[r + l] : S;
            k[l] = k[l] > 0 ? k[l] : 0;
            K = k[l] > K ? k[l] : K;
        }
        if (K == 0) {
            memset(keep + r * S, 0, (size_t)(g * S));
            continue;
        }
        if (K <= BUBBLE_MAX) {
            int64_t k1[GROUP];
            for (int l = 0; l < g; ++l) k1[l] = k[l] > 0 ? k[l] : 1;
            group_kth_largest(x, k1, S, r, g, K, thr);
        } else {
            for (int l = 0; l < g; ++l)
                thr[l] = k[l] > 0 ? kth_largest(x + (r + l) * S, S, k[l], scratch) : 0.0f;
        }
        for (int l = 0; l < g; ++l) {
            if (k[l] == 0)
                memset(keep + (r + l) * S, 0, (size_t)S);
            else
                keep_row(x + (r + l) * S, S, k[l], thr[l], keep + (r + l) * S);
        }
    }
}

/* All rows, split evenly between n_threads threads. Returns the number of threads that ran
 * (a test checks it), or -1 if a thread could not allocate its scratch row. */
int ssan_topk_keep(const float *x, const int64_t *keys, int64_t S, int64_t rows, int n_threads,
                   uint8_t *keep) {
    int failed = 0, ran = 1;
#pragma omp parallel num_threads(n_threads) if (n_threads > 1) reduction(| : failed) \
    reduction(max : ran)
    {
        int64_t begin, end;
        ran = thread_rows(rows, &begin, &end);
        float *scratch = malloc(sizeof(float) * (size_t)(S > 0 ? S : 1));
        if (scratch == NULL) {
            failed |= 1;
        } else {
            topk_keep_rows(x, keys, S, begin, end, scratch, keep);
            free(scratch);
        }
    }
    return failed ? -1 : ran;
}
