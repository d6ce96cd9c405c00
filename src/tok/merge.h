/* merge: the symbol list + priority queue both BPE variants share. A symbol is a byte range of the text;
 * merging joins a symbol with its right neighbour. The queue pops the best bigram: higher `prio` first,
 * ties broken by the leftmost position. */
#ifndef SD_TOK_MERGE_H
#define SD_TOK_MERGE_H
#include <stdbool.h>
#include <stddef.h>

typedef struct merge_sym {
    int start, n;     /* byte range in the text; n == 0: merged away */
    int prev, next;   /* neighbours, -1 at the ends */
} merge_sym;

typedef struct merge_pair {
    int left, right; /* symbol indices */
    double prio;
    int size;        /* byte length of the merged text when queued (stale if it changed) */
} merge_pair;

typedef struct merge_queue {
    merge_pair *heap; /* [cap] */
    int n, cap;
    bool oom;
} merge_queue;

void mq_push(merge_queue *q, merge_pair p);
bool mq_pop(merge_queue *q, merge_pair *out);
void mq_free(merge_queue *q);

/* Splits text into UTF-8 characters: syms[n_syms] (caller frees). NULL when out of memory. */
merge_sym *merge_split_chars(const char *text, size_t len, int *n_syms);
#endif
