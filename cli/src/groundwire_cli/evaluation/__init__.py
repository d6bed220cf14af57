"""`groundwire eval retrieval`: a retrieval ablation on any BEIR-format folder.

The run goes through the real services, exactly as the product uses them: the
embedder and the retriever (and the reranker, when a model is given) start as child
processes on a fresh, temporary store; the corpus goes in through the retriever's
streaming ``Ingest`` as plain-text documents (source id = the BEIR ``_id``, title =
its title); every query is embedded through the embedder and searched through the
retriever's ``Search`` once per configuration of the ablation.

The retriever returns chunks; a document ranks where its best chunk ranks. Rankings
are scored with ir-measures (nDCG@10, R@100 and RR@10, i.e. MRR@10) on a dev part of
the queries (chosen by a hash of the query id, so it never changes) and on all of
them; the rest (the "tune" part) is where the weighted fusion's weights are chosen.

Layout of a BEIR folder: ``corpus.jsonl`` (``_id``, ``title``, ``text``),
``queries.jsonl`` (``_id``, ``text``) and ``qrels/<split>.tsv`` (``query-id``,
``corpus-id``, ``score``; a header line is optional).
"""
