"""Results scripts end to end on fake run folders: tables, figures, sweeps, experiment configs."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import DictConfig, OmegaConf

from racer_bench.analysis import frames, names, paper_numbers
from racer_bench.analysis.tables import build_tables, table_runs
from racer_bench.analysis.tables.ablation import ABLATIONS
from racer_bench.analysis.tables.categories import head_to_head_notes
from racer_bench.analysis.tables.papers import ordering_note
from racer_bench.analysis.tables.render import header_sources
from tests.conftest import CONF_DIR, REPO
from tests.scripts import load_script
from tests.unit.test_frames import SPEC_CATEGORIES, write_run


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Main runs (two methods, two tasks), three RACER ablations and an ASD grid."""
    root = tmp_path_factory.mktemp("results")
    for i, (method, accept) in enumerate((("pld", 0.5), ("logitspec", 0.9), ("racer", 1.5))):
        write_run(root / "main", f"s{i}", method, "spec_bench", SPEC_CATEGORIES, 12, accept=accept,
                  ranks=method == "racer", seed=i)  # fmt: skip
        write_run(root / "main", f"h{i}", method, "humaneval", ("humaneval",), 4, seed=10 + i)
    for i, cfg in enumerate(({"retrieval": False}, {"logit_source": "last"})):
        write_run(root / "ablation", str(i), "racer", "spec_bench", SPEC_CATEGORIES, 12,
                  ranks=True, method_cfg=cfg, seed=20 + i)  # fmt: skip
    for i, (budget, gate) in enumerate(((0.0, 0.25), (8.0, 0.25), (8.0, 0.5), (12.0, 1.0))):
        write_run(root / "asd", str(i), "racer", "gsm8k", ("gsm8k",), 6, verifier="asd",
                  strict=True, verifier_cfg={"budget": budget, "gate": gate}, seed=30 + i,
                  started=f"2026-01-01T00:00:0{i}")  # fmt: skip
    return root


