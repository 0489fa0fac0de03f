"""Tasks: loading, selection (categories / split / limit), rendering, scoring, data files.

Data-file tests read ``$RACER_BENCH_DATA`` (tests/conftest.py points it at the shared datasets)
and skip when a file is absent; the smollm2 tokenizer tests skip when it is not cached.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from hydra.utils import instantiate

from racer_bench.config.construct import constructor_node
from racer_bench.config.paths import DEFAULT_MODELS_DIR
from racer_bench.errors import ConfigError
from racer_bench.models.tiny_tokenizer import ByteTokenizer
from racer_bench.tasks.base import Prompt, Task, balanced_sample, split_of
from racer_bench.tasks.datafiles import (
    SOURCES,
    copy_from_folder,
    data_file,
    jsonl_lines,
    mgsm_lines,
    prepare,
)
from racer_bench.tasks.gsm8k import GSM8KTask
from racer_bench.tasks.math500 import Math500Task
from racer_bench.tasks.mgsm import MGSMZhTask
from racer_bench.tasks.spec_bench import MT_BENCH_CATEGORIES, SpecBenchTask, report_category
from racer_bench.tasks.tiny import TinyTask
from tests.conftest import CONF_DIR, REPO, run_generate

DATA_TASKS = {"spec_bench": SpecBenchTask, "gsm8k": GSM8KTask, "math500": Math500Task,
              "mgsm_zh": MGSMZhTask}  # fmt: skip
TASK_YAMLS = sorted(p.stem for p in (CONF_DIR / "task").glob("*.yaml"))
SMOLLM2_DIR = Path(DEFAULT_MODELS_DIR, "smollm2_135m").expanduser()


def need_data(task: str) -> None:
    root = os.environ.get("RACER_BENCH_DATA")
    if not root or not (Path(root) / SOURCES[task].relpath).is_file():
        pytest.skip(f"{task}: {SOURCES[task].relpath} not in RACER_BENCH_DATA={root}")


def make(task: str, **kwargs) -> Task:
    if task in DATA_TASKS:
        need_data(task)
        return DATA_TASKS[task](**kwargs)
    return TinyTask(**kwargs)


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    if not (SMOLLM2_DIR / "tokenizer.json").exists():
        pytest.skip(f"smollm2 tokenizer not cached in {SMOLLM2_DIR}")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(SMOLLM2_DIR))


# --- selection: pure functions ---------------------------------------------------------------


def test_split_of_is_stable_and_near_the_fraction():
    ids = [f"p{i}" for i in range(2000)]
    splits = [split_of("t", i, 0.3) for i in ids]
    assert splits == [split_of("t", i, 0.3) for i in ids]
    assert set(splits) == {"calib", "eval"}
    assert 0.26 < splits.count("calib") / len(ids) < 0.34
    # a larger calib fraction only moves prompts from eval to calib
    wider = [split_of("t", i, 0.5) for i in ids]
    assert all(w == "calib" for s, w in zip(splits, wider, strict=True) if s == "calib")


def test_balanced_sample_is_seeded_balanced_and_in_file_order():
    prompts = [Prompt(f"{c}{i}", c, ["q"]) for c in "abc" for i in range(10)]
    prompts.append(Prompt("d0", "d", ["q"]))
    sample = balanced_sample(prompts, 7, seed=1)
    assert sample == balanced_sample(prompts, 7, seed=1)
    assert sample != balanced_sample(prompts, 7, seed=2)
    cats = [p.category for p in sample]
    assert {"a", "b", "c", "d"} <= set(cats) and max(cats.count(c) for c in "abc") == 2
    order = [prompts.index(p) for p in sample]
    assert order == sorted(order)


def test_limit_takes_first_rows_without_seed_and_a_sample_with_one():
    assert [p.id for p in TinyTask(limit=2).load()] == ["tiny/0", "tiny/1"]
    seeded = TinyTask(limit=3, sample_seed=5).load()
    assert len(seeded) == 3 and seeded == TinyTask(limit=3, sample_seed=5).load()


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"split": "train"}, "task.split"),
        ({"prompt_style": "raw"}, "task.prompt_style"),
        ({"limit": -1}, "task.limit"),
        ({"limit": 0}, r"task\.limit=0: must be an integer >= 1 or null"),
        ({"calib_fraction": 1.5}, "task.calib_fraction"),
    ],
)
def test_bad_config_raises_one_line_config_error(kwargs, key):
    with pytest.raises(ConfigError, match=key) as err:
        TinyTask(**kwargs)
    assert "\n" not in str(err.value)


def test_unknown_category_names_the_allowed_ones():
    with pytest.raises(ConfigError, match=r"unknown nope; allowed: tiny"):
        TinyTask(categories=["nope"]).load()


def test_check_refuses_an_unknown_category_and_a_selection_without_prompts():
    """What only the prompts can judge, in one line each (run before the model loads)."""
    TinyTask(categories=["tiny"], split="calib").check()
    with pytest.raises(ConfigError, match=r"unknown nope; allowed: tiny"):
        TinyTask(categories=["nope"]).check()
    empty = TinyTask(split="calib", calib_fraction=1e-9)
    with pytest.raises(
        ConfigError, match=r"task: categories=null, split=calib keep no prompt"
    ) as err:
        empty.check()
    assert "\n" not in str(err.value)


def test_num_fewshot_is_checked():
    with pytest.raises(ConfigError, match=r"task\.num_fewshot"):
        GSM8KTask(num_fewshot=9)


# --- data files ------------------------------------------------------------------------------


def test_missing_data_file_says_which_where_and_how(tmp_path):
    with pytest.raises(ConfigError) as err:
        GSM8KTask(data_dir=str(tmp_path)).load()
    msg = str(err.value)
    assert "\n" not in msg
    assert "gsm8k/test.jsonl" in msg and str(tmp_path) in msg
    assert "python scripts/prepare_data.py --tasks gsm8k" in msg


def test_data_dir_falls_back_to_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("RACER_BENCH_DATA", str(tmp_path))
    (tmp_path / "mgsm").mkdir()
    (tmp_path / "mgsm" / "mgsm_zh.tsv").write_text(
        "一加一？\t2\n二加二？\t1,004\n", encoding="utf-8"
    )
    assert data_file("mgsm_zh", None) == tmp_path / "mgsm" / "mgsm_zh.tsv"
    prompts = MGSMZhTask().load()
    assert [p.reference["answer"] for p in prompts] == ["2", "1004"]


def test_hub_rows_convert_to_the_upstream_layouts():
    rows = [{"question": "q1", "answer": "a\n#### 3", "extra": 1}]
    assert jsonl_lines(rows, ("question", "answer")) == [
        '{"question": "q1", "answer": "a\\n#### 3"}\n'
    ]
    hub = [{"question": "问\t题", "answer": None, "answer_number": 2125}]
    assert mgsm_lines(hub) == ["问 题\t2125\n"]


def test_prepare_copies_from_an_upstream_checkout(tmp_path):
    upstream = tmp_path / "grade-school-math" / "grade_school_math" / "data"
    upstream.mkdir(parents=True)
    (upstream / "test.jsonl").write_text('{"question": "q", "answer": "#### 1"}\n')
    out = tmp_path / "data"
    msg = prepare("gsm8k", out, folder=tmp_path / "grade-school-math")
    assert "wrote" in msg and "expected 1319" in msg  # a short file is flagged
    assert GSM8KTask(data_dir=str(out)).load()[0].reference["answer"] == "1"
    assert "exists" in prepare("gsm8k", out, folder=tmp_path / "grade-school-math")
    with pytest.raises(ConfigError, match="math500"):
        copy_from_folder(SOURCES["math500"], tmp_path / "grade-school-math", out)


def test_prepare_data_script_fills_a_data_dir_from_a_folder(tmp_path):
    need_data("spec_bench")
    spec = importlib.util.spec_from_file_location("prepare_data", REPO / "scripts/prepare_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    src = os.environ["RACER_BENCH_DATA"]
    argv = ["--tasks", "spec_bench", "--from-folder", src, "--data-dir", str(tmp_path)]
    assert module.main(argv) == 0
    copied = tmp_path / "spec_bench" / "question.jsonl"
    assert copied.read_bytes() == (Path(src) / "spec_bench" / "question.jsonl").read_bytes()


# --- every task: load, split, render, score --------------------------------------------------


@pytest.mark.parametrize("task", TASK_YAMLS)
def test_every_task_yaml_instantiates_with_a_version(task, compose_cfg):
    if task in DATA_TASKS:
        need_data(task)
    cfg = compose_cfg(f"task={task}", "task.limit=2")
    obj = instantiate(constructor_node(cfg.task))
    assert obj.name == task and obj.version and len(obj.load()) == 2


@pytest.mark.parametrize(
    ("task", "rows", "categories"),
    [("spec_bench", 480, 13), ("gsm8k", 1319, 1), ("math500", 500, 7), ("mgsm_zh", 250, 1),
     ("tiny", 6, 1)],
)  # fmt: skip
def test_load_counts_and_unique_ids(task, rows, categories):
    prompts = make(task).load()
    assert len(prompts) == rows
    assert len({p.category for p in prompts}) == categories
    assert len({p.id for p in prompts}) == rows


@pytest.mark.parametrize("task", [*DATA_TASKS, "tiny"])
def test_splits_are_disjoint_and_cover_the_task(task):
    everything = {p.id for p in make(task).load()}
    calib = {p.id for p in make(task, split="calib").load()}
    evals = {p.id for p in make(task, split="eval").load()}
    assert calib.isdisjoint(evals) and calib | evals == everything
    if len(everything) >= 250:
        assert 0.22 < len(calib) / len(everything) < 0.38


def test_spec_bench_multi_turn_alias_and_report_category():
    task = make("spec_bench", categories=["multi_turn"])
    prompts = task.load()
    assert len(prompts) == 80 and all(len(p.turns) == 2 for p in prompts)
    assert {p.category for p in prompts} == set(MT_BENCH_CATEGORIES)
    assert {report_category(p.category) for p in prompts} == {"multi_turn"}
    assert report_category("translation") == "translation"
    assert task.report_category("stem") == "multi_turn" and TinyTask().report_category("x") == "x"
    assert len(make("spec_bench", categories="qa").load()) == 80
    assert task.score(prompts[0], ["a", "b"]) == {}


def test_spec_bench_turn_two_is_conditioned_on_the_models_answer():
    task = make("spec_bench", categories=["writing"])
    prompt = task.load()[0]
    tok = ByteTokenizer()
    text = tok.decode(task.render(prompt, 1, ["MY OWN ANSWER"], tok))
    first, answer, second = (
        text.index(s) for s in (prompt.turns[0], "MY OWN ANSWER", prompt.turns[1])
    )
    assert first < answer < second and text.endswith("<assistant>")
    completion = make("spec_bench", categories=["writing"], prompt_style="completion")
    plain = tok.decode(completion.render(prompt, 1, ["MY OWN ANSWER"], tok))
    assert "ASSISTANT: MY OWN ANSWER\nUSER: " in plain and plain.endswith("ASSISTANT:")


@pytest.mark.parametrize(
    ("task", "marker"), [("gsm8k", "The answer is 6."), ("mgsm_zh", "答案是 6。")]
)
def test_fewshot_prompts_hold_the_exemplars_then_the_question(task, marker, smollm2_tokenizer):
    prompt = make(task).load()[0]
    for style in ("chat", "completion"):
        rendered = make(task, prompt_style=style).render(prompt, 0, [], smollm2_tokenizer)
        text = smollm2_tokenizer.decode(rendered)
        assert text.count(marker) == 1 and text.index(marker) < text.index(prompt.turns[0])
    zero_shot = make(task, num_fewshot=0).render(prompt, 0, [], smollm2_tokenizer)
    assert marker not in smollm2_tokenizer.decode(zero_shot)
    completion = make(task, prompt_style="completion")
    assert completion.completion_text(prompt, 0, []).endswith(completion.answer_prefix.rstrip())


def test_math500_prompt_asks_for_a_box(smollm2_tokenizer):
    task = make("math500")
    prompt = task.load()[0]
    text = smollm2_tokenizer.decode(task.render(prompt, 0, [], smollm2_tokenizer))
    assert prompt.turns[0] in text and "\\boxed{}" in text and "<|im_start|>assistant" in text
    plain = make("math500", prompt_style="completion").completion_text(prompt, 0, [])
    assert plain.endswith("Solution:") and "\\boxed{}" in plain


@pytest.mark.parametrize(
    ("task", "good", "bad"),
    [
        ("gsm8k", "So 16 - 3 - 4 = 9 eggs, 9 * 2 = 18. The answer is $18.", "The answer is 9."),
        ("mgsm_zh", "逐步解答：16 - 3 - 4 = 9，9 * 2 = 18。答案是 18。", "答案是 9。"),
    ],
)
def test_numeric_task_scores(task, good, bad):
    t = make(task)
    prompt = t.load()[0]  # Janet's ducks: gold 18
    assert t.score(prompt, [good]) == {"accuracy": 1.0, "extracted": 1.0}
    assert t.score(prompt, [bad])["accuracy"] == 0.0


def test_math500_scores_the_last_box():
    t = make("math500")
    prompt = t.load()[0]  # polar coordinates of (0, 3)
    assert t.score(prompt, ["r = 3, so $\\boxed{(3, \\pi/2)}$."])["accuracy"] == 1.0
    assert t.score(prompt, ["$\\boxed{(3, \\pi)}$"])["accuracy"] == 0.0


@pytest.mark.parametrize("task", [*DATA_TASKS, "tiny"])
def test_renders_with_both_tokenizers(task, smollm2_tokenizer):
    t = make(task, limit=3, sample_seed=0)
    for prompt in t.load():
        history: list[str] = []
        for turn in range(len(prompt.turns)):
            for tok in (ByteTokenizer(), smollm2_tokenizer):
                ids = t.render(prompt, turn, history, tok)
                assert ids and all(isinstance(i, int) for i in ids)
                assert prompt.turns[turn].strip()[:20] in tok.decode(ids)
            history.append(f"answer {turn}")


# --- end to end on the tiny random model -----------------------------------------------------


@pytest.mark.parametrize("task", [*DATA_TASKS, "tiny"])
def test_task_runs_end_to_end_on_tiny_random(task, tiny_target):
    extra = {"spec_bench": {"categories": ["multi_turn"]}, "gsm8k": {"num_fewshot": 2},
             "mgsm_zh": {"num_fewshot": 2}}.get(task, {})  # fmt: skip
    t = make(task, limit=2, sample_seed=0, **extra)
    tok = tiny_target.tokenizer
    for prompt in t.load():
        history: list[str] = []
        for turn in range(len(prompt.turns)):
            ids = t.render(prompt, turn, history, tok)
            result = run_generate(
                tiny_target,
                _null(),
                ids,
                max_new_tokens=6,
                eos_ids=tiny_target.eos_ids,
                stop_strings=tuple(t.stop_strings),
            )
            history.append(result.text)
        scores = t.score(prompt, history)
        assert all(isinstance(v, float) for v in scores.values())
        if t.metric is not None:
            assert t.metric in scores
    assert task != "spec_bench" or len(history) == 2  # the multi-turn path ran


def _null():
    from racer_bench.engine.drafter import NullDrafter

    return NullDrafter()
