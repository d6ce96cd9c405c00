/* wmix: gen-model's K-quant mixes give each tensor the type llama-quantize gives it (the Q4_K_M and Q5_K_M files of
 * ../shared/models/kquant, written by llama.cpp), and the names parse as documented. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/gguf.h"
#include "kernels/wtype.h"
#include "model/wmix.h"
#include "testlib.h"

/* Every matrix of the file at path has the mix's type (after wtype_fit: the writers' fallback for rows that are not
 * whole blocks; a no-op on llama.cpp's files). Returns the Q6_K count; *n_mat, *n_layer: the matrices and layers. */
static int check_types(const char *what, const char *path, const char *mix_name, int *n_mat, int *n_layer) {
    wmix m;
    CHECK(wmix_from_name(mix_name, &m) && m.more_bits, "%s parses as a mix", mix_name);
    *n_mat = *n_layer = 0;
    gguf_file f;
    sd_error err;
    if (gguf_open(&f, path, &err) != SD_OK) {
        CHECK(0, "%s: %s", what, err.msg);
        return 0;
    }
    int64_t nl = 0;
    bool bad = false;
    CHECK(gguf_get_int(&f, "llama.block_count", &nl, &bad) && !bad && nl > 0, "%s: block_count", what);
    *n_layer = (int)nl;
    int n_q6 = 0;
    for (uint64_t i = 0; i < f.n_tensors; i++) {
        const gguf_tensor *t = &f.tensors[i];
        if (t->n_dims != 2) continue;
        uint32_t want = wtype_fit(wmix_type(&m, t->name, (int)nl), t->ne[0]);
        CHECK(want == t->type, "%s %s: the file has %s, the mix says %s", what, t->name, ggml_type_name(t->type),
              ggml_type_name(want));
        (*n_mat)++;
        n_q6 += t->type == GGML_Q6_K;
    }
    gguf_close(&f);
    return n_q6;
}

/* llama-quantize's own file: 8 layers, so output.weight and attn_v + ffn_down of layers 0, 3, 6, 7 */
static void check_file(const char *mix_name, const char *rel) {
    int n_mat, n_layer;
    int n_q6 = check_types(rel, tl_shared(rel), mix_name, &n_mat, &n_layer);
    CHECK(n_mat == 2 + 7 * n_layer && n_q6 == 9, "%s: %d matrices, %d Q6_K", rel, n_mat, n_q6);
}

/* a file the writers made with the mix: its Q6_K count */
static int check_written(const char *what, const char *path, const char *mix_name) {
    int n_mat, n_layer;
    return check_types(what, path, mix_name, &n_mat, &n_layer);
}

int main(void) {
    check_file("q4_k_m", "models/kquant/stories-ee-w768-q4_k_m.gguf");
    check_file("Q5_K_M", "models/kquant/stories-ee-w768-q5_k_m.gguf");
    wmix m;
    CHECK(wmix_from_name("q8_0", &m) && m.base == GGML_Q8_0 && !m.more_bits, "a plain type name");
    CHECK(wmix_type(&m, "output.weight", 8) == GGML_Q8_0 && wmix_type(&m, "blk.0.attn_v.weight", 8) == GGML_Q8_0,
          "a plain type is every matrix's");
    CHECK(!wmix_from_name("q4_k_l", &m) && !wmix_from_name("", &m) && !wmix_from_name(NULL, &m), "unknown names");
    CHECK(strstr(wmix_names(), "q4_K_M") && strstr(wmix_names(), "q6_K"), "the names for messages");
    /* the writers: gen-model (test-256: 2 layers, so layer 1 and output.weight take Q6_K) and gen-model --embed
     * (stories-ee at dim 768: 8 layers) */
    char path[256];
    snprintf(path, sizeof path, "%s/test_wmix_%d.gguf", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    sd_error err;
    sd_gen_model_params gp = {.shape = "test-256", .type = "q4_k_m", .vocab_path = tl_shared("models/vocab/ggml-vocab-llama-spm.gguf"), .seed = 1};
    if (sd_model_generate(&gp, path, &err) == SD_OK) {
        CHECK(check_written("gen-model test-256 q4_k_m", path, "q4_k_m") == 3, "gen-model q4_k_m: 3 Q6_K matrices");
    } else {
        CHECK(0, "gen-model q4_k_m: %s", err.msg);
    }
    sd_embed_params ep = {.small_path = tl_shared("models/stories-ee.gguf"), .dim = 768, .n_head = 24, .n_head_kv = 8,
                          .n_ff = 512, .type = "q5_k_m", .seed = 1};
    if (sd_model_embed(&ep, path, &err) == SD_OK) {
        CHECK(check_written("embed stories-ee q5_k_m", path, "q5_k_m") == 9, "embed q5_k_m: 9 Q6_K matrices");
    } else {
        CHECK(0, "embed q5_k_m: %s", err.msg);
    }
    remove(path);
    return tl_finish("test_wmix");
}
