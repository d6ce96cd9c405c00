"""specdec: Python binding of libspecdec (lossless speculative decoding on the CPU), over ctypes.

    import specdec
    with specdec.Model("stories260K.gguf", n_threads=2) as m:
        r = m.generate("Once upon a time", max_tokens=64, temperature=0)
        print(r.text, r.stats.tokens_per_s)
        r = m.generate("Once upon a time", max_tokens=64, temperature=0,
                       speculative={"method": "draft", "draft_model": "stories260K.gguf", "gamma": 4})
        for piece in m.stream("Once upon a time", max_tokens=64, seed=7):
            print(piece, end="", flush=True)

The library is found through $SPECDEC_LIB (the .so, or its folder), then beside this package or in the source
tree's build/, then the system's library path. Errors of the library raise SpecdecError with its message.
"""

import ctypes
import secrets
import weakref

from . import _lib

__all__ = ["Model", "Result", "Stats", "Stream", "SpecdecError", "methods", "version", "library_path"]

_L, _PATH, _VERSION = _lib.load()
__version__ = _VERSION


def version():
    """The version of the loaded libspecdec ("0.1.0")."""
    return _VERSION


def library_path():
    """The path libspecdec was loaded from."""
    return _PATH


def methods():
    """The speculative methods of the library's registry: ["none", "draft", "ngram", ...]."""
    out, i = [], 0
    while True:
        name = _L.sd_spec_method_name(i).decode()
        if name == "?":
            return out
        out.append(name)
        i += 1


class SpecdecError(Exception):
    """An error reported by libspecdec: str(e) is the library's message, e.status its status name ("i/o error",
    "invalid argument", ...), e.code the sd_status number."""

    def __init__(self, message, code=4, status=None):
        super().__init__(message)
        self.code = code
        self.status = status if status is not None else _L.sd_status_str(code).decode()


def _raise(code, err, what=None):
    msg = err.msg.decode("utf-8", "replace")
    raise SpecdecError("%s: %s" % (what, msg) if what else msg, code)


def _check(code, err, what=None):
    if code != 0:
        _raise(code, err, what)


def _b(s):
    return None if s is None else (s.encode() if isinstance(s, str) else bytes(s))


class Stats:
    """What a generation did (sd_spec_stats): token counts, rounds, drafted / accepted drafts, times in seconds."""

    _FIELDS = ("n_prompt", "n_gen", "n_rounds", "n_drafted", "n_accepted", "n_branch_rounds", "t_prompt_s",
               "t_gen_s", "t_draft_s", "t_verify_s", "t_aux_s", "layer_passes", "mean_exit", "mean_gamma",
               "n_verified", "t_companion_s")

    _AUTO = ("rounds", "best", "held", "probe", "gamma_sum", "drafted", "accepted", "accept_est", "est_accepted", "est_s",
             "meas_s", "timed_rounds")

    def __init__(self, c):
        for f in self._FIELDS:
            setattr(self, f, getattr(c, f))
        # --spec auto: per candidate, the rounds it ran and why (best / held by hysteresis / probe)
        self.auto_candidates = [dict(name=a.name.decode(), **{k: getattr(a, k) for k in self._AUTO})
                                for a in c.auto_cands[:c.n_auto_cands]]

    @property
    def acceptance(self):
        """Accepted / drafted tokens (0 when nothing was drafted)."""
        return self.n_accepted / self.n_drafted if self.n_drafted else 0.0

    @property
    def mean_accepted_length(self):
        """tau: generated tokens per target verification round."""
        return self.n_gen / self.n_rounds if self.n_rounds else 0.0

    @property
    def tokens_per_s(self):
        return self.n_gen / self.t_gen_s if self.t_gen_s > 0 else 0.0

    def as_dict(self):
        d = {f: getattr(self, f) for f in self._FIELDS}
        if self.auto_candidates:
            d["auto_candidates"] = self.auto_candidates
        return d

    def __repr__(self):
        return "Stats(%s)" % ", ".join("%s=%r" % (f, getattr(self, f)) for f in self._FIELDS[:5])


class Result:
    """A finished generation: text (the generated text, without the prompt), tokens (their ids), stats,
    finish_reason ("stop": an end-of-generation token; "length": max_tokens reached), seed (the sampler's)."""

    def __init__(self, text, tokens, stats, finish_reason, seed):
        self.text, self.tokens, self.stats, self.finish_reason, self.seed = text, tokens, stats, finish_reason, seed

    def __str__(self):
        return self.text

    def __repr__(self):
        return "Result(text=%r, n_tokens=%d, finish_reason=%r)" % (self.text, len(self.tokens), self.finish_reason)


