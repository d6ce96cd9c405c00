/*
 * specdec.h — the one public header of the specdec inference engine.
 *
 * Conventions (apply to every call below):
 *  - Handles are opaque. Whatever a *_new / *_load call returns through an out-pointer is owned by the
 *    caller and released with the matching *_free (which accepts NULL).
 *  - Calls that can fail return an sd_status. On failure they fill the optional sd_error (may be NULL) with a
 *    message that says what is wrong and what state was kept; outputs are left untouched unless stated.
 *  - The library never exits the process and never prints, except where a call says it does.
 *  - A model may be shared read-only by several contexts and threads; a context is used by one thread at a time.
 *  - Pointers passed in are borrowed for the duration of the call only, unless stated.
 */
#ifndef SPECDEC_H
#define SPECDEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- version */
/* The one place the version is defined: the Makefile reads it from here for the shared library's file name and
 * soname (libspecdec.so.MAJOR.MINOR.PATCH, soname libspecdec.so.MAJOR) and for specdec.pc. */
#define SPECDEC_VERSION_MAJOR 0
#define SPECDEC_VERSION_MINOR 1
#define SPECDEC_VERSION_PATCH 0
#define SPECDEC_VERSION "0.1.0"

/* The version of the library linked at run time ("0.1.0": the SPECDEC_VERSION it was built with). */
const char *sd_version(void);

/* ---------------------------------------------------------------- status */
typedef enum sd_status {
    SD_OK = 0,
    SD_ERR_IO,          /* file missing / unreadable */
    SD_ERR_FORMAT,      /* file is not a valid model / tokenizer file */
    SD_ERR_UNSUPPORTED, /* valid file, but an architecture / type / feature this build does not handle */
    SD_ERR_ARG,         /* invalid argument */
    SD_ERR_NOMEM,       /* allocation failed */
    SD_ERR_CTX_FULL,    /* the KV cache of a sequence has no room for the block */
} sd_status;

typedef struct sd_error {
    sd_status status;
    char msg[512];
} sd_error;

/* Static string naming a status ("ok", "io error", ...). */
const char *sd_status_str(sd_status st);

/* ---------------------------------------------------------------- model */
typedef struct sd_model sd_model;

typedef struct sd_model_params {
    /* llama2.c .bin models only: path of the tokenizer.bin. NULL: tok<vocab>.bin, then tokenizer.bin, beside
     * the model file. Ignored for GGUF (the tokenizer is in the metadata). */
    const char *tokenizer_path;
    /* NULL: weights as stored. "f32", "f16", "bf16", "q8_0", "q4_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k": convert
     * every weight matrix at load (into memory the model owns), e.g. a Q4_0 copy of an F16 target as its own draft.
     * Matrices whose rows are not whole blocks of the type (32, or 256 for the K-quants) become q8_0 (rows of whole
     * 32-blocks) or f16. */
    const char *convert_type;
    /* Read the whole file into memory the process owns instead of mapping it (the page cache is not guaranteed
     * to keep a mapping's pages on a loaded host; as llama.cpp's --no-mmap). */
    bool no_mmap;
    /* Lock the weights in RAM (mlock; as llama.cpp's --mlock): an error naming RLIMIT_MEMLOCK when it cannot. */
    bool mlock;
} sd_model_params;

sd_model_params sd_model_default_params(void);

/* Loads a GGUF (v2/v3) or llama2.c (.bin, v0 header) model. The file is mmapped read-only and validated
 * (header, metadata, tensor table, shapes the architecture expects). On failure *out is set to NULL. */
sd_status sd_model_load(const char *path, const sd_model_params *params, sd_model **out, sd_error *err);
void sd_model_free(sd_model *model);

typedef struct sd_model_info {
    const char *arch;        /* "llama", "qwen2", ... (static string) */
    const char *weight_type; /* dominant weight type of the layer matrices: "f32", "f16", "bf16", "q8_0", "q4_0", "q4_K", ... */
    int n_vocab, n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx_train;
    float rope_freq_base, norm_eps;
    size_t weight_bytes; /* bytes of all weight tensors */
    size_t decode_bytes; /* weight bytes one decode step reads: layer matrices, norms, LM head, one embedding row */
    uint64_t matmul_macs; /* multiply-adds of the weight matrices per position (layer matrices + LM head) */
} sd_model_info;

void sd_model_get_info(const sd_model *model, sd_model_info *info);

/* The compute ceiling of this machine's block kernels for a weight type ("f32", "f16", "bf16", "q8_0", "q4_0"):
 * multiply-adds per second of the kernel's inner arithmetic with every operand in registers (no memory traffic),
 * on n_threads threads at once, each running about `seconds`. 0 when the type is unknown or the scalar kernels
 * are in use (no such step), -1 when threads cannot be started. For benchmarks: a block of k positions cannot
 * take less than k * matmul_macs / this. */
double sd_kernel_peak(const char *type, int n_threads, double seconds);

/* A string metadata value of a GGUF model (e.g. "tokenizer.chat_template"): copies at most cap-1 bytes and a NUL
 * into buf; returns its full length, or -1 when absent (or the model is a llama2.c file). */
int sd_model_meta_str(const sd_model *model, const char *key, char *buf, int cap);

/* Writes a GGUF with seeded random weights of a named real shape (for speed work; weight values do not matter
 * for speed). shape: "llama-68m", "llama-160m", "tinyllama-1.1b", "llama2-7b", "test-tiny" (dim 64, 2 layers) or
 * "test-256" (dim 256, ffn 512, 2 layers: rows of whole K-quant blocks). type: "f32", "f16", "bf16", "q8_0", "q4_0",
 * "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", or llama.cpp's mixes "q4_k_m", "q5_k_m" (Q6_K for output.weight and for
 * attn_v and ffn_down of the first and last eighth of the layers and every third between) (norms stay f32; a matrix
 * whose rows are not whole blocks of its type takes q8_0 or f16). vocab_path: a GGUF whose tokenizer.* metadata is
 * copied (e.g. ../shared/models/vocab/ggml-vocab-llama-spm.gguf). Written streaming (memory O(row)). progress may
 * be NULL. */
typedef struct sd_gen_model_params {
    const char *shape;
    const char *type;
    const char *vocab_path;
    uint64_t seed;
    void (*progress)(void *user, uint64_t bytes_done, uint64_t bytes_total);
    void *user;
} sd_gen_model_params;
/* NULL-terminated list of the shape names. */
const char *const *sd_gen_model_shapes(void);
sd_status sd_model_generate(const sd_gen_model_params *params, const char *out_path, sd_error *err);

/* Writes a wide model that computes exactly the function of a small trained GGUF model (same layers, vocabulary
 * and head size) while costing what a model of the wide shape costs: a real-behaviour, real-cost test bed. The
 * residual stream keeps the small model's dims, the extra dims stay 0; extra heads and FFN units are seeded random
 * and feed nothing; RMSNorm weights are scaled by sqrt(D0/D) and epsilon by D0/D. dim must be larger than the small
 * model's and a multiple of its head size; n_head = dim / head size (0: derived); n_head_kv keeps the small model's
 * query heads per KV head (0: derived); n_ff >= the small model's (0: its n_ff scaled by dim / D0, rounded up to
 * 32); n_ctx 0 keeps the small model's context length. type as sd_gen_model_params (norms stay f32). */
typedef struct sd_embed_params {
    const char *small_path;
    int dim, n_head, n_head_kv, n_ff, n_ctx;
    const char *type;
    uint64_t seed;
    void (*progress)(void *user, uint64_t bytes_done, uint64_t bytes_total);
    void *user;
} sd_embed_params;
sd_status sd_model_embed(const sd_embed_params *params, const char *out_path, sd_error *err);

