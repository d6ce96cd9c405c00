/* The server's modules without HTTP: chat templates (detection and the exact text of every family), the request
 * parser (fields, types, ranges, the speculative object through the registry, OpenAI-style errors), response
 * bodies and the metrics exposition. tests/test_serve.sh runs the whole server. */
#include <stdlib.h>
#include <string.h>

#include "chat_tpl.h"
#include "serve_metrics.h"
#include "serve_req.h"
#include "serve_resp.h"
#include "specdec.h"
#include "testlib.h"

static void test_detect(void) {
    static const struct {
        const char *jinja;
        chat_tpl want;
    } cases[] = {
        {"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}", CT_CHATML},
        {"{{ bos_token }}{% for message in messages %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% endfor %}", CT_MISTRAL},
        {"{% if messages[0]['role'] == 'system' %}{% set system_message = '<<SYS>>\\n' + messages[0]['content'] + '\\n<</SYS>>\\n\\n' %}{% endif %}[INST]", CT_LLAMA2},
        {"{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}", CT_LLAMA3},
        {"{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}", CT_GEMMA},
        {"{% if message['role'] == 'user' %}{{'<|user|>' + '\\n' + message['content'] + '<|end|>' + '\\n' + '<|assistant|>' + '\\n'}}", CT_PHI3},
        {"{% if message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + eos_token }}", CT_ZEPHYR},
        {"{% for m in messages %}{{ m.content }}{% endfor %}", CT_NONE},
        {"", CT_NONE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(chat_tpl_detect(cases[i].jinja) == cases[i].want, "detect case %zu: %s, want %s", i,
              chat_tpl_name(chat_tpl_detect(cases[i].jinja)), chat_tpl_name(cases[i].want));
    CHECK(chat_tpl_from_name("chatml") == CT_CHATML && chat_tpl_from_name("llama-3") == CT_LLAMA3 &&
              chat_tpl_from_name("zephyr") == CT_ZEPHYR && chat_tpl_from_name("jinja") == CT_NONE,
          "names");
}

static void test_render(void) {
    const chat_msg conv[] = {{"system", "S"}, {"user", "U1"}, {"assistant", "A1"}, {"user", "U2"}};
    static const struct {
        chat_tpl t;
        const char *want;
    } cases[] = {
        {CT_CHATML, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
                    "<|im_start|>user\nU2<|im_end|>\n<|im_start|>assistant\n"},
        {CT_LLAMA2, "[INST] <<SYS>>\nS\n<</SYS>>\n\nU1 [/INST] A1 </s><s>[INST] U2 [/INST]"},
        {CT_LLAMA3, "<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU1"
                    "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nA1<|eot_id|><|start_header_id|>user"
                    "<|end_header_id|>\n\nU2<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
        {CT_MISTRAL, "[INST] S\n\nU1 [/INST]A1</s>[INST] U2 [/INST]"},
        {CT_GEMMA, "<start_of_turn>user\nS\n\nU1<end_of_turn>\n<start_of_turn>model\nA1<end_of_turn>\n<start_of_turn>user\nU2"
                   "<end_of_turn>\n<start_of_turn>model\n"},
        {CT_PHI3, "<|system|>\nS<|end|>\n<|user|>\nU1<|end|>\n<|assistant|>\nA1<|end|>\n<|user|>\nU2<|end|>\n<|assistant|>\n"},
        {CT_ZEPHYR, "<|system|>\nS</s>\n<|user|>\nU1</s>\n<|assistant|>\nA1</s>\n<|user|>\nU2</s>\n<|assistant|>\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *s = chat_tpl_render(cases[i].t, conv, 4);
        CHECK(s && !strcmp(s, cases[i].want), "render %s:\n[%s]\nwant\n[%s]", chat_tpl_name(cases[i].t), s ? s : "(null)",
              cases[i].want);
        free(s);
    }
}

typedef struct fixture {
    sd_model *m, *dm;
    sd_ctx *ctx, *dctx;
    sv_defaults def;
} fixture;

static bool parse(const fixture *f, sv_kind kind, const char *body, sv_request *r, sv_error *e) {
    memset(e, 0, sizeof *e);
    return sv_request_parse(body, strlen(body), kind, &f->def, 42, r, e);
}

/* The body fails with this status, error code and (when not NULL) parameter, and the message contains `msg`. */
static void expect_fail(const fixture *f, sv_kind kind, const char *body, int http, const char *code, const char *param,
                        const char *msg) {
    sv_request r;
    sv_error e;
    bool ok = parse(f, kind, body, &r, &e);
    CHECK(!ok && e.http == http && e.code && !strcmp(e.code, code) && (!param || !strcmp(e.param, param)) &&
              strstr(e.msg, msg),
          "%s: got ok=%d http %d code %s param '%s' msg '%s'", body, ok, e.http, e.code ? e.code : "-", e.param, e.msg);
    if (ok) sv_request_free(&r);
}

static void test_parse(fixture *f) {
    sv_request r;
    sv_error e;
    /* defaults, then every field */
    CHECK(parse(f, SV_COMPLETION, "{\"prompt\": \"hi\"}", &r, &e), "minimal: %s", e.msg);
    CHECK(r.max_tokens == -1 && r.sampling.seed == 42 && r.spec.method == SD_SPEC_NONE && !r.stream && r.n_stop == 0 &&
              !strcmp(r.prompt, "hi"),
          "defaults");
    sv_request_free(&r);
    CHECK(parse(f, SV_COMPLETION,
                "{\"model\": \"m\", \"prompt\": [\"a\\u00e9\"], \"max_tokens\": 7, \"temperature\": 0.5, \"top_p\": 0.9, "
                "\"top_k\": 3, \"min_p\": 0.1, \"seed\": 9, \"stop\": [\"x\", \"\", \"yz\"], \"stream\": true, "
                "\"stream_options\": {\"include_usage\": true}, \"n\": 1, \"ignore_eos\": true, \"presence_penalty\": 0,"
                " \"user\": \"someone\", \"speculative\": {\"method\": \"draft\", \"gamma\": 3, \"ctrl\": \"fs\", "
                "\"tree_nodes\": 8, \"tree_topk\": [3, 2, 1], \"tree_conf\": [0.5, 0.9]}}",
                &r, &e),
          "full: %s", e.msg);
    CHECK(!strcmp(r.prompt, "a\xc3\xa9") && r.max_tokens == 7 && r.sampling.temp == 0.5f && r.sampling.top_p == 0.9f &&
              r.sampling.top_k == 3 && r.sampling.min_p == 0.1f && r.sampling.seed == 9 && r.n_stop == 2 &&
              !strcmp(r.stop[1], "yz") && r.stream && r.include_usage && r.ignore_eos,
          "full: fields");
    CHECK(r.spec.method == SD_SPEC_DRAFT && r.spec.gamma == 3 && r.spec.ctrl == SD_CTRL_FS && r.spec.tree_nodes == 8 &&
              r.spec.tree_topk[2] == 1 && r.spec.n_tree_conf == 2 && r.spec.draft_ctx == f->dctx,
          "full: speculative");
    sv_request_free(&r);
    /* method none and early exit */
    CHECK(parse(f, SV_COMPLETION, "{\"prompt\": \"x\", \"speculative\": {\"method\": \"none\"}}", &r, &e) &&
              r.spec.method == SD_SPEC_NONE,
          "method none: %s", e.msg);
    sv_request_free(&r);
    CHECK(parse(f, SV_COMPLETION, "{\"prompt\": \"x\", \"speculative\": {\"method\": \"del\", \"layers\": [1, 2]}}", &r, &e) &&
              r.spec.method == SD_SPEC_DEL && r.spec.del_n_layers == 2,
          "del layers: %s", e.msg);
    sv_request_free(&r);
    /* chat: rendered with the template */
    CHECK(parse(f, SV_CHAT,
                "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": "
                "[{\"type\": \"text\", \"text\": \"U\"}, {\"type\": \"text\", \"text\": \"2\"}]}], \"max_completion_tokens\": 5}",
                &r, &e),
          "chat: %s", e.msg);
    CHECK(r.prompt && !strcmp(r.prompt, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU2<|im_end|>\n<|im_start|>assistant\n") &&
              r.max_tokens == 5,
          "chat prompt [%s]", r.prompt ? r.prompt : "");
    sv_request_free(&r);

    /* errors */
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\",", 400, "invalid_json", "", "not valid JSON");
    expect_fail(f, SV_COMPLETION, "", 400, "invalid_json", "", "not valid JSON");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\"} {}", 400, "invalid_json", "", "after the JSON value");
    expect_fail(f, SV_COMPLETION, "\"prompt\"", 400, "invalid_json", "", "JSON object");
    expect_fail(f, SV_COMPLETION, "{}", 400, "missing_required_parameter", "prompt", "required");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": [\"a\", \"b\"]}", 400, "invalid_type", "prompt", "a string");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"model\": 3}", 400, "invalid_type", "model", "a string");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"max_tokens\": -1}", 400, "invalid_value", "max_tokens", "-1");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"max_tokens\": 0}", 400, "invalid_value", "max_tokens", "[1,");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"max_tokens\": \"5\"}", 400, "invalid_type", "max_tokens", "integer");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"temperature\": -1}", 400, "invalid_value", "temperature", "-1");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"top_p\": 0}", 400, "invalid_value", "top_p", "(0, 1]");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"top_k\": 1.5}", 400, "invalid_type", "top_k", "integer");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"seed\": \"s\"}", 400, "invalid_type", "seed", "integer");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"stream\": 1}", 400, "invalid_type", "stream", "true or false");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"stop\": [1]}", 400, "invalid_type", "stop", "strings");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"stop\": [\"a\",\"b\",\"c\",\"d\",\"e\"]}", 400, "invalid_value", "stop", "more than 4");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"n\": 3}", 400, "unsupported_value", "n", "n = 1");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"logprobs\": true}", 400, "unsupported_value", "logprobs", "not supported");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"frequency_penalty\": 1}", 400, "unsupported_value", "frequency_penalty", "not supported");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"speculative\": 1}", 400, "invalid_type", "speculative", "an object");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"speculative\": {}}", 400, "invalid_value", "speculative.method", "method name");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"speculative\": {\"method\": \"eagle\"}}", 400, "invalid_value", "speculative", "unknown speculative method 'eagle'");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"speculative\": {\"method\": \"ngram:gamma=3\"}}", 400, "invalid_value", "speculative.method", "unknown method");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"speculative\": {\"method\": \"ngram\", \"nope\": 1}}", 400, "invalid_value", "speculative", "unknown key 'nope'");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"speculative\": {\"method\": \"ngram\", \"sb_tau\": 1}}", 400, "invalid_value", "speculative", "");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"speculative\": {\"method\": \"ngram\", \"ctrl\": \"x:y\"}}", 400, "invalid_value", "speculative.ctrl", "not a valid value");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"speculative\": {\"method\": \"ngram\", \"ctrl\": \"zigzag\"}}", 400, "invalid_value", "speculative", "zigzag");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"speculative\": {\"method\": \"ngram\", \"gamma\": 2.5}}", 400, "invalid_value", "speculative", "gamma");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"speculative\": {\"method\": \"ngram\", \"gamma\": {}}}", 400, "invalid_type", "speculative.gamma", "a number");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"speculative\": {\"method\": \"ngram\", \"ngram_min\": 3, \"ngram_max\": 2}}", 400, "invalid_value", "speculative", "ngram_min");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"speculative\": {\"method\": \"ngram\", \"gamma\": 100}}", 400, "invalid_value", "speculative", "n_batch");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"speculative\": {\"method\": \"early-exit\", \"exit\": 8}}", 400, "invalid_value", "speculative", "exit layer");
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"speculative\": {\"method\": \"specbound\", \"tree_nodes\": 4}}", 400, "invalid_value", "speculative", "");
    expect_fail(f, SV_CHAT, "{\"messages\": []}", 400, "invalid_value", "messages", "empty");
    expect_fail(f, SV_CHAT, "{\"messages\": [{\"role\": \"user\"}]}", 400, "invalid_type", "messages[0].content", "a string");
    expect_fail(f, SV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}", 400, "invalid_value", "messages[0].content", "only text");
    expect_fail(f, SV_CHAT, "{\"messages\": [5]}", 400, "invalid_type", "messages[0]", "an object");
    /* a server without a draft model refuses the draft method; one without a template refuses chat */
    sv_defaults keep = f->def;
    f->def.dctx = NULL;
    f->def.dmodel = NULL;
    expect_fail(f, SV_COMPLETION, "{\"prompt\": \"x\", \"speculative\": {\"method\": \"draft\"}}", 400, "invalid_value", "speculative.method", "--draft-model");
    f->def.tpl = CT_NONE;
    expect_fail(f, SV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", 400, "no_chat_template", "messages", "--chat-template");
    f->def = keep;
    /* the server's default auto: a request sampling with a seed of its own takes the seeded default (plain) */
    f->def.spec.method = SD_SPEC_AUTO;
    static const struct { const char *body; sd_spec_method want; } seeded[] = {
        {"{\"prompt\": \"x\", \"temperature\": 0.7, \"seed\": 3}", SD_SPEC_NONE},
        {"{\"prompt\": \"x\", \"temperature\": 0.7}", SD_SPEC_AUTO},
        {"{\"prompt\": \"x\", \"temperature\": 0, \"seed\": 3}", SD_SPEC_AUTO},
        {"{\"prompt\": \"x\", \"temperature\": 0.7, \"seed\": 3, \"speculative\": {\"method\": \"ngram\"}}", SD_SPEC_NGRAM},
    };
    for (size_t i = 0; i < sizeof seeded / sizeof *seeded; i++) {
        const bool ok = parse(f, SV_COMPLETION, seeded[i].body, &r, &e);
        CHECK(ok && r.spec.method == seeded[i].want, "%s: method %d, expected %d (%s)", seeded[i].body,
              ok ? (int)r.spec.method : -1, (int)seeded[i].want, e.msg);
        if (ok) sv_request_free(&r);
    }
    f->def = keep;
}

