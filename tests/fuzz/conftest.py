"""The fuzz tests (their helpers: ``tests.fuzz.fuzz_support``, ``tests.fuzz.config_documents``)."""
