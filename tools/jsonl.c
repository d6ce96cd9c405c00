#define _POSIX_C_SOURCE 200809L
#include "jsonl.h"

#include "specdec.h"

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

/* Parses a string at p->i (which is '"'); returns a malloc'd UTF-8 copy or NULL. */
static char *str(jp *p) {
    if (p->i >= p->n || p->s[p->i] != '"') return p->err = "a string was expected", NULL;
    p->i++;
    char *o = malloc(p->n - p->i + 1);
    if (!o) return p->err = "out of memory", NULL;
    size_t k = 0;
    while (p->i < p->n && p->s[p->i] != '"') {
        char c = p->s[p->i++];
        if (c != '\\') {
            o[k++] = c;
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
            if (v >= 0xd800 && v < 0xdc00 && p->i + 6 <= p->n && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
                p->i += 2;
                if (!hex4(p, &lo) || lo < 0xdc00 || lo > 0xdfff) goto bad;
                v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
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

static int skip_value(jp *p, int depth);

static int skip_container(jp *p, char open, char close, int depth) {
    p->i++;
    ws(p);
    if (p->i < p->n && p->s[p->i] == close) return p->i++, 1;
    for (;;) {
        ws(p);
        if (open == '{') {
            char *k = str(p);
            if (!k) return 0;
            free(k);
            ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') return p->err = "':' expected", 0;
            p->i++;
        }
        if (!skip_value(p, depth + 1)) return 0;
        ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == close) return p->i++, 1;
        return p->err = "',' or a closing bracket expected", 0;
    }
}

static int skip_value(jp *p, int depth) {
    ws(p);
    if (depth > 64) return p->err = "nested too deeply", 0;
    if (p->i >= p->n) return p->err = "a value was expected", 0;
    char c = p->s[p->i];
    if (c == '"') {
        char *s = str(p);
        free(s);
        return s != NULL;
    }
    if (c == '{') return skip_container(p, '{', '}', depth);
    if (c == '[') return skip_container(p, '[', ']', depth);
    size_t st = p->i;
    while (p->i < p->n && strchr("+-0123456789.eEtruefalsn", p->s[p->i])) p->i++;
    return p->i > st ? 1 : (p->err = "a value was expected", 0);
}

static int parse_line(jp *p, jl_question *q) {
    memset(q, 0, sizeof *q);
    ws(p);
    if (p->i >= p->n || p->s[p->i] != '{') return p->err = "an object was expected", 0;
    p->i++;
    for (;;) {
        ws(p);
        char *k = str(p);
        if (!k) return 0;
        ws(p);
        if (p->i >= p->n || p->s[p->i] != ':') return free(k), p->err = "':' expected", 0;
        p->i++;
        ws(p);
        int ok = 1;
        if (!strcmp(k, "category") || (!strcmp(k, "question_id") && p->i < p->n && p->s[p->i] == '"')) {
            char *v = str(p);
            ok = v != NULL;
            if (v) snprintf(!strcmp(k, "category") ? q->category : q->id, 64, "%s", v);
            free(v);
        } else if (!strcmp(k, "question_id")) {
            size_t st = p->i;
            ok = skip_value(p, 1);
            snprintf(q->id, 64, "%.*s", (int)(p->i - st), p->s + st);
        } else if (!strcmp(k, "turns")) {
            if (p->i >= p->n || p->s[p->i] != '[') ok = 0, p->err = "\"turns\" must be an array of strings";
            else {
                p->i++;
                ws(p);
                while (ok && p->i < p->n && p->s[p->i] != ']') {
                    char *t = str(p);
                    char **nt = t ? realloc(q->turns, (size_t)(q->n_turns + 1) * sizeof *nt) : NULL;
                    if (!nt) {
                        free(t);
                        ok = 0;
                        break;
                    }
                    q->turns = nt;
                    q->turns[q->n_turns++] = t;
                    ws(p);
                    if (p->i < p->n && p->s[p->i] == ',') p->i++, ws(p);
                }
                if (ok && p->i < p->n) p->i++;
            }
        } else {
            ok = skip_value(p, 1);
        }
        free(k);
        if (!ok) return 0;
        ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == '}') break;
        return p->err = "',' or '}' expected", 0;
    }
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

int jl_load(const char *path, jl_question **out, char *err, int cap) {
    *out = NULL;
    char *text = NULL;
    sd_error e = {0};
    if (sd_read_text_file(path, (size_t)256 << 20, &text, NULL, &e) != SD_OK) {
        snprintf(err, (size_t)cap, "%s", e.msg);
        return -1;
    }
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
            snprintf(err, (size_t)cap, "%s: out of memory", path);
            jl_free(qs, n);
            free(text);
            return -1;
        }
        qs = nq;
        if (!parse_line(&p, &qs[n])) {
            snprintf(err, (size_t)cap, "%s:%d: %s", path, lineno, p.err ? p.err : "invalid JSON");
            jl_free(qs, n + 1);
            free(text);
            return -1;
        }
        n++;
    }
    free(text);
    *out = qs;
    return n;
}