@pytest.fixture(scope="module")
def tables(results: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("docs") / "tables.md"
    built = load_script("make_tables").main(["--results", str(results), "--out", str(out)])
    markdown = out.read_text()
    sections = re.split(r"^### ", markdown, flags=re.M)[1:]
    return {t.key: s for t, s in zip(built, sections, strict=True)} | {
        "tex": out.with_suffix(".tex").read_text(), "all": markdown}  # fmt: skip


def md_rows(section: str) -> dict[str, list[str]]:
    """Table rows of a Markdown section, keyed by their first cell."""
    rows = [line.strip("|").split(" | ") for line in section.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [c.strip() for c in cells] for cells in rows[1:]}


def test_all_four_tables_are_built(tables: dict[str, str]) -> None:
    assert {"main", "speed", "spec_bench_categories", "ablation", "logitspec", "asd"} <= set(tables)
    assert "make_tables.py --results" in tables["all"].splitlines()[0]


def test_main_table_cells_come_from_the_runs(results: Path, tables: dict[str, str]) -> None:
    df = frames.runs_frame(frames.load_runs(results)).set_index(["label", "task"])
    racer = md_rows(tables["main"])["RACER"]
    overall = df.loc[("RACER", "spec_bench")]
    assert f"{overall['speedup']:.2f}× ({overall['mat']:.2f})" in racer
    humaneval = df.loc[("RACER", "humaneval")]
    assert racer[-3] == f"{humaneval['speedup']:.2f}× ({humaneval['mat']:.2f})"
    assert racer[-2:] == ["2.21× (3.00)", "–"]  # RACER paper | Spec-Bench leaderboard
    header = tables["main"].splitlines()[2]
    assert "multi turn" in header and "RACER paper: Spec-Bench overall" in header
    assert "arXiv:2604.14885" in tables["main"]
    assert "tiny_random (float64) on cpu:test" in tables["main"]


def test_each_table_keeps_to_its_own_experiment(tmp_path: Path) -> None:
    """A newer, smaller run of the same method in the LogitSpec experiment must not replace the
    main table's run: each table reads its home experiment's runs when there are any."""
    for experiment, started, n in (("racer_main", "00", 8), ("logitspec_table", "09", 2)):
        for i, method in enumerate(("pld", "logitspec")):
            write_run(tmp_path / experiment, method, method, "spec_bench", SPEC_CATEGORIES, n,
                      accept=0.5 + i + n / 10, experiment=experiment, seed=n + i,
                      started=f"2026-01-01T00:00:{started}")  # fmt: skip
    built = {t.key: t for t in build_tables(frames.load_runs(tmp_path))}
    for key, experiment in (("main", "racer_main"), ("logitspec", "logitspec_table")):
        df = frames.runs_frame(frames.load_runs(tmp_path / experiment)).set_index("method")
        row = next(r for r in built[key].rows if r[0] == "LogitSpec")
        assert f"{df.loc['logitspec', 'speedup']:.2f}×" in " ".join(row), key
    prompts = next(n for n in built["main"].notes if n.startswith("Ours"))
    assert "prompts Spec-Bench 8" in prompts


def test_spec_bench_table_has_a_row_per_category_with_intervals(
    results: Path, tables: dict[str, str]
) -> None:
    rows = md_rows(tables["spec_bench_categories"])
    assert list(rows) == ["writing", "coding", "translation", "summarization", "qa", "rag", "all"]
    raw = frames.categories_frame(frames.load_runs(results / "main"), "category").set_index(
        ["label", "task", "category"]
    )
    coding = raw.loc[("RACER", "spec_bench", "coding")]
    cell = (f"{coding['speedup']:.2f}× [{coding['speedup_ci_low']:.2f}, "
            f"{coding['speedup_ci_high']:.2f}] ({coding['mat']:.2f})")  # fmt: skip
    header = tables["spec_bench_categories"].splitlines()[2].strip("|").split(" | ")
    assert rows["coding"][[h.strip() for h in header].index("RACER (fixed)")] == cell
    assert rows["all"][1] == "12"


def test_runs_differing_only_in_scheduler_get_a_row_each(tmp_path: Path) -> None:
    """RACER under the fixed and the confidence scheduler on the same task: neither is dropped;
    each row and column names its scheduler, and ranking notes stay within one scheduler."""
    for i, scheduler in enumerate(("fixed", "confidence")):
        for method in ("pld", "racer"):
            write_run(tmp_path, f"{method}-{scheduler}", method, "spec_bench", SPEC_CATEGORIES, 6,
                      manifest={"scheduler": scheduler}, seed=i, accept=0.5 + i)  # fmt: skip
    write_run(tmp_path, "racer-h", "racer", "humaneval", ("humaneval",), 4, seed=5)
    built = {t.key: t for t in build_tables(frames.load_runs(tmp_path))}
    df = frames.runs_frame(frames.load_runs(tmp_path)).set_index(["method", "scheduler", "task"])
    main = built["main"]
    assert main.header[:2] == ["method", "scheduler"]
    pairs = [["PLD", "fixed"], ["PLD", "confidence"], ["RACER", "fixed"], ["RACER", "confidence"]]
    assert [row[:2] for row in main.rows] == pairs
    overall = main.header.index("Spec-Bench overall")
    humaneval = main.header.index("HumanEval")
    for row in main.rows:
        run = df.loc[({"PLD": "pld", "RACER": "racer"}[row[0]], row[1], "spec_bench")]
        assert row[overall] == f"{run['speedup']:.2f}× ({run['mat']:.2f})"
        assert (row[humaneval] == "–") == (row[:2] != ["RACER", "fixed"])
    assert [row[:3] for row in built["speed"].rows][-1] == ["RACER", "confidence", "Spec-Bench"]
    assert "RACER (confidence)" in built["spec_bench_categories"].header
    orderings = [n for n in main.notes if n.startswith("Ordering by")]
    assert any("(confidence scheduler)" in n for n in orderings)
    assert any("(fixed scheduler)" in n for n in orderings)


def test_ablation_table_rows_and_paper_column(tables: dict[str, str]) -> None:
    rows = md_rows(tables["ablation"])
    assert list(rows) == ["RACER (full)", "logits tree only", "last logit instead of copy"]
    assert rows["logits tree only"][1] == "retrieval=false"
    assert (
        rows["logits tree only"][-1]
        == paper_numbers.table("racer_ablation_mat")["retrieval=false"].text
    )


def test_asd_table_shows_front_and_frozen_setting(results: Path, tables: dict[str, str]) -> None:
    rows = [r for r in md_rows(tables["asd"]).values()]
    settings = [r[2] for r in rows]
    assert "B=8 g=0.25 M=2" in settings
    frozen = rows[settings.index("B=8 g=0.25 M=2")]
    reported = paper_numbers.table("asd_reported")
    assert frozen[-4:] == [reported["gain"].text, reported["mat"].text, "–",
                           reported["divergence_math"].text]  # fmt: skip
    df = frames.runs_frame(frames.load_runs(results / "asd"))
    row = df[df["verifier.budget"] == 8.0].query("`verifier.gate` == 0.25").iloc[0]
    assert frozen[3] == f"{row['gain_vs_strict']:+.1%}"
    assert frozen[4] == f"{row['strict_mat']:.2f} → {row['mat']:.2f}"


def test_asd_table_shows_quality_measures_or_marks_them_missing(
    results: Path, tables: dict[str, str]
) -> None:
    rows = list(md_rows(tables["asd"]).values())
    header = next(line for line in tables["asd"].splitlines() if line.startswith("| task"))
    names = [h.strip() for h in header.strip("|").split(" | ")]
    df = frames.runs_frame(frames.load_runs(results / "asd"))
    row = df[df["verifier.budget"] == 8.0].query("`verifier.gate` == 0.25").iloc[0]
    frozen = next(r for r in rows if r[2] == "B=8 g=0.25 M=2")
    cell = dict(zip(names, frozen, strict=True))
    # fake records hold no log-probabilities: not measured; agreement comes from their texts
    assert cell["log-lik gap (nats/token) [95% CI]"] == "not measured"
    assert cell["answer agreement [95% CI]"].startswith(f"{row['agreement']:.0%} [")
    assert cell["first divergence [95% CI]"].startswith(f"{row['first_divergence']:.0%} [")


def test_latex_is_escaped(tables: dict[str, str]) -> None:
    tex = tables["tex"]
    assert tex.count(r"\begin{tabular}") == 6 and r"\label{tab:asd}" in tex
    assert r"$\times$" in tex and "×" not in tex and r"tiny\_random" in tex


def test_no_paper_drops_the_reported_columns(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.md"
    load_script("make_tables").main(["--results", str(results / "main"), "--out", str(out),
                                     "--no-paper"])  # fmt: skip
    text = out.read_text()
    assert "paper" not in text and "leaderboard" not in text and "arXiv" not in text


def test_mismatched_runs_are_refused_with_the_reason(tmp_path: Path) -> None:
    write_run(tmp_path, "a")
    write_run(tmp_path, "b", dtype="bfloat16")
    with pytest.raises(SystemExit, match="dtype differs"):
        load_script("make_tables").main(["--results", str(tmp_path)])


def _fingerprint(cpu: str) -> dict[str, str]:
    return {"id": f"id-{cpu}", "label": f"{cpu}, avx2, 2 cores"}


def _section(tables: list, key: str, markdown: str) -> str:
    sections = re.split(r"^### ", markdown, flags=re.M)[1:]
    return dict(zip([t.key for t in tables], sections, strict=True))[key]


@pytest.mark.parametrize(
    ("b_manifest", "concerned"),
    [
        ({"hardware": _fingerprint("CPU B"), "engine": {"engine": "fast"}}, "CPU B, avx2"),
        ({"hardware": _fingerprint("CPU A"), "engine": {"engine": "eager"}}, "eager engine"),
        ({"hardware": None, "engine": None}, "hardware not recorded"),
    ],
)
def test_a_table_mixing_machines_or_engines_names_the_rows_concerned(
    tmp_path: Path, b_manifest: dict, concerned: str
) -> None:
    same = {"hardware": _fingerprint("CPU A"), "engine": {"engine": "fast"}}
    write_run(tmp_path, "a", "pld", "humaneval", ("humaneval",), manifest=same, seed=1)
    write_run(tmp_path, "b", "racer", "humaneval", ("humaneval",), manifest=b_manifest, seed=2)
    out = tmp_path / "tables.md"
    built = load_script("make_tables").main(["--results", str(tmp_path), "--out", str(out),
                                             "--no-paper"])  # fmt: skip
    main = _section(built, "main", out.read_text())
    (note,) = [line for line in main.splitlines() if "Mixed machines or engines" in line]
    assert "PLD / HumanEval on CPU A, avx2, 2 cores (fast engine)" in note
    assert "RACER / HumanEval on" in note and concerned in note
    assert "Mixed machines" in out.with_suffix(".tex").read_text()


def test_a_table_of_one_machine_and_engine_shows_it_without_a_mixing_note(tmp_path: Path) -> None:
    same = {"hardware": _fingerprint("CPU A"), "engine": {"engine": "fast"}}
    for i, method in enumerate(("pld", "racer")):
        write_run(tmp_path, method, method, "humaneval", ("humaneval",), manifest=same, seed=i)
    out = tmp_path / "tables.md"
    built = load_script("make_tables").main(["--results", str(tmp_path), "--out", str(out)])
    main = _section(built, "main", out.read_text())
    assert "[CPU A, avx2, 2 cores, fast engine]" in main
    assert "Mixed machines" not in main


def test_the_curated_tables_note_every_mix_of_machines_or_engines() -> None:
    """Every table built from the committed records docs/tables.md is made of: if the runs
    behind its rows differ in hardware fingerprint or engine (read from the manifests here), its
    notes say so."""
    first_line = (REPO / "docs" / "tables.md").read_text(encoding="utf-8").split("\n", 1)[0]
    runs = frames.load_runs([REPO / s for s in header_sources(first_line)], check=False)
    for table in build_tables(runs, paper=False):
        home = table_runs(runs, table.key, newest=True)
        settings = {(frames.hardware_of(r.manifest)[0], frames.engine_of(r.manifest)) for r in home}
        if table.key == "asd":
            shown = " ".join(" ".join(row[:3]) for row in table.rows)
            home = [r for r in home if r.summary.get("gain_vs_strict") is not None]
            settings = {(frames.hardware_of(r.manifest)[0], frames.engine_of(r.manifest))
                        for r in home if names.method_name(r.method) in shown}  # fmt: skip
        noted = any(n.startswith("Mixed machines or engines") for n in table.notes)
        if len(settings) > 1:
            assert noted, f"{table.key} mixes {settings} without a note"


def test_make_figures_writes_png_and_pdf(results: Path, tmp_path: Path) -> None:
    written = load_script("make_figures").main(
        ["--results", str(results / "main"), "--out", str(tmp_path), "--formats", "png", "pdf"]
    )
    names = {p.stem for p in written}
    assert {"speedup_mat", "categories", "accept_hist", "retrieval", "accepted_ranks"} == names
    assert all(p.stat().st_size > 1000 for p in written)


def test_collect_sweep_orders_jobs_and_keeps_varying_overrides(tmp_path: Path) -> None:
    for job in (0, 2, 10):
        run_dir = write_run(tmp_path / "multirun", str(job), "racer", seed=job,
                            method_cfg={"capacity": 2**job})  # fmt: skip
        (run_dir / ".hydra").mkdir()
        overrides = ["model=tiny_random", f"method.capacity={2**job}"]
        (run_dir / ".hydra" / "overrides.yaml").write_text(OmegaConf.to_yaml(overrides))
    collect = load_script("collect_sweep")
    out = tmp_path / "sweep.md"
    collect.main(["--results", str(tmp_path / "multirun"), "--out", str(out)])
    rows = md_rows(out.read_text())
    assert list(rows) == ["0", "2", "10"]
    assert "engine not recorded]" in out.read_text()  # the setting line names the machine
    assert "Mixed machines" not in out.read_text()
    assert [r[1] for r in rows.values()] == ["method.capacity=1", "method.capacity=4",
                                            "method.capacity=1024"]  # fmt: skip
    csv = tmp_path / "sweep.csv"
    collect.main(["--results", str(tmp_path / "multirun"), "--out", str(csv)])
    assert len(pd.read_csv(csv)) == 3


def test_collect_sweep_notes_jobs_on_other_machines(tmp_path: Path) -> None:
    for job, cpu in enumerate(("CPU A", "CPU B")):
        where = {"hardware": _fingerprint(cpu), "engine": {"engine": "fast"}}
        write_run(tmp_path, str(job), "racer", seed=job, method_cfg={"capacity": 2 + job},
                  manifest=where)  # fmt: skip
    out = tmp_path / "sweep.md"
    load_script("collect_sweep").main(["--results", str(tmp_path), "--out", str(out)])
    (note,) = [n for n in out.read_text().splitlines() if "Mixed machines" in n]
    assert "job 0 on CPU A, avx2, 2 cores (fast engine)" in note and "job 1 on CPU B" in note


EXPERIMENTS = sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_composes_and_names_its_command(
    compose_cfg: Callable[..., DictConfig], name: str
) -> None:
    text = (CONF_DIR / "experiment" / f"{name}.yaml").read_text()
    assert text.startswith("# @package _global_")
    assert f"python -m racer_bench experiment={name}" in text
    cfg = compose_cfg(f"experiment={name}")
    OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves
    assert cfg.experiment_name == name


def test_ablation_experiment_variants_match_the_table_rows(
    compose_cfg: Callable[..., DictConfig],
) -> None:
    cfg = compose_cfg("experiment=racer_ablation")
    variants = set()
    for ablation in cfg.ablations:
        composed = compose_cfg("experiment=racer_ablation", f"ablation={ablation}")
        method = OmegaConf.to_container(composed.method, resolve=True)
        # the run's whole config, as a record saves it: resolves the hardware- and
        # scheduler-sized capacity
        context = OmegaConf.to_container(composed, resolve=True)
        defaults = frames.group_defaults("method", "racer", context=context)
        diff = {k: v for k, v in frames.flatten(method, "method").items() if defaults.get(k) != v}
        variants.add(frames.variant_string(diff))
    table_variants = {v for _, v in ABLATIONS}
    assert variants == table_variants


def test_ordering_note_names_the_pairs_that_swap() -> None:
    note = ordering_note(
        "speedup", {"A": 1.7, "B": 1.5, "C": 1.1, "D": 3.0}, {"A": 2.2, "B": 1.5, "C": 2.0},
        "racer", "{:.1f}×",
    )  # fmt: skip
    assert note.startswith("Ordering by speedup: ours A 1.7× > B 1.5× > C 1.1×; RACER paper A 2.2×")
    assert note.endswith("a different order: ours has B above C.")
    same = ordering_note("MAT", {"A": 2, "B": 1}, {"A": 3, "B": 1}, "racer", "{:.0f}")
    assert same.endswith("the same order.")
    assert ordering_note("MAT", {"A": 2}, {"A": 3}, "racer", "{}") is None


def test_tables_compare_their_ordering_with_the_papers(tables: dict[str, str]) -> None:
    assert "Ordering by Spec-Bench overall speedup: ours" in tables["main"]
    assert "Ordering by Spec-Bench MAT: ours" in tables["ablation"]
    assert "Ordering by Spec-Bench speedup: ours" in tables["logitspec"]
    assert "At the paper's frozen setting B=8 g=0.25 M=2, ours: GSM8K RACER" in tables["asd"]


def test_head_to_head_note_names_where_each_method_is_faster() -> None:
    rows = [("racer", "qa", 1.5), ("suffix", "qa", 1.2), ("racer", "rag", 1.1),
            ("suffix", "rag", 2.0), ("pld", "rag", 3.0), ("racer", "math", 1.3)]  # fmt: skip
    cats = pd.DataFrame(rows, columns=["method", "category", "speedup"])
    [note] = head_to_head_notes(cats, ["qa", "rag", "math"])
    assert "RACER faster in 1 of 2 (qa 1.50× vs 1.20×)" in note
    assert "SuffixDecoding faster in 1 of 2 (rag 1.10× vs 2.00×)" in note
    cats["mat"], cats["draft_size_mean"] = 2.0, 10.0
    [note] = head_to_head_notes(cats, ["qa"])
    assert "qa 1.50× (MAT 2.00, 10.0 nodes) vs 1.20× (MAT 2.00, 10.0 nodes)" in note
    assert head_to_head_notes(cats[cats["method"] != "suffix"], ["qa"]) == []


def test_speed_table_gives_absolute_tok_s_from_the_runs(results: Path, tables: dict[str, str]):
    df = frames.runs_frame(frames.load_runs(results / "main")).set_index(["method", "task"])
    lines = [line for line in tables["speed"].splitlines() if line.startswith("| RACER | fixed")]
    rows = [[c.strip() for c in line.strip("|").split(" | ")] for line in lines]
    [cells] = [row for row in rows if row[2] == "Spec-Bench"]
    racer = df.loc[("racer", "spec_bench")]
    assert cells[4] == f"{racer['baseline_tokens_per_s']:.1f}"
    assert cells[5] == f"{racer['tokens_per_s']:.1f}"
    assert cells[6].startswith(f"{racer['speedup']:.2f}× [")
    assert "AR tok/s per machine and engine" in tables["speed"]
