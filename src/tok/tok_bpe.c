/* GPT-2 byte-level BPE: split the text into words with the gpt-2 pre-tokenizer
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * (hand-written matcher, Unicode categories from utf8proc), map each byte of a word to its printable code point,
 * then merge adjacent symbols by merge rank (lowest first, leftmost on ties). */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tok/merge.h"
#include "tok/tok.h"
#include "util/strmap.h"

enum { CF_LETTER = 1, CF_NUMBER = 2, CF_SPACE = 4, CF_ANY = 8 };

static int cpt_flags(int c) {
    if (c < 0) return CF_ANY; /* invalid byte: "other" */
    int f = CF_ANY;
    if ((c >= 9 && c <= 13) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
        c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000)
        f |= CF_SPACE;
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: f |= CF_LETTER; break;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO: f |= CF_NUMBER; break;
    default: break;
    }
    return f;
}

/* Encodes the bytes text[a..b) of one word. */
static void bpe_word(const tokenizer *t, const char *text, size_t a, size_t b, tokbuf *out) {
    /* byte -> code point -> UTF-8 */
    size_t n = b - a;
    char *w = malloc(n * 2 + 1);
    if (!w) {
        out->oom = true;
        return;
    }
    size_t wl = 0;
    for (size_t i = a; i < b; i++) wl += (size_t)utf8_encode(tok_byte_to_cpt((unsigned char)text[i]), w + wl);
    int n_sym;
    merge_sym *sym = merge_split_chars(w, wl, &n_sym);
    char *pair = malloc(wl + 2);
    merge_queue q = {0};
    if (!sym || !pair) {
        out->oom = true;
        goto done;
    }
#define TRY(l, r)                                                                                                 \
    do {                                                                                                          \
        if ((l) >= 0 && (r) >= 0) {                                                                               \
            int ln = sym[l].n, rn = sym[r].n;                                                                     \
            memcpy(pair, w + sym[l].start, (size_t)ln);                                                           \
            pair[ln] = ' ';                                                                                       \
            memcpy(pair + ln + 1, w + sym[r].start, (size_t)rn);                                                  \
            int rank = strmap_get(t->merges, pair, (size_t)(ln + rn + 1));                                        \
            if (rank >= 0) mq_push(&q, (merge_pair){(l), (r), -(double)rank, ln + rn});                          \
        }                                                                                                         \
    } while (0)
    for (int i = 1; i < n_sym; i++) TRY(i - 1, i);
    merge_pair p;
    while (mq_pop(&q, &p)) {
        merge_sym *L = &sym[p.left], *R = &sym[p.right];
        if (L->n == 0 || R->n == 0 || L->n + R->n != p.size) continue;
        L->n += R->n;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) sym[R->next].prev = p.left;
        TRY(L->prev, p.left);
        TRY(p.left, L->next);
    }
#undef TRY
    if (q.oom) out->oom = true;
    for (int i = 0; n_sym > 0 && i != -1; i = sym[i].next) {
        int id = tok_find(t, w + sym[i].start, (size_t)sym[i].n);
        if (id >= 0) {
            tokbuf_push(out, id);
            continue;
        }
        for (int k = 0; k < sym[i].n; k++) { /* unknown symbol: single-byte tokens where they exist */
            int bid = tok_find(t, w + sym[i].start + k, 1);
            if (bid >= 0) tokbuf_push(out, bid);
        }
    }
done:
    mq_free(&q);
    free(sym);
    free(pair);
    free(w);
}

void tok_bpe_encode(const tokenizer *t, const char *text, size_t len, tokbuf *out) {
    /* decode to code points, remembering byte offsets */
    int *cp = malloc((len + 1) * sizeof *cp);
    size_t *off = malloc((len + 1) * sizeof *off);
    if (!cp || !off) {
        out->oom = true;
        free(cp);
        free(off);
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        off[n] = i;
        i += (size_t)utf8_decode(text + i, len - i, &cp[n]);
        n++;
    }
    off[n] = len;
#define CPT(i) ((i) < n ? cp[i] : -2)
#define FLG(i) ((i) < n ? cpt_flags(cp[i]) : 0)
    size_t pos = 0, prev = 0;
    while (pos < n) {
        int c = cp[pos];
        int f = FLG(pos);
        size_t end = 0;
        if (c == '\'' && pos + 1 < n) {
            int c1 = CPT(pos + 1), c2 = CPT(pos + 2);
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')
                end = pos + 2;
            else if (pos + 2 < n && ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')))
                end = pos + 3;
        }
        if (!end) {
            int f2 = c == ' ' ? FLG(pos + 1) : f;
            size_t p = pos + (c == ' ');
            if (f2 & CF_LETTER) {
                while (FLG(p) & CF_LETTER) p++;
                end = p;
            } else if (f2 & CF_NUMBER) {
                while (FLG(p) & CF_NUMBER) p++;
                end = p;
            } else if (!(f2 & (CF_SPACE | CF_LETTER | CF_NUMBER)) && f2) {
                while (!(FLG(p) & (CF_SPACE | CF_LETTER | CF_NUMBER)) && FLG(p)) p++;
                end = p;
            } else {
                size_t ws = 0;
                while (FLG(pos + ws) & CF_SPACE) ws++;
                if (ws > 1 && pos + ws < n)
                    end = pos + ws - 1; /* \s+(?!\S): leave the last space to the next word */
                else if (ws > 0)
                    end = pos + ws;
                else
                    end = pos + 1;
            }
        }
        bpe_word(t, text, off[prev], off[end], out);
        pos = prev = end;
    }
#undef CPT
#undef FLG
    free(cp);
    free(off);
}
