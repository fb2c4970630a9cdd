"""The official `openai` package, unchanged, against Tally's AI gateway (scripts/openai-client runs it).

Environment: TALLY_AI_BASE_URL (the server's /v1/ai), TALLY_TOKEN (a user's access token, used as the API key),
DEV_LLM_URL (the local model's root, to script a mid-stream failure), POOR_TOKEN (a user with no tokens), IMAGE_PATH (a
640×480 JPEG, asked about on the model `vision`, whose `images:` rule is OpenAI's tiles).
"""
import base64
import json
import os
import sys
import urllib.request

import openai

base_url = os.environ["TALLY_AI_BASE_URL"]
client = openai.OpenAI(base_url=base_url, api_key=os.environ["TALLY_TOKEN"], max_retries=0)
messages = [{"role": "user", "content": "What do the stars say today?"}]
failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


# Not streamed: OpenAI's answer object, usage, and the charge in Tally-Charge.
raw = client.chat.completions.with_raw_response.create(model="chat", messages=messages, max_tokens=20)
answer = raw.parse()
charge = json.loads(raw.headers["tally-charge"])
check(bool(answer.choices[0].message.content), "a non-streamed answer has content")
check(answer.usage is not None and answer.usage.completion_tokens > 0, "and usage")
check(charge["charged"] >= 1 and charge["wallet"]["held"] == 0, "Tally-Charge reports the charge and the wallet")

# Streamed: chunk by chunk, the same text; no usage chunk unless asked, then one.
chunks = list(client.chat.completions.create(model="chat", messages=messages, max_tokens=20, stream=True))
text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
check(len(chunks) > 3, f"a streamed answer comes in chunks ({len(chunks)})")
check(text == answer.choices[0].message.content, "with the same text as the non-streamed one")
check(all(chunk.usage is None for chunk in chunks), "and no usage chunk when not asked")
with_usage = list(client.chat.completions.create(
    model="chat", messages=messages, max_tokens=20, stream=True, stream_options={"include_usage": True}))
check(with_usage[-1].usage is not None and not with_usage[-1].choices, "the usage chunk when asked")

# The async client streams too.
import asyncio


async def stream_async():
    async_client = openai.AsyncOpenAI(base_url=base_url, api_key=os.environ["TALLY_TOKEN"], max_retries=0)
    parts = []
    async for chunk in await async_client.chat.completions.create(model="chat", messages=messages, max_tokens=20, stream=True):
        if chunk.choices:
            parts.append(chunk.choices[0].delta.content or "")
    await async_client.close()
    return "".join(parts)


check(asyncio.run(stream_async()) == text, "AsyncOpenAI streams the same text")

# Errors are the library's own exceptions.
try:
    client.chat.completions.create(model="nope", messages=messages)
    check(False, "an unknown model raises NotFoundError")
except openai.NotFoundError as error:
    check(error.code == "unknown_model" or "unknown_model" in str(error.body), f"an unknown model raises NotFoundError ({error.code})")
poor = openai.OpenAI(base_url=base_url, api_key=os.environ["POOR_TOKEN"], max_retries=0)
try:
    poor.chat.completions.create(model="chat", messages=messages)
    check(False, "an empty wallet raises APIStatusError 402")
except openai.APIStatusError as error:
    check(error.status_code == 402 and "insufficient_tokens" in str(error.body), f"an empty wallet raises APIStatusError 402 ({error.status_code} {error.body})")
bad = openai.OpenAI(base_url=base_url, api_key="not-a-token", max_retries=0)
try:
    bad.chat.completions.create(model="chat", messages=messages)
    check(False, "a wrong key raises AuthenticationError")
except openai.AuthenticationError:
    check(True, "a wrong key raises AuthenticationError")

# A field that could cost more than the hold (here priority processing) is refused by name, nothing held.
try:
    client.chat.completions.create(model="chat", messages=messages, service_tier="priority")
    check(False, "a field the gateway does not take raises BadRequestError")
except openai.BadRequestError as error:
    check("'service_tier'" in str(error.body), f"a field the gateway does not take raises BadRequestError naming it ({error.body})")

# A stream that fails after its 200 raises in the loop (the gateway's OpenAI-shaped error event), not a silent end.
script = json.dumps({"behaviours": [{"failAfterChunks": 3}]}).encode()
urllib.request.urlopen(urllib.request.Request(
    os.environ["DEV_LLM_URL"] + "/dev/script", data=script, headers={"Content-Type": "application/json"}))
received = 0
try:
    for chunk in client.chat.completions.create(model="chat", messages=messages, max_tokens=20, stream=True):
        received += 1
    check(False, "a stream cut mid-way raises APIError")
except openai.APIError as error:
    check(received >= 1, f"a stream cut mid-way raises APIError after {received} chunks: {error}")

# A question about a photo, as OpenAI documents it (a base64 data: URL in an image_url part), on a model with `images:`:
# the image is priced from its header by the tile rule (640×480: 85 + 170 × 2 tiles = 425 prompt tokens), the local
# model bills the same and says what it sees, and the charge is the model's price of the provider's usage.
question = "What is in this picture?"
photo = "data:image/jpeg;base64," + base64.b64encode(open(os.environ["IMAGE_PATH"], "rb").read()).decode()
plain_raw = client.chat.completions.with_raw_response.create(
    model="vision", messages=[{"role": "user", "content": [{"type": "text", "text": question}]}], max_tokens=20)
plain_charge = json.loads(plain_raw.headers["tally-charge"])
image_raw = client.chat.completions.with_raw_response.create(model="vision", max_tokens=20, messages=[{"role": "user", "content": [
    {"type": "text", "text": question}, {"type": "image_url", "image_url": {"url": photo, "detail": "auto"}}]}])
image_answer = image_raw.parse()
image_charge = json.loads(image_raw.headers["tally-charge"])
check("640×480" in (image_answer.choices[0].message.content or ""), f"the answer about the photo names its size ({image_answer.choices[0].message.content!r})")
check(image_answer.usage.prompt_tokens == image_charge["prompt_tokens"], "the charge counts the provider's usage")
check(image_charge["prompt_tokens"] - plain_charge["prompt_tokens"] == 425,
      f"the image is 425 prompt tokens, the tile rule's for 640×480 ({image_charge['prompt_tokens']} - {plain_charge['prompt_tokens']})")
prompt, completion = image_charge["prompt_tokens"], image_charge["completion_tokens"]
price = -(-(prompt * 50 + completion * 100) // (100 * 50))  # prompt/100 + completion/50 credits, rounded up once
check(image_charge["charged"] == price and image_charge["wallet"]["held"] == 0,
      f"and it is charged at the model's price: {image_charge['charged']} == {price}")

print(f"openai {openai.__version__}: {'all checks passed' if not failures else str(len(failures)) + ' failed'}")
sys.exit(1 if failures else 0)
