"""Offline (snapshot) mechanisms on the same privacy core as the stream engine (spec §6–§9).

* :mod:`privacy.offline.hhh_offline` — non-streaming DP-HHH (Algorithm 1, corrected), the
  per-level stability-histogram baseline, and a planner that picks between them;
* :mod:`privacy.offline.inftda` — InfTDA: integer, non-negative, consistent hierarchical counts
  under zCDP (TopDown with IntOPT);
* :mod:`privacy.offline.ldp` and :mod:`privacy.offline.ahead` — local-DP frequency oracles
  (OUE, GRR) and AHEAD range queries (1-D, 2-D, higher dimensions by LLE), with HIO and Uni
  baselines;
* :mod:`privacy.offline.lue_dptree` — LUE-DPTree: optimal non-uniform budgets on arbitrary
  interval trees and BLUE consistency, for range queries.

Every mechanism draws its noise from :mod:`privacy.noise` through :mod:`privacy.randomness`
(secure by default; tests inject seeded sources). No printed value carries continuous
floating-point noise (Mironov 2012; spec §3 "Integer counts"): central-model releases are integers
(discrete Laplace or discrete Gaussian on integer counts), local-model reports are bits or
integers, and every float in an output is post-processing of those. The one continuous sampler in
use, Algorithm 1's selection noise, only feeds a comparison (see
:mod:`privacy.offline.hhh_algorithm1`).
"""
