"""pytest set-up: most tests open pools in a temporary directory on whatever this machine
has, so each read-write open in mode "adr" off persistent memory warns (a
``pmkv.DurabilityWarning``). Those warnings are ignored here; the test of the warning
records it itself (``pytest.warns``)."""


def pytest_configure(config):
    config.addinivalue_line("filterwarnings", "ignore::pmkv.DurabilityWarning")
