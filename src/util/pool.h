/* pool: one persistent thread pool, created once per context. pool_run runs fn(arg, ith, nth) on every
 * thread (the caller is thread 0) and returns when all are done. Work is split by the callee (e.g. output
 * rows), so results never depend on scheduling. */
#ifndef SD_UTIL_POOL_H
#define SD_UTIL_POOL_H

typedef struct pool pool;
typedef void (*pool_fn)(void *arg, int ith, int nth);

pool *pool_new(int n_threads); /* NULL on failure; n_threads >= 1 */
void pool_free(pool *p);
int pool_size(const pool *p);
void pool_run(pool *p, pool_fn fn, void *arg);

/* [begin, end) of n items for thread ith of nth, in contiguous chunks. */
static inline void pool_split(int n, int ith, int nth, int *begin, int *end) {
    int per = n / nth, rem = n % nth;
    *begin = ith * per + (ith < rem ? ith : rem);
    *end = *begin + per + (ith < rem ? 1 : 0);
}
#endif
