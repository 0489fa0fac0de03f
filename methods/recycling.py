"""Token Recycling: draft from an adjacency matrix of the target's recent top-k candidates.

Paper: Luo et al., "Turning Trash into Treasure: Accelerating Inference of Large Language Models
with Token Recycling" (arXiv 2408.08696, ACL 2025). Reference code: Luowaterbi/TokenRecycling
(= Spec-Bench ``model/recycling``, ``evaluation/inference_recycling.py``). Behaviour followed:

* State: ``adj[vocab_size, topk]`` int64, initialised to zeros (an unseen token proposes token
  id 0). After every verification, row ``adj[t]`` is overwritten with the target's top-k after
  ``t`` for every tree token (root and every node, accepted or not); for duplicate tokens the
  last tree position wins.
* Draft: the static template "2.2.2" (80 nodes, depth 6) filled breadth-first, one vectorised
  gather per layer: ``tokens[layer] = adj[tokens[parent], column]``. ``Draft.rank`` is each
  node's column, ``Draft.score`` 1 / (1 + the columns summed along its path) (features for
  the confidence scheduler).
* ``persist_across_prompts``: the reference creates the matrix once per process and never resets
  it (warm across questions); here the default (false) resets it per prompt so results do not
  depend on prompt order. Set true for the reference behaviour.

Our additions, all off by default: smaller templates ``"bfs<n>"`` keep the first ``n`` nodes of
"2.2.2" in BFS order ((depth, path) order, so the result is closed under parents; "bfs16" is depth
2, "bfs32" depth 3); ``seed_from_prompt`` fills rows from the prompt's prefill top-k;
``skip_unwritten`` drops the nodes read from rows the target never wrote (the reference proposes
token 0 from them), which matters under ``scheduler=confidence``: filler nodes that always fail
would teach the scheduler that the whole tree fails, and it would stop verifying. The harness
prefills the whole prompt, while the reference forwards the last prompt token as its first
root; to keep the same information, the first draft after a reset first writes the row of
``tokens[-2]`` from ``DraftContext.root_topk`` (what the reference's first update writes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from racer_bench.config.schema import PositiveInt
from racer_bench.engine.drafter import DrafterNeeds
from racer_bench.engine.structs import Draft, DraftContext, Feedback, Source
from racer_bench.engine.tree import prune, select_nodes

# Reference template "2.2.2" (Spec-Bench model/recycling/tree_template_.py): each node is the path
# of top-k columns from the root; listed in (depth, lexicographic) order.
# fmt: off
TEMPLATE_2_2_2: tuple[tuple[int, ...], ...] = (
    (0,), (1,), (2,), (3,), (4,), (5,), (6,), (7,),
    (0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (0, 6), (0, 7), (1, 0), (1, 1), (1, 2), (1, 3),
    (2, 0), (2, 1), (2, 2), (3, 0), (3, 1), (4, 0), (5, 0), (6, 0), (7, 0),
    (0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 0, 3), (0, 0, 4), (0, 0, 5), (0, 0, 6), (0, 0, 7),
    (0, 1, 0), (0, 1, 1), (0, 1, 2), (0, 2, 0), (0, 2, 1), (0, 3, 0), (0, 4, 0), (0, 5, 0),
    (0, 6, 0), (0, 7, 0), (1, 0, 0), (1, 0, 1), (1, 1, 0), (2, 0, 0), (3, 0, 0), (4, 0, 0),
    (5, 0, 0),
    (0, 0, 0, 0), (0, 0, 0, 1), (0, 0, 0, 2), (0, 0, 0, 3), (0, 0, 0, 4), (0, 0, 1, 0),
    (0, 0, 1, 1), (0, 0, 2, 0), (0, 0, 3, 0), (0, 0, 4, 0), (0, 1, 0, 0), (0, 2, 0, 0),
    (1, 0, 0, 0), (2, 0, 0, 0), (3, 0, 0, 0),
    (0, 0, 0, 0, 0), (0, 0, 0, 0, 1), (0, 0, 0, 0, 2), (0, 0, 0, 1, 0), (0, 0, 0, 2, 0),
    (0, 0, 1, 0, 0), (0, 1, 0, 0, 0), (1, 0, 0, 0, 0),
    (0, 0, 0, 0, 0, 0), (0, 0, 0, 0, 0, 1), (0, 0, 0, 1, 0, 0),
)
# fmt: on


def template_paths(name: str) -> list[tuple[int, ...]]:
    """Node paths of a named template: ``"2.2.2"`` or ``"bfs<n>"`` (its first n BFS nodes)."""
    full = sorted(TEMPLATE_2_2_2, key=lambda p: (len(p), p))
    if name == "2.2.2":
        return full
    if name.startswith("bfs") and name[3:].isdigit() and 1 <= int(name[3:]) <= len(full):
        return full[: int(name[3:])]
    raise ValueError(f"method.template={name}: allowed are 2.2.2 and bfs1..bfs{len(full)}")


@dataclass(frozen=True)
class TreeTemplate:
    """A static tree as flat arrays (node ``i`` is flat position ``i + 1``; the root is 0).

    Attributes:
        parents: int64[N] parent node index, -1 for children of the root.
        columns: int64[N] top-k column of the parent's adjacency row that gives the node.
        layers: (start, end) node ranges of each depth, in depth order.
    """

    parents: np.ndarray
    columns: np.ndarray
    layers: tuple[tuple[int, int], ...]

    @classmethod
    def from_paths(cls, paths: Sequence[Sequence[int]]) -> TreeTemplate:
        """Build from paths listed in non-decreasing depth order, parents before children."""
        position = {(): -1}
        parents, columns = [], []
        for i, path in enumerate(paths):
            path = tuple(path)
            if path[:-1] not in position:
                raise ValueError(f"template path {path} comes before its parent")
            position[path] = i
            parents.append(position[path[:-1]])
            columns.append(path[-1])
        depths = [len(p) for p in paths]
        if depths != sorted(depths):
            raise ValueError("template paths must be in non-decreasing depth order")
        starts = [i for i in range(len(depths)) if i == 0 or depths[i] != depths[i - 1]]
        layers = tuple(zip(starts, [*starts[1:], len(depths)], strict=True))
        return cls(np.array(parents, dtype=np.int64), np.array(columns, dtype=np.int64), layers)

    def __len__(self) -> int:
        return len(self.parents)


def path_scores(template: TreeTemplate) -> np.ndarray:
    """float32[N]: 1 / (1 + sum of the top-k columns on the path from the root to each node).

    The nodes reached through top-1 entries only score 1; every lower-ranked step lowers it.
    """
    total = np.zeros(len(template), dtype=np.int64)
    for i, parent in enumerate(template.parents):
        total[i] = template.columns[i] + (total[parent] if parent >= 0 else 0)
    return (1.0 / (1.0 + total)).astype(np.float32)


def fill_tree(adj: np.ndarray, root: int, template: TreeTemplate) -> np.ndarray:
    """Token ids of the template's nodes: int64[N], one gather per layer.

    Args:
        adj: int64[V, k] adjacency matrix (row t = candidate successors of token t).
        root: the root token id.
        template: the static tree.
    """
    flat = np.empty(len(template) + 1, dtype=np.int64)
    flat[0] = root
    for start, end in template.layers:
        fathers = flat[template.parents[start:end] + 1]
        flat[start + 1 : end + 1] = adj[fathers, template.columns[start:end]]
    return flat[1:]


def informed_nodes(
    tokens: np.ndarray, root: int, template: TreeTemplate, written: np.ndarray
) -> list[int]:
    """Nodes whose every ancestor's row (the root's included) was written by the target.

    Args:
        tokens: int64[N] the filled template (:func:`fill_tree`).
        written: bool[V], rows of the adjacency matrix the target has filled.
    """
    ok = np.zeros(len(tokens), dtype=bool)
    for i, parent in enumerate(template.parents):
        father = root if parent < 0 else tokens[parent]
        ok[i] = written[father] and (parent < 0 or ok[parent])
    return np.flatnonzero(ok).tolist()


def update_adjacency(adj: np.ndarray, tokens: np.ndarray, topk: np.ndarray) -> None:
    """Overwrite ``adj[tokens[i]] = topk[i]``; for a repeated token the last row wins.

    Args:
        adj: int64[V, k] adjacency matrix, modified in place.
        tokens: int64[M] token ids (tree order: root, then nodes).
        topk: int[M, >=k] target top-k after each token.
    """
    # First occurrence in the reversed array = last occurrence in tree order.
    uniq, first_rev = np.unique(tokens[::-1], return_index=True)
    adj[uniq] = topk[len(tokens) - 1 - first_rev, : adj.shape[1]]


class TokenRecyclingDrafter:
    """Token Recycling drafter (adjacency matrix + static tree template)."""

    name: ClassVar[str] = "recycling"
    version: ClassVar[str] = "1"
    needs = DrafterNeeds(topk=8)

    def __init__(
        self,
        vocab_size: int,
        topk: PositiveInt = 8,
        template: str = "2.2.2",
        persist_across_prompts: bool = False,
        seed_from_prompt: bool = False,
        skip_unwritten: bool = False,
    ) -> None:
        self.template = TreeTemplate.from_paths(template_paths(template))
        if int(self.template.columns.max()) >= topk:
            raise ValueError(f"method.topk={topk} is narrower than template {template} needs")
        self.vocab_size = vocab_size
        self.topk = topk
        self.persist_across_prompts = persist_across_prompts
        self.seed_from_prompt = seed_from_prompt
        self.skip_unwritten = skip_unwritten
        self.needs = DrafterNeeds(topk=topk, prefill_topk=seed_from_prompt)
        self.capacity = len(self.template)
        self.adj = np.zeros((vocab_size, topk), dtype=np.int64)
        self.written = np.zeros(vocab_size, dtype=bool)  # rows the target has filled
        self._parents = torch.from_numpy(self.template.parents.copy())
        self._ranks = torch.from_numpy(self.template.columns.copy())
        self._scores = torch.from_numpy(path_scores(self.template))
        self._root = 0
        self._fresh = True

    def reset(self, prompt_ids: list[int], prompt_topk: torch.Tensor | None) -> None:
        if not self.persist_across_prompts:
            self.adj.fill(0)
            self.written.fill(False)
        if self.seed_from_prompt and prompt_topk is not None:
            tokens = np.asarray(prompt_ids, dtype=np.int64)
            update_adjacency(self.adj, tokens, prompt_topk.cpu().numpy())
            self.written[tokens] = True
        self._fresh = True

    def propose(self, ctx: DraftContext) -> Draft:
        if self._fresh and ctx.root_topk is not None and len(ctx.tokens) >= 2:
            self.adj[ctx.tokens[-2]] = ctx.root_topk.cpu().numpy()[: self.topk]
            self.written[ctx.tokens[-2]] = True
        self._root = ctx.root
        tokens = fill_tree(self.adj, ctx.root, self.template)
        n = len(tokens)
        draft = Draft(
            tokens=torch.from_numpy(tokens),
            parents=self._parents.clone(),
            source=torch.full((n,), int(Source.LOGITS), dtype=torch.int32),
            rank=self._ranks.clone(),
            score=self._scores.clone(),
        )
        if self.skip_unwritten:
            draft = select_nodes(
                draft, informed_nodes(tokens, ctx.root, self.template, self.written)
            )
        return prune(draft, ctx.budget, ctx.max_depth)

    def update(self, fb: Feedback) -> None:
        if fb.node_topk is None:
            return
        tokens = np.concatenate(([self._root], fb.draft.tokens.numpy()))
        update_adjacency(self.adj, tokens, fb.node_topk.cpu().numpy())
        self.written[tokens] = True
        self._fresh = False
