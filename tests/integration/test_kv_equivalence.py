"""After a tree forward + commit, the next logits equal a fresh full forward's."""

from __future__ import annotations

import torch

from racer_bench.engine.structs import Draft


def test_tree_forward_commit_matches_full_forward(tiny_target):
    prompt = list(b"equivalence check prompt")
    target = tiny_target
    target.prefill(prompt[:-1])
    root = prompt[-1]
    # root -> 10 -> 11 -> 12 ; root -> 20 -> 21 ; 10 -> 30
    draft = Draft(
        tokens=torch.tensor([10, 20, 11, 21, 12, 30]),
        parents=torch.tensor([-1, -1, 0, 1, 2, 0]),
    )
    past = target.length
    out = target.forward_tree(root, draft)
    # every node's logits equal the full forward over its root path
    for node, path in [(4, [10, 11, 12]), (3, [20, 21]), (5, [10, 30])]:
        full = target.full_logits(prompt + path)[-1]
        torch.testing.assert_close(out.logits[node + 1], full, rtol=0, atol=1e-9)
    target.commit(past, [1, 3])  # accept 20 -> 21
    committed = [*prompt, 20, 21]
    assert target.length == len(committed)
    nxt = target.forward_tree(77, Draft.empty()).logits[0]
    torch.testing.assert_close(nxt, target.full_logits([*committed, 77])[-1], rtol=0, atol=1e-9)


def test_commit_of_nothing_keeps_only_the_root(tiny_target):
    prompt = list(b"abc")
    tiny_target.prefill(prompt)
    past = tiny_target.length
    tiny_target.forward_tree(5, Draft.chain([6, 7, 8]))
    tiny_target.commit(past, [])
    assert tiny_target.length == past + 1
    nxt = tiny_target.forward_tree(9, Draft.empty()).logits[0]
    torch.testing.assert_close(nxt, tiny_target.full_logits([*prompt, 5, 9])[-1], rtol=0, atol=1e-9)
