#include "tok/merge.h"

#include <stdlib.h>

#include "tok/tok.h"

static bool better(const merge_pair *a, const merge_pair *b) {
    return a->prio > b->prio || (a->prio == b->prio && a->left < b->left);
}

void mq_push(merge_queue *q, merge_pair p) {
    if (q->n == q->cap) {
        int nc = q->cap ? q->cap * 2 : 64;
        merge_pair *nh = realloc(q->heap, (size_t)nc * sizeof *nh);
        if (!nh) {
            q->oom = true;
            return;
        }
        q->heap = nh;
        q->cap = nc;
    }
    int i = q->n++;
    q->heap[i] = p;
    while (i > 0) {
        int par = (i - 1) / 2;
        if (!better(&q->heap[i], &q->heap[par])) break;
        merge_pair t = q->heap[i];
        q->heap[i] = q->heap[par];
        q->heap[par] = t;
        i = par;
    }
}

bool mq_pop(merge_queue *q, merge_pair *out) {
    if (q->n == 0) return false;
    *out = q->heap[0];
    q->heap[0] = q->heap[--q->n];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, b = i;
        if (l < q->n && better(&q->heap[l], &q->heap[b])) b = l;
        if (r < q->n && better(&q->heap[r], &q->heap[b])) b = r;
        if (b == i) break;
        merge_pair t = q->heap[i];
        q->heap[i] = q->heap[b];
        q->heap[b] = t;
        i = b;
    }
    return true;
}

void mq_free(merge_queue *q) {
    free(q->heap);
    q->heap = NULL;
    q->n = q->cap = 0;
}

merge_sym *merge_split_chars(const char *text, size_t len, int *n_syms) {
    merge_sym *s = malloc((len ? len : 1) * sizeof *s);
    if (!s) return NULL;
    int n = 0;
    for (size_t off = 0; off < len;) {
        int cl = utf8_len((unsigned char)text[off]);
        if ((size_t)cl > len - off) cl = (int)(len - off);
        s[n] = (merge_sym){(int)off, cl, n - 1, (off + (size_t)cl < len) ? n + 1 : -1};
        n++;
        off += (size_t)cl;
    }
    *n_syms = n;
    return s;
}
