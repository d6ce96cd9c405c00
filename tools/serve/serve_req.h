/* serve_req: an OpenAI request body (JSON) read into a request, with every field's type and range checked.
 * Completions take `prompt`, chat completions `messages` (rendered with the server's chat template); both take
 * max_tokens, temperature, top_p, top_k, min_p, repeat_penalty, seed, stop, stream, stream_options.include_usage,
 * n (1 only), ignore_eos (llama.cpp's extension) and the optional `speculative` object {"method": NAME, KEY: VALUE, ...} validated through the method
 * registry. Errors are OpenAI-style: an HTTP status, a type, a code, the parameter and a message. */
#ifndef SD_SERVE_REQ_H
#define SD_SERVE_REQ_H
#include <stdbool.h>
#include <stdint.h>

#include "chat_tpl.h"
#include "specdec.h"

typedef enum { SV_COMPLETION, SV_CHAT } sv_kind;

typedef struct sv_error {
    int http;          /* 400, 401, 404, 413, 500, 503, ... */
    const char *type;  /* "invalid_request_error", "server_error", ... (static) */
    const char *code;  /* machine-readable code or NULL (static) */
    char param[64];    /* the offending parameter or "" */
    char msg[512];
} sv_error;

/* Sets *e and returns false (for `return sv_fail(...)`). */
bool sv_fail(sv_error *e, int http, const char *type, const char *code, const char *param, const char *fmt, ...);

/* What the server contributes to every request: defaults and what the checks need. */
typedef struct sv_defaults {
    const sd_model *model, *dmodel; /* dmodel: the draft model, NULL when the server has none */
    sd_ctx *ctx, *dctx;             /* read-only use here (limits); dctx: the draft context or NULL */
    const sd_exit_heads *heads;     /* the server's exit heads or NULL */
    sd_accept_head *const *accept;  /* SpecDec++: the server's acceptance heads (--accept-head, repeatable): a
                                       specdecpp request takes the first one made for its drafter */
    int n_accept;
    sd_sampler_params sampling;     /* the server's sampling defaults (seed: drawn per request unless given) */
    sd_spec_params spec;            /* the server's default method */
    sd_spec_params seeded;          /* the default method of a request that samples with a seed of its own: spec, or
                                       plain decoding where spec is auto by default (auto's choices follow measured
                                       times, so the sampled text of a seed would not be reproducible) */
    int n_predict;                  /* max_tokens when absent (-1: to the end of the context) */
    chat_tpl tpl;                   /* CT_NONE: chat requests refused */
    bool no_bos;
    sd_swift_state *swift;          /* SWIFT: the optimiser state every swift request shares (the scheduler thread
                                       uses it, one session step at a time), or NULL */
    sd_auto_state *autos;           /* auto: the estimates every auto request starts from and leaves (likewise) */
} sv_defaults;

#define SV_MAX_STOP 4

typedef struct sv_request {
    sv_kind kind;
    char *prompt;       /* the text the model continues (chat: the rendered conversation); malloc'd */
    int max_tokens;     /* -1: not given */
    sd_sampler_params sampling;
    char *stop[SV_MAX_STOP]; /* malloc'd, non-empty */
    int n_stop;
    bool stream, include_usage;
    bool ignore_eos;     /* llama.cpp's extension: keep going after an end-of-generation token */
    sd_spec_params spec; /* the method to use (draft_ctx / exit_heads filled in) */
} sv_request;

/* Reads body[len] (not necessarily NUL-terminated). On failure returns false with *e filled (the request is
 * left empty). Free with sv_request_free. */
bool sv_request_parse(const char *body, size_t len, sv_kind kind, const sv_defaults *def, uint64_t seed,
                      sv_request *out, sv_error *e);
void sv_request_free(sv_request *r);
#endif
