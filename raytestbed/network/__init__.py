"""The network model: the one max-min allocator (``allocator.py``, its compiled kernels in
``waterfill.py``), coflow rate building blocks (``coflow_rates.py``) and per-iteration traffic
(``traffic.py``)."""

#: Relative tolerance of progressive filling (numpy and compiled alike): a link whose unused capacity is
#: at most ``RTOL * C_l`` counts as saturated, a flow within ``RTOL`` of its cap as capped.
RTOL = 1e-12
