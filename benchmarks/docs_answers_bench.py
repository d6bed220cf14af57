"""Answers without an LLM on documentation nobody here wrote, per labelled set.

Each set (``evals/docs-answers/*.yaml``) names a folder of installed documentation
(``corpus``, read in place; ``include`` globs pick the pages), and questions in two parts,
``tuning`` and ``held_out``: answerable ones with the page that answers (its source id)
and the term the answer must state (the command, function or option; matched
case-sensitively as a whole word), and out-of-scope ones the chain must decline. The
pages are copied into a temporary folder (never into the repository) and ingested into a
local cluster of the set's own (MiniLM, a fresh embedded store, no LLM, no reranker
model); every question is asked through ``POST /v1/chat``.

Reported per set and part, and pooled per part: the answer states the expected term (%),
the expected page is cited (%), out-of-scope questions declined (%), answerable
questions declined (%). The coverage stage's evidence is kept per question (how its
thresholds are chosen; ``--part tuning`` only when tuning).

    .venv/bin/python benchmarks/docs_answers_bench.py evals/docs-answers/aws-s3api.yaml \\
        evals/docs-answers/cmake-commands.yaml --out evals/docs-answers/report-after.json
"""

from __future__ import annotations

import argparse
import fnmatch
import gzip
import json
import re
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml

from groundwire_cli.chat import ask
from groundwire_cli.demo import serving_corpus
from groundwire_cli.golden.checks import cited_ids, declined

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("tuning", "held_out")


@dataclass(frozen=True)
class Asked:
    part: str
    question: str
    answerable: bool
    page: str
    term: str
    mode: str
    declined: bool
    states_term: bool
    cites_page: bool
    cited: list[str]
    answer: str
    coverage: dict[str, str]
    answer_stage: dict[str, str]


def states(term: str, answer: str) -> bool:
    """Whether ``answer`` states ``term`` as a whole word (case-sensitive: "READ" is
    the keyword, not the verb; "put-object" is not "put-object-acl")."""
    head = r"(?<![\w-])"
    tail = r"(?![\w-])" if re.match(r"[\w-]", term[-1]) else ""
    return re.search(head + re.escape(term) + tail, answer) is not None


def cites(page: str, cited: list[str]) -> bool:
    return any(c == page or c.endswith("/" + page) for c in cited)


def collect(spec: dict[str, Any], into: Path) -> int:
    """Copies the set's pages (``include`` globs under ``corpus``) into ``into``,
    keeping their paths (the source ids; a gzipped page decompressed, without its
    ``.gz``); returns how many."""
    corpus = Path(spec["corpus"])
    if not corpus.is_dir():
        raise FileNotFoundError(f"{corpus}: the set's documentation is not installed here")
    n = 0
    for path in sorted(corpus.rglob("*")):
        rel = path.relative_to(corpus).as_posix()
        if path.is_file() and any(fnmatch.fnmatch(rel, g) for g in spec.get("include", ["*"])):
            (into / rel).parent.mkdir(parents=True, exist_ok=True)
            if rel.endswith(".gz"):  # Debian gzips the larger pages of a package's docs
                (into / rel[:-3]).write_bytes(gzip.decompress(path.read_bytes()))
            else:
                shutil.copyfile(path, into / rel)
            n += 1
    return n


def _ask_all(spec: dict[str, Any], parts: list[str], url: str) -> list[Asked]:
    out = []
    with httpx.Client(base_url=url, timeout=300.0) as client:
        for part in parts:
            labelled = [(q, True) for q in spec[part]["answerable"]] + [
                ({"q": q, "page": "", "term": ""}, False) for q in spec[part]["out_of_scope"]
            ]
            for case, answerable in labelled:
                outcome = ask(client, case["q"], collection=spec["collection"])
                cov = outcome.stage("coverage")
                ans = outcome.stage("answer")
                cited = cited_ids(outcome)
                a = Asked(
                    part,
                    case["q"],
                    answerable,
                    case["page"],
                    case["term"],
                    outcome.mode or "error",
                    declined(outcome),
                    bool(case["term"]) and states(case["term"], outcome.answer),
                    bool(case["page"]) and cites(case["page"], cited),
                    cited,
                    outcome.answer,
                    dict(cov.details) if cov else {},
                    dict(ans.details) if ans else {},
                )
                out.append(a)
                mark = (
                    f"term {'Y' if a.states_term else '-'} page {'Y' if a.cites_page else '-'}"
                    if answerable
                    else "out-of-scope"
                )
                print(f"  {part:8} {a.mode:10} {mark:16} {case['q']}", flush=True)
    return out


def figures(asked: list[Asked]) -> dict[str, Any]:
    """The four figures (percent) and their counts."""
    ans = [a for a in asked if a.answerable]
    out = [a for a in asked if not a.answerable]

    def pct(n: int, d: int) -> float:
        return round(100.0 * n / d, 1) if d else 0.0

    term = sum(a.states_term for a in ans)
    page = sum(a.cites_page for a in ans)
    out_declined = sum(a.declined for a in out)
    ans_declined = sum(a.declined for a in ans)
    return {
        "answerable": len(ans),
        "out_of_scope": len(out),
        "term_in_answer_pct": pct(term, len(ans)),
        "page_cited_pct": pct(page, len(ans)),
        "out_of_scope_declined_pct": pct(out_declined, len(out)),
        "answerable_declined_pct": pct(ans_declined, len(ans)),
        "counts": {
            "term_in_answer": term,
            "page_cited": page,
            "out_of_scope_declined": out_declined,
            "answerable_declined": ans_declined,
        },
    }


