/* SentencePiece BPE (as llama.cpp's SPM tokenizer): merge the adjacent pair whose joined text is a token with the
 * highest score (leftmost on ties) until no pair joins into a token. Every merged symbol is a token by
 * construction; single characters that are not tokens fall back to <0xNN> byte tokens (or <unk>). */
#include <stdlib.h>

#include "tok/merge.h"
#include "tok/tok.h"

static void try_pair(const tokenizer *t, const char *text, const merge_sym *sym, merge_queue *q, int left, int right) {
    if (left < 0 || right < 0) return;
    int n = sym[left].n + sym[right].n;
    int id = tok_find(t, text + sym[left].start, (size_t)n);
    if (id >= 0) mq_push(q, (merge_pair){left, right, t->score[id], n});
}

void tok_spm_encode(const tokenizer *t, const char *text, size_t len, tokbuf *b) {
    merge_queue q = {0};
    int n_sym;
    merge_sym *sym = merge_split_chars(text, len, &n_sym);
    if (!sym) {
        b->oom = true;
        return;
    }
    for (int i = 1; i < n_sym; i++) try_pair(t, text, sym, &q, i - 1, i);
    merge_pair p;
    while (mq_pop(&q, &p)) {
        merge_sym *L = &sym[p.left], *R = &sym[p.right];
        if (L->n == 0 || R->n == 0 || L->n + R->n != p.size) continue; /* stale entry */
        L->n += R->n;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) sym[R->next].prev = p.left;
        try_pair(t, text, sym, &q, L->prev, p.left);
        try_pair(t, text, sym, &q, p.left, L->next);
    }
    if (q.oom) b->oom = true;
    for (int i = 0; n_sym > 0 && i != -1; i = sym[i].next) {
        const char *s = text + sym[i].start;
        int id = tok_find(t, s, (size_t)sym[i].n);
        if (id >= 0) {
            tokbuf_push(b, id);
            continue;
        }
        for (int k = 0; k < sym[i].n; k++) {
            int bt = t->byte_tok[(unsigned char)s[k]];
            tokbuf_push(b, bt >= 0 ? bt : t->unk >= 0 ? t->unk : 0);
        }
    }
    free(sym);
    mq_free(&q);
}
