"""Property-based checks of the Trainer's step loop against an independent reference (`series.py invariants`).

The worker runs inside the pinned venv with one transformers tree on PYTHONPATH. Its rooms:

- `draw.py`: the configurations Hypothesis draws (model, batch size, accumulation, data, fp16 and the injected
  infs, schedule, strategies, callbacks, resume) and the profiles;
- `models.py`: the tiny models and datasets, built in code (no download), which count their reads;
- `case.py`: one configuration run through the Trainer, observed by a harness callback (what each optimizer
  attempt saw, the events, the logs, the checkpoints), then resumed when the configuration says so;
- `contract.py`: the contract of the step loop simulated on its own (standard library): each attempt's window from
  the sampler order, which attempts are applied, the callback events, logs, evaluations and saves, the end;
- `mutants.py`: the checker's own mutation check (standard library): plausible bugs of the series, one per claim;
- `reference.py`: what is expected, computed without the Trainer: a plain PyTorch gradient and loss of each
  window, closed-form learning rates, counts of the faults the harness injected, the bound on reads;
- `judges.py`: the invariants, one function each, which compare an observation with the reference;
- `declared.py`: the declared limitations (invariant, tree, configuration predicate, reason);
- `search.py`: the Hypothesis search that finds and shrinks a violation of each invariant;
- `report.py`: the lines a violation prints, the replay command, the JSON the tool reads;
- `__main__.py`: the worker's command line (`python -m invariants`).
"""
