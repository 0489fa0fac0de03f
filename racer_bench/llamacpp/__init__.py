"""llama.cpp through llama-cpp-python: the engine people run on a CPU, beside our own loop.

Nothing here imports ``llama_cpp`` at module level (CI does not build it): only the functions
that load a model do, after :func:`.compat.require` has said in one line how to install it.

* :mod:`.compat` -- the supported llama-cpp-python, the install line, which models have a GGUF,
  and the checks a run gets before anything loads.
* :mod:`.bufts` -- whether llama.cpp's extra buffer types (weight repacking) are safe here: a
  child process loads the GGUF and decodes a few tokens first; the verdict is cached.
* :mod:`.probe` -- that child process.
* :mod:`.engine` -- one ``llama_cpp.Llama`` and a greedy generation with the harness's stop rule.
* :mod:`.exactness` -- whether a batched eval gives the logits of one-token evals.
* :mod:`.drafts` -- llama-cpp-python's draft-model hook around our drafters (chains) or
  llama.cpp's own prompt lookup, with per-step notes for the records.
* :mod:`.peers` -- ``method=llamacpp_lookup``: llama-cpp-python's ``LlamaPromptLookupDecoding``.
* :mod:`.reference` -- ``reference=llamacpp``: llama.cpp's AR timed in the native rotation
  (:func:`.reference.register`, called by cli.py, makes the native runner know it).
* :mod:`.offline` -- ``backend=llamacpp``: llama.cpp's AR against the method inside llama.cpp.
"""
