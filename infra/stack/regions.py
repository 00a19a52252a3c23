"""Which provider regions lie in the EU, for `policy.residency: eu`."""
from __future__ import annotations

# EU member states (ISO 3166-1 alpha-2). The UK, Switzerland and Norway are not in the EU.
EU_COUNTRIES = {
    "at", "be", "bg", "hr", "cy", "cz", "dk", "ee", "fi", "fr", "de", "gr", "hu", "ie", "it",
    "lv", "lt", "lu", "mt", "nl", "pl", "pt", "ro", "sk", "si", "es", "se",
}
# Hyperscaler region codes and their country (AWS, Google Cloud, Azure public region lists).
KNOWN_REGIONS = {
    "eu-central-1": "de", "eu-central-2": "ch", "eu-west-1": "ie", "eu-west-2": "gb", "eu-west-3": "fr",
    "eu-north-1": "se", "eu-south-1": "it", "eu-south-2": "es",
    "europe-west1": "be", "europe-west2": "gb", "europe-west3": "de", "europe-west4": "nl",
    "europe-west6": "ch", "europe-west8": "it", "europe-west9": "fr", "europe-west10": "de",
    "europe-west12": "it", "europe-north1": "fi", "europe-southwest1": "es", "europe-central2": "pl",
    "westeurope": "nl", "northeurope": "ie", "francecentral": "fr", "germanywestcentral": "de",
    "swedencentral": "se", "italynorth": "it", "polandcentral": "pl", "spaincentral": "es",
    "uksouth": "gb", "switzerlandnorth": "ch", "norwayeast": "no",
    "us-east-1": "us", "us-east-2": "us", "us-west-1": "us", "us-west-2": "us",
    "us-central1": "us", "us-east4": "us", "us-east5": "us", "us-west1": "us", "us-west4": "us",
    "eastus": "us", "eastus2": "us", "westus2": "us", "westus3": "us", "southcentralus": "us",
    "ap-northeast-1": "jp", "ap-southeast-1": "sg", "asia-east1": "tw",
    # The catalog's GPU cloud (infra/sizing/catalog/providers.yaml).
    "es-madrid": "es", "fr-paris": "fr", "fi-helsinki": "fi",
}


def region_country(region: str) -> str | None:
    """The country of a known region code, else None. No guessing from the name's shape: with residency, a
    misspelt region (es-madird) must be refused, not placed by its first letters."""
    return KNOWN_REGIONS.get(region.strip().lower())


def in_eu(region: str, allowed: list[str]) -> bool | None:
    """True/False when known, None when the region cannot be placed (the user must list it)."""
    if region in allowed:
        return True
    country = region_country(region)
    return None if country is None else country in EU_COUNTRIES
