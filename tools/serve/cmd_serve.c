/* specdec serve: an OpenAI-compatible HTTP server. The HTTP front listens first (/health says 503 while the model
 * loads); then one scheduler thread drives every request's session through the continuous-batching scheduler.
 * SIGINT / SIGTERM: new requests get 503, the ones in flight finish, then the process exits 0. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat_tpl.h"
#include "cli_args.h"
#include "cmds.h"
#include "run_opts.h"
#include "serve_http.h"
#include "serve_job.h"
#include "serve_metrics.h"
#include "serve_sched.h"
#include "specdec.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: specdec serve -m MODEL [--host 127.0.0.1] [--port 8080] [--parallel N] [options]\n\n"
            "An OpenAI-compatible server: POST /v1/completions, POST /v1/chat/completions (JSON or streamed as\n"
            "Server-Sent Events), GET /v1/models, GET /health, GET /metrics (Prometheus). Each request may choose its\n"
            "speculative method with \"speculative\": {\"method\": \"ngram\", \"gamma\": 4, ...} (the keys of bench spec\n"
            "--methods; \"method\": \"none\" = plain decoding); the flags below set the default method. Without --spec\n"
            "the default is auto (the method and its draft length chosen every round from measured costs; the latency\n"
            "table it prices rounds with is measured at start-up: keep it with --sv-latency FILE), except for a request\n"
            "that samples with a \"seed\" of its own, which is decoded plainly so that its text is the seed's (auto's\n"
            "choices follow measured times). Up to N requests decode at once (continuous batching), more wait in a\n"
            "queue.\n\n"
            "server:\n"
            "      --host ADDR         address to listen on (default 127.0.0.1)\n"
            "      --port N            port (default 8080; 0 = any free port, printed at start)\n"
            "      --parallel N        sequences decoding at once (default 4, 1..256)\n"
            "      --queue-limit N     requests waiting beyond those (default 64); more get 503 + Retry-After\n"
            "      --api-key KEY       require 'Authorization: Bearer KEY' on every endpoint but /health\n"
            "      --chat-template NAME  chat format (%s) instead of the GGUF's\n"
            "                          tokenizer.chat_template (a template none of these is refused)\n"
            "      --alias NAME        the model id in responses and /v1/models (default: the file name)\n"
            "      --max-body BYTES    largest request body (default 8388608); larger gets 413\n"
            "      --timeout SECONDS   per request, from its arrival (default 600; 0 = none)\n"
            "      --max-connections N open connections at most (default 1024)\n"
            "      --idle-timeout S    close a connection idle for S seconds, e.g. a client that sends too slowly\n"
            "                          (default 60; 0 = never; not while its request is being answered)\n"
            "      --token-budget N    positions per scheduler step over all sequences (default: -b)\n"
            "  -n, --n-predict N       max_tokens when a request gives none (default 128; -1 = to the end of the context)\n"
            "  --draft-model FILE      loaded whatever --spec is, so that requests can choose \"method\": \"draft\"\n",
            chat_tpl_names());
    run_opts_help(f);
    fprintf(f, "  -h, --help              this text\n");
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* --chat-template: a family name, or a file holding a Jinja template (recognised like the GGUF's). */
static bool template_arg(const char *v, chat_tpl *out) {
    if ((*out = chat_tpl_from_name(v)) != CT_NONE) return true;
    char *text = NULL;
    sd_error e = {0};
    if (sd_read_text_file(v, 1 << 20, &text, NULL, &e) != SD_OK) {
        fprintf(stderr, "error: --chat-template %s: not a template name (%s) nor a readable file (%s)\n", v,
                chat_tpl_names(), e.msg);
        return false;
    }
    *out = chat_tpl_detect(text);
    free(text);
    if (*out == CT_NONE) {
        fprintf(stderr, "error: --chat-template %s: the template is none of the known families (%s)\n", v,
                chat_tpl_names());
        return false;
    }
    return true;
}

