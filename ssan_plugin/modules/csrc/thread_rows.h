/* The rows of a call split evenly between the OpenMP threads of a parallel region (both kernels
 * of ssan_plugin/modules/native.py's library): thread t of n takes rows [rows t / n,
 * rows (t + 1) / n); without OpenMP, one thread takes them all. */
#ifndef SSAN_THREAD_ROWS_H
#define SSAN_THREAD_ROWS_H
#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* This thread's rows of ``rows`` as [*begin, *end); returns how many threads share them. */
static inline int thread_rows(int64_t rows, int64_t *begin, int64_t *end) {
#ifdef _OPENMP
    int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
#else
    int64_t t = 0, n = 1;
#endif
    *begin = rows * t / n;
    *end = rows * (t + 1) / n;
    return (int)n;
}

#endif
