"""Clouds a provider's api may run on (catalog `cloud`: Amazon Bedrock, Google Vertex AI, Azure OpenAI;
docs/clouds.md). Each cloud is one package here whose `__init__.py` holds its `CloudDescriptor` (`base.py`) as
`CLOUD`, beside the adapters that build the cloud's SDK client; `registry.py` lists them in `CLOUDS`. No code
outside this folder has a case for one cloud: the catalog checks a provider's `cloud` object against its
descriptor, the provider registry builds its adapter from it, start-up lines and demo mode read it.

A descriptor module imports no SDK and nothing of the catalog (the catalog imports every descriptor); its
adapters are imported when a provider on the cloud is built."""
