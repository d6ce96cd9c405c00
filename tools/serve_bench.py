#!/usr/bin/env python3
"""Load generator for OpenAI-compatible servers (specdec serve, llama.cpp's llama-server): C clients, each sending
R streamed greedy /v1/completions one after another (prompts: story beginnings from a jsonl file, round-robin).
Per request: time to the first text chunk (TTFT), per-token latency after it ((last - first) / (tokens - 1)),
completion tokens (usage, or llama-server's timings), draft / accepted tokens when the server reports them.
Prints one JSON line: requests/s, generated tokens/s, p50/p99 TTFT, p50/p99 per-token latency, errors.
Python 3 standard library only.

  tools/serve_bench.py --url http://127.0.0.1:8080 --clients 4 --requests 3 --max-tokens 64 \
      [--spec '{"method":"draft","gamma":4}'] [--label NAME] [--ignore-eos]
"""
import argparse, http.client, json, sys, threading, time, urllib.parse


def pct(a, p):
    if not a:
        return None
    a = sorted(a)
    return a[int(p * (len(a) - 1) + 0.5)]


def one_request(host, port, body, timeout):
    t0 = time.monotonic()
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    r = {"status": resp.status, "ttft": None, "tlast": None, "chunks": 0, "tokens": None, "done": False,
         "draft": None, "accepted": None, "text": ""}
    if resp.status != 200:
        r["error"] = resp.read()[:300].decode("utf-8", "replace")
        conn.close()
        return r
    while True:
        line = resp.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data: "):
            continue
        data = line[6:]
        if data == b"[DONE]":
            r["done"] = True
            break
        ev = json.loads(data)
        now = time.monotonic() - t0
        ch = ev.get("choices") or []
        if ch and ch[0].get("text"):
            if r["ttft"] is None:
                r["ttft"] = now
            r["tlast"] = now
            r["chunks"] += 1
            r["text"] += ch[0]["text"]
        # llama-server /v1/completions also puts "content"
        elif "content" in ev and ev.get("content"):
            if r["ttft"] is None:
                r["ttft"] = now
            r["tlast"] = now
            r["chunks"] += 1
            r["text"] += ev["content"]
        u = ev.get("usage")
        if u:
            r["tokens"] = u.get("completion_tokens", r["tokens"])
            if "draft_tokens" in u:
                r["draft"] = u.get("draft_tokens")
                r["accepted"] = u.get("accepted_tokens")
        tm = ev.get("timings")
        if tm:
            if r["tokens"] is None and "predicted_n" in tm:
                r["tokens"] = tm["predicted_n"]
            if "draft_n" in tm:
                r["draft"] = tm.get("draft_n")
                r["accepted"] = tm.get("draft_n_accepted")
    conn.close()
    if r["tokens"] is None:
        r["tokens"] = r["chunks"]
    r["total"] = time.monotonic() - t0
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--requests", type=int, default=2, help="per client")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--spec", default=None, help='JSON for the "speculative" field (specdec only)')
    ap.add_argument("--prompts", default="../shared/data/stories_dev.jsonl")
    ap.add_argument("--label", default="")
    ap.add_argument("--ignore-eos", action="store_true")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--dump", default=None, help="write every request's record (jsonl) here")
    a = ap.parse_args()
    prompts = [json.loads(l)["turns"][0] for l in open(a.prompts) if l.strip()]
    u = urllib.parse.urlparse(a.url)
    results, lock = [], threading.Lock()

    def client(c):
        for k in range(a.requests):
            p = prompts[(c * a.requests + k) % len(prompts)]
            body = {"prompt": p, "max_tokens": a.max_tokens, "temperature": 0, "stream": True,
                    "stream_options": {"include_usage": True}}
            if a.ignore_eos:
                body["ignore_eos"] = True
            if a.spec:
                body["speculative"] = json.loads(a.spec)
            try:
                r = one_request(u.hostname, u.port, body, a.timeout)
            except Exception as e:  # noqa: BLE001
                r = {"status": -1, "error": repr(e), "done": False, "tokens": 0}
            r["client"], r["prompt"] = c, p
            with lock:
                results.append(r)

    t0 = time.monotonic()
    th = [threading.Thread(target=client, args=(c,)) for c in range(a.clients)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    wall = time.monotonic() - t0
    good = [r for r in results if r.get("status") == 200 and r.get("done")]
    toks = sum(r.get("tokens") or 0 for r in good)
    ttft = [r["ttft"] for r in good if r.get("ttft") is not None]
    tpot = [(r["tlast"] - r["ttft"]) / (r["tokens"] - 1) for r in good
            if r.get("ttft") is not None and (r.get("tokens") or 0) > 1]
    dr = [r["draft"] for r in good if r.get("draft") is not None]
    ac = [r["accepted"] for r in good if r.get("accepted") is not None]
    out = {"label": a.label, "clients": a.clients, "requests": len(results), "ok": len(good),
           "errors": [r.get("error") or r.get("status") for r in results if r not in good][:3],
           "wall_s": round(wall, 2), "req_s": round(len(good) / wall, 3), "tok_s": round(toks / wall, 2),
           "tokens": toks, "ttft_p50": pct(ttft, .5), "ttft_p99": pct(ttft, .99),
           "tpot_p50": pct(tpot, .5), "tpot_p99": pct(tpot, .99),
           "draft_tokens": sum(dr) if dr else None, "accepted_tokens": sum(ac) if ac else None,
           "chunks_per_req": round(sum(r["chunks"] for r in good) / max(1, len(good)), 1)}
    for k in ("ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99"):
        if out[k] is not None:
            out[k] = round(out[k], 4)
    print(json.dumps(out), flush=True)
    if a.dump:
        with open(a.dump, "a") as f:
            for r in results:
                r["label"] = a.label
                f.write(json.dumps(r) + "\n")
    return 0 if len(good) == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
