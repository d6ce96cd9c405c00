"""The Python binding against the CLI and the header: struct layouts equal the C ones, greedy text equals
`specdec generate --temp 0` (plain, n-gram, a draft model; seeded sampling too), streamed pieces join to the same
text, errors raise SpecdecError with the library's message. Run by tests/test_python.sh (SPECDEC_LIB, PYTHONPATH)."""
import ctypes
import os
import subprocess
import sys
import tempfile

import specdec
from specdec import _lib

BUILD = os.environ.get("BUILD", "build")
SHARED = os.environ.get("SHARED", "../shared")
CLI = os.path.join(BUILD, "specdec")
S260 = os.path.join(SHARED, "models", "stories260K.gguf")
SEE = os.path.join(SHARED, "models", "stories-ee.gguf")
PROMPT = "Once upon a time"
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what)


def raises(fn, pattern, what):
    try:
        fn()
    except specdec.SpecdecError as e:
        check(pattern in str(e), "%s: message %r lacks %r" % (what, str(e), pattern))
        return e
    except Exception as e:  # noqa: BLE001
        check(False, "%s: raised %r, not SpecdecError" % (what, e))
        return None
    check(False, "%s: no error" % what)
    return None


def cli(model, *args):
    out = subprocess.run([CLI, "generate", "-m", model, "-p", PROMPT, "-t", "1"] + list(args),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    check(out.returncode == 0, "cli %s: %s" % (args, out.stderr.decode()))
    text = out.stdout.decode("utf-8", "replace")
    check(text.startswith(PROMPT) and text.endswith("\n"), "cli output shape: %r" % text)
    return text[len(PROMPT):-1]


def test_abi():
    """Every mirrored struct: size and every field's offset as the C compiler sees them through specdec.h."""
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "specdec.h"', "int main(void) {"]
    expect = []
    for cls in _lib.STRUCTS:
        c = cls._c_name_
        lines.append('printf("%s %%zu\\n", sizeof(%s));' % (c, c))
        expect.append("%s %d" % (c, ctypes.sizeof(cls)))
        for f, _ in cls._fields_:
            lines.append('printf("%s.%s %%zu\\n", offsetof(%s, %s));' % (c, f, c, f))
            expect.append("%s.%s %d" % (c, f, getattr(cls, f).offset))
    lines.append("return 0; }")
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "abi.c"), os.path.join(d, "abi")
        with open(src, "w") as f:
            f.write("\n".join(lines))
        cc = subprocess.run([os.environ.get("CC", "cc"), "-Iinclude", src, "-o", exe], stderr=subprocess.PIPE)
        check(cc.returncode == 0, "abi program: %s" % cc.stderr.decode())
        if cc.returncode:
            return
        got = subprocess.run([exe], stdout=subprocess.PIPE).stdout.decode().split("\n")[:-1]
    diff = [(e, g) for e, g in zip(expect, got) if e != g]
    check(len(got) == len(expect) and not diff, "struct layouts differ from specdec.h (python, C): %s" % diff[:5])


def test_version_and_lookup():
    with open("include/specdec.h") as f:
        v = [ln.split('"')[1] for ln in f if ln.startswith("#define SPECDEC_VERSION ")][0]
    check(specdec.version() == v == specdec.__version__, "version %s vs header %s" % (specdec.version(), v))
    check(specdec.methods() == ["none", "draft", "ngram", "early-exit", "del", "specbound", "swift", "auto"],
          "methods: %s" % specdec.methods())
    check(os.path.realpath(specdec.library_path()) == os.path.realpath(os.environ["SPECDEC_LIB"]),
          "SPECDEC_LIB is what was loaded: %s" % specdec.library_path())
    # a SPECDEC_LIB that is not there: a clear import error, no fallback to another copy
    env = dict(os.environ, SPECDEC_LIB="/no/such/libspecdec.so")
    r = subprocess.run([sys.executable, "-c", "import specdec"], env=env, stderr=subprocess.PIPE)
    check(r.returncode != 0 and b"/no/such/libspecdec.so" in r.stderr, "bad SPECDEC_LIB: %s" % r.stderr[-300:])


