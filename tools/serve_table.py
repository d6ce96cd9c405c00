#!/usr/bin/env python3
# Table of tools/serve_compare.sh results (results.jsonl files): ranges over runs per engine, method and clients.
import json,sys,re,collections
rows=collections.defaultdict(list)
for f in sys.argv[1:]:
    for l in open(f):
        if l.startswith('#') or not l.strip(): continue
        d=json.loads(l)
        lab=re.sub(r' rep=\d+','',d['label'])
        rows[lab].append(d)
def rng(v,fmt):
    v=[x for x in v if x is not None]
    if not v: return '-'
    a,b=min(v),max(v)
    return (fmt%a) if a==b else (fmt%a+'–'+fmt%b)
print('| engine, method | clients | runs | requests ok | req/s | gen tok/s | TTFT p50 s | TTFT p99 s | per-token p50 s | per-token p99 s | draft/accepted (per run) |')
print('|---|---|---|---|---|---|---|---|---|---|---|')
for lab,v in rows.items():
    name=lab.rsplit(' c=',1)[0]; c=v[0]['clients']
    print(f"| {name} | {c} | {len(v)} | {sum(x['ok'] for x in v)}/{sum(x['requests'] for x in v)} | {rng([x['req_s'] for x in v],'%.3f')} | {rng([x['tok_s'] for x in v],'%.2f')} | {rng([x['ttft_p50'] for x in v],'%.2f')} | {rng([x['ttft_p99'] for x in v],'%.2f')} | {rng([x['tpot_p50'] for x in v],'%.3f')} | {rng([x['tpot_p99'] for x in v],'%.3f')} | {rng([x['draft_tokens'] for x in v],'%d')}/{rng([x['accepted_tokens'] for x in v],'%d')} |")