class _Draft:
    """A draft model loaded for a target: its model and a context as long as the target's."""

    def __init__(self, target, path, convert_type):
        self.model = Model(path, convert_type=convert_type, n_ctx=target.n_ctx, n_threads=target.n_threads,
                           n_batch=target._cp.n_batch)

    def close(self):
        self.model.close()


class _Closing:
    """close() at the end of a `with` block and when collected (errors while collected are ignored)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Stream(_Closing):
    """An iterator over the text pieces of one generation (UTF-8 safe: a character split across tokens comes out
    whole). After the last piece, .result holds the Result. close() (or leaving a `with` block) stops early."""

    def __init__(self, model, session, keep, n_predict, seed):
        self._model, self._s, self._keep, self._n_predict, self._seed = model, session, keep, n_predict, seed
        self._dt = _lib.Detok()
        self._buf = ctypes.create_string_buffer(320)
        self._toks = (ctypes.c_int32 * 256)()
        self._pending = []
        self._tokens = []
        self._text = []
        self.result = None

    def __iter__(self):
        return self

    def __next__(self):
        while True:
            if self._pending:
                piece = self._pending.pop(0)
                self._text.append(piece)
                return piece
            if self._s is None:
                raise StopIteration
            self._advance()

    def _advance(self):
        L, s, err = _L, self._s, _lib.Error()
        if L.sd_session_done(s):
            n = L.sd_detok_flush(ctypes.byref(self._dt), self._buf)
            if n:
                self._pending.append(self._buf.raw[:n].decode("utf-8", "replace"))
            code = L.sd_session_status(s, ctypes.byref(err))
            st = _lib.SpecStats()
            L.sd_session_stats(s, ctypes.byref(st))
            self._free()
            if code != 0:
                _raise(code, err)
            reason = "length" if len(self._tokens) >= self._n_predict else "stop"
            self.result = Result("".join(self._text + self._pending), list(self._tokens), Stats(st), reason,
                                 self._seed)
            return
        code = L.sd_session_step(s, ctypes.byref(err))
        if code != 0:
            self._free()
            _raise(code, err)
        while True:
            n = L.sd_session_read(s, self._toks, len(self._toks))
            if n <= 0:
                break
            for t in self._toks[:n]:
                self._tokens.append(t)
                k = L.sd_detok_push(self._model._m, ctypes.byref(self._dt), t, self._buf)
                if k:
                    self._pending.append(self._buf.raw[:k].decode("utf-8", "replace"))

    def _free(self):
        if self._s is not None:
            _L.sd_session_free(self._s)
            self._s = None  # the model's _running() no longer sees this stream
            self._keep = None

    def close(self):
        """Stops the generation (if it is still running) and frees it."""
        self._free()
        self._pending = []


class Model(_Closing):
    """A loaded model and one context (KV cache, threads) to generate with.

    Model(path, n_ctx=0, n_threads=0, n_batch=64, tokenizer=None, convert_type=None, n_kv_cells=0, no_mmap=False,
          mlock=False, kv_type="f32")
      path          GGUF (v2/v3) or llama2.c .bin model
      n_ctx         positions of the context (0: the model's training context)
      n_threads     threads (0: the online CPUs)
      n_batch       largest block per forward pass
      tokenizer     llama2.c models: the tokenizer.bin (default: beside the model)
      convert_type  convert the weights at load: "f32", "f16", "bf16", "q8_0", "q4_0"
      n_kv_cells    KV pool capacity (0: n_ctx)
      no_mmap       read the file into memory the process owns instead of mapping it
      mlock         lock the weights in RAM (an error naming RLIMIT_MEMLOCK when it cannot)
      kv_type       "f32" (default) or "f16": K/V rounded to fp16, attention as llama.cpp's (CLI --kv-type)
    """

    def __init__(self, path, n_ctx=0, n_threads=0, n_batch=64, tokenizer=None, convert_type=None, n_kv_cells=0,
                 no_mmap=False, mlock=False, kv_type="f32"):
        if kv_type not in ("f32", "f16"):
            raise SpecdecError("kv_type must be 'f32' or 'f16', not %r" % (kv_type,))
        self._m = self._c = None
        self._drafts, self._heads, self._active = {}, {}, None
        err = _lib.Error()
        mp = _L.sd_model_default_params()
        self._keep = (_b(tokenizer), _b(convert_type))
        mp.tokenizer_path, mp.convert_type = self._keep
        mp.no_mmap, mp.mlock = bool(no_mmap), bool(mlock)
        m = ctypes.c_void_p()
        _check(_L.sd_model_load(_b(str(path)), ctypes.byref(mp), ctypes.byref(m), ctypes.byref(err)), err)
        self._m = m
        cp = _L.sd_ctx_default_params()
        cp.n_ctx, cp.n_threads, cp.n_batch, cp.n_kv_cells, cp.n_seq = n_ctx, n_threads, n_batch, n_kv_cells, 1
        cp.kv_type = 1 if kv_type == "f16" else 0
        self._cp = cp
        c = ctypes.c_void_p()
        code = _L.sd_ctx_new(m, ctypes.byref(cp), ctypes.byref(c), ctypes.byref(err))
        if code != 0:
            self.close()
            _raise(code, err)
        self._c = c
        self.path = str(path)
        info = _lib.ModelInfo()
        _L.sd_model_get_info(m, ctypes.byref(info))
        self.info = {f: getattr(info, f) for f, _ in _lib.ModelInfo._fields_}
        for k in ("arch", "weight_type"):
            self.info[k] = self.info[k].decode()

    def _running(self):
        """The stream whose session is live on this model's context, or None."""
        st = self._active() if self._active is not None else None
        return st if st is not None and st._s is not None else None

    @property
    def n_ctx(self):
        return _L.sd_ctx_n_ctx(self._ctx())

    @property
    def n_threads(self):
        return _L.sd_ctx_n_threads(self._ctx())

    def _ctx(self):
        if self._c is None:
            raise SpecdecError("the model is closed", 4)
        return self._c

    # ---------------------------------------------------------------- tokens
    def tokenize(self, text, add_bos=None, parse_special=True):
        """Token ids of text (BOS first when the model adds one, unless add_bos=False)."""
        self._ctx()
        data = text.encode() if isinstance(text, str) else bytes(text)
        if add_bos is None:
            add_bos = _L.sd_model_add_bos(self._m)
        cap = len(data) + 8
        while True:
            out, n, err = (ctypes.c_int32 * cap)(), ctypes.c_int(), _lib.Error()
            code = _L.sd_tokenize(self._m, data, len(data), add_bos, parse_special, out, cap, ctypes.byref(n),
                                  ctypes.byref(err))
            if code != 0 and n.value > cap:
                cap = n.value
                continue
            _check(code, err)
            return list(out[:n.value])

    def detokenize(self, tokens):
        """The text of token ids (control tokens give nothing)."""
        self._ctx()
        dt, buf, parts = _lib.Detok(), ctypes.create_string_buffer(320), []
        for t in tokens:
            k = _L.sd_detok_push(self._m, ctypes.byref(dt), int(t), buf)
            parts.append(buf.raw[:k])
        k = _L.sd_detok_flush(ctypes.byref(dt), buf)
        parts.append(buf.raw[:k])
        return b"".join(parts).decode("utf-8", "replace")

    # ---------------------------------------------------------------- generation
    def _spec(self, speculative, keep):
        sp, err = _L.sd_spec_default_params(), _lib.Error()
        if speculative is None:
            return sp
        if isinstance(speculative, str):  # "ngram" or "draft:gamma=4:ctrl=fs" (sd_spec_parse)
            _check(_L.sd_spec_parse(ctypes.byref(sp), speculative.encode(), ctypes.byref(err)), err, "speculative")
            if sp.method == 1:
                raise SpecdecError("speculative: the draft method needs a draft model: give a dict with "
                                   "'draft_model'", 4)
            return sp
        opts = dict(speculative)
        method = opts.pop("method", "none")
        draft = opts.pop("draft_model", None)
        draft_type = opts.pop("draft_type", None)
        heads = opts.pop("exit_heads", None)
        # the dict becomes the method text of `bench spec --methods` ("ngram:gamma=4:ngram_max=3"), parsed by the
        # library's registry: ranges, names, and keys that do not apply to the method are refused there
        text = str(method)
        for key, value in opts.items():
            if isinstance(value, (list, tuple)):
                v = "+".join(str(x) for x in value)
            elif isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise SpecdecError("speculative: %s=%r: not a number, a list or a name" % (key, value), 4)
            else:
                v = str(value)
            if ":" in v or ":" in str(key) or "=" in str(key):
                raise SpecdecError("speculative: %s=%r: ':' and '=' cannot appear in a key or value" % (key, value), 4)
            text += ":%s=%s" % (key, v)
        _check(_L.sd_spec_parse(ctypes.byref(sp), text.encode(), ctypes.byref(err)), err, "speculative")
        if draft is not None:
            if isinstance(draft, Model):
                if draft_type is not None:
                    raise SpecdecError("speculative: draft_type applies to a draft_model path, not a Model", 4)
                d = draft
            else:
                k = (str(draft), draft_type)
                if k not in self._drafts:
                    self._drafts[k] = _Draft(self, draft, draft_type)
                d = self._drafts[k].model
            sp.draft_ctx = d._ctx()
            keep.append(d)
        elif draft_type is not None:
            raise SpecdecError("speculative: draft_type needs draft_model", 4)
        if heads is not None:
            k = str(heads)
            if k not in self._heads:
                h = ctypes.c_void_p()
                _check(_L.sd_exit_heads_load(self._m, k.encode(), ctypes.byref(h), ctypes.byref(err)), err,
                       "exit_heads")
                self._heads[k] = h
            sp.exit_heads = self._heads[k]
        return sp

    def stream(self, prompt, max_tokens=128, temperature=None, top_k=None, top_p=None, min_p=None,
               repeat_penalty=None, repeat_last_n=None, seed=None, speculative=None, ignore_eos=False,
               add_bos=None):
        """Starts a generation and returns a Stream: iterate it for the text pieces; .result after the end.
        Arguments as generate()."""
        ctx = self._ctx()
        if self._running() is not None:
            raise SpecdecError("another generation is running on this model: finish or close() its stream first", 4)
        toks = self.tokenize(prompt, add_bos=add_bos)
        if not toks:
            raise SpecdecError("the prompt is empty and the model has no BOS token to start from", 4)
        n_ctx = _L.sd_ctx_n_ctx(ctx)
        if len(toks) >= n_ctx:
            raise SpecdecError("the prompt has %d tokens but the context holds %d (raise n_ctx or shorten the prompt)"
                               % (len(toks), n_ctx), 4)
        n_predict = int(max_tokens)
        if n_predict < 0 or len(toks) + n_predict > n_ctx:
            n_predict = n_ctx - len(toks)  # as the CLI: cut to what the context holds
        keep = []
        p = _L.sd_session_default_params()
        sm = p.sampling
        for name, v in (("temp", temperature), ("top_k", top_k), ("top_p", top_p), ("min_p", min_p),
                        ("repeat_penalty", repeat_penalty), ("repeat_last_n", repeat_last_n)):
            if v is not None:
                setattr(sm, name, v)
        if seed is None:
            seed = secrets.randbits(63)
        sm.seed = int(seed)
        p.sampling = sm
        p.spec = self._spec(speculative, keep)
        p.n_predict = n_predict
        p.ignore_eos = bool(ignore_eos)
        s, err = ctypes.c_void_p(), _lib.Error()
        _check(_L.sd_session_new(ctx, ctypes.byref(p), ctypes.byref(s), ctypes.byref(err)), err)
        arr = (ctypes.c_int32 * len(toks))(*toks)
        code = _L.sd_session_set_prompt(s, arr, len(toks), ctypes.byref(err))
        if code != 0:
            _L.sd_session_free(s)
            _raise(code, err)
        st = Stream(self, s, keep, n_predict, sm.seed)
        self._active = weakref.ref(st)  # a stream dropped unfinished frees its session (Stream.__del__)
        return st

    def generate(self, prompt, max_tokens=128, temperature=None, top_k=None, top_p=None, min_p=None,
                 repeat_penalty=None, repeat_last_n=None, seed=None, speculative=None, ignore_eos=False,
                 add_bos=None, stream=False):
        """Generates a continuation of prompt and returns a Result (.text, .tokens, .stats); stream=True returns a
        Stream of text pieces instead.

          max_tokens      most tokens to generate (-1 or more than fits: until the context is full)
          temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n
                          sampling (None: the library's defaults, temperature 0.8; temperature=0 is greedy)
          seed            the sampler's seed (None: a random one, in result.seed)
          speculative     None (plain decoding); a method text as `bench spec --methods` takes ("ngram",
                          "early-exit:exit=4:ctrl=fs"); or a dict {"method": NAME, KEY: VALUE, ...} with the
                          registry's keys (gamma, gamma_max, ctrl, ngram_max, exit, layers, tree_nodes, ...; lists
                          as Python lists) plus "draft_model" (a path or a Model), "draft_type" and "exit_heads"
                          (a path). Lossless: greedy output equals plain greedy output.
          ignore_eos      keep going after an end-of-generation token
          add_bos         None: as the model says
        """
        st = self.stream(prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed,
                         speculative, ignore_eos, add_bos)
        if stream:
            return st
        try:
            for _ in st:
                pass
        finally:
            st.close()
        return st.result

    # ---------------------------------------------------------------- lifetime
    def close(self):
        """Frees the context, the model, and the draft models and exit heads it loaded (idempotent)."""
        if self._running() is not None:
            self._running().close()
        for d in self._drafts.values():
            d.close()
        self._drafts = {}
        for h in self._heads.values():
            _L.sd_exit_heads_free(h)
        self._heads = {}
        if self._c is not None:
            _L.sd_ctx_free(self._c)
            self._c = None
        if self._m is not None:
            _L.sd_model_free(self._m)
            self._m = None

    def __repr__(self):
        return "Model(%r, n_ctx=%d)" % (self.path, self.n_ctx) if self._c is not None else "Model(closed)"