int cmd_serve(int argc, char **argv) {
    run_opts o;
    run_opts_init(&o);
    o.draft_any_method = true;
    o.swift_any_method = true; /* SWIFT requests share one optimiser state, kept across requests */
    o.auto_any_method = true;  /* auto requests share their estimates likewise */
    sv_server s;
    memset(&s, 0, sizeof s);
    s.host = "127.0.0.1";
    s.port = 8080;
    s.max_body = (size_t)8 << 20;
    s.timeout_s = 600;
    s.max_connections = 1024;
    s.idle_timeout_s = 60;
    int P = 4, queue_limit = 64, budget = 0;
    const char *alias = NULL, *tpl_arg = NULL;
    bool spec_given = false;
    static const char *const own[] = {"--host", "--port", "--parallel", "--queue-limit", "--api-key",
                                      "--chat-template", "--alias", "--max-body", "--timeout",
                                      "--max-connections", "--token-budget", "--idle-timeout", NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        run_arg r = run_opts_arg(&o, argc, argv, &i, own, "serve", usage, &v);
        spec_given |= r == RUN_ARG_SHARED && !strcmp(a, "--spec");
        if (r == RUN_ARG_SHARED) continue;
        if (r != RUN_ARG_OWN) return r == RUN_ARG_HELP ? 0 : 2;
        int x = 0;
        float f = 0;
        if (!strcmp(a, "--host")) s.host = v;
        else if (!strcmp(a, "--api-key")) s.api_key = v;
        else if (!strcmp(a, "--alias")) alias = v;
        else if (!strcmp(a, "--chat-template")) tpl_arg = v;
        else if (!strcmp(a, "--port")) {
            if (!cli_int(a, v, 0, 65535, &s.port)) return 2;
        } else if (!strcmp(a, "--parallel")) {
            if (!cli_int(a, v, 1, 256, &P)) return 2;
        } else if (!strcmp(a, "--queue-limit")) {
            if (!cli_int(a, v, 0, 1 << 20, &queue_limit)) return 2;
        } else if (!strcmp(a, "--max-connections")) {
            if (!cli_int(a, v, 1, 1 << 16, &s.max_connections)) return 2;
        } else if (!strcmp(a, "--idle-timeout")) {
            if (!cli_int(a, v, 0, 1 << 24, &s.idle_timeout_s)) return 2;
        } else if (!strcmp(a, "--token-budget")) {
            if (!cli_int(a, v, 1, 1 << 20, &budget)) return 2;
        } else if (!strcmp(a, "--max-body")) {
            if (!cli_int(a, v, 64, 1 << 30, &x)) return 2;
            s.max_body = (size_t)x;
        } else if (!strcmp(a, "--timeout")) {
            if (!cli_float(a, v, 0, 1e7, &f)) return 2;
            s.timeout_s = f;
        }
    }
    if (!o.model_path) {
        fprintf(stderr, "error: specdec serve needs -m MODEL (see --help)\n");
        return 2;
    }
    if (!spec_given) o.spec.method = SD_SPEC_AUTO;
    if (s.api_key && !*s.api_key) {
        fprintf(stderr, "error: --api-key is empty\n");
        return 2;
    }
    chat_tpl tpl = CT_NONE;
    if (tpl_arg && !template_arg(tpl_arg, &tpl)) return 2;
    snprintf(s.model_id, sizeof s.model_id, "%s", alias ? alias : base_name(o.model_path));

    /* Signals are taken by sigwait below; every thread started from here on has them blocked. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    sv_queue queue;
    sv_metrics metrics;
    sv_queue_init(&queue, queue_limit);
    sv_metrics_init(&metrics);
    s.queue = &queue;
    s.metrics = &metrics;
    atomic_store(&s.seed, o.seed_set ? o.sp.seed : (unsigned long long)time(NULL));
    atomic_store(&s.next_id, 1);
    int rc = 1;
    run_env env;
    memset(&env, 0, sizeof env);
    sv_worker w;
    memset(&w, 0, sizeof w);
    char err[512];
    if (!sv_http_start(&s, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        goto done;
    }
    fprintf(stderr, "serve: listening on http://%s:%d (loading the model)\n", s.host, s.port);
    if (!run_env_open(&o, P, &env)) goto done;
    if (!tpl_arg && !chat_tpl_from_model(env.model, &tpl, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        goto done;
    }
    sd_error e = {0};
    if (!sv_worker_start(&w, env.ctx, env.dctx, P, budget, &queue, &metrics, &e)) {
        fprintf(stderr, "error: %s\n", e.msg);
        goto done;
    }
    s.def.model = env.model;
    s.def.dmodel = env.dmodel;
    s.def.ctx = env.ctx;
    s.def.dctx = env.dctx;
    s.def.heads = env.heads;
    s.def.swift = env.swift;
    s.def.autos = env.autos;
    s.def.accept = env.accept; /* SpecDec++ */
    s.def.n_accept = env.n_accept;
    s.def.sampling = o.sp;
    s.def.spec = o.spec;
    if (s.def.spec.method != SD_SPEC_DRAFT && s.def.spec.method != SD_SPEC_AUTO) s.def.spec.draft_ctx = NULL;
    s.def.seeded = s.def.spec;
    if (!spec_given) { /* plain decoding, with what the server shares (heads, SV's files) as any request has them */
        s.def.seeded.method = SD_SPEC_NONE;
        s.def.seeded.draft_ctx = NULL;
        s.def.seeded.auto_state = NULL;
    }
    s.def.n_predict = o.n_predict;
    s.def.tpl = tpl;
    s.def.no_bos = o.no_bos;
    atomic_store(&s.state, SV_READY);
    fprintf(stderr, "serve: ready on http://%s:%d — model %s, %d parallel, context %d, chat format %s, default method "
                    "%s%s%s\n",
            s.host, s.port, s.model_id, P, sd_ctx_n_ctx(env.ctx), chat_tpl_name(tpl),
            sd_spec_method_name(o.spec.method), env.dmodel ? ", draft model " : "", env.dmodel ? o.draft_path : "");
    if (!spec_given)
        fprintf(stderr, "serve: (auto by default; a request that samples with a seed of its own is decoded plainly, "
                        "one that names a method gets it)\n");
    rc = 0;
done:;
    int sig = 0;
    if (rc == 0) sigwait(&sigs, &sig);
    if (rc == 0) {
        fprintf(stderr, "serve: %s: finishing %d request(s) in flight\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
                atomic_load(&s.in_flight));
        atomic_store(&s.state, SV_DRAINING);
        /* new requests now get 503; wait for the ones in flight (bounded by the request timeout) */
        double waited = 0, bound = s.timeout_s > 0 ? s.timeout_s + 5 : 3600;
        while (atomic_load(&s.in_flight) > 0 && waited < bound) {
            struct timespec ts = {0, 20 * 1000000L};
            nanosleep(&ts, NULL);
            waited += 0.02;
        }
    }
    sv_http_stop(&s);
    sv_worker_stop(&w);
    if (rc == 0 && !run_env_save_swift(&o, &env)) rc = 1;
    run_env_free(&env);
    sv_metrics_destroy(&metrics);
    sv_queue_destroy(&queue);
    if (rc == 0) fprintf(stderr, "serve: stopped\n");
    return rc;
}