/* ---------------------------------------------------------------- tokenizer */
int32_t sd_token_bos(const sd_model *model); /* -1 when the vocabulary has none */
int32_t sd_token_eos(const sd_model *model);
bool sd_token_is_eog(const sd_model *model, int32_t token); /* end of generation (EOS, EOT, ...) */
bool sd_model_add_bos(const sd_model *model);               /* whether prompts start with BOS by default */

/* Encodes len bytes of text. add_bos: prepend BOS when the vocabulary has one. parse_special: text such as
 * "<s>" that spells a control token becomes that token. Writes at most cap ids to out and sets *n_out to the
 * number of tokens of the text; when that exceeds cap, returns SD_ERR_ARG and out holds the first cap ids. */
sd_status sd_tokenize(const sd_model *model, const char *text, size_t len, bool add_bos, bool parse_special,
                      int32_t *out, int cap, int *n_out, sd_error *err);

/* Raw bytes of one token (may be an incomplete UTF-8 sequence; control tokens give ""). Returns the piece
 * length, which may exceed cap (then only cap bytes are written; the piece is never longer than 256 bytes).
 * Returns -1 for an id outside the vocabulary. */
int sd_token_to_piece(const sd_model *model, int32_t token, char *buf, int cap);

/* Streaming-safe detokenizer: holds back the bytes of an incomplete UTF-8 character until it completes. */
typedef struct sd_detok {
    char pending[8];
    int n_pending;
} sd_detok;

/* Appends token's text to out (NUL-terminated); out must hold at least 300 bytes. Returns the bytes written. */
int sd_detok_push(const sd_model *model, sd_detok *st, int32_t token, char *out);
/* Writes what is still pending (an invalid tail is written as U+FFFD). out: >= 32 bytes. Returns bytes. */
int sd_detok_flush(sd_detok *st, char *out);

/* ---------------------------------------------------------------- context: KV cache + work buffers + threads */
typedef struct sd_ctx sd_ctx;

enum { SD_MAX_CTX = 1 << 20, SD_MAX_BATCH = 4096 }; /* the largest n_ctx and n_batch a context takes */
typedef struct sd_ctx_params {
    int n_ctx;     /* positions per sequence; 0 = the model's training context */
    int n_seq;     /* number of independent sequences (KV caches); default 1 */
    int n_batch;   /* largest block one sd_forward call takes; default 64 */
    int n_threads; /* worker threads incl. the caller; 0 = number of online CPUs */
    /* KV pool capacity in cells over all sequences, rounded up to whole pages (sd_kv_page_cells); 0 = n_seq *
     * n_ctx, so the pool never runs out before a sequence reaches n_ctx. Pages are allocated when first needed. */
    int n_kv_cells;
    /* kv-type: the KV cache's number format (sd_kv_type). SD_KV_F32 (default): float K and V, float attention.
     * SD_KV_F16: K and V rounded to fp16 and attention with the arithmetic of llama.cpp's CPU flash attention
     * (fp16 query and accumulator, online softmax), so that logits follow llama.cpp's; the pages hold halves (half
     * the memory of SD_KV_F32). */
    int kv_type;
} sd_ctx_params;
/* kv-type: values of sd_ctx_params.kv_type */
typedef enum sd_kv_type { SD_KV_F32 = 0, SD_KV_F16 = 1 } sd_kv_type;

sd_ctx_params sd_ctx_default_params(void);
sd_status sd_ctx_new(const sd_model *model, const sd_ctx_params *params, sd_ctx **out, sd_error *err);
void sd_ctx_free(sd_ctx *ctx);
int sd_ctx_n_ctx(const sd_ctx *ctx);
int sd_ctx_n_batch(const sd_ctx *ctx);
int sd_ctx_n_seq(const sd_ctx *ctx);
int sd_ctx_n_threads(const sd_ctx *ctx);
/* Transformer layers run so far by this context, a layer counted once per forward call whatever the number of
 * positions in the block (DEL's "layers loaded"; eTPL = generated tokens / layers loaded). */
uint64_t sd_ctx_layer_passes(const sd_ctx *ctx);
const sd_model *sd_ctx_model(const sd_ctx *ctx);

/* KV cache. Each layer of each sequence holds a prefix of positions [0, len). The cells live in pages (all layers
 * and KV heads of sd_kv_page_cells consecutive cells) from a pool shared by the context's sequences (capacity
 * n_kv_cells): a sequence takes pages as it grows and gives them back when truncated, so memory follows the live
 * tokens. A sequence that cannot get a page fails alone (SD_ERR_NOMEM, "KV pool exhausted"), changing nothing. */
int sd_kv_len(const sd_ctx *ctx, int seq, int layer); /* layer -1: the minimum over layers; -1 on bad args */
/* Drops every position >= n_pos in every layer of seq (rollback) and gives the pages wholly at or past n_pos back
 * to the pool (pages reserved below n_pos stay). n_pos beyond the length drops no positions. */
sd_status sd_kv_truncate(sd_ctx *ctx, int seq, int n_pos, sd_error *err);
/* Makes dst's cache a copy of src's (all layers), in pages of dst's own. SD_ERR_NOMEM (pool exhausted) leaves dst
 * as it was. */
sd_status sd_kv_copy_seq(sd_ctx *ctx, int src, int dst, sd_error *err);
/* Keeps, in every layer of seq, the cells start + cells[i] (i = 0..n-1, ascending, each >= 0) as the cells
 * start + i and drops every cell >= start + n: after verifying a token tree, the accepted path's K/V rows move into
 * place and the rejected nodes leave no trace. Layers shorter than a listed cell keep what they have up to it. */
sd_status sd_kv_keep(sd_ctx *ctx, int seq, int start, const int32_t *cells, int n, sd_error *err);
/* Copies the K and V rows of one layer at one position into k_out / v_out ([n_head_kv * head_dim] floats
 * each; either may be NULL). For tests and tools that compare caches. */
sd_status sd_kv_read(const sd_ctx *ctx, int seq, int layer, int pos, float *k_out, float *v_out, sd_error *err);
/* Makes sure seq can append n_more cells after its longest layer without taking memory in sd_forward: takes the
 * pages now. SD_ERR_NOMEM ("KV pool exhausted: ...") when the pool has too few pages left, SD_ERR_CTX_FULL when
 * that would pass n_ctx; either way nothing changes. Reserved pages are held until a truncation below them. */
sd_status sd_kv_reserve(sd_ctx *ctx, int seq, int n_more, sd_error *err);
/* Cells held by all sequences (whole pages, reservations included) and the pool's capacity in cells; either
 * pointer may be NULL. */
void sd_kv_pool_usage(const sd_ctx *ctx, int *cells_used, int *cells_capacity);
/* Returns the memory of the cache pages no sequence holds to the OS (a server going idle); they are mapped again
 * when needed. The sequences' contents are untouched. */
void sd_ctx_trim(sd_ctx *ctx);
/* Cells per KV page: 64, or n_ctx when smaller. */
int sd_kv_page_cells(const sd_ctx *ctx);

