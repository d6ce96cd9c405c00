/* tok: tokenizers — SentencePiece-BPE (GGUF `llama`, llama2.c tokenizer.bin) and GPT-2 byte-level BPE
 * (GGUF `gpt2`). Vocabulary tables, encode, decode of one token. */
#ifndef SD_TOK_TOK_H
#define SD_TOK_TOK_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io/gguf.h"
#include "specdec.h"

typedef enum tok_kind { TOK_KIND_SPM, TOK_KIND_BPE } tok_kind;

typedef enum tok_attr {
    TOK_ATTR_NORMAL = 1, TOK_ATTR_UNKNOWN = 2, TOK_ATTR_CONTROL = 3, TOK_ATTR_USER = 4, TOK_ATTR_UNUSED = 5,
    TOK_ATTR_BYTE = 6,
} tok_attr;

typedef struct str_map str_map; /* string -> int hash table */

typedef struct tokenizer {
    tok_kind kind;
    int n_vocab;
    char **text;      /* [n_vocab] NUL-terminated token texts (GGUF form: "▁" for spaces in SPM) */
    int *len;         /* [n_vocab] byte lengths */
    float *score;     /* [n_vocab] SPM merge scores */
    uint8_t *attr;    /* [n_vocab] tok_attr */
    str_map *by_text; /* text -> id */
    str_map *merges;  /* BPE: "left right" -> rank */
    int byte_tok[256]; /* SPM byte-fallback token for each byte (-1 when absent) */
    int32_t bos, eos, eot, unk, pad;
    bool add_bos, add_space_prefix;
    int *special;     /* [n_special] control/user tokens, longest text first (for parse_special) */
    int n_special;
    char *pre_name;   /* tokenizer.ggml.pre value, for reports (the gpt-2 pre-tokenizer serves every BPE vocabulary) */
} tokenizer;

sd_status tok_from_gguf(const gguf_file *f, tokenizer **out, sd_error *err);
/* llama2.c tokenizer.bin: float max_len header, then n_vocab x {float score, int32 len, bytes}. */
sd_status tok_from_llama2c(const char *path, int n_vocab, tokenizer **out, sd_error *err);
void tok_free(tokenizer *t);

/* Encodes text; see sd_tokenize. Returns the number of tokens (may exceed cap: only cap are written),
 * or -1 when out of memory. */
int tok_encode(const tokenizer *t, const char *text, size_t len, bool add_bos, bool parse_special, int32_t *out,
               int cap);
/* Raw bytes of a token's text as it appears in output; see sd_token_to_piece. */
int tok_piece(const tokenizer *t, int32_t id, char *buf, int cap);
int tok_find(const tokenizer *t, const char *s, size_t len); /* -1 when absent */

/* Length of the UTF-8 sequence starting with byte c (1 for invalid lead bytes). */
static inline int utf8_len(unsigned char c) {
    if (c < 0x80) return 1;
    if ((c & 0xe0) == 0xc0) return 2;
    if ((c & 0xf0) == 0xe0) return 3;
    if ((c & 0xf8) == 0xf0) return 4;
    return 1;
}

/* ---- internal: shared by tok.c, tok_spm.c, tok_bpe.c */
typedef struct tokbuf {
    int32_t *ids; /* [cap] */
    int n, cap;
    bool oom;
} tokbuf;
void tokbuf_push(tokbuf *b, int32_t id);
/* Encode one raw-text fragment (no special-token parsing) and append to b. */
void tok_spm_encode(const tokenizer *t, const char *text, size_t len, tokbuf *b);
void tok_bpe_encode(const tokenizer *t, const char *text, size_t len, tokbuf *b);
/* GPT-2 byte <-> unicode code point mapping. */
int tok_byte_to_cpt(unsigned char b);
int tok_cpt_to_byte(int cpt); /* -1 when cpt is not a mapped byte */
int utf8_encode(int cpt, char *out); /* returns bytes written (1..4) */
int utf8_decode(const char *s, size_t len, int *cpt); /* bytes consumed (>= 1); invalid -> cpt = -1 */
#endif
