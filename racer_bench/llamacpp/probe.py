"""The child process of :mod:`.bufts`: load a GGUF with llama.cpp's extra buffer types on (its
default) and decode a few tokens; print one JSON line, ``{"ok": true, ...}``, when all went well.

``python -m racer_bench.llamacpp.probe <gguf> <threads> <tokens>``; it imports nothing of the
harness but this package's empty ``__init__``, so it starts in well under a second. A crash (a
signal), an exception (non-zero exit) or a hang (the parent's time limit) is the parent's
verdict to draw.
"""

from __future__ import annotations

import json
import sys
import time


def probe(gguf: str, threads: int, tokens: int) -> dict[str, object]:
    """Load with the default model parameters, prefill 8 tokens, decode ``tokens`` greedily."""
    import llama_cpp

    start = time.perf_counter()
    llm = llama_cpp.Llama(gguf, n_ctx=128, n_threads=threads, n_threads_batch=threads,
                          verbose=True)  # fmt: skip
    vocab = llm.n_vocab()
    prompt = [i % vocab for i in range(1, 9)]
    out = []
    for token in llm.generate(prompt, temp=0.0, repeat_penalty=1.0):
        out.append(int(token))
        if len(out) >= tokens:
            break
    llm.close()
    return {"ok": True, "tokens": out, "seconds": round(time.perf_counter() - start, 3)}


def main(argv: list[str]) -> None:
    gguf, threads, tokens = argv[0], int(argv[1]), int(argv[2])
    print(json.dumps(probe(gguf, threads, tokens)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