def test_generate(m, ee):
    want = cli(S260, "-n", "60", "--temp", "0")
    r = m.generate(PROMPT, max_tokens=60, temperature=0)
    check(r.text == want, "greedy text %r != cli %r" % (r.text, want))
    check(len(r.tokens) == r.stats.n_gen == 60 and r.finish_reason == "length", "tokens/stats: %r %r" % (r, r.stats))
    check(m.detokenize(r.tokens) == r.text, "detokenize(tokens) == text")
    check(r.stats.n_prompt == len(m.tokenize(PROMPT)) == 5, "n_prompt %d" % r.stats.n_prompt)
    # n-gram lookup, as a dict and as the method text of bench spec
    want_ng = cli(S260, "-n", "60", "--temp", "0", "--spec", "ngram", "--gamma", "4")
    r = m.generate(PROMPT, max_tokens=60, temperature=0, speculative={"method": "ngram", "gamma": 4})
    check(r.text == want_ng == want, "ngram text %r" % r.text)
    check(r.stats.n_drafted > 0, "ngram drafted nothing: %r" % r.stats)
    r2 = m.generate(PROMPT, max_tokens=60, temperature=0, speculative="ngram:gamma=4")
    check(r2.text == want and r2.stats.n_drafted == r.stats.n_drafted, "method text")
    # a draft model: stories-ee drafted by stories260K, lists and enums through the registry keys
    want_ee = cli(SEE, "-n", "60", "--temp", "0")
    want_d = cli(SEE, "-n", "60", "--temp", "0", "--spec", "draft", "--draft-model", S260, "--gamma", "3")
    r = ee.generate(PROMPT, max_tokens=60, temperature=0,
                    speculative={"method": "draft", "draft_model": S260, "gamma": 3})
    check(r.text == want_d == want_ee, "draft text %r vs %r" % (r.text, want_ee))
    check(r.stats.n_accepted > 0 and 0 < r.stats.acceptance <= 1 and r.stats.mean_accepted_length > 1,
          "draft stats %r" % r.stats.as_dict())
    r = ee.generate(PROMPT, max_tokens=60, temperature=0,
                    speculative={"method": "draft", "draft_model": m, "tree_nodes": 8, "tree_topk": [3, 2, 1],
                                 "tree_conf": [0.5, 0.9], "ctrl": "fs"})
    check(r.text == want_ee, "draft tree with a Model as draft: %r" % r.text)
    # auto: the method chosen every round from a pool (here with the draft model), its candidates in the stats
    r = ee.generate(PROMPT, max_tokens=60, temperature=0,
                    speculative={"method": "auto", "draft_model": S260, "candidates": ["ngram", "draft", "early-exit"]})
    names = [c["name"] for c in r.stats.auto_candidates]
    check(r.text == want_ee, "auto text %r" % r.text)
    check("draft" in names and "ngram" in names and sum(c["rounds"] for c in r.stats.auto_candidates) == r.stats.n_rounds,
          "auto stats %r" % r.stats.as_dict())
    # seeded sampling: the same draws as the CLI
    want_s = cli(S260, "-n", "40", "--seed", "7", "--temp", "0.9")
    r = m.generate(PROMPT, max_tokens=40, temperature=0.9, seed=7)
    check(r.text == want_s and r.seed == 7, "seeded text %r != cli %r" % (r.text, want_s))


def test_stream(m):
    full = m.generate(PROMPT, max_tokens=50, temperature=0, speculative={"method": "ngram"})
    st = m.stream(PROMPT, max_tokens=50, temperature=0, speculative={"method": "ngram"})
    pieces = list(st)
    check(len(pieces) > 10 and "".join(pieces) == full.text, "stream pieces %r" % pieces[:5])
    check(st.result is not None and st.result.text == full.text and st.result.tokens == full.tokens,
          "stream result")
    st = m.generate(PROMPT, max_tokens=50, temperature=0, stream=True)
    first = next(st)
    raises(lambda: m.generate(PROMPT, max_tokens=5), "another generation", "a second generation while streaming")
    st.close()
    check(list(st) == [] and st.result is None, "a closed stream yields nothing more")
    check(first and full.text.startswith(first), "first piece %r" % first)
    check(m.generate(PROMPT, max_tokens=50, temperature=0).text == full.text, "generation after an early close")
    st = m.stream(PROMPT, max_tokens=50, temperature=0)
    next(st)
    del st  # dropped unfinished: its session is freed, the model is free again
    check(m.generate(PROMPT, max_tokens=50, temperature=0).text == full.text, "generation after a dropped stream")
    r = m.generate(PROMPT, max_tokens=-1, temperature=0)
    check(len(r.tokens) == m.n_ctx - 5, "max_tokens=-1: until the context is full (%d)" % len(r.tokens))
    check(m.generate(PROMPT, max_tokens=0).tokens == [], "max_tokens=0")


