"""`ralm eval ppl`: strided In-Context RALM perplexity under a frozen LM (Ram et al. 2023, §4–6).

Modules from the command down: ``ppl_command`` (the command, its checks), ``options`` (its own option
groups: the reranker, the batches), ``chooser_loading`` (the choosers the options name), ``summary``
(what it prints at the end), ``run`` (one evaluation:
text, queries, candidates, then the engine; shared by sweeps), ``point`` (the condition engine: which LM
rows each window needs, scored once), ``conditions`` (the typed conditions, their plan and pick),
``choosers`` (models that choose before the LM scores: trained and zero-shot rerankers), ``perplexity``
(a window's LM rows), ``windows`` (eval_lm.py's strided windows), ``compare`` and ``compare_stats``
(several conditions from one table, paired bootstrap CIs), ``sweep`` (several points, one retrieval pass),
``eval_text``, ``retrieval_cache`` and ``outputs`` (the files read and written).
"""
