"""Answer extraction and scoring on hand-written answers (no model, no data files)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from racer_bench.tasks.scoring import (
    extract_final_number,
    find_numbers,
    gsm8k_gold,
    last_boxed,
    math_equal,
    numbers_equal,
    parse_number,
    score_boxed,
    score_numeric,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("16 - 3 - 4 = 9", ["16", "3", "4", "9"]),  # a minus between numbers is no sign
        ("it fell to -5 degrees", ["-5"]),
        ("x=-12.5", ["-12.5"]),
        ("she paid $1,250,000.00", ["1250000.00"]),
        ("items 1,2,3", ["1", "2", "3"]),  # not a thousands group
        ("3/4 of the pie", ["3/4"]),
        ("有５个苹果和12个梨", ["5", "12"]),  # full-width digit, CJK right before a digit
        ("−7 (unicode minus)", ["-7"]),
        ("version2 and H2O", []),  # digits glued to letters are not numbers
    ],
)
def test_find_numbers(text, expected):
    assert find_numbers(text) == expected


def test_parse_number_fractions_and_decimals():
    assert parse_number("1/2") == Fraction(1, 2)
    assert parse_number("0.5") == Fraction(1, 2)
    assert parse_number("-3/4") == Fraction(-3, 4)
    assert parse_number("5/0") is None
    assert parse_number("no digits") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("First 3 + 4 = 7. The answer is 12.", "12"),
        ("The answer is 12. Then 99 bottles.", "12"),  # marker beats the last number
        ("the answer is: $1,600.", "1600"),
        ("So he made a profit of $70,000.\n#### 70000", "70000"),
        ("The answer is 3. Wait, no. The answer is 4.", "4"),  # the last marker wins
        ("The temperature drops to -3. The answer is -3 degrees.", "-3"),
        ("所以一共 5 * 3 = 15 美元。答案是 15。", "15"),
        ("答案：２，５００元", "2500"),  # full-width digits and thousands separator
        ("We get \\boxed{42} in the end, after 7 steps", "42"),
        ("no marker, so the last number: 3 then 8", "8"),
        ("The answer is twelve. Earlier we had 11.", "11"),  # nothing after the marker
        ("nothing here", None),
    ],
)
def test_extract_final_number(text, expected):
    assert extract_final_number(text) == expected


@pytest.mark.parametrize(
    ("pred", "gold", "equal"),
    [
        ("1,000", "1000", True),
        ("18.00", "18", True),
        ("0.5", "1/2", True),
        ("-10", "-10", True),
        ("10", "-10", False),
        ("0.33", "1/3", False),  # no rounding slack beyond 1e-6
        ("12", "12.0000001", True),
        (None, "3", False),
    ],
)
def test_numbers_equal(pred, gold, equal):
    assert numbers_equal(pred, gold) is equal


def test_gsm8k_gold_strips_commas_and_reasoning():
    solution = "He spends 2*1,000=<<2*1000=2000>>2,000.\nThen 2,000+125=2,125\n#### 2,125"
    assert gsm8k_gold(solution) == "2125"
    assert gsm8k_gold("x\n#### -3") == "-3"


def test_score_numeric_reports_extraction():
    assert score_numeric("The answer is $1,250.", "1250") == {"accuracy": 1.0, "extracted": 1.0}
    assert score_numeric("The answer is 1251.", "1250") == {"accuracy": 0.0, "extracted": 1.0}
    assert score_numeric("I do not know.", "1250") == {"accuracy": 0.0, "extracted": 0.0}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("so $x = \\boxed{5}$.", "5"),
        ("first \\boxed{1}, finally \\boxed{\\frac{1}{2}} done", "\\frac{1}{2}"),
        (
            "nested \\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}.",
            "\\left( 3, \\frac{\\pi}{2} \\right)",
        ),
        ("\\fbox{7}", "7"),
        ("The answer is \\boxed 9.", "9"),
        ("unclosed \\boxed{3 and then", None),
        ("no box here", None),
    ],
)
def test_last_boxed(text, expected):
    assert last_boxed(text) == expected


@pytest.mark.parametrize(
    ("pred", "gold", "equal"),
    [
        ("\\frac{1}{2}", "\\frac12", True),
        ("1/2", "\\frac{1}{2}", True),  # \frac vs /
        ("0.5", "\\frac{1}{2}", True),  # fraction vs decimal
        ("\\dfrac{14}{3}", "\\frac{14}{3}", True),
        ("(3,\\pi/2)", "\\left( 3, \\frac{\\pi}{2} \\right)", True),
        ("2\\sqrt{13}", "3\\sqrt{13}", False),
        ("\\text{Evelyn}", "\\text{Evelyn}", True),  # non-math answers fall back to text
        ("\\text{Evelyn}", "\\text{Bob}", False),
        ("x^2+2x+1", "(x+1)^2", True),
        ("-\\frac{\\pi}{6}", "\\frac{\\pi}{6}", False),
        (None, "1", False),
    ],
)
def test_math_equal(pred, gold, equal):
    assert math_equal(pred, gold) is equal


def test_score_boxed_with_text_around_the_box():
    out = "We compute $a=3$ and $b=4$, so the hypotenuse is $\\boxed{5}$. Checking: 25=9+16."
    assert score_boxed(out, "5") == {"accuracy": 1.0, "extracted": 1.0}
    assert score_boxed("The answer is 5.", "5") == {"accuracy": 0.0, "extracted": 0.0}
    assert score_boxed("$\\boxed{6}$", "5")["accuracy"] == 0.0
