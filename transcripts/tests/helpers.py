"""Helpers of the transcripts tests (and of the tests above them that drive extraction)."""


def memory_role(base_url: str, **overrides) -> dict:
    return {
        "provider": "custom",
        "base_url": base_url,
        "model": "fake-model",
        "api_key_env": "",
        "location": "local",
        "response_format": "json_schema",
        **overrides,
    }
