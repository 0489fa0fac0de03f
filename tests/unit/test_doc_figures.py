"""Record-backed figures of the README and docs equal their records (scripts/fill_doc_figures.py).

Every ``<!-- fig SOURCE EXPR FORMAT -->text<!-- /fig -->`` marker must resolve, and its text must
be what the record says at the precision shown, so a number edited by hand, or a record replaced
without rerunning the fill script, fails here.
"""

from __future__ import annotations

import json

import pytest

from racer_bench.analysis import doc_figures
from tests.conftest import REPO
from tests.scripts import load_script


def test_every_doc_figure_equals_its_record() -> None:
    stale = doc_figures.check(REPO)
    assert stale == [], "rerun scripts/fill_doc_figures.py:\n" + "\n".join(stale)


@pytest.mark.parametrize("doc", ["README.md", "docs/benchmarks.md", "docs/vllm.md"])
def test_the_measured_docs_have_figures(doc: str) -> None:
    assert len(doc_figures.parse((REPO / doc).read_text(encoding="utf-8"))) >= 10


def test_a_figure_edited_by_hand_fails_the_check(tmp_path) -> None:
    readme = tmp_path / "README.md"
    text = (REPO / "README.md").read_text(encoding="utf-8")
    first = doc_figures.parse(text)[0]
    readme.write_text(text[: first.start] + "999" + text[first.end :], encoding="utf-8")
    [stale] = doc_figures.check(REPO, [readme])
    assert f"[{first.marker}] shows '999'" in stale
    fill = load_script("fill_doc_figures")
    assert fill.main(["--check", str(readme)]) == 1
    assert fill.main([str(readme)]) == 0  # rewrites it from the record
    assert readme.read_text(encoding="utf-8") == text


@pytest.fixture
def records(tmp_path) -> doc_figures.Records:
    run = tmp_path / "results/curated/exp/a"
    run.mkdir(parents=True)
    summary = {"n_prompts": 4, "speedup": 1.316, "ci": [1.1358, 1.6], "identical": 0.75,
               "tokens_per_s": 30.0, "reference_tokens_per_s": 12.0, "hist": {"0": 1, "3": 3},
               "per_category": {"qa": {"mat": 2.584}}, "label": "EPYC, 2 cores"}  # fmt: skip
    (run / "summary.json").write_text(json.dumps(summary))
    (run / "manifest.json").write_text(json.dumps({"engine_choice": {"ar_step_s": 0.01257}}))
    turn = {"tokens": [1, 2], "prefill_time": 0.5, "decode_time": 0.5}
    prompts = [{"index": i, "baseline": {"turns": [turn]}, "reference": {"turns": [
        {"tokens": [1], "wall_time": 3.0}]}} for i in range(2)]  # fmt: skip
    (run / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))
    (tmp_path / "results/curated/exp/b").mkdir()
    (tmp_path / "results/curated/exp/b/summary.json").write_text(json.dumps({"speedup": 0.9}))
    (tmp_path / "results/archive/old/a").mkdir(parents=True)
    (tmp_path / "results/archive/old/a/summary.json").write_text(json.dumps({"speedup": 1.7}))
    (tmp_path / "docs/bench").mkdir(parents=True)
    racer = {"tokens": 100, "seconds": 2.0, "mat": 2.5}
    bench = {"contenders": {"ar": {"tokens": 100, "seconds": 4.0}, "racer@capacity=5": racer}}
    (tmp_path / "docs/bench/b.json").write_text(json.dumps(bench))
    rows = [{"dtype": "bfloat16", "build": b, "tokens": 16, "median_s": s}
            for b, s in (("abc1234", 0.020), ("def5678", 0.018))]  # fmt: skip
    kernel_ab = {"settings": {"builds": ["abc1234", "def5678"]}, "medians": rows}
    (tmp_path / "docs/bench/k.json").write_text(json.dumps(kernel_ab))
    cell = {"row attention": 30.0, "q/k/v GEMM": 60.0, "outside the layers": 10.0}
    phases = {"phases_us": [{"context": 600, "tokens": 16, **cell}]}
    (tmp_path / "docs/bench/p.json").write_text(json.dumps(phases))
    return doc_figures.Records(tmp_path)


def fig(source: str, expr: str, spec: str, text: str = "?") -> str:
    return f"<!-- fig {source} {expr} {spec} -->{text}<!-- /fig -->"


