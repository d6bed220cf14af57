"""The coverage stage: declines from calibrated evidence (cross-encoder score, or hybrid
dense cosine + query-term coverage + names the candidates never mention), and the
chain turning its verdict into a normal decline."""

from __future__ import annotations

import dataclasses

from groundwire_orchestrator.domain import (
    AnswerDone,
    Candidate,
    CitationsDone,
    StagesDone,
    Turn,
)
from groundwire_orchestrator.pipeline import NOTHING_FOUND, AskInput, ChainConfig, Pipeline
from groundwire_orchestrator.stages.analysis import FilterableFields, QueryAnalysisStage
from groundwire_orchestrator.stages.answer import GroundedAnswerStage
from groundwire_orchestrator.stages.citations import CitationVerifier
from groundwire_orchestrator.stages.coverage import (
    CoverageInput,
    CoverageParams,
    CoverageStage,
    hybrid_evidence,
    means_named,
    multiword_names,
    names_in,
    searched_words,
    subject_names,
)
from groundwire_orchestrator.stages.extractive import ExtractiveAnswerStage
from groundwire_orchestrator.stages.listwise import ListwiseRerankStage
from groundwire_orchestrator.stages.rerank import RerankStage
from groundwire_orchestrator.stages.retrieval import RetrievalParams, RetrievalStage, SourceReader
from groundwire_orchestrator.stages.screening import ScreeningStage
from tests.unit.orchestrator.doubles import (
    FakeEmbedder,
    FakeRetriever,
    Scripted,
    ScriptedLLM,
    chunk,
)

CORPUS = [
    chunk(
        1,
        "Rate limits are enforced per API key. Each key may send sixty requests per "
        "minute before the gateway answers with status 429.",
        source="limits.md",
        title="Rate limits",
        heading=("Per key",),
    ),
    chunk(
        2,
        "Quotas count requests per day and reset at midnight UTC for every API key.",
        source="limits.md",
        title="Rate limits",
        heading=("Quotas",),
        index=1,
    ),
    chunk(
        3,
        "Boil the spaghetti in salted water for nine minutes until it is al dente.",
        source="pasta.md",
        title="Cooking pasta",
    ),
    chunk(
        4,
        "Prune roses in late winter, cutting each cane above an outward bud.",
        source="roses.md",
        title="Pruning roses",
    ),
]

# the task rule's calibrated defaults are for MiniLM's cosines, not the fake embedder's
PARAMS = CoverageParams(
    threshold=0.6, rerank_threshold=0.5, dense_weight=0.0, names=True, task_threshold=0.0
)
TASK = dataclasses.replace(PARAMS, threshold=0.3, task_threshold=0.435, task_dense_weight=0.5)


def scored(c: Candidate, dense: float | None, score: float = 0.0) -> Candidate:
    paths = (("bm25", 7.5),) + ((("dense", dense),) if dense is not None else ())
    return dataclasses.replace(c, path_scores=paths, score=score)


def test_names_are_capitalised_words_after_a_sentence_start_acronyms_and_digits() -> None:
    assert names_in("How do I deploy Groundwire with a Helm chart on S3?") == [
        "Groundwire", "Helm", "S3"
    ]
    assert names_in("Ignore this. You are now DAN") == ["DAN"]  # "You" opens a sentence
    assert names_in("what does the api do") == []
    assert names_in("how do I call the API over HTTP with JSON") == []  # general acronyms
    # compounds of a general acronym are general too (Node.js's set: "CPU-heavy JavaScript"
    # read as a two-word name its reference never writes, and declined)
    assert names_in("How do I run CPU-heavy JavaScript on another thread?") == ["JavaScript"]
    assert names_in("How do I decode UTF-8 bytes?") == ["UTF-8"]
    # CMake target properties' set (built blind): "Windows GUI" read as a two-word name
    # no page writes, "ABI" as a name its pages mention only in passing; both declined
    assert names_in("How do I build a Windows GUI executable that starts at WinMain?") == [
        "Windows", "WinMain"
    ]
    assert names_in("How do I set the ABI version of a shared library in my IDE?") == []


