"""`ralm train`: the predictive reranker trained on `ralm data-gen` output (In-Context RALM §6.2), its
checkpoint selection and the export decision. The model it trains, its inference and its export are
``ralm.rerank``, which imports nothing from here."""