def test_parse_finds_each_marker_with_its_span_and_line() -> None:
    doc = (
        f"MAT {fig('exp/a', 'mat', '.2f', '2.02')}x\nat {fig('bench/b', 'tok_s(ar)', '.1f', '25')}"
    )
    first, second = doc_figures.parse(doc)
    assert (first.source, first.expr, first.spec, first.text, first.line) == (
        "exp/a", "mat", ".2f", "2.02", 1)  # fmt: skip
    assert doc[first.start : first.end] == "2.02"
    assert (second.marker, second.text, second.line) == ("bench/b tok_s(ar) .1f", "25", 2)


@pytest.mark.parametrize(
    "doc", ["<!-- fig exp/a mat -->2<!-- /fig -->", "<!-- fig exp/a mat .2f -->2", "<!-- fig x"]
)
def test_a_malformed_marker_is_an_error(doc: str) -> None:
    with pytest.raises(ValueError, match="malformed figure marker on line"):
        doc_figures.parse(f"prose\n{doc}\n")


@pytest.mark.parametrize(
    ("value", "spec", "text"),
    [(1.316, ".2f", "1.32"), (0.6939, ".0%", "69%"), (0.709, "+.0%", "+71%"), (14.6, "d", "15"),
     (3268.0, ",d", "3,268"), ("fast", "s", "fast"), ((6.66, 9.19), ".1f", "6.7-9.2")],
)  # fmt: skip
def test_render(value, spec: str, text: str) -> None:
    assert doc_figures.render(value, spec) == text


@pytest.mark.parametrize(
    ("source", "expr", "spec", "text"),
    [("exp/a", "speedup", ".2f", "1.32"), ("exp/a", "ci.0", ".2f", "1.14"),
     ("exp/a", "per_category.qa.mat", ".2f", "2.58"), ("exp/a", "label", "s", "EPYC, 2 cores"),
     ("exp/a/manifest.json", "scaled(engine_choice.ar_step_s,1000)", ".1f", "12.6"),
     ("exp/a", "ratio(tokens_per_s,reference_tokens_per_s)", ".2f", "2.50"),
     ("exp/a", "of_n(identical)", "s", "3/4"), ("exp/a", "hist_share(hist,1,4)", ".0%", "75%"),
     ("exp/a", "time_share(reference)", ".0%", "75%"),
     ("exp/a", "first_tok_s(baseline,1,1)", ".1f", "2.0"), ("exp/*", "speedup", ".2f", "0.90-1.32"),
     ("archive/old/a", "speedup", ".1f", "1.7"), ("archive/old/*", "speedup", ".1f", "1.7-1.7"),
     ("bench/b", "tok_s(ar)", ".1f", "25.0"), ("bench/b", "vs(racer@capacity=5,ar)", ".2f", "2.00"),
     ("bench/b", "contender(racer@capacity=5,mat)", ".2f", "2.50"),
     ("bench/k", "kernel_ms(bfloat16,def5678,16)", ".1f", "18.0"),
     ("bench/k", "kernel_ratio(bfloat16,def5678,16)", ".2f", "0.90"),
     ("bench/p", "phase_us(600,16,row_attention)", ".0f", "30"),
     ("bench/p", "phase_share(600,16,q/k/v_GEMM)", ".0%", "60%")],
)  # fmt: skip
def test_a_figure_resolves_from_its_record(records, source, expr, spec, text) -> None:
    doc = f"x {fig(source, expr, spec)} y"
    filled, [stale] = doc_figures.fill(doc, records)
    assert filled == f"x {fig(source, expr, spec, text)} y"
    assert stale.want == text
    assert doc_figures.fill(filled, records)[1] == []  # once filled, nothing is stale


def test_an_unresolvable_figure_is_reported_and_left_as_it_is(records) -> None:
    doc = f"{fig('exp/a', 'no_such_key', '.2f', '1.00')} {fig('exp/missing', 'mat', '.2f', '2')}"
    filled, stale = doc_figures.fill(doc, records)
    assert filled == doc
    assert [s.want for s in stale] == [None, None]
    assert "cannot resolve (KeyError" in str(stale[0]) and "FileNotFoundError" in str(stale[1])


def test_documents_are_the_readme_and_the_docs() -> None:
    assert doc_figures.documents(REPO)[0] == REPO / "README.md"
    assert REPO / "docs/benchmarks.md" in doc_figures.documents(REPO)
