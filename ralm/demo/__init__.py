"""`ralm demo` (``demo_command``): the pipeline (``ralm.pipeline``) on offline presets, its dev and test books
(``presets``) and texts (``assets``).

Kept free of imports so ``import ralm.demo`` stays cheap; import the submodules by full path.
"""
