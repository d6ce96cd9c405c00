#include "tok/tok.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/strmap.h"

/* ------------------------------------------------------------------ utf-8 */
int utf8_encode(int c, char *o) {
    if (c < 0x80) { o[0] = (char)c; return 1; }
    if (c < 0x800) { o[0] = (char)(0xc0 | (c >> 6)); o[1] = (char)(0x80 | (c & 0x3f)); return 2; }
    if (c < 0x10000) {
        o[0] = (char)(0xe0 | (c >> 12)); o[1] = (char)(0x80 | ((c >> 6) & 0x3f)); o[2] = (char)(0x80 | (c & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (c >> 18)); o[1] = (char)(0x80 | ((c >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3f)); o[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

int utf8_decode(const char *s, size_t len, int *cpt) {
    const unsigned char *u = (const unsigned char *)s;
    int n = utf8_len(u[0]);
    if (n == 1) {
        *cpt = u[0] < 0x80 ? u[0] : -1;
        return 1;
    }
    if ((size_t)n > len) {
        *cpt = -1;
        return 1;
    }
    int c = u[0] & (0x7f >> n);
    for (int i = 1; i < n; i++) {
        if ((u[i] & 0xc0) != 0x80) {
            *cpt = -1;
            return 1;
        }
        c = (c << 6) | (u[i] & 0x3f);
    }
    *cpt = c;
    return n;
}

int tok_byte_to_cpt(unsigned char b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174)) return b;
    int n = 0; /* index among the unmapped bytes, in byte order */
    for (int x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174))) n++;
    return 256 + n;
}

int tok_cpt_to_byte(int c) {
    if ((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255)) return c;
    if (c < 256 || c >= 256 + 68) return -1;
    int n = c - 256;
    for (int x = 0; x < 256; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174)) && n-- == 0) return x;
    return -1;
}

/* ------------------------------------------------------------------ buffers */
void tokbuf_push(tokbuf *b, int32_t id) {
    if (b->n == b->cap) {
        int nc = b->cap ? b->cap * 2 : 64;
        int32_t *ni = realloc(b->ids, (size_t)nc * sizeof *ni);
        if (!ni) {
            b->oom = true;
            return;
        }
        b->ids = ni;
        b->cap = nc;
    }
    b->ids[b->n++] = id;
}

/* ------------------------------------------------------------------ construction */
void tok_free(tokenizer *t) {
    if (!t) return;
    if (t->text)
        for (int i = 0; i < t->n_vocab; i++) free(t->text[i]);
    free(t->text);
    free(t->len);
    free(t->score);
    free(t->attr);
    free(t->special);
    free(t->pre_name);
    strmap_free(t->by_text);
    strmap_free(t->merges);
    free(t);
}

static tokenizer *tok_alloc(int n) {
    tokenizer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->n_vocab = n;
    t->text = calloc((size_t)n, sizeof *t->text);
    t->len = calloc((size_t)n, sizeof *t->len);
    t->score = calloc((size_t)n, sizeof *t->score);
    t->attr = calloc((size_t)n, 1);
    t->by_text = strmap_new((size_t)n);
    t->bos = t->eos = t->eot = t->unk = t->pad = -1;
    if (!t->text || !t->len || !t->score || !t->attr || !t->by_text) {
        tok_free(t);
        return NULL;
    }
    return t;
}

static bool tok_set(tokenizer *t, int i, const char *s, size_t len) {
    t->text[i] = malloc(len + 1);
    if (!t->text[i]) return false;
    memcpy(t->text[i], s, len);
    t->text[i][len] = 0;
    t->len[i] = (int)len;
    return strmap_put(t->by_text, s, len, i);
}

/* Derived tables: byte-fallback tokens, list of special tokens (longest first). */
static sd_status tok_finish(tokenizer *t, sd_error *err) {
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        t->byte_tok[b] = strmap_get(t->by_text, hex, 6);
    }
    int n = 0;
    for (int i = 0; i < t->n_vocab; i++)
        if ((t->attr[i] == TOK_ATTR_CONTROL || t->attr[i] == TOK_ATTR_USER) && t->len[i] > 0) n++;
    t->special = malloc((size_t)(n ? n : 1) * sizeof *t->special);
    if (!t->special) return err_set(err, SD_ERR_NOMEM, "out of memory");
    t->n_special = 0;
    for (int i = 0; i < t->n_vocab; i++)
        if ((t->attr[i] == TOK_ATTR_CONTROL || t->attr[i] == TOK_ATTR_USER) && t->len[i] > 0)
            t->special[t->n_special++] = i;
    /* insertion sort by length, descending (stable; lists are short) */
    for (int i = 1; i < t->n_special; i++) {
        int v = t->special[i], j = i;
        while (j > 0 && t->len[t->special[j - 1]] < t->len[v]) {
            t->special[j] = t->special[j - 1];
            j--;
        }
        t->special[j] = v;
    }
    return SD_OK;
}

