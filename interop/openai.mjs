#!/usr/bin/env node
// openai.mjs drives Orrery's /v1 with the official `openai` npm SDK, its
// retries left at their default (2):
//
//   node openai.mjs --url http://127.0.0.1:PORT --model MODEL
//
// It asks for a chat completion whose turn fails, then for a model that
// does not exist, and prints one JSON line with the error each gave
// (status, code, type, message, and the x-should-retry header).

import { parseArgs } from "node:util";
import OpenAI from "openai";

const { values } = parseArgs({ options: { url: { type: "string" }, model: { type: "string" } } });
const client = new OpenAI({ baseURL: values.url + "/v1", apiKey: "unused-on-loopback" });

const caught = async (fn) => {
  try {
    await fn();
    return { ok: true };
  } catch (err) {
    if (!(err instanceof OpenAI.APIError)) throw err;
    return { status: err.status, code: err.code, type: err.type, message: err.message, shouldRetry: err.headers?.get?.("x-should-retry") ?? null };
  }
};

const failed = await caught(() =>
  client.chat.completions.create({ model: values.model, messages: [{ role: "user", content: "do something with side effects" }] }),
);
const missing = await caught(() => client.models.retrieve("no-such-model"));
console.log(JSON.stringify({ failed, missing }));
