#include "util/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

enum { POOL_SPIN = 1 << 15 };

struct worker {
    pool *p;
    int ith;
    pthread_t tid;
};

struct pool {
    int n;
    struct worker *workers; /* [n-1] */
    pool_fn fn;
    void *arg;
    atomic_uint gen;     /* bumped once per pool_run */
    atomic_int pending;  /* workers still running the current job */
    atomic_int quit;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static void *worker_main(void *a) {
    struct worker *w = a;
    pool *p = w->p;
    unsigned seen = 0;
    for (;;) {
        int spins = 0;
        while (atomic_load_explicit(&p->gen, memory_order_acquire) == seen && spins < POOL_SPIN) {
            CPU_RELAX();
            spins++;
        }
        if (atomic_load_explicit(&p->gen, memory_order_acquire) == seen) {
            pthread_mutex_lock(&p->mu);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->quit)) pthread_cond_wait(&p->cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit)) break;
        seen = atomic_load_explicit(&p->gen, memory_order_acquire);
        p->fn(p->arg, w->ith, p->n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
    return NULL;
}

pool *pool_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    atomic_init(&p->gen, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->quit, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) {
            pool_free(p);
            return NULL;
        }
        for (int i = 1; i < n_threads; i++) {
            struct worker *w = &p->workers[i - 1];
            w->p = p;
            w->ith = i;
            if (pthread_create(&w->tid, NULL, worker_main, w) != 0) {
                p->n = i; /* only threads 1..i-1 exist */
                pool_free(p);
                return NULL;
            }
        }
    }
    return p;
}

void pool_free(pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, 1);
    atomic_fetch_add(&p->gen, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->workers[i - 1].tid, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->workers);
    free(p);
}

int pool_size(const pool *p) { return p->n; }

void pool_run(pool *p, pool_fn fn, void *arg) {
    if (p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    fn(arg, 0, p->n);
    int spins = 0;
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) {
        if (++spins < POOL_SPIN)
            CPU_RELAX();
        else
            sched_yield();
    }
}
