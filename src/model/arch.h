/* arch: what differs between the supported architectures — one table, one place to add an architecture. */
#ifndef SD_MODEL_ARCH_H
#define SD_MODEL_ARCH_H
#include <stdbool.h>

typedef enum rope_kind {
    ROPE_KIND_NORM, /* rotate adjacent pairs (x[2i], x[2i+1]) — llama, mistral */
    ROPE_KIND_NEOX, /* rotate (x[i], x[i + head_dim/2]) — qwen2 */
} rope_kind;

typedef struct arch_desc {
    const char *name;  /* general.architecture value and metadata key prefix */
    rope_kind rope;
    bool qkv_bias;     /* blk.N.attn_{q,k,v}.bias present */
    double default_rope_base;
} arch_desc;

/* NULL when the architecture is not supported. */
const arch_desc *arch_find(const char *name, unsigned long len);
/* Comma-separated list of supported names, for error messages. */
const char *arch_list(void);
#endif
