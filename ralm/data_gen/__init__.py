"""Self-supervised reranking data (`ralm data-gen`): for sampled prefixes of a training corpus, retrieve
BM25 candidates and score each with the frozen LM (In-Context RALM §6.2).

Modules, one job each:
``options`` (the command's own option groups: sampling, sharding), ``inputs`` (the index, the LM's input
length, the documents and the prefix sample, opened and checked before any scoring), ``prefixes``
(tokenize documents once, seeded sampling over stride boundaries), ``candidates`` (BM25 with
same-document exclusion), ``scoring`` (one prefix's candidates plus no retrieval in one scorer batch),
``generate`` (the run's settings, one shard's rows, every shard a process writes), ``schema`` (the
dataset's columns, format ``ralm-rerank-data/2``), ``metadata`` (the recorded config and metadata, and
mismatch messages), ``shards`` (shard plan, atomic shard files, resume), ``merge`` (join shards into the
final dataset), ``summary`` (end-of-run statistics), ``data_gen_command`` (the CLI).
"""