static void test_bodies(void) {
    sv_error e = {0};
    sv_fail(&e, 400, "invalid_request_error", "invalid_value", "top_p", "bad \"quote\"");
    char *s = sv_json_error(&e);
    CHECK(s && !strcmp(s, "{\"error\":{\"message\":\"bad \\\"quote\\\"\",\"type\":\"invalid_request_error\",\"param\":\"top_p\","
                          "\"code\":\"invalid_value\"}}"),
          "error body %s", s);
    free(s);
    sv_usage u = {5, 3, 4, 2, "ngram"};
    s = sv_json_response(SV_CHAT, "chatcmpl-1", 7, "m", "hi\n", "stop", &u);
    CHECK(s && strstr(s, "\"object\":\"chat.completion\"") && strstr(s, "\"message\":{\"role\":\"assistant\",\"content\":\"hi\\n\"}") &&
              strstr(s, "\"finish_reason\":\"stop\"") &&
              strstr(s, "\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3,\"total_tokens\":8,\"draft_tokens\":4,"
                        "\"accepted_tokens\":2,\"method\":\"ngram\"}"),
          "chat body %s", s);
    free(s);
    s = sv_sse_chunk(SV_COMPLETION, "cmpl-2", 7, "m", false, "ab", NULL, NULL);
    CHECK(s && !strncmp(s, "data: {", 7) && strstr(s, "\"text\":\"ab\"") && strstr(s, "\"finish_reason\":null") &&
              !strcmp(s + strlen(s) - 3, "}\n\n"),
          "sse chunk %s", s);
    free(s);
    s = sv_sse_chunk(SV_CHAT, "c", 7, "m", true, "", NULL, NULL);
    CHECK(s && strstr(s, "\"object\":\"chat.completion.chunk\"") && strstr(s, "\"delta\":{\"role\":\"assistant\",\"content\":\"\"}"),
          "first chat chunk %s", s);
    free(s);
}