static bool special_id_ok(int64_t v, int n) { return v >= 0 && v < n; }

sd_status tok_from_gguf(const gguf_file *f, tokenizer **out, sd_error *err) {
    *out = NULL;
    gguf_str model;
    if (!gguf_get_str(f, "tokenizer.ggml.model", &model, NULL))
        return err_set(err, SD_ERR_FORMAT, "missing metadata 'tokenizer.ggml.model' (no tokenizer in the file)");
    tok_kind kind;
    if (gguf_str_eq(model, "llama"))
        kind = TOK_KIND_SPM;
    else if (gguf_str_eq(model, "gpt2"))
        kind = TOK_KIND_BPE;
    else
        return err_set(err, SD_ERR_UNSUPPORTED, "tokenizer model '%.*s' is not supported (llama, gpt2 are)",
                       (int)(model.len > 32 ? 32 : model.len), model.p);
    const gguf_kv *toks = gguf_find(f, "tokenizer.ggml.tokens");
    if (!toks || toks->type != GGUF_ARR || toks->arr_type != GGUF_STR || toks->arr_n == 0 || toks->arr_n > (1u << 24))
        return err_set(err, SD_ERR_FORMAT, "missing or invalid 'tokenizer.ggml.tokens' (an array of strings)");
    int n = (int)toks->arr_n;
    const gguf_kv *scores = gguf_find(f, "tokenizer.ggml.scores");
    const gguf_kv *types = gguf_find(f, "tokenizer.ggml.token_type");
    if (scores && (scores->type != GGUF_ARR || scores->arr_n != (uint64_t)n ||
                   (scores->arr_type != GGUF_F32 && scores->arr_type != GGUF_F64)))
        return err_set(err, SD_ERR_FORMAT, "'tokenizer.ggml.scores' must be %d floats", n);
    if (types && (types->type != GGUF_ARR || types->arr_n != (uint64_t)n || types->arr_type == GGUF_STR ||
                  types->arr_type == GGUF_ARR))
        return err_set(err, SD_ERR_FORMAT, "'tokenizer.ggml.token_type' must be %d integers", n);
    tokenizer *t = tok_alloc(n);
    if (!t) return err_set(err, SD_ERR_NOMEM, "out of memory");
    t->kind = kind;
    sd_status st = SD_OK;
    for (int i = 0; i < n; i++) {
        if (!tok_set(t, i, toks->arr_strs[i].p, (size_t)toks->arr_strs[i].len)) {
            st = err_set(err, SD_ERR_NOMEM, "out of memory");
            goto fail;
        }
        double sc = scores ? gguf_arr_float(scores, (uint64_t)i) : 0.0;
        if (!isfinite(sc) || fabs(sc) > FLT_MAX) {
            st = err_set(err, SD_ERR_FORMAT, "'tokenizer.ggml.scores' entry %d (%g) is not a finite float", i, sc);
            goto fail;
        }
        t->score[i] = (float)sc;
        int64_t ty = types ? gguf_arr_int(types, (uint64_t)i) : TOK_ATTR_NORMAL;
        t->attr[i] = (uint8_t)(ty >= 1 && ty <= 6 ? ty : TOK_ATTR_NORMAL);
    }
    int64_t v;
    struct { const char *key; int32_t *dst; } ids[] = {
        {"tokenizer.ggml.bos_token_id", &t->bos}, {"tokenizer.ggml.eos_token_id", &t->eos},
        {"tokenizer.ggml.eot_token_id", &t->eot}, {"tokenizer.ggml.unknown_token_id", &t->unk},
        {"tokenizer.ggml.padding_token_id", &t->pad},
    };
    if (kind == TOK_KIND_SPM) {
        t->bos = 1 < n ? 1 : -1;
        t->eos = 2 < n ? 2 : -1;
        t->unk = 0;
    }
    for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++)
        if (gguf_get_int(f, ids[k].key, &v, NULL)) /* ids outside the vocabulary (e.g. 0xffffffff) mean "none" */
            *ids[k].dst = special_id_ok(v, n) ? (int32_t)v : -1;
    t->add_bos = kind == TOK_KIND_SPM;
    bool b;
    if (gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &b, NULL)) t->add_bos = b;
    t->add_space_prefix = kind == TOK_KIND_SPM;
    if (gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", &b, NULL)) t->add_space_prefix = b;
    gguf_str pre;
    if (gguf_get_str(f, "tokenizer.ggml.pre", &pre, NULL)) {
        t->pre_name = malloc((size_t)pre.len + 1);
        if (t->pre_name) {
            memcpy(t->pre_name, pre.p, (size_t)pre.len);
            t->pre_name[pre.len] = 0;
        }
    }
    if (kind == TOK_KIND_BPE) {
        const gguf_kv *mg = gguf_find(f, "tokenizer.ggml.merges");
        if (!mg || mg->type != GGUF_ARR || mg->arr_type != GGUF_STR) {
            st = err_set(err, SD_ERR_FORMAT, "gpt2 tokenizer without 'tokenizer.ggml.merges'");
            goto fail;
        }
        t->merges = strmap_new((size_t)mg->arr_n);
        if (!t->merges) {
            st = err_set(err, SD_ERR_NOMEM, "out of memory");
            goto fail;
        }
        for (uint64_t i = 0; i < mg->arr_n; i++)
            if (!strmap_put(t->merges, mg->arr_strs[i].p, (size_t)mg->arr_strs[i].len, (int)i)) {
                st = err_set(err, SD_ERR_NOMEM, "out of memory");
                goto fail;
            }
    }
    if ((st = tok_finish(t, err))) goto fail;
    *out = t;
    return SD_OK;
fail:
    tok_free(t);
    return st;
}