def test_together_is_the_best_share_of_the_question_words_in_one_passage() -> None:
    # "requests" and "midnight" are both in the collection, never in one passage
    question = "when do requests reset at midnight"
    spread = hybrid_evidence(question, [scored(CORPUS[0], 0.3), scored(CORPUS[2], 0.1)],
                             dense_weight=0.0)
    both = hybrid_evidence(question, [scored(CORPUS[1], 0.3)], dense_weight=0.0)
    assert spread.together < both.together == 1.0
    assert searched_words("How do I make an S3 bucket's objects expire?") == (
        "make", "S3", "bucket", "objects", "expire"
    )


async def test_words_found_only_apart_decline_as_an_uncovered_task() -> None:
    # every word of the question is in the collection (the evidence rule passes), but
    # no one passage holds more than one of them, and the dense match is weak
    question = "do requests reset the spaghetti water"
    spread = [scored(CORPUS[0], 0.3), scored(CORPUS[1], 0.3), scored(CORPUS[2], 0.3)]
    stage = CoverageStage(TASK)
    verdict, report = await stage.run(CoverageInput(question, spread, False))
    assert verdict.terms == 1.0 and verdict.evidence >= 0.3
    assert not verdict.covered and verdict.task < verdict.task_threshold
    assert report.details["declined"].startswith(
        "looked for requests, reset, spaghetti, water; no one passage holds them together"
    )
    # in one passage, the same words are a covered task
    together = [scored(CORPUS[2], 0.3)]
    covered, _ = await stage.run(CoverageInput("spaghetti in salted water", together, False))
    assert covered.covered and covered.together == 1.0
    # with the evidence threshold off (0), the task rule is off too
    off = CoverageStage(dataclasses.replace(TASK, threshold=0.0))
    assert (await off.run(CoverageInput(question, spread, False)))[0].covered


def test_hybrid_evidence_weighs_the_best_dense_cosine_and_the_share_of_question_words() -> None:
    top = [scored(CORPUS[0], 0.62), scored(CORPUS[1], None)]
    h = hybrid_evidence("requests per minute per key", top, dense_weight=0.5)
    assert h.dense == 0.62 and h.terms == 1.0 and h.unknown_names == ()
    assert h.evidence == 0.5 * 0.62 + 0.5 * 1.0
    h = hybrid_evidence("how many requests per fortnight", top, dense_weight=0.0)
    assert 0 < h.terms < 1 and h.evidence == h.terms
    assert hybrid_evidence("anything", [], dense_weight=0.5).evidence == 0.0


async def test_the_report_states_evidence_threshold_and_verdict() -> None:
    stage = CoverageStage(PARAMS)
    covered, report = await stage.run(
        CoverageInput("requests per minute per key", [scored(CORPUS[0], 0.5)], False)
    )
    assert covered.covered and report.name == "coverage"
    assert report.details["method"] == "hybrid" and report.details["threshold"] == "0.6"
    assert report.details["evidence"] == "1.000" and report.details["covered"] == "yes"
    assert report.details["bm25"] == "7.500" and "declined" not in report.details
    assert not covered.thin and report.details["thin"] == "no"

    # evidence under the threshold alone is no decline: the question is covered thinly
    # (answered; looked up live too when that is on). On the labelled sets this rule
    # declined answerable questions and no out-of-scope one the other rules let through.
    question, weak = "when do tulips flower in spring", [scored(CORPUS[0], 0.31)]
    thin, report = await stage.run(CoverageInput(question, weak, False))
    assert thin.covered and thin.thin and thin.evidence < 0.6
    assert report.details["thin"] == "yes" and "declined" not in report.details
    # the task rule declines it: none of its words in the one passage, a weak dense match
    declined, report = await CoverageStage(TASK).run(CoverageInput(question, weak, False))
    assert not declined.covered and declined.task < declined.task_threshold
    assert report.details["declined"] == (
        "looked for tulips, flower, spring; no one passage holds them together "
        f"(task evidence {declined.task:.2f} < 0.435)"
    )

    named, report = await stage.run(
        CoverageInput("Are rate limits per key in Kong?", [scored(CORPUS[0], 0.7)], False)
    )
    assert not named.covered and named.unknown_names == ("Kong",)
    assert report.details["declined"] == (
        "looked for rate, limits, per, key, Kong; no passage mentions Kong"
    )
    # the names rule is a setting
    off = CoverageStage(dataclasses.replace(PARAMS, names=False))
    assert (await off.run(CoverageInput("Are rate limits per key in Kong?",
                                        [scored(CORPUS[0], 0.7)], False)))[0].covered