/* ---------------------------------------------------------------- forward over a block of positions */
typedef struct sd_block {
    int n;                /* number of positions, 1..n_batch */
    const int32_t *token; /* [n] token ids; used when layer_begin == 0 */
    const float *embd;    /* [n][n_embd] input hidden states; used when layer_begin > 0 */
    const int32_t *seq;   /* [n] sequence id of each position; NULL: all in sequence seq_all */
    const int32_t *pos;   /* [n] position of each entry; NULL: consecutive after each sequence's current length */
    /* [n] tree parent: index of the parent entry within the block, or -1 for a root (attached to the cached
     * prefix of its sequence). NULL: each entry's parent is the previous entry of the same sequence (a chain).
     * Parents must come before children. An entry attends to its sequence's cached prefix and to its ancestors
     * in the block (and itself). A tree's K/V are written in block order after the prefix; rollback after
     * verification is sd_kv_truncate. */
    const int32_t *parent;
    int32_t seq_all;      /* the sequence of every entry when seq is NULL (default 0) */
} sd_block;

/* Trained exit heads (one affine "translator" per exit depth, applied to the hidden state before the shared final
 * norm + LM head; see sd_train_exit_heads). Owned by the caller; must outlive every call that uses it. */
typedef struct sd_exit_heads sd_exit_heads;

typedef struct sd_forward_args {
    int layer_begin;          /* first layer run, 0..n_layer-1 */
    int layer_end;            /* one past the last layer run; 0 means n_layer */
    const uint8_t *skip;      /* [2 * n_layer] 1 = skip sub-layer (2l: attention of layer l, 2l+1: its MLP); NULL */
    const uint8_t *want_logits; /* [n] nonzero = compute logits of that position; NULL = the last position only */
    float *logits;            /* [n_wanted][n_vocab] out, in block order (final norm + LM head on the state after
                                 layer_end-1); NULL = no logits */
    float *hidden;            /* [n][n_embd] out: state after layer_end-1, before the final norm; NULL = not wanted */
    float *hidden_layers;     /* [layer_end - layer_begin][n][n_embd] out: the state after every layer run; NULL */
    const sd_exit_heads *exit_heads; /* when layer_end < n_layer: the head for depth layer_end is applied before the
                                        final norm for the logits (if it has one); NULL = the plain shared head */
    /* SWIFT: > 0: tree blocks only (parent set): roots attach to the first view_len cached cells of their sequence
     * instead of all of them (the block's K/V still go after every cached cell: a scratch extension to truncate),
     * so a block can re-run cached positions at their own positions (pos) without seeing what follows them. */
    int view_len;
} sd_forward_args;

/* Runs layers [layer_begin, layer_end) over the block, appending each position's K/V to the caches of the layers
 * it runs (position p of layer l goes at the layer's current length; every entry of a sequence must follow on
 * from that length: pos == len + index within the sequence's chain, or depth for trees). On error nothing in
 * the caches changes (SD_ERR_CTX_FULL when a sequence has no room, SD_ERR_NOMEM when the KV pool has no page left
 * for one: the pages of every sequence in the block are taken before anything is computed). The bits of a position's results do not
 * depend on the other positions in the block nor on the thread count (batch invariance). */
sd_status sd_forward(sd_ctx *ctx, const sd_block *block, const sd_forward_args *args, sd_error *err);

/* Loads heads written by sd_train_exit_heads; refuses heads made for another model (shape or weights). */
sd_status sd_exit_heads_load(const sd_model *model, const char *path, sd_exit_heads **out, sd_error *err);
void sd_exit_heads_free(sd_exit_heads *heads);
/* The depths (1..n_layer-1) that have a head: writes up to cap of them, returns how many there are. */
int sd_exit_heads_depths(const sd_exit_heads *heads, int *depths, int cap);

/* Trains exit heads (methods.md 3/4): caches the target's hidden states at every depth over a text corpus (stories
 * separated by lines "<|endofstory|>"), then fits per depth an affine translator A h + b (A initialised to the
 * identity) applied before the shared final norm + LM head, minimising KL(p_final || p_exit) with AdamW (decoupled
 * weight decay toward the identity). Agreement = top-1 of the exit == top-1 of the final layer. Checkpoints every
 * quarter epoch are scored on a validation split and the best one is kept (the identity counts as a checkpoint);
 * the report gives agreement on a separate held-out split. */
typedef struct sd_train_params {
    const char *corpus_path;
    int n_train_tokens;   /* positions to train on (default 48000) */
    int n_heldout_tokens; /* positions held out for the agreement report (default 4000) */
    int epochs;           /* passes over the training positions (default 3) */
    int batch;            /* positions per AdamW step (default 32) */
    float lr;             /* default 3e-4 */
    float weight_decay;   /* default 0.01 */
    int seq_len;          /* longest text chunk run through the model (default 256, cut to the context) */
    const int *depths;    /* depths to train (1..n_layer-1); NULL = all */
    int n_depths;
    int n_threads;        /* 0 = online CPUs */
    uint64_t seed;
    void (*progress)(void *user, const char *line); /* optional progress lines */
    void *user;
} sd_train_params;

typedef struct sd_train_report {
    int n_train, n_heldout; /* positions used (a further n_heldout/2 validate the checkpoint choice) */
    int n_layer;
    float agree_before[256], agree_after[256]; /* indexed by depth; -1 where not trained */
    float loss_first[256], loss_last[256];     /* mean KL over the first and the last epoch */
    int kept_step[256]; /* AdamW step of the kept checkpoint (best validation agreement); 0 = the identity was kept */
    double seconds;
} sd_train_report;

sd_train_params sd_train_default_params(void);
sd_status sd_train_exit_heads(const sd_model *model, const sd_train_params *params, sd_exit_heads **out,
                              sd_train_report *report, sd_error *err);
/* Writes heads to a GGUF file (loadable with sd_exit_heads_load). */
sd_status sd_exit_heads_save(const sd_exit_heads *heads, const char *path, sd_error *err);

/* SpecDec++'s acceptance head (methods.md 5): a small residual MLP on a drafter's hidden state giving
 * P(the drafted token is accepted | prefix), stored in its own GGUF tied to the drafter it was trained for (the draft
 * model, the target's first E layers for early exit, or the target with a SWIFT skip set). Owned by the caller; must
 * outlive its use. */
typedef struct sd_accept_head sd_accept_head;
sd_status sd_accept_head_load(const char *path, sd_accept_head **out, sd_error *err);
sd_status sd_accept_head_save(const sd_accept_head *head, const char *path, sd_error *err);
void sd_accept_head_free(sd_accept_head *head);
/* SD_OK when head reads the states of model m after `depth` layers (n_layer: a draft model's last layer; E: early
 * exit at E); otherwise SD_ERR_ARG naming the mismatch (another draft model, another exit layer). */
sd_status sd_accept_head_check(const sd_accept_head *head, const sd_model *m, int depth, sd_error *err);
/* SWIFT: SD_OK when head was trained on target's last state with a skip set of n_skip sub-layers (the skip ratio's set
 * size; the set itself may differ: the optimiser moves it); otherwise SD_ERR_ARG naming the mismatch. */
sd_status sd_accept_head_check_swift(const sd_accept_head *head, const sd_model *target, int n_skip, sd_error *err);
/* SWIFT heads: the skip set trained on into mask[2 n_layer] (may be NULL); returns its size (0: not a SWIFT head). */
int sd_accept_head_skip_set(const sd_accept_head *head, uint8_t *mask);

/* Trains an acceptance head (specdec train accept-head): the target answers corpus prompts; the drafter (draft
 * model, or the target's first exit_layer layers) reads token-mixed responses (each response position replaced by a
 * draft sample with probability 1 - mix); the head learns the soft acceptance min(1, p(x)/q(x)) of each drafted
 * token with a binary cross-entropy weighted w_rej on the rejection class; AdamW; a validation split picks the best
 * epoch; held-out binary KL per epoch and the held-out AUC of the head and of the draft's top-1 probability. */
