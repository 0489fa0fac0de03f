"""What the model drafters (Medusa, EAGLE-3, DSpark) share: the head, loaded from a checkpoint
or built at random on the first features, and the target features still to be consumed."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch import nn

from methods.common.heads.layers import for_inference
from racer_bench.config.run import Engine
from racer_bench.config.schema import NonNegativeInt, Seed
from racer_bench.engine.drafter import DrafterNeeds
from racer_bench.engine.structs import Draft, DraftContext, Feedback
from racer_bench.models.checksums import content_sha256

RANDOM_LAYERS = (0, 1, -1)  # valid for any target with at least one layer
Propose = Callable[[Any, DraftContext], Draft]


def on_feature_device(propose: Propose) -> Propose:
    """Run a head drafter's ``propose`` on the device of the target's features (torch's default
    device there, so the positions, masks and indices the heads make as they go land beside the
    head) and hand the draft back on the CPU, as every other drafter does. On the CPU nothing
    is entered: a default-device mode costs Python time on every torch call."""

    @functools.wraps(propose)
    def wrapped(self: HeadDrafter, ctx: DraftContext) -> Draft:
        feats = ctx.hidden if ctx.hidden is not None else self._pending
        if feats is not None:
            self._device = feats.device
        if self._device.type == "cpu":
            return propose(self, ctx)
        with torch.device(self._device):
            draft = propose(self, ctx)
        moved = {f.name: getattr(draft, f.name).cpu() for f in dataclasses.fields(draft)
                 if isinstance(getattr(draft, f.name), torch.Tensor)}  # fmt: skip
        return dataclasses.replace(draft, **moved)

    return wrapped


class HeadDrafter:
    """Base of the model drafters; a subclass supplies the head and what it does with features.

    Subclasses implement :meth:`_load_head` (checkpoint -> module), :meth:`_random_head`
    (feature width -> module, ``checkpoint: null``), :meth:`_consume` (features of committed
    positions) and :meth:`_reset_state`, and call :meth:`_catch_up` first in ``propose``.
    """

    random_layers: ClassVar[tuple[int, ...]] = RANDOM_LAYERS  # () = the final normed state

    def __init__(
        self,
        vocab_size: int,
        checkpoint: str | None,
        feature_layers: list[NonNegativeInt] | None,
        seed: Seed,
        engine: Engine,
    ) -> None:
        self.vocab_size, self.seed, self.engine = vocab_size, seed, engine
        self.head: Any = None
        self._device = torch.device("cpu")  # the features' device, known from the first ones
        layers = tuple(feature_layers) if feature_layers else self.random_layers
        self.checkpoint_sha256: str | None = None  # which weights, for the run's manifest
        if checkpoint is not None:
            self.head = for_inference(self._load_head(checkpoint), engine)
            self.checkpoint_sha256 = content_sha256(checkpoint)
            layers = tuple(feature_layers or self._checkpoint_layers())
        self.needs = DrafterNeeds(hidden_states=True, hidden_layers=layers, backends=("native",))
        self.reset([], None)

    def _load_head(self, checkpoint: str) -> nn.Module:
        raise NotImplementedError

    def _random_head(self, feature_size: int) -> nn.Module:
        raise NotImplementedError

    def _checkpoint_layers(self) -> tuple[int, ...]:
        """The feature layers a loaded head was trained on."""
        return tuple(self.head.cfg["feature_layers"])

    def _consume(self, feats: torch.Tensor, tokens: list[int]) -> None:
        """Take in features FloatTensor[n, F] of committed positions, each followed by its token
        in ``tokens`` (the last ``n`` committed tokens)."""
        raise NotImplementedError

    def _reset_state(self) -> None:
        raise NotImplementedError

    def reset(self, prompt_ids: list[int], prompt_topk: torch.Tensor | None) -> None:
        self._pending: torch.Tensor | None = None  # features not consumed yet [n, F]
        self._reset_state()

    def _catch_up(self, ctx: DraftContext) -> None:
        """Consume the features committed since the last draft (the prompt's on the first);
        without a checkpoint, the random head is built on the first ones."""
        if ctx.hidden is not None:
            self._pending = ctx.hidden
        if self._pending is not None:
            device = self._pending.device
            if self.head is None:
                head = self._random_head(self._pending.shape[-1]).to(device)
                self.head = for_inference(head, self.engine)
            self._place_head(device)
            self._consume(self._pending, ctx.tokens[-len(self._pending) :])
            self._pending = None

    def _place_head(self, device: torch.device) -> None:
        """Move the head to the target's device, which only its first features tell (a head
        loaded at construction is on the CPU)."""
        param = next(self.head.parameters(), None)
        if param is not None and param.device != device:
            self.head.to(device)

    def update(self, fb: Feedback) -> None:
        if fb.hidden is not None:
            rows = [0, *(i + 1 for i in fb.accepted)]  # the root and every accepted node
            self._pending = fb.hidden[rows]
