"""ralm: retrieval-augmented language modeling with frozen LMs (In-Context RALM and FLARE).

Stages live in subpackages: ``ralm.retrieval``, ``ralm.lm``, ``ralm.data_gen``, ``ralm.rerank``,
``ralm.eval``. Import them by full path (``from ralm.eval import ...``), never ``from ralm import eval``.
"""

__version__ = "0.1.0"
