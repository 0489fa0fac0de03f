"""A byte-level tokenizer with a trivial chat template, for the tiny random test model."""

from __future__ import annotations

from collections.abc import Sequence


class ByteTokenizer:
    """Bytes 0-255 are tokens 0-255; 256 = BOS, 257 = EOS, 258-259 spare specials."""

    bos_token_id = 256
    eos_token_id = 257
    pad_token_id = 258
    vocab_size = 260
    chat_template = "tiny"  # marks that apply_chat_template is available

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids = list(text.encode("utf-8"))
        return [self.bos_token_id, *ids] if add_special_tokens else ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        data = bytes(int(i) for i in ids if int(i) < 256)
        return data.decode("utf-8", errors="replace")

    def apply_chat_template(
        self,
        messages: list[dict[str, str]],
        add_generation_prompt: bool = True,
        tokenize: bool = False,
        **_: object,
    ) -> str | list[int]:
        text = "".join(f"<{m['role']}>{m['content']}\n" for m in messages)
        if add_generation_prompt:
            text += "<assistant>"
        return self.encode(text) if tokenize else text