def _line(name: str, f: dict[str, Any]) -> str:
    return (
        f"{name}: term {f['term_in_answer_pct']}% · page cited {f['page_cited_pct']}% · "
        f"out-of-scope declined {f['out_of_scope_declined_pct']}% · answerable declined "
        f"{f['answerable_declined_pct']}% ({f['answerable']} answerable, "
        f"{f['out_of_scope']} out of scope)"
    )


FIGURES = (
    ("term_in_answer_pct", "answer states the term"),
    ("page_cited_pct", "expected page cited"),
    ("out_of_scope_declined_pct", "out of scope declined"),
    ("answerable_declined_pct", "answerable declined"),
)


def markdown(before: dict[str, Any], after: dict[str, Any]) -> str:
    """Before and after, per set and part and pooled, and the held-out misses after."""
    lines = [
        "# Answers without an LLM on documentation nobody here wrote",
        "",
        f"Before: {before.get('label', '')} ({before['date']}). "
        f"After: {after.get('label', '')} ({after['date']}). MiniLM, no LLM, no reranker "
        "model; `benchmarks/docs_answers_bench.py`, sets in `evals/docs-answers/`.",
        "",
        "| set | part | questions (answerable + out of scope) | "
        + " | ".join(name for _, name in FIGURES) + " |",
        "|---|---|---|" + "---|" * len(FIGURES),
    ]
    rows = [(n, p, after["sets"][n]["parts"][p], before["sets"].get(n, {}).get("parts", {}).get(p))
            for n in after["sets"] for p in after["sets"][n]["parts"]]
    rows += [("pooled", p, f, before["pooled"].get(p)) for p, f in after["pooled"].items()]
    for name, part, f, b in rows:
        cells = [
            f"{b[k]} → **{f[k]}**" if b else f"**{f[k]}**" for k, _ in FIGURES
        ]
        lines.append(
            f"| {name} | {part} | {f['answerable']} + {f['out_of_scope']} | "
            + " | ".join(cells) + " |"
        )
    lines += ["", "Held-out misses after (answerable: term or page missing; out of scope: "
              "answered):", ""]
    for name, data in after["sets"].items():
        for q in data["questions"]:
            if q["part"] != "held_out":
                continue
            if q["answerable"] and not (q["states_term"] and q["cites_page"] and not q["declined"]):
                what = "declined" if q["declined"] else (
                    f"term {'yes' if q['states_term'] else 'no'}, page "
                    f"{'yes' if q['cites_page'] else 'no'} (cited {', '.join(q['cited'])})"
                )
                lines.append(f"- {name}: {q['question']} — `{q['term']}` / {q['page']}: {what}")
            elif not q["answerable"] and not q["declined"]:
                lines.append(f"- {name}: {q['question']} — answered, citing "
                             f"{', '.join(q['cited'])}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="*", type=Path)
    parser.add_argument("--model-dir", type=Path, default=ROOT / "var" / "models" / "minilm")
    parser.add_argument("--part", choices=[*PARTS, "all"], default="all")
    parser.add_argument("--label", default="", help="what code was measured (kept in the report)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="extra settings for the cluster")
    parser.add_argument("--markdown", type=Path, nargs=3, metavar=("BEFORE", "AFTER", "OUT"),
                        help="only write the markdown report of two runs' JSON")
    args = parser.parse_args()
    if args.markdown:
        before, after, out = args.markdown
        out.write_text(markdown(*(json.loads(p.read_text()) for p in (before, after))))
        print(f"wrote {out}")
        return 0
    parts = list(PARTS) if args.part == "all" else [args.part]
    # small embedding batches: the embedder client's deadline is per call, and a batch
    # of 32 long reference pages overran it on a loaded 2-core machine
    extra = {"GROUNDWIRE_GATEWAY_RATE_LIMIT_PER_MIN": "0", "GROUNDWIRE_RETRIEVER_EMBED_BATCH": "8"}
    extra.update(e.split("=", 1) for e in args.env)
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "label": args.label,
        "model": str(args.model_dir.name),
        "llm": None,
        "env": extra,
        "sets": {},
        "pooled": {},
    }
    pooled: list[Asked] = []
    for path in args.sets:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
        with tempfile.TemporaryDirectory(prefix="groundwire-docs-answers-") as tmp:
            corpus = Path(tmp) / "corpus"
            corpus.mkdir()
            n = collect(spec, corpus)
            print(f"{spec['name']}: {n} pages from {spec['corpus']}", flush=True)
            with serving_corpus(
                model_dir=args.model_dir,
                run_dir=Path(tmp) / "run",
                data_path=Path(tmp) / "qdrant",
                corpus=corpus,
                collection=spec["collection"],
                extra_env=extra,
            ) as cluster:
                asked = _ask_all(spec, parts, cluster.gateway_url)
        pooled += asked
        per_part = {p: figures([a for a in asked if a.part == p]) for p in parts}
        for p, f in per_part.items():
            print(_line(f"{spec['name']} {p}", f), flush=True)
        results["sets"][spec["name"]] = {
            "file": str(path),
            "corpus": spec["corpus"],
            "pages": n,
            "parts": per_part,
            "questions": [asdict(a) for a in asked],
        }
        if args.out:  # after each set: a later set's failure keeps this one's figures
            _write(args.out, results)
    for p in parts:
        results["pooled"][p] = figures([a for a in pooled if a.part == p])
        print(_line(f"pooled {p}", results["pooled"][p]), flush=True)
    if args.out:
        _write(args.out, results)
        print(f"wrote {args.out}")
    return 0


def _write(out: Path, results: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
