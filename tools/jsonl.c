#define _POSIX_C_SOURCE 200809L
#include "jsonl.h"

#include "specdec.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct jp {
    const char *s;
    size_t i, n;
    const char *err;
} jp;

static void ws(jp *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\r' || p->s[p->i] == '\n')) p->i++;
}

static int hex4(jp *p, unsigned *v) {
    if (p->i + 4 > p->n) return 0;
    *v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p->s[p->i++];
        *v <<= 4;
        if (c >= '0' && c <= '9') *v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') *v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') *v |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    return 1;
}

static size_t put_utf8(unsigned c, char *o) {
    if (c < 0x80) { o[0] = (char)c; return 1; }
    if (c < 0x800) { o[0] = (char)(0xc0 | (c >> 6)); o[1] = (char)(0x80 | (c & 0x3f)); return 2; }
    if (c < 0x10000) { o[0] = (char)(0xe0 | (c >> 12)); o[1] = (char)(0x80 | ((c >> 6) & 0x3f)); o[2] = (char)(0x80 | (c & 0x3f)); return 3; }
    o[0] = (char)(0xf0 | (c >> 18)); o[1] = (char)(0x80 | ((c >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3f)); o[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

/* Length of the valid UTF-8 sequence at s[0..n) (1..4), 0 when invalid (overlong, surrogate, > U+10FFFF). */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t k = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    if (!k || c > 0xf4 || k > n) return 0;
    unsigned v = c & (0xff >> (k + 1));
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if ((k == 3 && v < 0x800) || (k == 4 && (v < 0x10000 || v > 0x10ffff)) || (v >= 0xd800 && v < 0xe000)) return 0;
    return k;
}

/* Parses a string at p->i (which is '"'); returns a malloc'd UTF-8 copy or NULL. RFC 8259: no raw control
 * characters, only the listed escapes, valid UTF-8; and what a C string can carry: no \u0000, no lone surrogates. */
static char *str(jp *p) {
    if (p->i >= p->n || p->s[p->i] != '"') return p->err = "a string was expected", NULL;
    p->i++;
    char *o = malloc(p->n - p->i + 1);
    if (!o) return p->err = "out of memory", NULL;
    size_t k = 0;
    while (p->i < p->n && p->s[p->i] != '"') {
        unsigned char c = (unsigned char)p->s[p->i];
        if (c < 0x20) {
            free(o);
            return p->err = "a control character inside a string (it must be escaped)", NULL;
        }
        if (c >= 0x80) {
            size_t u = utf8_len((const unsigned char *)p->s + p->i, p->n - p->i);
            if (!u) {
                free(o);
                return p->err = "invalid UTF-8 inside a string", NULL;
            }
            memcpy(o + k, p->s + p->i, u);
            k += u, p->i += u;
            continue;
        }
        p->i++;
        if (c != '\\') {
            o[k++] = (char)c;
            continue;
        }
        if (p->i >= p->n) break;
        char e = p->s[p->i++];
        switch (e) {
        case 'n': o[k++] = '\n'; break;
        case 't': o[k++] = '\t'; break;
        case 'r': o[k++] = '\r'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case '/': case '\\': case '"': o[k++] = e; break;
        case 'u': {
            unsigned v, lo;
            if (!hex4(p, &v)) goto bad;
            if (v >= 0xdc00 && v < 0xe000) goto bad; /* a low surrogate first */
            if (v >= 0xd800 && v < 0xdc00) {
                if (!(p->i + 6 <= p->n && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u')) goto bad;
                p->i += 2;
                if (!hex4(p, &lo) || lo < 0xdc00 || lo > 0xdfff) goto bad;
                v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
            }
            if (v == 0) {
                free(o);
                return p->err = "\\u0000 inside a string", NULL;
            }
            k += put_utf8(v, o + k);
            break;
        }
        default: goto bad;
        }
    }
    if (p->i >= p->n) {
        free(o);
        return p->err = "unterminated string", NULL;
    }
    p->i++;
    o[k] = 0;
    return o;
bad:
    free(o);
    return p->err = "invalid escape in a string", NULL;
}

static bool digits(jp *p) {
    size_t st = p->i;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    return p->i > st;
}

/* RFC 8259 number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int number(jp *p) {
    if (p->i < p->n && p->s[p->i] == '-') p->i++;
    if (p->i < p->n && p->s[p->i] == '0') p->i++;
    else if (!digits(p)) return p->err = "a value was expected", 0;
    if (p->i < p->n && p->s[p->i] == '.') {
        p->i++;
        if (!digits(p)) return p->err = "digits expected after '.'", 0;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (!digits(p)) return p->err = "digits expected in an exponent", 0;
    }
    return 1;
}

static int literal(jp *p, const char *w) {
    size_t n = strlen(w);
    if (p->n - p->i < n || memcmp(p->s + p->i, w, n)) return p->err = "a value was expected", 0;
    p->i += n;
    return 1;
}

static int skip_value(jp *p, int depth);

/* The members of an object or the elements of an array at p->i (its opening bracket): each element through
 * elem(p, key, user) (key NULL in arrays); commas strictly between elements. */
typedef int (*elem_fn)(jp *p, const char *key, void *user, int depth);
static int container(jp *p, char close, elem_fn elem, void *user, int depth) {
    if (depth > 64) return p->err = "nested too deeply", 0;
    p->i++;
    ws(p);
    if (p->i < p->n && p->s[p->i] == close) return p->i++, 1;
    for (;;) {
        ws(p);
        char *k = NULL;
        if (close == '}') {
            if (!(k = str(p))) return 0;
            ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') return free(k), p->err = "':' expected", 0;
            p->i++;
            ws(p);
        }
        int ok = elem(p, k, user, depth);
        free(k);
        if (!ok) return 0;
        ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == close) return p->i++, 1;
        return p->err = close == '}' ? "',' or '}' expected" : "',' or ']' expected", 0;
    }
}

static int skip_elem(jp *p, const char *key, void *user, int depth) {
    (void)key, (void)user;
    return skip_value(p, depth + 1);
}

static int skip_value(jp *p, int depth) {
    ws(p);
    if (p->i >= p->n) return p->err = "a value was expected", 0;
    char c = p->s[p->i];
    if (c == '"') {
        char *s = str(p);
        free(s);
        return s != NULL;
    }
    if (c == '{' || c == '[') return container(p, c == '{' ? '}' : ']', skip_elem, NULL, depth);
    if (c == 't') return literal(p, "true");
    if (c == 'f') return literal(p, "false");
    if (c == 'n') return literal(p, "null");
    return number(p);
}

static int copy64(jp *p, char *dst, const char *v, const char *what) {
    if (strlen(v) >= 64) return p->err = what, 0;
    memcpy(dst, v, strlen(v) + 1);
    return 1;
}

static int turn_elem(jp *p, const char *key, void *user, int depth) {
    (void)key, (void)depth;
    jl_question *q = user;
    if (p->i >= p->n || p->s[p->i] != '"') return p->err = "\"turns\" must be an array of strings", 0;
    char *t = str(p);
    if (!t) return 0;
    char **nt = realloc(q->turns, (size_t)(q->n_turns + 1) * sizeof *nt);
    if (!nt) return free(t), p->err = "out of memory", 0;
    q->turns = nt;
    q->turns[q->n_turns++] = t;
    return 1;
}

static int question_member(jp *p, const char *k, void *user, int depth) {
    jl_question *q = user;
    char c = p->i < p->n ? p->s[p->i] : 0;
    if (!strcmp(k, "category") || (!strcmp(k, "question_id") && c == '"')) {
        char *v = str(p);
        if (!v) return 0;
        int ok = !strcmp(k, "category") ? copy64(p, q->category, v, "\"category\" is longer than 63 bytes")
                                       : copy64(p, q->id, v, "\"question_id\" is longer than 63 bytes");
        free(v);
        return ok;
    }
    if (!strcmp(k, "question_id")) {
        size_t st = p->i;
        if (c != '-' && !(c >= '0' && c <= '9')) return p->err = "\"question_id\" must be a string or a number", 0;
        if (!number(p)) return 0;
        if (p->i - st >= 64) return p->err = "\"question_id\" is longer than 63 bytes", 0;
        snprintf(q->id, 64, "%.*s", (int)(p->i - st), p->s + st);
        return 1;
    }
    if (!strcmp(k, "turns")) {
        if (c != '[') return p->err = "\"turns\" must be an array of strings", 0;
        if (q->n_turns) return p->err = "\"turns\" given twice", 0;
        return container(p, ']', turn_elem, q, depth + 1);
    }
    return skip_value(p, depth + 1);
}

/* One line: exactly one object (white space around it), nothing else. */
static int parse_line(jp *p, jl_question *q) {
    memset(q, 0, sizeof *q);
    ws(p);
    if (p->i >= p->n || p->s[p->i] != '{') return p->err = "an object was expected", 0;
    if (!container(p, '}', question_member, q, 0)) return 0;
    ws(p);
    if (p->i < p->n) return p->err = "text after the object", 0;
    if (!q->n_turns) return p->err = "no \"turns\"", 0;
    if (!q->category[0]) snprintf(q->category, sizeof q->category, "default");
    return 1;
}

void jl_free(jl_question *q, int n) {
    for (int i = 0; i < n; i++) {
        for (int t = 0; t < q[i].n_turns; t++) free(q[i].turns[t]);
        free(q[i].turns);
    }
    free(q);
}

int jl_parse(char *text, const char *name, jl_question **out, char *err, int cap) {
    *out = NULL;
    jl_question *qs = NULL;
    int n = 0, lineno = 0;
    for (char *line = text, *next; *line; line = next) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        next = nl ? nl + 1 : line + len;
        if (nl) *nl = 0; /* each line NUL-terminated, as the parser expects */
        lineno++;
        jp p = {line, 0, len, NULL};
        ws(&p);
        if (p.i == p.n) continue; /* blank line */
        jl_question *nq = realloc(qs, (size_t)(n + 1) * sizeof *nq);
        if (!nq) {
            snprintf(err, (size_t)cap, "%s: out of memory", name);
            jl_free(qs, n);
            return -1;
        }
        qs = nq;
        if (!parse_line(&p, &qs[n])) {
            snprintf(err, (size_t)cap, "%s:%d: %s (at byte %zu)", name, lineno, p.err ? p.err : "invalid JSON", p.i + 1);
            jl_free(qs, n + 1);
            return -1;
        }
        n++;
    }
    *out = qs;
    return n;
}

int jl_load(const char *path, jl_question **out, char *err, int cap) {
    *out = NULL;
    char *text = NULL;
    sd_error e = {0};
    if (sd_read_text_file(path, (size_t)256 << 20, &text, NULL, &e) != SD_OK) {
        snprintf(err, (size_t)cap, "%s", e.msg);
        return -1;
    }
    int n = jl_parse(text, path, out, err, cap);
    free(text);
    return n;
}
