"""The whole pipeline as one command: `ralm run` (``run_command``, your own corpus and eval text) over the
stage plan (``plan``: each stage's typed arguments, ``stage_arguments``), the stage runner (``stages``), the
scales (``scale``), the held-out rule (``held_out``), the bf16 check (``dtype_check``) and the report
(``report``, ``verdicts``).
`ralm demo` (``ralm.demo``) is this pipeline on offline presets.

Kept free of imports so ``import ralm.pipeline`` stays cheap; import the submodules by full path.
"""
