"""The :class:`Table` every table builder returns, and its Markdown and LaTeX forms."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Table:
    """A rendered-agnostic table: header, rows of cell strings, notes printed below it."""

    key: str
    title: str
    header: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)


def to_markdown(table: Table) -> str:
    """A Markdown section: title, pipe table, notes."""
    lines = [
        f"### {table.title}",
        "",
        "| " + " | ".join(table.header) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(table.header))) + "|",
    ]
    lines += [
        "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in table.rows
    ]
    lines += ["", *[f"- {note}" for note in table.notes]]
    return "\n".join(lines) + "\n"


LATEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "_": r"\_",
    "#": r"\#",
    "$": r"\$",
    "{": r"\{",
    "}": r"\}",
    "×": r"$\times$",
    "→": r"$\rightarrow$",
    "≈": r"$\approx$",
    "Δ": r"$\Delta$",
    "−": r"$-$",
    "–": "--",
    "τ": r"$\tau$",
    "≥": r"$\geq$",
    ">": r"$>$",
    "·": r"$\cdot$",
}


def latex_escape(text: str) -> str:
    """``text`` with LaTeX's special characters and the symbols the tables use escaped."""
    return "".join(LATEX_ESCAPES.get(ch, ch) for ch in text)


def to_latex(table: Table) -> str:
    """A booktabs ``table`` environment with the notes below the tabular."""
    spec = "l" + "r" * (len(table.header) - 1)
    lines = [
        f"% {table.key}",
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(latex_escape(h) for h in table.header) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(latex_escape(c) for c in row) + r" \\" for row in table.rows]
    lines += [
        r"\bottomrule",
        r"\end{tabular}",
        rf"\caption{{{latex_escape(table.title)}}}",
        rf"\label{{tab:{table.key}}}",
    ]
    lines += [rf"\par\smallskip{{\footnotesize {latex_escape(n)}\par}}" for n in table.notes]
    return "\n".join([*lines, r"\end{table}"]) + "\n"