static void test_metrics(void) {
    sv_metrics mt;
    sv_metrics_init(&mt);
    sv_metrics_round(&mt, SD_SPEC_NGRAM, 3, 1); /* positions 1..3 drafted, 1 accepted */
    sv_metrics_round(&mt, SD_SPEC_NGRAM, 2, 2);
    sv_metrics_request(&mt, SD_SPEC_NGRAM, 10, 20, 5, 3, 2);
    sv_metrics_status(&mt, 400);
    sv_metrics_gauges(&mt, 2, 3, 130, 256, 64);
    char *t = sv_metrics_text(&mt);
    CHECK(t && strstr(t, "specdec_requests_total{method=\"ngram\"} 1\n") &&
              strstr(t, "specdec_generated_tokens_total{method=\"ngram\"} 20\n") &&
              strstr(t, "specdec_draft_position_drafted_total{method=\"ngram\",position=\"2\"} 2\n") &&
              strstr(t, "specdec_draft_position_accepted_total{method=\"ngram\",position=\"2\"} 1\n") &&
              strstr(t, "specdec_draft_position_acceptance{method=\"ngram\",position=\"1\"} 1.000000\n") &&
              strstr(t, "specdec_draft_position_acceptance{method=\"ngram\",position=\"3\"} 0.000000\n") &&
              strstr(t, "specdec_http_errors_total{code=\"400\"} 1\n") && strstr(t, "specdec_queue_length 2\n") &&
              strstr(t, "specdec_live_sessions 3\n") && strstr(t, "specdec_kv_pages_used 3\n") &&
              strstr(t, "specdec_kv_pages_capacity 4\n"),
          "metrics text:\n%s", t ? t : "");
    free(t);
    /* every method has its own label, the ones added last included (SWIFT was counted as "none") */
    sv_metrics_request(&mt, SD_SPEC_SWIFT, 4, 7, 6, 5, 2);
    sv_metrics_round(&mt, SD_SPEC_SWIFT, 1, 1);
    t = sv_metrics_text(&mt);
    CHECK(t && strstr(t, "specdec_requests_total{method=\"swift\"} 1\n") &&
              strstr(t, "specdec_requests_total{method=\"none\"} 0\n") &&
              strstr(t, "specdec_draft_position_drafted_total{method=\"swift\",position=\"1\"} 1\n") &&
              !strstr(t, "method=\"?\""),
          "metrics text:\n%s", t ? t : "");
    free(t);
    /* auto's candidates, summed by name over requests; a candidate that never ran is not listed */
    sd_spec_stats st;
    memset(&st, 0, sizeof st);
    st.n_auto_cands = 3;
    st.auto_cands[0] = (sd_auto_cand_stats){.name = "draft", .rounds = 5, .best = 3, .held = 2, .drafted = 15, .accepted = 9,
                                            .est_accepted = 8.5};
    st.auto_cands[1] = (sd_auto_cand_stats){.name = "ngram:repeat", .rounds = 1, .probe = 1, .drafted = 8, .accepted = 8,
                                            .est_accepted = 6};
    st.auto_cands[2] = (sd_auto_cand_stats){.name = "swift"};
    sv_metrics_auto(&mt, &st);
    sv_metrics_auto(&mt, &st);
    t = sv_metrics_text(&mt);
    CHECK(t && strstr(t, "specdec_auto_rounds_total{candidate=\"draft\",reason=\"best\"} 6\n") &&
              strstr(t, "specdec_auto_rounds_total{candidate=\"draft\",reason=\"held\"} 4\n") &&
              strstr(t, "specdec_auto_rounds_total{candidate=\"ngram:repeat\",reason=\"probe\"} 2\n") &&
              strstr(t, "specdec_auto_accepted_tokens_total{candidate=\"draft\"} 18\n") &&
              strstr(t, "specdec_auto_expected_accepted_tokens_total{candidate=\"draft\"} 17.000\n") &&
              strstr(t, "specdec_auto_drafted_tokens_total{candidate=\"ngram:repeat\"} 16\n") && !strstr(t, "candidate=\"swift\""),
          "auto metrics:\n%s", t ? t : "");
    free(t);
    sv_metrics_destroy(&mt);
}