sd_status tok_from_llama2c(const char *path, int n_vocab, tokenizer **out, sd_error *err) {
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return err_set(err, SD_ERR_IO, "%s: cannot open tokenizer", path);
    tokenizer *t = tok_alloc(n_vocab);
    if (!t) {
        fclose(fp);
        return err_set(err, SD_ERR_NOMEM, "out of memory");
    }
    t->kind = TOK_KIND_SPM;
    t->bos = 1;
    t->eos = 2;
    t->unk = 0;
    t->add_bos = true;
    t->add_space_prefix = true;
    sd_status st = SD_OK;
    int32_t max_len;
    char buf[1024], conv[3 * 1024];
    if (fread(&max_len, 4, 1, fp) != 1 || max_len <= 0 || max_len > 1024) {
        st = err_set(err, SD_ERR_FORMAT, "%s: not a llama2.c tokenizer (bad header)", path);
        goto done;
    }
    for (int i = 0; i < n_vocab; i++) {
        float sc;
        int32_t len;
        if (fread(&sc, 4, 1, fp) != 1 || fread(&len, 4, 1, fp) != 1 || len < 0 || len > max_len ||
            fread(buf, 1, (size_t)len, fp) != (size_t)len) {
            st = err_set(err, SD_ERR_FORMAT, "%s: truncated or corrupt at token %d of %d (does the tokenizer match the model's vocabulary?)",
                         path, i, n_vocab);
            goto done;
        }
        /* spaces become "▁" so one SentencePiece implementation serves both file kinds */
        int cl = 0;
        for (int k = 0; k < len; k++) {
            if (buf[k] == ' ') {
                memcpy(conv + cl, "\xe2\x96\x81", 3);
                cl += 3;
            } else {
                conv[cl++] = buf[k];
            }
        }
        t->score[i] = sc;
        if (!tok_set(t, i, conv, (size_t)cl)) {
            st = err_set(err, SD_ERR_NOMEM, "out of memory");
            goto done;
        }
        bool is_byte = len == 6 && memcmp(buf, "<0x", 3) == 0 && buf[5] == '>';
        t->attr[i] = i == 0 ? TOK_ATTR_UNKNOWN : (i == 1 || i == 2) ? TOK_ATTR_CONTROL : is_byte ? TOK_ATTR_BYTE : TOK_ATTR_NORMAL;
    }
    if (fgetc(fp) != EOF) {
        st = err_set(err, SD_ERR_FORMAT, "%s: has more than the model's %d tokens (tokenizer for another model?)", path,
                     n_vocab);
        goto done;
    }
    st = tok_finish(t, err);
done:
    fclose(fp);
    if (st) {
        tok_free(t);
        return st;
    }
    *out = t;
    return SD_OK;
}