typedef struct sd_accept_train_params {
    const char *corpus_path;
    int exit_layer;       /* 0: the draft model; E > 0: early exit at E (draft NULL) */
    const sd_exit_heads *exit_heads; /* early exit: the exit's LM head (NULL: the shared one) */
    const uint8_t *skip;  /* SWIFT (draft NULL, exit_layer 0): the skip set [2 n_layer] (1 = skipped; 2l attention,
                             2l+1 MLP; layers 0 and L-1 run), e.g. sd_swift_state_best's; the head reads the skipped
                             target's last state */
    int n_tokens;         /* labelled (drafted) positions to collect, train + validation + held out (default 24000) */
    int prompt_len;       /* shortest prompt taken from a corpus story: a seeded cut of prompt_len..8 prompt_len tokens
                             of its beginning (default 8); equal prompts are used once */
    int response_len;     /* tokens the target generates per prompt (default 96) */
    int blocks;           /* residual blocks k, 0..4 (default 3) */
    bool shared;          /* one block's weights used k times */
    float w_rej;          /* weight of the rejection class (default 6) */
    float mix;            /* r: probability a response position keeps the target's token (default 0.15) */
    float temp;           /* temperature of the target's responses and of p, q for the labels (default 1) */
    int epochs;           /* default 6 */
    int batch;            /* default 64 */
    float lr;             /* default 3e-3 */
    float weight_decay;   /* default 0.01 */
    int n_threads;        /* 0 = online CPUs */
    uint64_t seed;
    void (*progress)(void *user, const char *line);
    void *user;
} sd_accept_train_params;

typedef struct sd_accept_train_report {
    int n_train, n_val, n_heldout;   /* labelled positions */
    double mean_label;               /* mean soft acceptance of the held-out drafts */
    double loss_first, loss_last;    /* mean weighted BCE over the first and the last epoch (training) */
    double kl_before, kl_after;      /* held-out binary KL(label || head), rejection-weighted (see accept_train.c; the
                                        plain one when w_rej = 1): the initial constant predictor, the kept head */
    double auc_head, auc_top1;       /* held-out AUC (soft labels): the head, the draft's top-1 probability */
    int kept_epoch;                  /* epoch whose weights were kept (best validation loss) */
    double seconds;
} sd_accept_train_report;

sd_accept_train_params sd_accept_train_default_params(void);
/* draft: the draft model (NULL with exit_layer > 0). */
sd_status sd_train_accept_head(const sd_model *target, const sd_model *draft, const sd_accept_train_params *params,
                               sd_accept_head **out, sd_accept_train_report *report, sd_error *err);

/* Logits of hidden states taken after `depth` layers (1..n_layer): [exit head for that depth,] final norm, LM head.
 * h: [n][n_embd]; logits: [n][n_vocab]; n <= n_batch. The bits equal those sd_forward gives for the same state. */
sd_status sd_lm_head(sd_ctx *ctx, const float *h, int n, int depth, const sd_exit_heads *heads, float *logits,
                     sd_error *err);

/* ---------------------------------------------------------------- sampling */
typedef struct sd_sampler_params {
    float temp;           /* <= 0: greedy (argmax, lowest id on ties) */
    int top_k;            /* <= 0: off */
    float top_p;          /* >= 1: off */
    float min_p;          /* <= 0: off */
    float repeat_penalty; /* 1: off */
    int repeat_last_n;    /* tokens of history the penalty looks at */
    uint64_t seed;
} sd_sampler_params;

typedef struct sd_sampler sd_sampler;

sd_sampler_params sd_sampler_default_params(void);
/* Validates params (temp >= 0, top_p in (0,1], min_p in [0,1], repeat_penalty > 0, ...). */
sd_status sd_sampler_new(const sd_sampler_params *params, int n_vocab, sd_sampler **out, sd_error *err);
void sd_sampler_free(sd_sampler *s);
bool sd_sampler_is_greedy(const sd_sampler *s);
void sd_sampler_get_params(const sd_sampler *s, sd_sampler_params *out);
/* The processed distribution: probs[n_vocab] after the repetition penalty, then top-k, top-p and min-p on
 * softmax(logits), then the temperature over what is left (llama.cpp's order). Zeros for removed tokens;
 * one-hot on the argmax when greedy. history: the n_hist previous tokens (for the penalty). */
void sd_sampler_probs(sd_sampler *s, const float *logits, const int32_t *history, int n_hist, float *probs);
/* Draws a token from probs[n_vocab] with the sampler's RNG (argmax when greedy). */
int32_t sd_sampler_draw(sd_sampler *s, const float *probs);
/* probs + draw in one call. */
int32_t sd_sampler_sample(sd_sampler *s, const float *logits, const int32_t *history, int n_hist);
/* Next uniform double in [0, 1) from the sampler's RNG. */
double sd_sampler_uniform(sd_sampler *s);

/* ---------------------------------------------------------------- plain generation */
/* Called once per generated token; return false to stop. */
typedef bool (*sd_token_cb)(int32_t token, void *user);

typedef struct sd_gen_stats {
    int n_prompt, n_gen;
    double t_prompt_s, t_gen_s; /* wall time of prefill and of decoding */
} sd_gen_stats;

/* Clears sequence 0, prefills prompt[n_prompt] in chunks of n_batch, then generates up to n_predict tokens
 * (stops at an end-of-generation token unless ignore_eos). Generated ids are written to out (if not NULL,
 * capacity n_predict) and passed to cb (if not NULL). Errors: empty prompt, prompt + n_predict > n_ctx. */
sd_status sd_generate(sd_ctx *ctx, sd_sampler *smp, const int32_t *prompt, int n_prompt, int n_predict,
                      bool ignore_eos, int32_t *out, int *n_out, sd_token_cb cb, void *user, sd_gen_stats *stats,
                      sd_error *err);

/* ---------------------------------------------------------------- speculative decoding */
typedef enum sd_spec_method {
    SD_SPEC_NONE = 0, /* plain decoding through the same loop (gamma 0) */
    SD_SPEC_DRAFT,    /* a separate draft model (its own context and KV cache) */
    SD_SPEC_NGRAM,    /* prompt lookup: continue the latest earlier match of the last n tokens */
    SD_SPEC_EARLY_EXIT, /* LayerSkip self-speculation: draft with layers [0, exit_layer) of the target + its LM head
                           (or a trained exit head); verify layers [exit_layer, L) over the cached states */
    SD_SPEC_DEL,        /* DEL: early exit whose exit layer E and length gamma are chosen every round from decayed
                           shadow-token statistics (TPL), with a dynamic confidence threshold */
    SD_SPEC_SPECBOUND,  /* SpecBound: each draft token exits at the first depth whose annealed confidence reaches
                           tau; depth bound D, width bound W; states aligned to the deepest exit, one verify pass */
    /* SWIFT */
    SD_SPEC_SWIFT,      /* SWIFT: draft with the target minus a set of skipped attention / MLP sub-layers, the set
                           optimised on the fly (random search + Gaussian-process proposals scored by matchness);
                           chains, or token trees of the draft chain plus top-k alternatives per position */
    /* auto */
    SD_SPEC_AUTO,       /* the method and its knobs (n-gram / draft model / early exit at depth E, each with its gamma,
                           or plain decoding) chosen at every round boundary: the candidate with the most expected
                           tokens per second from measured costs and acceptance estimated for every candidate */
} sd_spec_method;

