"""Languages and their PostgreSQL full-text configurations ('simple' for the rest)."""

TEXT_SEARCH_CONFIGS = {
    "ar": "arabic",
    "ca": "catalan",
    "da": "danish",
    "de": "german",
    "el": "greek",
    "en": "english",
    "es": "spanish",
    "eu": "basque",
    "fi": "finnish",
    "fr": "french",
    "ga": "irish",
    "hu": "hungarian",
    "hy": "armenian",
    "id": "indonesian",
    "it": "italian",
    "lt": "lithuanian",
    "ne": "nepali",
    "nl": "dutch",
    "no": "norwegian",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
    "yi": "yiddish",
}
LANGUAGE_CODE_REGEX = r"^[a-z]{2,3}$"


def text_search_config(language: str) -> str:
    """The PostgreSQL text search configuration for an ISO 639-1 code."""
    return TEXT_SEARCH_CONFIGS.get(language, "simple")
