#!/usr/bin/env python3
"""Replays --spec auto's gamma choice for the draft-model family over fixed texts (greedy decoding: the text does not
depend on the method, so every rule can be run over the same texts exactly), against every fixed gamma.

Input: predictions.c's output (category, prompt tokens, total tokens, match string) and a latency table written by
`--sv-latency FILE` (T(n): seconds of a verification pass over n drafts). A round of gamma g from position p
accepts the run of matches from p (at most g) and costs T(g) + g * draft + overhead; the next round starts after
the target's token. The auto rule is draft_auto.c's for this one family: every gamma replays its own rounds over
the text so far (a prior of one round at per-token acceptance 0.5, the prompt's last 32 positions at weight 0.03,
decayed sums per round), the highest (accepted + 1) / cost wins, and a different gamma takes over only when it
beats the running one by the hysteresis fraction (the first round chooses freely); "carried": each answer starts
from the previous answer's sums (in file order), scaled down to at most 8 rounds, as sd_auto_state does.

    python3 -c 'import json, sys; [print(q["category"], q["turns"][0].replace("\\n", "\\\\n"), sep="\\t")
        for q in map(json.loads, sys.stdin)]' < ../mixed.jsonl > prompts.tsv
    ./predictions ee-w3072-f16.gguf ../../../shared/models/stories260K.gguf 64 < prompts.tsv > matches.txt
    python3 replay.py matches.txt ee.lat --tokens 64 [--draft-ms 1.7] [--overhead-ms 0.5]

(The widened model computes stories-ee's function, so `../../../shared/models/stories-ee.gguf` gives the same
matches much faster; the latency table must be the widened model's.)
"""
import argparse


def monotone(t):
    blocks = []
    for v in t:
        blocks.append([v, 1])
        while len(blocks) > 1 and blocks[-1][0] < blocks[-2][0]:
            a, b = blocks.pop()
            c, d = blocks.pop()
            blocks.append([(a * b + c * d) / (b + d), b + d])
    return [v for v, n in blocks for _ in range(n)]


def read_latency(path):
    for line in open(path):
        f = line.split()
        if f and f[0] == "t" and f[1] == "1":
            return monotone([float(x) for x in f[2:]])
    raise SystemExit(f"{path}: no 't 1' row (a specdec-sv-latency file)")


def read_matches(path):
    qs = []
    for line in open(path):
        cat, n_prompt, n, m = line.split()[:4]
        qs.append((cat, int(n_prompt), int(n), [c == "1" for c in m]))
    return qs


def run_len(m, p, g):
    L = 0
    while L < g and p + L < len(m) and m[p + L]:
        L += 1
    return L


class Replay:
    """One gamma's replayed rounds: decayed rounds R and accepted drafts A; next: where its next round starts."""

    def __init__(self, start):
        self.next, self.R, self.A = start, 1.0, 0.0

    def observe(self, m, g, n_known, n_prompt, decay):
        while True:
            p = self.next
            L = 0
            while L < g and p + L + 1 < n_known and m[p + L]:
                L += 1
            if p + L + 1 >= n_known or (L == g and p + g + 1 > n_known - 1):
                return  # the text does not decide this round yet
            w = 0.03 if p < n_prompt - 1 else 1.0
            f = decay**w
            self.R, self.A = f * self.R + w, f * self.A + w * L
            self.next = p + L + 1


def generate(q, n_tokens, T, draft, over, choose, fixed_g):
    """Seconds and tokens of one answer with a rule (None: fixed_g). As the engine: the prompt but its last token is
    prefilled, the first round starts at the last prompt token (position n_prompt - 1), a round drafts at most the
    tokens still wanted minus one, and the answer ends where the text does (the target's end of text)."""
    cat, n_prompt, n, m = q
    p, made, secs, gammas = n_prompt - 1, 0, 0.0, []
    state = choose.start(q) if choose else None
    while made < n_tokens and p < n - 1:
        g = choose.pick(state, p) if choose else fixed_g
        g = max(0, min(g, n_tokens - made - 1))
        L = run_len(m, p, g)
        secs += T[g] + g * draft + over
        p, made = p + L + 1, made + L + 1
        gammas.append(g)
    if choose:
        choose.end(state)
    return secs, made, gammas


