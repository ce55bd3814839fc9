"""``skillgrad serve``: a configured model role behind a loopback endpoint that speaks the
coding agents' wire formats, so real agent CLIs run offline on skillgrad's models (the
rollout's forward pass, when the policy is an agent CLI instead of a chat call).

* :mod:`.wire` — what the formats share; one module per format: :mod:`.chat` (OpenAI Chat
  Completions: OpenCode, Copilot CLI), :mod:`.responses` (OpenAI Responses: Codex CLI),
  :mod:`.anthropic` (Anthropic Messages: Claude Code), :mod:`.gemini` (Gemini: Gemini CLI);
* :mod:`.scopes` — the rollout tag of a call, and the stage and journal it is metered and
  recorded under;
* :mod:`.app` — the Starlette app; the command line is ``skillgrad.cli.serve``.

Every call goes through the client layer (:class:`~skillgrad.models.client.ModelClient`:
meter, budget, cache, journal, replay, retries), so an agent's calls are counted and
recorded like any rollout's.

Why hand-written and not LiteLLM (the rule: evaluate LiteLLM before writing protocol
translation). Measured on this project's 2-core machine with LiteLLM 1.108.7, driving it
offline (``unshare -rn``) with a custom provider that stands in for skillgrad's client:

* Translations: Anthropic Messages (``litellm.anthropic.messages``) and Responses
  (``litellm.aresponses``) were complete in both directions, with tool calls, tool results and
  streaming. Gemini was not: ``litellm.google_genai.generate_content`` (and the proxy's
  ``/v1beta`` routes built on it) refuse a custom provider (``'sg' is not a valid
  LlmProviders``), so Gemini CLI would need a second, hand-written path anyway.
* Size: ``pip install litellm`` brings 60 packages, 381 MB (boto3, tokenizers,
  huggingface_hub, aiohttp, tiktoken ...); its proxy (``litellm[proxy]``, the part that is an
  HTTP server) 120 packages, 756 MB. Starlette and uvicorn are already the dashboard's.
* Import: ``import litellm`` takes 4-6 s and 197 MB (the proxy 9.7 s, 323 MB) against 0.5 s
  and 34 MB for Starlette + uvicorn + httpx; and at import it fetches its model price map
  from GitHub (retrying for several seconds offline) unless an environment variable is set.
* Shape: a custom provider is registered in a module-global list (``litellm.custom_provider_map``),
  against the house rule of no module-level state; the SDK gives event objects, not the
  SSE bytes, so the server, framing, tags and key check are ours either way.

The four formats and what they share are about 950 lines here, the app about 260, with no
dependency beyond the dashboard's.
"""
