"""Every table of the retriever, imported here so that ``Base.metadata`` knows them all
(the migrations' env.py and the tests import this module)."""

from __future__ import annotations

from groundwire_retriever.db import jobs  # noqa: F401  (retriever_jobs and its rows)
