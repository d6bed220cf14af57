"""The pieces of ``benchmarks/load_report.py``, one idea each: ``inputs`` (model,
corpus and questions), ``fake_llm`` (the fake LLM process), ``machine``, ``locust_step``
(one concurrency step), ``warm_up``, ``throughput`` (per-replica model throughput),
``report`` (table and chart), ``topology`` (extra gateway and orchestrator processes),
``capacity`` (requests/s per core and per CPU-second, the saturation point) and ``runs``
(the sweep and the throughput-only run).

Scripts in ``benchmarks/`` run with that folder first on ``sys.path``, so this package
imports as ``loadrun``.
"""