int main(void) {
    test_detect();
    test_render();
    test_bodies();
    test_metrics();
    fixture f;
    memset(&f, 0, sizeof f);
    sd_error err = {0};
    sd_ctx_params cp = sd_ctx_default_params();
    cp.n_threads = 1;
    cp.n_ctx = 128;
    cp.n_batch = 16;
    if (sd_model_load(tl_shared("models/stories-ee.gguf"), NULL, &f.m, &err) != SD_OK ||
        sd_model_load(tl_shared("models/stories260K.gguf"), NULL, &f.dm, &err) != SD_OK ||
        sd_ctx_new(f.m, &cp, &f.ctx, &err) != SD_OK || sd_ctx_new(f.dm, &cp, &f.dctx, &err) != SD_OK) {
        CHECK(false, "fixture: %s", err.msg);
    } else {
        f.def.model = f.m;
        f.def.dmodel = f.dm;
        f.def.ctx = f.ctx;
        f.def.dctx = f.dctx;
        f.def.sampling = sd_sampler_default_params();
        f.def.spec = sd_spec_default_params();
        f.def.seeded = f.def.spec;
        f.def.n_predict = 16;
        f.def.tpl = CT_CHATML;
        test_parse(&f);
    }
    sd_ctx_free(f.dctx);
    sd_ctx_free(f.ctx);
    sd_model_free(f.dm);
    sd_model_free(f.m);
    return tl_finish("test_serve_units");
}