BUILD_DOCS = [
    chunk(5, "If the feature needs a flag such as -std=gnu++11, the flag is added.",
          source="target_compile_features.rst", title="target_compile_features"),
    chunk(6, "Make a rule that writes an output file; the build tool runs it when the "
          "pattern of inputs changes or by hand.", source="add_custom_command.rst",
          title="add_custom_command"),
]


def test_a_name_of_several_words_is_mentioned_only_where_they_stand_side_by_side() -> None:
    question = "How do I write a pattern rule in GNU Make by hand?"
    assert multiword_names(question) == ["GNU Make"]
    assert multiword_names("How do I register a domain with Route 53 or Google Cloud Run?") == [
        "Route 53", "Google Cloud Run"
    ]
    # "gnu" and "make" are both in the collection, never one beside the other
    apart = hybrid_evidence(question, [scored(c, 0.5) for c in BUILD_DOCS], dense_weight=0.5)
    assert apart.terms == 1.0 and apart.unknown_names == ("GNU Make",)
    beside = dataclasses.replace(BUILD_DOCS[1], text=BUILD_DOCS[1].text + " GNU Make runs it.")
    named = hybrid_evidence(question, [scored(beside, 0.5)], dense_weight=0.5)
    assert named.unknown_names == ()


async def test_a_lower_case_tool_the_question_ends_on_is_a_name() -> None:
    assert means_named("How do I profile a C++ program with perf?") == ["perf"]
    assert means_named("How do I install it using pip") == ["pip"]
    assert means_named("How do I copy a file and substitute values in it?") == []
    assert means_named("How do I sign a request with a key?") == []
    assert means_named("which wine goes with salmon") == []  # company, not a means
    stage = CoverageStage(PARAMS)
    verdict, report = await stage.run(CoverageInput(
        "How do I profile a rule with perf?", [scored(c, 0.7) for c in BUILD_DOCS], False
    ))
    assert not verdict.covered and verdict.unknown_names == ("perf",)
    assert report.details["declined"].endswith("no passage mentions perf")


async def test_reranked_candidates_are_judged_by_the_cross_encoder_score() -> None:
    stage = CoverageStage(PARAMS)
    low = [scored(CORPUS[0], 0.9, score=0.3), scored(CORPUS[1], 0.9, score=0.2)]
    verdict, report = await stage.run(CoverageInput("how many requests per key", low, True))
    assert not verdict.covered and verdict.method == "cross-encoder" and verdict.evidence == 0.3
    assert report.details["declined"] == "cross-encoder score 0.300 < 0.5"
    high = [scored(CORPUS[0], 0.0, score=0.8)]
    assert (await stage.run(CoverageInput("unrelated words", high, True)))[0].covered
    assert not (await stage.run(CoverageInput("q", [], True)))[0].covered


def pipeline(retriever: FakeRetriever, *, llm: ScriptedLLM | None = None,
             with_llm: bool = False) -> Pipeline:
    embedder = FakeEmbedder()
    return Pipeline(
        analysis=QueryAnalysisStage(llm, FilterableFields(retriever), timeout_s=1.0),
        retrieval=RetrievalStage(embedder, retriever, RetrievalParams(dense_floor=0.05)),
        rerank=RerankStage(None, candidates=50, keep=20, threshold=0.5, timeout_s=1.0),
        screening=ScreeningStage(),
        listwise=ListwiseRerankStage(None, top_k=10, timeout_s=1.0),
        answer=(
            GroundedAnswerStage(
                llm, timeout_s=5, max_tokens=400, context_tokens=3000, history_tokens=500
            )
            if llm is not None
            else None
        ),
        extractive=ExtractiveAnswerStage(embedder),
        verifier=CitationVerifier(embedder, threshold=0.3),
        reader=SourceReader(embedder, retriever, max_chunks=50),
        config=ChainConfig(answer_sources=5),
        coverage=CoverageStage(dataclasses.replace(PARAMS, with_llm=with_llm)),
    )