typedef enum sd_ctrl_kind {
    SD_CTRL_FIXED = 0, /* gamma drafts every round */
    SD_CTRL_CONF,      /* stop drafting when the draft's top-1 probability < p_min (up to gamma_max) */
    SD_CTRL_FS,        /* finite state: gamma += 1 after a fully accepted round, -= 1 otherwise (min 1, max gamma_max) */
    SD_CTRL_DV,        /* Draft&Verify: stop when top-1 < theta; theta moves by dv_eps toward acceptance dv_target */
    /* SpecDec++ */
    SD_CTRL_SPECDECPP, /* a trained acceptance head a_i on the drafter's hidden state: draft while
                          1 - prod_{j<=i} a_j <= stop_threshold (the first token always), up to gamma_max */
} sd_ctrl_kind;

/* What one round did (passed to round_cb). */
typedef struct sd_spec_round {
    int n_drafted, n_accepted, n_emitted;
    int n_committed; /* positions now in the target's cache (all emitted tokens but the newest) */
} sd_spec_round;

enum { SD_TREE_AUTO = -1, SD_TREE_AUTO_MAX = 32 };

typedef struct sd_spec_params {
    sd_spec_method method;
    sd_ctx *draft_ctx; /* SD_SPEC_DRAFT: the draft model's context (borrowed; its sequence 0 is used) */
    sd_ctrl_kind ctrl;
    int gamma;         /* drafts per round (fixed), initial gamma (FS); default 5 */
    int gamma_max;     /* bound for conf / FS / DV; default 16 */
    float p_min;       /* conf-stop threshold, default 0.75 */
    float dv_target, dv_eps, dv_theta0; /* DV: 0.8, 0.01, 0.5 */
    int ngram_max, ngram_min;           /* lookup n-gram sizes, default 3 and 1 */
    int exit_layer;                     /* early exit: layers run by the draft, 1..n_layer-1 (default 0: n_layer/2) */
    const sd_exit_heads *exit_heads;    /* early exit: trained heads (NULL: the model's own final norm + LM head) */
    float del_omega;                    /* DEL: decay of the statistics (0.95) */
    int del_dmax;                       /* DEL: longest draft (18) */
    int del_init_tokens;                /* DEL: prompt tokens used to initialise the statistics (32) */
    int del_layers[64];                 /* DEL: candidate exit depths (the first del_n_layers) — the bounded mode */
    int del_n_layers;                   /* 0: all 1..L-1 */
    int del_every;                      /* DEL: compute shadow tokens every k-th round only (1) — the bounded mode */
    float sb_tau;                       /* SpecBound: exit when max softmax(z_l / T_l) >= tau, tau in (0, 1] (0.8) */
    float sb_alpha;                     /* SpecBound: T_l = 1 + alpha (1 - l/L) (default 1) */
    int sb_depth;                       /* SpecBound: depth bound D, 1..L-1 (0: 3L/4) */
    int sb_width;                       /* SpecBound: width bound W (default 8) */
    /* Token trees (drafters that can branch: the draft model). tree_nodes 0 = a chain (the default); otherwise the
     * most draft nodes per round. Children per node by the parent's top-1 draft probability c: tree_topk[i]
     * children while c < tree_conf[i] (i < n_tree_conf), tree_topk[n_tree_conf] children above the last bound.
     * Depth bound: the controller's draft length. SWIFT also takes tree_nodes = SD_TREE_AUTO (-1): the budget N
     * (1..SD_TREE_AUTO_MAX, and what the round's block has room for) is re-chosen every round as the N maximising
     * (E[accepted | N] + 1) / T(N) — T from sv_latency (required), E from each tree node's observed acceptance.
     * Lossless either way; but with it the sampled draws of a seed are not reproducible (the budget follows T, which
     * live verification passes refresh with measured timings, and so the tree), as with SV. */
    int tree_nodes;
    int tree_topk[8];
    float tree_conf[7];
    int n_tree_conf;
    /* optional: called after every round (tests check the caches there); return false to stop */
    bool (*round_cb)(const sd_spec_round *r, void *user);
    void *round_user;
    /* SWIFT (methods.md 4). The tree shape comes from tree_nodes / tree_topk / tree_conf above. */
    float swift_skip_ratio;   /* r: |S| = floor(2 (L - 2) r) skipped sub-layers (0.45) */
    int swift_window;         /* C: generated tokens the matchness is measured over (32) */
    int swift_opt_steps;      /* optimisation steps at most (1000) */
    int swift_patience;       /* stop after this many steps without improvement (300) */
    int swift_bayes_interval; /* beta: every beta-th step a Gaussian-process proposal (25) */
    float swift_p_stop;       /* stop drafting when the draft's top-1 probability is below this (0.8) */
    int swift_max_draft;      /* longest draft chain (25) */
    float swift_stop_score;   /* stop optimising once the best matchness reaches this (0.95) */
    struct sd_swift_state *swift_state; /* the optimiser's state (borrowed; shared across sessions and prompts, one
                                           session at a time); NULL: each generation starts its own */
    /* SpecDec++ (ctrl = SD_CTRL_SPECDECPP; drafters with hidden states: draft model, early exit) */
    const sd_accept_head *accept_head;        /* borrowed; trained for the drafter (sd_accept_head_check) */
    float stop_threshold;                     /* h: stop when P(some draft of the round is rejected) > h (0.3) */
    /* Speculative Verification (SV, methods.md 6; see the SV section at the end of this header). A companion runs
     * beside the draft on the drafted tokens (chains); with verify = SD_VERIFY_SV only the goodput-maximising prefix of
     * each round's draft is verified (the rest is dropped unverified), chosen from the profile's acceptance table and
     * the latency table (in a scheduler: over the whole batch). */
    int verify;                           /* SD_VERIFY_ALL (0, default) or SD_VERIFY_SV */
    sd_ctx *companion_ctx;                /* the companion's context (borrowed; its sequence seq is a session's): a small
                                             model with the target's vocabulary, or a context on the target model */
    int companion_exit;                   /* run only the companion model's layers [0, E) through its head (0: all) */
    const struct sd_sv_profile *sv_profile; /* beta(S, A) for this target (sd_sv_profile_new / _build) */
    struct sd_sv_latency *sv_latency;     /* T(n, b), refreshed from live verification passes (NULL: see SV) */
    /* optional (profiling): every drafted token whose acceptance was decided, with its indicators; the companion
     * runs when this is set even with SD_VERIFY_ALL. Chains only (token trees are refused) */
    void (*sv_record_cb)(float s, float a, bool accepted, void *user);
    void *sv_record_user;
    /* auto (SD_SPEC_AUTO): the candidates are (method, gamma) for gamma 1..gamma_max, early exit also per depth */
    unsigned auto_candidates; /* bit (1u << m) per candidate sd_spec_method (none, draft, ngram, early-exit); 0: every
                                 one available (draft when draft_ctx is set) */
    int auto_exits[8];        /* candidate exit depths, the first auto_n_exits (0: L/4, 3L/8 and L/2) */
    int auto_n_exits;
    float auto_hysteresis;    /* another method, or another gamma, takes over only when its expected tokens/s beat the
                                 running one's by this fraction (0.1) */
    float auto_decay;         /* weight of the old acceptance statistics per new observation (0.97) */
    int auto_probe;           /* every N-th round runs the method run least recently, whatever the estimates (0:
                                 never; 1: a different method every round) (0) */
    struct sd_auto_state *auto_state; /* the estimates carried from one generation to the next (borrowed; shared
                                         across sessions and prompts, one thread at a time: sessions that run at once
                                         each start from it as it was, the last to end leaves its estimates); NULL:
                                         each generation starts from the prior */
} sd_spec_params;