int tok_find(const tokenizer *t, const char *s, size_t len) { return strmap_get(t->by_text, s, len); }

/* ------------------------------------------------------------------ encode */
static void encode_fragment(const tokenizer *t, const char *s, size_t n, bool prev_special, tokbuf *b) {
    if (t->kind == TOK_KIND_SPM) {
        /* SentencePiece: prefix a space (after BOS / a special token), spaces -> "▁", then BPE by scores. */
        size_t extra = 0;
        for (size_t i = 0; i < n; i++) extra += s[i] == ' ';
        bool pre = t->add_space_prefix && prev_special;
        char *e = malloc(n + 2 * extra + 3 + 1);
        if (!e) {
            b->oom = true;
            return;
        }
        size_t k = 0;
        if (pre) { memcpy(e, "\xe2\x96\x81", 3); k = 3; }
        for (size_t i = 0; i < n; i++) {
            if (s[i] == ' ') { memcpy(e + k, "\xe2\x96\x81", 3); k += 3; }
            else e[k++] = s[i];
        }
        tok_spm_encode(t, e, k, b);
        free(e);
    } else {
        tok_bpe_encode(t, s, n, b);
    }
}

int tok_encode(const tokenizer *t, const char *text, size_t len, bool add_bos, bool parse_special, int32_t *out,
               int cap) {
    tokbuf b = {0};
    if (add_bos && t->bos >= 0) tokbuf_push(&b, t->bos);
    size_t start = 0, i = 0;
    bool prev_special = true;
    while (i < len && parse_special) {
        int hit = -1;
        for (int k = 0; k < t->n_special; k++) {
            int id = t->special[k];
            if ((size_t)t->len[id] <= len - i && memcmp(text + i, t->text[id], (size_t)t->len[id]) == 0) {
                hit = id;
                break;
            }
        }
        if (hit < 0) {
            i++;
            continue;
        }
        if (i > start) {
            encode_fragment(t, text + start, i - start, prev_special, &b);
            prev_special = false;
        }
        tokbuf_push(&b, hit);
        prev_special = true;
        i += (size_t)t->len[hit];
        start = i;
    }
    if (len > start) encode_fragment(t, text + start, len - start, prev_special, &b);
    if (b.oom) {
        free(b.ids);
        return -1;
    }
    for (int k = 0; k < b.n && k < cap; k++) out[k] = b.ids[k];
    int n = b.n;
    free(b.ids);
    return n;
}

/* ------------------------------------------------------------------ decode */
int tok_piece(const tokenizer *t, int32_t id, char *buf, int cap) {
    if (id < 0 || id >= t->n_vocab) return -1;
    char tmp[1024];
    int n = 0;
    const char *s = t->text[id];
    int len = t->len[id];
    switch (t->attr[id]) {
    case TOK_ATTR_CONTROL: case TOK_ATTR_UNUSED: break;
    case TOK_ATTR_UNKNOWN: memcpy(tmp, "\xe2\x96\x85", 3); n = 3; break;
    case TOK_ATTR_BYTE:
        if (t->kind == TOK_KIND_SPM && len == 6) {
            tmp[0] = (char)strtol(s + 3, NULL, 16);
            n = 1;
            break;
        }
        /* fallthrough */
    default:
        if (t->attr[id] == TOK_ATTR_USER || t->kind == TOK_KIND_SPM) {
            for (int i = 0; i < len && n < (int)sizeof tmp - 3; i++) {
                if (i + 2 < len && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
                    tmp[n++] = ' ';
                    i += 2;
                } else {
                    tmp[n++] = s[i];
                }
            }
        } else { /* byte-level BPE: each code point stands for one byte */
            for (int i = 0; i < len && n < (int)sizeof tmp;) {
                int c;
                i += utf8_decode(s + i, (size_t)(len - i), &c);
                int by = tok_cpt_to_byte(c);
                if (by >= 0) tmp[n++] = (char)by;
            }
        }
    }
    if (n > 256) n = 256;
    memcpy(buf, tmp, (size_t)(n < cap ? n : cap));
    return n;
}
