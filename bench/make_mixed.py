#!/usr/bin/env python3
"""Writes bench/mixed.jsonl: a mixed prompt set (Spec-Bench format) for `--spec auto`, from the project's story data.

Categories (10 prompts each):
  story   story openings from ../shared/data/stories_dev.jsonl (free text);
  repeat  a sentence said three times, then its first words again (the story models fall into repeating it);
  copy    a story passage from ../shared/data/stories_corpus.txt followed by its own first sentence;
  loop    story openings whose answers fall into repeating themselves (5 prompts): the stories_dev.jsonl openings,
          beyond the story category's ten, whose 160-token greedy answer from stories-ee the n-gram lookup predicts
          best (n-gram gamma 8: tau >= 3.2 against 1.2-2.9 for the others), strongest first; found with
          specdec bench spec -m ../shared/models/stories-ee.gguf -c 512 -n 160 --methods ngram:gamma=8 over each
          opening as its own category. (The story models do not copy their prompt; they do repeat their own answer.)
Deterministic: python3 bench/make_mixed.py > bench/mixed.jsonl
"""
import json
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data")

LOOP = [27, 30, 25, 21, 13]  # stories_dev.jsonl indices of the loop category (see above)

out = []
with open(os.path.join(DATA, "stories_dev.jsonl")) as f:
    stories = [json.loads(line) for line in f if line.strip()]
for q in stories[:10]:
    out.append({"question_id": 2000 + len(out), "category": "story", "turns": q["turns"][:1]})

NAMES = ["Tom", "Lily", "Ben", "Sue", "Max", "Mia", "Sam", "Anna", "Tim", "Zoe"]
THINGS = [("a big red bird", "sang a happy song"), ("a little brown dog", "ran to the park"),
          ("a shiny blue ball", "rolled down the hill"), ("a small green frog", "jumped into the pond"),
          ("a kind old cat", "slept in the sun"), ("a tall yellow flower", "grew in the garden"),
          ("a funny white duck", "swam in the lake"), ("a soft pink teddy", "sat on the bed"),
          ("a fast black car", "drove down the road"), ("a big gray cloud", "floated in the sky")]
for i, (name, (thing, did)) in enumerate(zip(NAMES, THINGS)):
    s = "%s saw %s. The %s %s." % (name, thing, thing.split(" ", 2)[2], did)
    out.append({"question_id": 3000 + i, "category": "repeat", "turns": [" ".join([s] * 3) + " " + name]})

with open(os.path.join(DATA, "stories_corpus.txt")) as f:
    corpus = [s.strip() for s in f.read().split("<|endofstory|>") if s.strip()]
n = 0
for s in corpus[20:]:
    text = s.replace("\n", " ")
    sents = re.findall(r"[^.!?]+[.!?]", text)
    passage = ""
    for x in sents:
        if len(passage) + len(x) > 260:
            break
        passage += x
    if len(passage) < 150 or '"' in passage:
        continue
    out.append({"question_id": 4000 + n, "category": "copy", "turns": [passage.strip() + "\n" + sents[0].strip()]})
    n += 1
    if n == 10:
        break

for i, k in enumerate(LOOP):
    out.append({"question_id": 5000 + i, "category": "loop", "turns": stories[k]["turns"][:1]})

for q in out:
    print(json.dumps(q))