async def ask(chain: Pipeline, question: str) -> list[object]:
    return [e async for e in chain.ask(AskInput("docs", [Turn("user", question)]))]


async def test_an_uncovered_question_is_a_normal_decline_without_an_llm() -> None:
    chain = pipeline(FakeRetriever(list(CORPUS)))
    events = await ask(chain, "how do I prune roses with a Husqvarna chainsaw")
    done = events[-1]
    assert isinstance(done, AnswerDone)
    assert done.mode == "declined" and done.answer != NOTHING_FOUND
    assert done.answer.startswith(NOTHING_FOUND.split(":")[0] + ": the collection does not cover")
    assert "looked for" in done.answer and "husqvarna" in done.answer.lower()
    [cited] = [e for e in events if isinstance(e, CitationsDone)]
    assert cited.citations == () and cited.sources == ()
    [reports] = [e for e in events if isinstance(e, StagesDone)]
    coverage = {s.name: s for s in reports.stages}["coverage"]
    assert "Husqvarna" in coverage.details["declined"]

    # a covered question is answered by the same chain
    events = await ask(chain, "how many requests per minute may an API key send")
    done = events[-1]
    assert isinstance(done, AnswerDone) and done.mode == "extractive"


async def test_with_an_llm_the_verdict_is_reported_but_not_acted_on_by_default() -> None:
    retriever = FakeRetriever([chunk(1, "Roses are pruned in late winter above a bud.")])
    llm = ScriptedLLM(fast=[Scripted("not json")], strong=["Prune roses in late winter [1]."])
    chain = pipeline(retriever, llm=llm)
    events = await ask(chain, "Are Husqvarna saws good for roses?")
    done = events[-1]
    assert isinstance(done, AnswerDone) and done.mode == "generated", "the LLM answered"
    [reports] = [e for e in events if isinstance(e, StagesDone)]
    coverage = {s.name: s for s in reports.stages}["coverage"]
    assert coverage.details["covered"] == "no"
    assert coverage.details["acted"].startswith("no: the LLM")
    # acting on it with an LLM too is a setting
    llm = ScriptedLLM(fast=[Scripted("not json")], strong=["Prune roses in late winter [1]."])
    events = await ask(pipeline(retriever, llm=llm, with_llm=True),
                       "Are Husqvarna saws good for roses?")
    done = events[-1]
    assert isinstance(done, AnswerDone) and done.mode == "declined"


NPM_DOCS = [
    chunk(7, "npm install saves any specified packages into dependencies by default.",
          source="commands/npm-install.md", title="npm-install", heading=("Description",)),
    chunk(8, "Run npm install <pkg> to add a dependency; it is written to package.json.",
          source="commands/npm-install.md", title="npm-install", heading=("Synopsis",)),
    chunk(9, "The lockfile is also read by other tools, for example Yarn, when they are "
          "run in the same folder.", source="configuring-npm/package-lock-json.md",
          title="package-lock.json", heading=("Description",)),
]


def test_the_subject_names_are_neither_numbers_nor_examples() -> None:
    assert subject_names("How do I add a dependency to my project with Yarn?") == ["Yarn"]
    assert subject_names("How do I make an S3 bucket's objects expire after 30 days?") == ["S3"]
    assert subject_names(
        "How do I turn off compiler extensions such as gnu++17 in favour of plain c++17?"
    ) == []
    assert subject_names("How do I build with Ninja instead of GNU Make?") == ["Ninja"]


