"""Target models: the factories that ``conf/model/*.yaml`` name (:mod:`.loaders`), content
hashes of checkpoints (:mod:`.checksums`) and the byte tokenizer of the tiny test model
(:mod:`.tiny_tokenizer`). Records saved when the loaders were re-exported here resolve through
:mod:`racer_bench.config.legacy`."""