def test_errors(m):
    e = raises(lambda: specdec.Model("/no/such/model.gguf"), "/no/such/model.gguf", "missing model")
    check(e is not None and e.status == "i/o error", "status name: %s" % (e and e.status))
    raises(lambda: specdec.Model(os.path.join(SHARED, "data", "README.md")), "not a valid", "not a model")
    raises(lambda: m.generate(PROMPT, speculative={"method": "bogus"}), "unknown speculative method 'bogus'", "bad method")
    raises(lambda: m.generate(PROMPT, speculative="bogus:gamma=2"), "bogus", "bad method text")
    raises(lambda: m.generate(PROMPT, speculative={"method": "ngram", "gamma": 999}), "gamma=999", "gamma out of range")
    raises(lambda: m.generate(PROMPT, speculative={"method": "ngram", "exit": 2}), "exit", "key of another method")
    raises(lambda: m.generate(PROMPT, speculative={"method": "draft"}), "draft", "draft without a draft model")
    raises(lambda: m.generate(PROMPT, speculative={"method": "draft", "draft_model": "/no/such/draft.gguf"}),
           "/no/such/draft.gguf", "missing draft model")
    raises(lambda: m.generate(PROMPT, temperature=-1), "temperature", "negative temperature")
    raises(lambda: m.generate(PROMPT, top_p=2), "top-p", "top_p out of range")
    raises(lambda: specdec.Model(S260, n_ctx=-5), "n_ctx", "negative n_ctx")
    with specdec.Model(S260, n_threads=1, no_mmap=True) as nm:  # a load option of sd_model_params
        check(nm.generate(PROMPT, max_tokens=20, temperature=0).text ==
              m.generate(PROMPT, max_tokens=20, temperature=0).text, "no_mmap: the same text")
    kq = os.path.join(SHARED, "models", "kquant", "stories-ee-w768-q5_k_m.gguf")
    with specdec.Model(kq, n_ctx=128, n_threads=1, kv_type="f16") as kf:  # a context option: llama.cpp's arithmetic
        check(kf.generate(PROMPT, max_tokens=30, temperature=0).text ==
              cli(kq, "-c", "128", "-n", "30", "--temp", "0", "--kv-type", "f16"), "kv_type f16: the CLI's text")
    raises(lambda: specdec.Model(S260, kv_type="f8"), "kv_type", "bad kv_type")
    small = specdec.Model(S260, n_ctx=8, n_threads=1)
    raises(lambda: small.generate(PROMPT * 4), "context holds 8", "prompt longer than the context")
    r = small.generate(PROMPT, max_tokens=100, temperature=0)
    check(len(r.tokens) == 8 - 5, "max_tokens cut to the context: %d" % len(r.tokens))
    small.close()
    small.close()
    raises(lambda: small.generate(PROMPT), "closed", "a closed model")


def main():
    test_abi()
    test_version_and_lookup()
    with specdec.Model(S260, n_threads=1) as m, specdec.Model(SEE, n_threads=1) as ee:
        check(m.info["n_layer"] == 5 and m.info["n_vocab"] == 512 and m.n_ctx == m.info["n_ctx_train"] == 128, "info %r" % m.info)
        toks = m.tokenize(PROMPT)
        check(toks[0] == 1 and m.detokenize(toks).strip() == PROMPT, "tokenize %r" % toks)
        check(m.tokenize(PROMPT, add_bos=False) == toks[1:], "add_bos=False")
        test_generate(m, ee)
        test_stream(m)
        test_errors(m)
    print("test_python: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
