"""`ralm run` (``run_command``: the whole pipeline on your own corpus and eval text) and `ralm demo`
(``demo_command``: the same on real offline assets, its presets in ``presets``).

Kept free of imports so ``import ralm.demo`` stays cheap; import the submodules by full path.
"""