sd_spec_params sd_spec_default_params(void);

/* ---------------------------------------------------------------- method registry
 * Every speculative method, controller and method parameter is declared once, in a registry; everything that reads
 * methods from text (the CLI's flags, `bench spec --methods`, per-request JSON) parses and validates through it.
 * Each parameter has a key ("gamma_max", the spelling of --methods entries and JSON objects), a CLI flag
 * ("--gamma-max"), a type, a range, a default and the methods it applies to. */
typedef enum sd_spec_param_type {
    SD_PARAM_INT,
    SD_PARAM_FLOAT,
    SD_PARAM_ENUM,       /* one of a fixed set of names (choices) */
    SD_PARAM_INT_LIST,   /* up to max_count integers, each in [min, max]; written "1+2+3" (the CLI also takes "1,2,3") */
    SD_PARAM_FLOAT_LIST, /* the same with numbers */
    SD_PARAM_NAME_LIST,  /* a set of names from choices, stored as a bit mask (bit i = the i-th choice); written
                            "a+b" (the CLI also takes "a,b"); the empty set is written as empty_word ("all") */
} sd_spec_param_type;

typedef struct sd_spec_param_info {
    const char *key;      /* "gamma_max" */
    const char *cli_flag; /* "--gamma-max" (`specdec generate`) */
    sd_spec_param_type type;
    double min, max;      /* range of a number or of each list element (inclusive unless min_open) */
    bool min_open;        /* the range is (min, max] */
    int max_count;        /* lists: most elements */
    const char *choices;  /* enums: the names, '|'-separated ("fixed|conf|fs|dv") */
    const char *def;      /* the default as text (what sd_spec_default_params() holds) */
    const char *help;     /* one line */
    unsigned methods;     /* bit (1u << m) for every sd_spec_method m the parameter applies to */
} sd_spec_param_info;

/* Static name of a method ("none", "draft", "ngram", "early-exit", "del", "specbound"); "?" for others. */
const char *sd_spec_method_name(sd_spec_method m);
sd_status sd_spec_method_from_name(const char *name, sd_spec_method *out, sd_error *err);
/* Static name of a controller ("fixed", "conf", "fs", "dv"); "?" for others. */
const char *sd_ctrl_name(sd_ctrl_kind c);
sd_status sd_ctrl_from_name(const char *name, sd_ctrl_kind *out, sd_error *err);

/* The parameters, for help texts and request schemas: i in [0, sd_spec_n_params()); NULL outside. */
int sd_spec_n_params(void);
const sd_spec_param_info *sd_spec_param_at(int i);
/* The parameter with this key (or, when key starts with "--", this CLI flag); NULL when there is none. */
const sd_spec_param_info *sd_spec_param_find(const char *key);

/* Sets one parameter by its key (or CLI flag) from text: strict number syntax, range check, enum names, lists
 * ("+" or "," between elements; "all" or "" = empty where the list may be empty). On failure *sp is unchanged and
 * the message names the key, the value and what is allowed. The key "method" takes a method name. */
sd_status sd_spec_set(sd_spec_params *sp, const char *key, const char *value, sd_error *err);
/* Parses "NAME[:key=value]..." (e.g. "early-exit:exit=4:ctrl=fs", "del:layers=1+2+3") on top of *sp: sets the
 * method, then each key, rejecting keys that do not apply to the method. On failure *sp is unchanged. */
sd_status sd_spec_parse(sd_spec_params *sp, const char *text, sd_error *err);
/* Validates params before any context exists: every value in its range, the cross-parameter rules (ngram_min <=
 * ngram_max, token trees only with the draft method, tree_topk / tree_conf lengths), and, when target is not
 * NULL, the model-dependent ones (exit layer, SpecBound depth and DEL candidate depths below the target's layer
 * count; exit heads for this model; the draft method needs a draft model — `draft`, or sp->draft_ctx's — with a
 * vocabulary compatible with the target's). sd_spec_generate runs the same checks (plus the context's limits). */
sd_status sd_spec_check(const sd_model *target, const sd_model *draft, const sd_spec_params *sp, sd_error *err);
/* sd_spec_check against the target context's model and draft context, plus the context's limits (a round's
 * verification block — gamma + 1, SpecBound's width + 1, tree_nodes + 1 — must fit n_batch). */
sd_status sd_spec_check_ctx(sd_ctx *target, const sd_spec_params *sp, sd_error *err);
/* The most drafted tokens one round of sp can hold (its controller's longest draft, DEL's dmax, SpecBound's width,
 * the tree budget, SWIFT's max_draft): what a latency table for its SV choices or tree budget has to reach. */
int sd_spec_max_drafts(const sd_spec_params *sp);
/* Whether sp runs method m: m itself, or auto with m among its candidates (auto's pool from sp: its candidates,
 * else every method, draft only with sp->draft_ctx; the target's layer count is not checked here). */
bool sd_spec_uses(const sd_spec_params *sp, sd_spec_method m);

/* auto: one candidate method's share of a generation. */
enum { SD_AUTO_MAX_CANDS = 12 };
typedef struct sd_auto_cand_stats {
    char name[24];        /* "none", "ngram", "ngram:repeat", "draft", "early-exit:E", "swift" */
    int rounds;           /* rounds it ran */
    int best, held, probe; /* why: the highest expected tokens/s / kept by hysteresis / a probe (auto_probe) */
    int gamma_sum;        /* drafts it was asked for, over its rounds (mean gamma = gamma_sum / rounds) */
    int drafted, accepted;
    float accept_est;     /* its estimated per-token acceptance at the end (P(first draft accepted)) */
    /* calibration: the sum over its rounds of the accepted drafts the choice expected; over the timed_rounds of
     * them (rounds run alone), the sums of the seconds it expected and the measured ones (drafting, verification
     * and the estimators) */
    double est_accepted, est_s, meas_s;
    int timed_rounds;
} sd_auto_cand_stats;

typedef struct sd_spec_stats {
    int n_prompt, n_gen;
    int n_rounds;    /* target verification passes */
    int n_drafted;   /* draft tokens proposed */
    int n_accepted;  /* draft tokens accepted */
    int n_branch_rounds; /* token trees: rounds whose accepted path was not a prefix of the block (K/V rows moved) */
    double t_prompt_s;              /* prefill of target (and draft) */
    double t_gen_s;                 /* the whole generation after the prefill */
    double t_draft_s, t_verify_s;   /* parts of t_gen_s: drafting, target verification passes */
    double t_aux_s;                 /* part of t_gen_s: method bookkeeping (DEL: shadow-token LM heads and statistics) */
    uint64_t layer_passes;          /* target layers run (eTPL = n_gen / layer_passes) */
    double mean_exit, mean_gamma;   /* DEL: mean chosen exit depth and draft bound over rounds */
    /* SWIFT */
    double t_opt_s;                 /* part of t_gen_s: the skip-set optimisation (its scoring passes, GP) */
    int opt_steps;                  /* optimisation steps taken in this generation */
    float matchness;                /* the best skip set's matchness at the end (-1: none scored yet) */
    /* SV */
    int n_verified;                 /* drafted tokens sent to verification (n_drafted - n_verified dropped unverified) */
    double t_companion_s;           /* part of t_gen_s: the companion's forwards and the indicators */
    /* auto: its candidates (t_aux_s holds its estimators' time: the draft model's catch-up forwards, shadow tokens,
     * n-gram lookups) */
    int n_auto_cands;
    sd_auto_cand_stats auto_cands[SD_AUTO_MAX_CANDS];
} sd_spec_stats;

