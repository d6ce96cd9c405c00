/* The public tokenizer calls (specdec.h) over the model's tokenizer, and the streaming detokenizer. */
#include <string.h>

#include "model/model.h"
#include "tok/tok.h"
#include "util/err.h"

int32_t sd_token_bos(const sd_model *m) { return m->tok->bos; }
int32_t sd_token_eos(const sd_model *m) { return m->tok->eos; }
bool sd_model_add_bos(const sd_model *m) { return m->tok->add_bos; }

bool sd_token_is_eog(const sd_model *m, int32_t t) {
    return t >= 0 && (t == m->tok->eos || t == m->tok->eot);
}

sd_status sd_tokenize(const sd_model *m, const char *text, size_t len, bool add_bos, bool parse_special, int32_t *out,
                      int cap, int *n_out, sd_error *err) {
    if (!m || (!text && len) || (!out && cap > 0) || cap < 0) return err_set(err, SD_ERR_ARG, "sd_tokenize: invalid arguments");
    int n = tok_encode(m->tok, text ? text : "", len, add_bos, parse_special, out, cap);
    if (n < 0) return err_set(err, SD_ERR_NOMEM, "out of memory while tokenizing");
    if (n_out) *n_out = n;
    if (n > cap) return err_set(err, SD_ERR_ARG, "text has %d tokens, the buffer holds %d", n, cap);
    return SD_OK;
}

int sd_token_to_piece(const sd_model *m, int32_t t, char *buf, int cap) { return tok_piece(m->tok, t, buf, cap); }

/* bytes of pending[0..n) that form complete UTF-8 characters (an invalid lead byte counts as complete) */
static int complete_prefix(const char *s, int n) {
    int i = 0;
    while (i < n) {
        int l = utf8_len((unsigned char)s[i]);
        if ((unsigned char)s[i] >= 0x80 && (unsigned char)s[i] < 0xc0) l = 1; /* stray continuation byte */
        if (i + l > n) break;
        i += l;
    }
    return i;
}

int sd_detok_push(const sd_model *m, sd_detok *st, int32_t t, char *out) {
    char piece[300];
    int n = tok_piece(m->tok, t, piece, 256);
    if (n < 0) n = 0;
    if (n > 256) n = 256;
    char all[300];
    memcpy(all, st->pending, (size_t)st->n_pending);
    memcpy(all + st->n_pending, piece, (size_t)n);
    int tot = st->n_pending + n;
    int done = complete_prefix(all, tot);
    if (tot - done > 3) done = tot; /* can never complete: let it out */
    memcpy(out, all, (size_t)done);
    out[done] = 0;
    st->n_pending = tot - done;
    memcpy(st->pending, all + done, (size_t)st->n_pending);
    return done;
}

int sd_detok_flush(sd_detok *st, char *out) {
    int n = 0;
    if (st->n_pending > 0) {
        memcpy(out, "\xef\xbf\xbd", 3);
        n = 3;
    }
    out[n] = 0;
    st->n_pending = 0;
    return n;
}