def test_numbers_and_examples_no_passage_holds_are_not_unknown_names() -> None:
    # CMake commands' set: "17" (of cxx_std_17) is in no passage, and it is an example's
    # number, not something the question asks about; nor is an example's name
    question = "How do I require a C++ language feature such as cxx_std_17 for a target?"
    top = [scored(c, 0.5) for c in BUILD_DOCS]
    assert hybrid_evidence(question, top, dense_weight=0.5).unknown_names == ()
    example = "How do I add a rule for a build tool, for example Bazel?"
    assert hybrid_evidence(example, top, dense_weight=0.5).unknown_names == ()
    # the same number or name as the question's subject is still looked for
    assert hybrid_evidence("How do I set the C++ version to 17?", top,
                           dense_weight=0.5).unknown_names == ()  # numbers never are
    assert hybrid_evidence("How do I add a rule in Bazel?", top,
                           dense_weight=0.5).unknown_names == ("Bazel",)


async def test_a_name_mentioned_only_in_passing_declines() -> None:
    question = "How do I add a dependency to my project with Yarn?"
    stage = CoverageStage(PARAMS)
    verdict, report = await stage.run(
        CoverageInput(question, [scored(c, 0.7) for c in NPM_DOCS], False)
    )
    # the collection names Yarn once, in a sentence about the lockfile: not a page on it
    assert verdict.unknown_names == () and verdict.passing_names == ("Yarn",)
    assert not verdict.covered
    assert report.details["passing_names"] == "Yarn"
    assert report.details["declined"].endswith(
        "Yarn is mentioned only in passing (in no title or heading, and not with the rest "
        "of the question)"
    )
    # a page whose title or heading names it is about it
    titled = dataclasses.replace(NPM_DOCS[2], heading_path=("Yarn",))
    on_it = await stage.run(
        CoverageInput(question, [scored(c, 0.7) for c in [*NPM_DOCS[:2], titled]], False)
    )
    assert on_it[0].passing_names == () and on_it[0].covered


def test_a_name_in_several_passages_is_in_passing_only_away_from_the_task() -> None:
    question = "How do I add a dependency to my project with Yarn?"
    aside = [
        chunk(10 + i, f"Yarn {i} also reads this file.", source=f"aside{i}.md", title="Files")
        for i in range(3)
    ]
    # three passages name it, none with the task's words, which another passage holds
    away = hybrid_evidence(question, [scored(c, 0.5) for c in [NPM_DOCS[1], *aside]],
                           dense_weight=0.5)
    assert away.passing_names == ("Yarn",)
    # three passages name it beside the task: the collection covers doing it with Yarn
    beside = [
        chunk(20 + i, f"With Yarn, add a dependency to the project: step {i}.",
              source=f"yarn{i}.md", title="Recipes")
        for i in range(3)
    ]
    with_task = hybrid_evidence(question, [scored(c, 0.5) for c in [NPM_DOCS[1], *beside]],
                                dense_weight=0.5)
    assert with_task.passing_names == () and with_task.unknown_names == ()


def test_a_name_in_the_passage_best_holding_the_task_is_not_in_passing() -> None:
    # named in one passage, never in a heading, but that passage is where the task is
    # (samples/corpus's installation page; npm's "publish through OpenID Connect")
    question = "Which command exports the MiniLM model before the first start?"
    pages = [
        chunk(30, "Build the MiniLM model once before the first start: the command "
              "groundwire models build minilm exports it.", source="installation.md",
              title="Installing", heading=("Build the model once",)),
        chunk(31, "Start the stack with groundwire up.", source="installation.md",
              title="Installing", heading=("Start the stack",)),
    ]
    h = hybrid_evidence(question, [scored(c, 0.5) for c in pages], dense_weight=0.5)
    assert h.passing_names == () and h.unknown_names == ()
    # the same name, only beside other words, is in passing
    aside = dataclasses.replace(pages[1], text=pages[1].text + " It embeds with MiniLM.")
    unnamed = chunk(32, "Build the model once before the first start: the command "
                    "groundwire models build exports it.", source="installation.md",
                    title="Installing", heading=("Build the model once",))
    elsewhere = [unnamed, aside]
    h = hybrid_evidence(question, [scored(c, 0.5) for c in elsewhere], dense_weight=0.5)
    assert h.passing_names == ("MiniLM",)