/* Speculative generation on sequence 0 of `target`: the same tokens as sd_generate with a greedy sampler, the same
 * distribution with a sampling one. Clears the caches of target (and draft) first. Errors: as sd_generate, plus
 * invalid spec params (gamma < 1 or > 256 or > the context, a missing or vocabulary-incompatible draft). */
/* SWIFT's optimiser state: the best skip set found so far, its matchness, the steps taken and the scored candidates
 * (for the Gaussian process). Made for one model (its layer count); reusable across sessions and prompts
 * (sd_spec_params.swift_state), savable to a text file. */
typedef struct sd_swift_state sd_swift_state;
/* A fresh state for an n_layer model with the parameters of sp (skip ratio, step limits, seed from seed). */
sd_status sd_swift_state_new(int n_layer, const sd_spec_params *sp, uint64_t seed, sd_swift_state **out, sd_error *err);
void sd_swift_state_free(sd_swift_state *st);
sd_status sd_swift_state_save(const sd_swift_state *st, const char *path, sd_error *err);
/* Loads a saved state; refuses a file that is not one, is damaged, or is for a model of another layer count. */
sd_status sd_swift_state_load(const char *path, int n_layer, sd_swift_state **out, sd_error *err);
/* The best skip set: mask[2 n_layer] (1 = skipped; 2l attention, 2l+1 MLP), its matchness (-1: not scored yet), and
 * the steps taken; any out pointer may be NULL. Returns the number of skipped sub-layers. */
int sd_swift_state_best(const sd_swift_state *st, uint8_t *mask, float *matchness, int *steps);
/* Matchness over time: the optimisation steps at which the best set improved (1-based step counts) and its new
 * matchness, oldest first, up to cap of them (the latest 64 are kept); returns how many there are. */
int sd_swift_state_history(const sd_swift_state *st, int *steps, float *scores, int cap);
/* "a3 m3 a5 ..." (a = attention, m = MLP, layer index) of the best set, into buf. */
void sd_swift_state_describe(const sd_swift_state *st, char *buf, size_t cap);

/* auto's estimates across generations (sd_spec_params.auto_state), as a server keeps them across requests: when a
 * generation ends, each candidate's replayed rounds (decayed acceptance sums per gamma) and its measured costs; the
 * next generation starts from them — the model drafters' acceptance worth at most SD_AUTO_CARRY_ROUNDS rounds, the
 * drafters' costs where a latency table (sv_latency) scales T from the start — instead of the prior (a request's
 * first rounds otherwise choose from one round of guessed acceptance and a guessed drafting cost). The n-gram
 * lookup's acceptance is the text's, so it is not carried. */
enum { SD_AUTO_CARRY_ROUNDS = 8 };
typedef struct sd_auto_state sd_auto_state;
sd_status sd_auto_state_new(sd_auto_state **out, sd_error *err);
void sd_auto_state_free(sd_auto_state *st);

sd_status sd_spec_generate(sd_ctx *target, sd_sampler *smp, const sd_spec_params *sp, const int32_t *prompt,
                           int n_prompt, int n_predict, bool ignore_eos, int32_t *out, int *n_out, sd_token_cb cb,
                           void *user, sd_spec_stats *stats, sd_error *err);

/* ---------------------------------------------------------------- sessions: one sequence, advanced in steps */
/* A session is one sequence's generation: its history, sampler, speculative method state and statistics. It owns
 * sequence `seq` of the target context (and of the draft model's context for SD_SPEC_DRAFT) while it lives; each
 * step is one prefill chunk or one round (propose -> verify -> accept -> commit). Run a session alone with
 * sd_session_step, or many at once through a scheduler (sd_sched below), which merges their verification passes
 * into shared forward calls; the tokens are the same either way (greedy: plain greedy decoding; sampling: the same
 * draws for the same seed, except with the choices that follow measured timings: SV, and SWIFT's automatic tree
 * budget). */
typedef struct sd_session sd_session;

typedef struct sd_session_params {
    int seq;                      /* sequence id in the target (and draft) context; default 0 */
    sd_sampler_params sampling;   /* default: sd_sampler_default_params() */
    sd_spec_params spec;          /* default: sd_spec_default_params() (plain decoding) */
    int n_predict;                /* tokens to generate at most; -1 = until the context is full (default 128) */
    bool ignore_eos;              /* keep going after an end-of-generation token */
} sd_session_params;

sd_session_params sd_session_default_params(void);
/* Validates the parameters (sampling and speculative, against the target) before anything runs. */
sd_status sd_session_new(sd_ctx *target, const sd_session_params *params, sd_session **out, sd_error *err);
/* Sets the prompt (copied; at least one token) and clears the session's sequence. Errors: empty prompt, prompt +
 * n_predict beyond the context. */
sd_status sd_session_set_prompt(sd_session *s, const int32_t *prompt, int n_prompt, sd_error *err);
/* One step alone: the next prefill chunk, or one speculative round. A failed step leaves the session failed
 * (sd_session_status says why). Calling it on a finished session is a no-op. */
sd_status sd_session_step(sd_session *s, sd_error *err);
/* Copies up to cap tokens generated since the last read into out; returns how many. */
int sd_session_read(sd_session *s, int32_t *out, int cap);
/* All generated tokens so far (borrowed; valid until the next step or free); *n gets their count. */
const int32_t *sd_session_tokens(const sd_session *s, int *n);
/* Done: n_predict reached, end of generation, cancelled, or failed. */
bool sd_session_done(const sd_session *s);
/* Stops the session between rounds: it generates nothing more and its sequence's cache is cleared. */
void sd_session_cancel(sd_session *s);
/* SD_OK, or the error that ended the session (message copied into err when not NULL). */
sd_status sd_session_status(const sd_session *s, sd_error *err);
void sd_session_stats(const sd_session *s, sd_spec_stats *stats);
/* Clears the session's sequence (cache memory returns to the context), takes it out of its scheduler if it is in
 * one, and frees the session. */
void sd_session_free(sd_session *s);

/* ---------------------------------------------------------------- scheduler: continuous batching */
/* Owns no sessions: they are added and removed between steps. Each step advances every live session by one prefill
 * chunk or one round; the verification blocks of all sessions (and the prefill chunks) are merged into as few
 * sd_forward calls as the token budget allows (one per distinct layer range; sequence ids keep them apart). A
 * session that fails (e.g. its cache cannot grow) fails alone: the step goes on for the others. */
typedef struct sd_sched sd_sched;
typedef struct sd_sched_params {
    int token_budget; /* positions per step over all sessions (prefill chunks fill what rounds leave); 0 = n_batch */
    int max_sessions; /* 0 = the target context's n_seq */
} sd_sched_params;

sd_sched_params sd_sched_default_params(void);
sd_status sd_sched_new(sd_ctx *target, const sd_sched_params *params, sd_sched **out, sd_error *err);
/* Adds a session (with its prompt set) to the next step. Errors: another live session uses the same sequence, the
 * session belongs to another context, the scheduler is full. */
sd_status sd_sched_add(sd_sched *sc, sd_session *s, sd_error *err);
/* Removes a session (it keeps its state; removing one that is not there is a no-op). */
void sd_sched_remove(sd_sched *sc, sd_session *s);
/* One step of every live session; finished sessions leave the scheduler. Returns an error only for a failure that
 * is nobody's alone (then every live session is failed with it). */
