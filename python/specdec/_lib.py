"""_lib: finds and loads libspecdec.so, mirrors the structs of specdec.h that the binding passes by value or by
pointer, and declares the prototypes of the calls it makes. Nothing here is public API.

The structs mirror ABI 0 of include/specdec.h field for field; tests/test_python.py compiles a C program that
prints every field's offset and every struct's size from the header and compares them with these classes."""

import ctypes
import ctypes.util
import os

ABI_MAJOR = "0"  # the soname major (libspecdec.so.0) these mirrors are written for

c_int, c_float, c_double, c_char_p, c_void_p = ctypes.c_int, ctypes.c_float, ctypes.c_double, ctypes.c_char_p, ctypes.c_void_p
c_bool, c_size_t, c_uint64, c_int32 = ctypes.c_bool, ctypes.c_size_t, ctypes.c_uint64, ctypes.c_int32


class Error(ctypes.Structure):
    _c_name_ = "sd_error"
    _fields_ = [("status", c_int), ("msg", ctypes.c_char * 512)]


class ModelParams(ctypes.Structure):
    _c_name_ = "sd_model_params"
    _fields_ = [("tokenizer_path", c_char_p), ("convert_type", c_char_p), ("no_mmap", c_bool), ("mlock", c_bool)]


class ModelInfo(ctypes.Structure):
    _c_name_ = "sd_model_info"
    _fields_ = [("arch", c_char_p), ("weight_type", c_char_p), ("n_vocab", c_int), ("n_embd", c_int),
                ("n_layer", c_int), ("n_head", c_int), ("n_head_kv", c_int), ("n_ff", c_int), ("n_ctx_train", c_int),
                ("rope_freq_base", c_float), ("norm_eps", c_float), ("weight_bytes", c_size_t),
                ("decode_bytes", c_size_t), ("matmul_macs", c_uint64)]


class CtxParams(ctypes.Structure):
    _c_name_ = "sd_ctx_params"
    _fields_ = [("n_ctx", c_int), ("n_seq", c_int), ("n_batch", c_int), ("n_threads", c_int), ("n_kv_cells", c_int),
                ("kv_type", c_int)]


class SamplerParams(ctypes.Structure):
    _c_name_ = "sd_sampler_params"
    _fields_ = [("temp", c_float), ("top_k", c_int), ("top_p", c_float), ("min_p", c_float),
                ("repeat_penalty", c_float), ("repeat_last_n", c_int), ("seed", c_uint64)]


class SpecParams(ctypes.Structure):
    _c_name_ = "sd_spec_params"
    _fields_ = [("method", c_int), ("draft_ctx", c_void_p), ("ctrl", c_int), ("gamma", c_int), ("gamma_max", c_int),
                ("p_min", c_float), ("dv_target", c_float), ("dv_eps", c_float), ("dv_theta0", c_float),
                ("ngram_max", c_int), ("ngram_min", c_int), ("exit_layer", c_int), ("exit_heads", c_void_p),
                ("del_omega", c_float), ("del_dmax", c_int), ("del_init_tokens", c_int),
                ("del_layers", c_int * 64), ("del_n_layers", c_int), ("del_every", c_int), ("sb_tau", c_float),
                ("sb_alpha", c_float), ("sb_depth", c_int), ("sb_width", c_int), ("tree_nodes", c_int),
                ("tree_topk", c_int * 8), ("tree_conf", c_float * 7), ("n_tree_conf", c_int),
                ("round_cb", c_void_p), ("round_user", c_void_p),
                # SWIFT
                ("swift_skip_ratio", c_float), ("swift_window", c_int), ("swift_opt_steps", c_int),
                ("swift_patience", c_int), ("swift_bayes_interval", c_int), ("swift_p_stop", c_float),
                ("swift_max_draft", c_int), ("swift_stop_score", c_float), ("swift_state", c_void_p),
                # SpecDec++
                ("accept_head", c_void_p), ("stop_threshold", c_float),
                # Speculative Verification (SV)
                ("verify", c_int), ("companion_ctx", c_void_p), ("companion_exit", c_int), ("sv_profile", c_void_p),
                ("sv_latency", c_void_p), ("sv_record_cb", c_void_p), ("sv_record_user", c_void_p),
                # auto
                ("auto_candidates", ctypes.c_uint), ("auto_exits", c_int * 8), ("auto_n_exits", c_int),
                ("auto_hysteresis", c_float), ("auto_decay", c_float), ("auto_probe", c_int),
                ("auto_state", c_void_p)]


class SessionParams(ctypes.Structure):
    _c_name_ = "sd_session_params"
    _fields_ = [("seq", c_int), ("sampling", SamplerParams), ("spec", SpecParams), ("n_predict", c_int),
                ("ignore_eos", c_bool)]


class AutoCandStats(ctypes.Structure):
    _c_name_ = "sd_auto_cand_stats"
    _fields_ = [("name", ctypes.c_char * 24), ("rounds", c_int), ("best", c_int), ("held", c_int), ("probe", c_int),
                ("gamma_sum", c_int), ("drafted", c_int), ("accepted", c_int), ("accept_est", c_float),
                ("est_accepted", c_double), ("est_s", c_double), ("meas_s", c_double), ("timed_rounds", c_int)]


SD_AUTO_MAX_CANDS = 12


