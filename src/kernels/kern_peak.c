/* kern_peak: the compute ceiling of a type's block-kernel inner step, measured on n threads at once. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/wtype.h"
#include "kernels/kern.h"
#include "specdec.h"

static double peak_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct peak_job {
    const kern_ops *ops;
    uint32_t type;
    long iters;
    double macs; /* out */
} peak_job;

static void *peak_thread(void *arg) {
    peak_job *j = arg;
    j->macs = j->ops->peak(j->type, j->iters);
    return NULL;
}

double kern_peak(uint32_t type, int n_threads, double seconds) {
    const kern_ops *ops = kern_best();
    if (!ops->peak || n_threads < 1 || n_threads > 512 || !(seconds > 0)) return 0;
    /* calibrate the step count on one thread */
    long iters = 1 << 16;
    for (;;) {
        double t0 = peak_now();
        if (ops->peak(type, iters) == 0) return 0;
        double dt = peak_now() - t0;
        if (dt > 0.02 || iters > (1L << 40)) {
            iters = (long)((double)iters * seconds / (dt > 1e-9 ? dt : 1e-9)) + 1;
            break;
        }
        iters *= 4;
    }
    peak_job *jobs = calloc((size_t)n_threads, sizeof *jobs);
    pthread_t *tid = calloc((size_t)n_threads, sizeof *tid);
    if (!jobs || !tid) {
        free(jobs);
        free(tid);
        return -1;
    }
    double best = 0;
    for (int rep = 0; rep < 3 && best >= 0; rep++) {
        double t0 = peak_now();
        int started = 0;
        for (int i = 0; i < n_threads; i++) {
            jobs[i] = (peak_job){ops, type, iters, 0};
            if (i > 0 && pthread_create(&tid[i], NULL, peak_thread, &jobs[i]) != 0) break;
            started = i + 1;
        }
        if (started == n_threads) peak_thread(&jobs[0]);
        for (int i = 1; i < started; i++) pthread_join(tid[i], NULL);
        double dt = peak_now() - t0;
        if (started < n_threads) {
            best = -1;
            break;
        }
        double macs = 0;
        for (int i = 0; i < n_threads; i++) macs += jobs[i].macs;
        if (macs / dt > best) best = macs / dt;
    }
    free(jobs);
    free(tid);
    return best;
}

double sd_kernel_peak(const char *type, int n_threads, double seconds) {
    uint32_t t;
    if (!wtype_from_name(type, &t)) return 0;
    return kern_peak(t, n_threads, seconds);
}
