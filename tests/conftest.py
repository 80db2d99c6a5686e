"""Settings for the whole suite.

Hypothesis times each example (200 ms by default) and checks that generating data is not too slow.
Both measure the machine, not callbound: under ``pytest -n auto`` on a shared two-core machine an
example can take longer than that for no fault of the code, and the test fails by chance. Timings are
benchmarks' job (bench/), never assertions in tests; a test's own ``@settings`` still wins where it
sets these.
"""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "callbound", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile("callbound")