sd_status sd_sched_step(sd_sched *sc, sd_error *err);
int sd_sched_n_live(const sd_sched *sc);
void sd_sched_free(sd_sched *sc);

/* ---------------------------------------------------------------- Speculative Verification (SV)
 * methods.md 6. Per drafted token x with draft distribution P_d and companion distribution P_c: S = sum_v
 * min(P_d(v), P_c(v)) and A = min(1, P_c(x) / P_d(x)). P_d is the drafter's processed distribution q when sampling;
 * greedy: the softmax of the drafter's logits at temperature 1; a drafter that exposes neither (n-gram lookup):
 * one-hot on x. P_c: the companion's softmax at temperature 1 (sampling: through the sampler's processing, as q).
 * A profile maps (S, A) to beta = the probability that the token is accepted given the ones before it were
 * (equal-count bins of S and of A, measured with sd_spec_params.sv_record_cb); E[n] = sum_{i<=n} prod_{j<=i} beta_j;
 * the verified prefix n maximises (E[n] + 1) / T(n) (batch: every sequence verifies >= 1 drafted token; tokens are
 * added greedily by expected accepted tokens and the best total is kept). Lossless: greedy output is plain greedy
 * output, sampling keeps the target's distribution; but with SV the sampled draws of a seed are not reproducible (the
 * verified lengths follow measured timings, and in a scheduler the batch). */
enum { SD_VERIFY_ALL = 0, SD_VERIFY_SV = 1 };
enum { SD_SV_MAX_BINS = 64 };

/* What a profile is tied to: the target's shape and a hash of its final-norm weights. */
typedef struct sd_sv_target_id {
    uint32_t check;
    int n_layer, n_embd, n_vocab;
} sd_sv_target_id;
void sd_sv_target_id_of(const sd_model *target, sd_sv_target_id *id);

typedef struct sd_sv_profile sd_sv_profile;
/* A profile as numbers (what a profile file holds). Bin i of S holds s_edges[i-1] <= S < s_edges[i] (the first and
 * last open-ended); the same for A. */
typedef struct sd_sv_profile_desc {
    sd_sv_target_id target;
    int n_s, n_a;          /* bins, 1..SD_SV_MAX_BINS each */
    const float *s_edges;  /* [n_s - 1] strictly ascending */
    const float *a_edges;  /* [n_a - 1] strictly ascending */
    const float *beta;     /* [n_s][n_a] in [0, 1] (empty bins already filled from their neighbours) */
    const int *count;      /* [n_s][n_a] profiled tokens per bin (may be NULL) */
} sd_sv_profile_desc;
/* Validates d (and, when target is not NULL, that it was made for this target: else an error naming both) and
 * copies it. */
sd_status sd_sv_profile_new(const sd_model *target, const sd_sv_profile_desc *d, sd_sv_profile **out, sd_error *err);
/* Whether p was made for target (the same error as sd_sv_profile_new). */
sd_status sd_sv_profile_check(const sd_sv_profile *p, const sd_model *target, sd_error *err);
/* The profile's numbers (pointers into p, valid while it lives; count is never NULL here). */
void sd_sv_profile_get(const sd_sv_profile *p, sd_sv_profile_desc *d);
float sd_sv_profile_beta(const sd_sv_profile *p, float s, float a);
void sd_sv_profile_free(sd_sv_profile *p);

/* Building a profile from recorded tokens: n_s bins of S and n_a bins of A with equal counts (ties keep equal
 * values in one bin, so fewer bins may result), beta = mean acceptance per (S, A) bin, an empty bin takes the
 * count-weighted mean of its nearest non-empty bins. info: the entropy of acceptance (bits) and given the bins. */
typedef struct sd_sv_profile_info {
    int n_records, n_accepted;
    double h_accept;   /* H(accepted) */
    double h_given;    /* H(accepted | S bin, A bin) */
    double info_gain;  /* (h_accept - h_given) / h_accept: the reduction, 0 when h_accept is 0 */
} sd_sv_profile_info;
sd_status sd_sv_profile_build(const sd_model *target, const float *s, const float *a, const uint8_t *accepted, int n,
                              int n_s, int n_a, sd_sv_profile **out, sd_sv_profile_info *info, sd_error *err);

/* The latency table T(n, b): seconds of one target verification pass where b sequences each verify n drafted tokens
 * (n + 1 positions), n = 0..n_max, for a few batch sizes b (ascending). Uneven batches use the mean n. */
typedef struct sd_sv_latency sd_sv_latency;
sd_status sd_sv_latency_new(int n_max, const int *batch, int n_batch, const double *t /* [n_batch][n_max + 1] */,
                            sd_sv_latency **out, sd_error *err);
/* Measures the table on a scratch context of the target's model with n_threads threads (a few seconds on small
 * models): every (n, b) block run reps times after a 16-token prefix, the fastest kept. */
sd_status sd_sv_latency_measure(const sd_model *target, int n_threads, int n_max, const int *batch, int n_batch,
                                int reps, sd_sv_latency **out, sd_error *err);
/* A text file keyed by the model (sd_sv_target_id) and the thread count: load refuses a file for another model or
 * thread count (SD_ERR_ARG) or one that is not a latency file (SD_ERR_FORMAT). */
sd_status sd_sv_latency_save(const sd_sv_latency *l, const sd_model *target, int n_threads, const char *path,
                             sd_error *err);
sd_status sd_sv_latency_load(const sd_model *target, int n_threads, const char *path, sd_sv_latency **out,
                             sd_error *err);
/* T for b sequences verifying n_total drafted tokens in all (interpolated; beyond the table: linear). */
double sd_sv_latency_time(const sd_sv_latency *l, int n_total, int b);
/* A live pass: the nearest cell moves toward seconds (decay: weight of the old value, e.g. 0.9). */
void sd_sv_latency_observe(sd_sv_latency *l, int n_total, int b, double seconds, double decay);
int sd_sv_latency_n_max(const sd_sv_latency *l);
/* The largest batch size the table was measured for. */
int sd_sv_latency_max_batch(const sd_sv_latency *l);
void sd_sv_latency_free(sd_sv_latency *l);

/* The selection rule alone (for tests and tools): m sequences, sequence i has k[i] drafted tokens with beta
 * beta[i][0..k[i]) (rows of stride ld); fixed_pos / fixed_tokens: positions and expected tokens of other sequences in
 * the same pass (not chosen, counted in T's batch: fixed_seqs). Writes n[i] (1..k[i], 0 when k[i] == 0) and returns
 * the expected goodput (tokens per second). m == 1: the single-sequence rule. */
double sd_sv_select(const sd_sv_latency *l, const float *beta, int ld, const int *k, int m, int fixed_seqs,
                    int fixed_drafts, double fixed_tokens, int *n);

/* ---------------------------------------------------------------- text files */
/* Reads a whole text file (prompts, prompt sets, corpora) into a NUL-terminated malloc'd buffer (free() it); *len
 * (may be NULL) gets its length. Refuses folders, files with a NUL byte (SD_ERR_FORMAT) and anything longer than
 * max_bytes — a bound that also holds for pipes and devices (e.g. /dev/zero). */
sd_status sd_read_text_file(const char *path, size_t max_bytes, char **out, size_t *len, sd_error *err);

/* Whether a draft model can serve a target (llama.cpp's rule): same tokenizer type, same BOS/EOS ids and add_bos,
 * vocabulary sizes within 128, and identical token texts for the ids both have (ids >= 5). */
sd_status sd_vocab_compatible(const sd_model *target, const sd_model *draft, sd_error *err);

#ifdef __cplusplus
}
#endif
#endif /* SPECDEC_H */
