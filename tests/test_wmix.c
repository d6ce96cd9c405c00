/* wmix: gen-model's K-quant mixes give each tensor the type llama-quantize gives it (the Q4_K_M and Q5_K_M files of
 * ../shared/models/kquant, written by llama.cpp), and the names parse as documented. */
#include <string.h>

#include "io/gguf.h"
#include "kernels/wtype.h"
#include "model/wmix.h"
#include "testlib.h"

static void check_file(const char *mix_name, const char *rel) {
    wmix m;
    CHECK(wmix_from_name(mix_name, &m) && m.more_bits, "%s parses as a mix", mix_name);
    gguf_file f;
    sd_error err;
    if (gguf_open(&f, tl_shared(rel), &err) != SD_OK) {
        CHECK(0, "%s: %s", rel, err.msg);
        return;
    }
    int64_t n_layer = 0;
    bool bad = false;
    CHECK(gguf_get_int(&f, "llama.block_count", &n_layer, &bad) && !bad && n_layer > 0, "%s: block_count", rel);
    int n_mat = 0, n_q6 = 0;
    for (uint64_t i = 0; i < f.n_tensors; i++) {
        const gguf_tensor *t = &f.tensors[i];
        if (t->n_dims != 2) continue;
        uint32_t want = wmix_type(&m, t->name, (int)n_layer);
        CHECK(want == t->type, "%s %s: llama.cpp wrote %s, the mix says %s", mix_name, t->name, ggml_type_name(t->type),
              ggml_type_name(want));
        n_mat++;
        n_q6 += t->type == GGML_Q6_K;
    }
    /* 8 layers: output.weight and attn_v + ffn_down of layers 0, 3, 6, 7 */
    CHECK(n_mat == 2 + 7 * (int)n_layer && n_q6 == 9, "%s: %d matrices, %d Q6_K", rel, n_mat, n_q6);
    gguf_close(&f);
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
    return tl_finish("test_wmix");
}