class SpecStats(ctypes.Structure):
    _c_name_ = "sd_spec_stats"
    _fields_ = [("n_prompt", c_int), ("n_gen", c_int), ("n_rounds", c_int), ("n_drafted", c_int),
                ("n_accepted", c_int), ("n_branch_rounds", c_int), ("t_prompt_s", c_double), ("t_gen_s", c_double),
                ("t_draft_s", c_double), ("t_verify_s", c_double), ("t_aux_s", c_double),
                ("layer_passes", c_uint64), ("mean_exit", c_double), ("mean_gamma", c_double),
                # SWIFT
                ("t_opt_s", c_double), ("opt_steps", c_int), ("matchness", c_float),
                # SV
                ("n_verified", c_int), ("t_companion_s", c_double),
                # auto
                ("n_auto_cands", c_int), ("auto_cands", AutoCandStats * SD_AUTO_MAX_CANDS)]


class Detok(ctypes.Structure):
    _c_name_ = "sd_detok"
    _fields_ = [("pending", ctypes.c_char * 8), ("n_pending", c_int)]


STRUCTS = [Error, ModelParams, ModelInfo, CtxParams, SamplerParams, SpecParams, SessionParams, AutoCandStats, SpecStats,
           Detok]

P = ctypes.POINTER
_E = P(Error)

# name: (restype, argtypes)
_PROTOS = {
    "sd_version": (c_char_p, []),
    "sd_status_str": (c_char_p, [c_int]),
    "sd_model_default_params": (ModelParams, []),
    "sd_model_load": (c_int, [c_char_p, P(ModelParams), P(c_void_p), _E]),
    "sd_model_free": (None, [c_void_p]),
    "sd_model_get_info": (None, [c_void_p, P(ModelInfo)]),
    "sd_model_add_bos": (c_bool, [c_void_p]),
    "sd_ctx_default_params": (CtxParams, []),
    "sd_ctx_new": (c_int, [c_void_p, P(CtxParams), P(c_void_p), _E]),
    "sd_ctx_free": (None, [c_void_p]),
    "sd_ctx_n_ctx": (c_int, [c_void_p]),
    "sd_ctx_n_threads": (c_int, [c_void_p]),
    "sd_tokenize": (c_int, [c_void_p, c_char_p, c_size_t, c_bool, c_bool, P(c_int32), c_int, P(c_int), _E]),
    "sd_detok_push": (c_int, [c_void_p, P(Detok), c_int32, c_char_p]),
    "sd_detok_flush": (c_int, [P(Detok), c_char_p]),
    "sd_sampler_default_params": (SamplerParams, []),
    "sd_spec_default_params": (SpecParams, []),
    "sd_spec_method_name": (c_char_p, [c_int]),
    "sd_spec_parse": (c_int, [P(SpecParams), c_char_p, _E]),
    "sd_exit_heads_load": (c_int, [c_void_p, c_char_p, P(c_void_p), _E]),
    "sd_exit_heads_free": (None, [c_void_p]),
    "sd_session_default_params": (SessionParams, []),
    "sd_session_new": (c_int, [c_void_p, P(SessionParams), P(c_void_p), _E]),
    "sd_session_set_prompt": (c_int, [c_void_p, P(c_int32), c_int, _E]),
    "sd_session_step": (c_int, [c_void_p, _E]),
    "sd_session_read": (c_int, [c_void_p, P(c_int32), c_int]),
    "sd_session_done": (c_bool, [c_void_p]),
    "sd_session_status": (c_int, [c_void_p, _E]),
    "sd_session_stats": (None, [c_void_p, P(SpecStats)]),
    "sd_session_free": (None, [c_void_p]),
}


def _candidates():
    """Where the library is looked for, in order: $SPECDEC_LIB (a file, or a folder holding libspecdec.so*), beside
    the package, the source tree's build folder, then the system's search (ctypes.util.find_library)."""
    env = os.environ.get("SPECDEC_LIB")
    if env:
        if os.path.isdir(env):
            names = ["libspecdec.so." + ABI_MAJOR, "libspecdec.so"]
            found = [os.path.join(env, n) for n in names if os.path.exists(os.path.join(env, n))]
            if not found:
                raise OSError("SPECDEC_LIB=%s: no %s in that folder" % (env, " or ".join(names)))
            return found[:1], True
        return [env], True
    here = os.path.dirname(os.path.abspath(__file__))
    local = [os.path.join(here, "libspecdec.so"),
             os.path.join(here, "..", "..", "build", "libspecdec.so")]
    out = [p for p in local if os.path.exists(p)]
    sys_name = ctypes.util.find_library("specdec")
    if sys_name:
        out.append(sys_name)
    return out, False


def load():
    paths, explicit = _candidates()
    if not paths:
        raise OSError("libspecdec.so not found: set SPECDEC_LIB to its path, build it (make) in the source tree, or "
                      "install it (make install, then ldconfig)")
    errors = []
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            errors.append("%s: %s" % (path, e))
            if explicit:
                break
            continue
        for name, (res, args) in _PROTOS.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        version = lib.sd_version().decode()
        if version.split(".")[0] != ABI_MAJOR:
            raise OSError("%s is libspecdec %s; this binding is for ABI %s (libspecdec.so.%s)" %
                          (path, version, ABI_MAJOR, ABI_MAJOR))
        return lib, path, version
    raise OSError("cannot load libspecdec: " + "; ".join(errors))
