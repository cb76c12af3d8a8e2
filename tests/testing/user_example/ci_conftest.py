from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None)
settings.load_profile("ci")