class Auto:
    def __init__(self, T, draft, over, gmax, decay, hyst, carry=0):
        self.T, self.draft, self.over, self.gmax, self.decay, self.hyst = T, draft, over, gmax, decay, hyst
        self.carry, self.saved = carry, {}  # carry > 0: answers start from the last one's sums, at most carry rounds

    def start(self, q):
        cat, n_prompt, n, m = q
        p0 = max(n_prompt - 1 - 32, 0)
        for_g = {g: Replay(p0) for g in range(1, self.gmax + 1)}
        for g, r in for_g.items():  # the prior: one round of a chain at per-token acceptance 0.5
            r.A = sum(0.5**j for j in range(1, g + 1))
            if g in self.saved:  # or the previous answer's sums, scaled down to at most carry rounds
                R, A = self.saved[g]
                k = min(1.0, self.carry / R)
                r.R, r.A = k * R, k * A
        return {"q": q, "rep": for_g, "cur": None}

    def end(self, st):
        if self.carry > 0:
            self.saved = {g: (r.R, r.A) for g, r in st["rep"].items()}

    def rate(self, st, g):
        if g == 0:
            return 1.0 / (self.T[0] + self.over)
        r = st["rep"][g]
        return (r.A / r.R + 1) / (self.T[g] + g * self.draft + self.over)

    def pick(self, st, p):
        cat, n_prompt, n, m = st["q"]
        n_known = min(p + 1, n)
        for g, r in st["rep"].items():
            r.observe(m, g, n_known, n_prompt, self.decay)
        best = max(range(0, self.gmax + 1), key=lambda g: self.rate(st, g))
        cur = st["cur"]
        if cur is not None and best != cur and not self.rate(st, best) > self.rate(st, cur) * (1 + self.hyst):
            best = cur
        st["cur"] = best
        return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("matches")
    ap.add_argument("latency")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--draft-ms", type=float, default=1.7, help="draft model's cost per drafted token")
    ap.add_argument("--overhead-ms", type=float, default=0.5, help="per-round cost every gamma pays")
    ap.add_argument("--gamma-max", type=int, default=16)
    a = ap.parse_args()
    T, qs = read_latency(a.latency), read_matches(a.matches)
    if len(T) < 9:
        raise SystemExit(f"{a.latency}: T(n) for n up to 8 needed (the table has {len(T) - 1})")
    gmax = min(a.gamma_max, len(T) - 1)
    draft, over = a.draft_ms / 1e3, a.overhead_ms / 1e3
    cats = sorted({q[0] for q in qs}, key=[q[0] for q in qs].index)
    rules = [(f"fixed gamma={g}", None, g) for g in range(1, 9)]
    rules += [("auto: gamma free, decay 0.9", Auto(T, draft, over, gmax, 0.9, 0.0), 0),
              ("auto: held by 10%, decay 0.9", Auto(T, draft, over, gmax, 0.9, 0.1), 0),
              ("auto: held by 10%, decay 0.97", Auto(T, draft, over, gmax, 0.97, 0.1), 0),
              ("auto: held by 10%, decay 0.97, carried (8 rounds)", Auto(T, draft, over, gmax, 0.97, 0.1, 8), 0)]
    print("| rule | " + " | ".join(cats) + " | overall |")
    print("|---" * (len(cats) + 2) + "|")
    for name, rule, g in rules:
        row, tot_s, tot_n = [], 0.0, 0
        for c in cats:
            s = n = 0
            for q in qs:
                if q[0] == c:
                    secs, made, _ = generate(q, a.tokens, T, draft, over, rule, g)
                    s, n = s + secs, n + made
            row.append(n / s)
            tot_s, tot_n = tot_s + s, tot_n + n
        row.append(tot_n / tot_s)
        print(f"| {name} | " + " | ".join(f"{x:.2f}" for x in row) + " |")


if __name__ == "__main__":
    main()
