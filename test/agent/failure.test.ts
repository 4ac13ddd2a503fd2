// The provider failure table: what each kind of failure IS, decided from what the call
// proved. The HTTP loop retries only "transient"; the turn settles and tells by it.
import { describe, expect, test } from "bun:test";
import { classifyFailure, coolingReason, worthFallback, type FailureClass } from "../../src/agent/providers/failure.ts";
import type { ProviderErrorKind } from "../../src/agent/providers/contract.ts";
import { redactor } from "../../src/agent/providers/redact.ts";

describe("classifyFailure", () => {
  test.each([
    // kind, status, body, class
    ["http", 400, '{"error":{"message":"Invalid schema for function work_create"}}', "permanent"],
    ["http", 400, '{"error":{"code":"context_length_exceeded","message":"maximum context length is 8192 tokens"}}', "context_too_long"],
    ["http", 400, '{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}', "context_too_long"],
    ["http", 413, "request_too_large", "context_too_long"],
    ["http", 401, "Incorrect API key provided", "permanent"],
    ["http", 403, "model access denied", "permanent"],
    ["http", 404, "The model `gpt-9` does not exist", "permanent"],
    ["http", 422, "unprocessable", "permanent"],
    ["http", 408, "", "transient"],
    ["http", 409, "conflict, try again", "transient"],
    ["http", 425, "", "transient"],
    ["http", 429, "rate limit", "transient"],
    ["http", 500, "internal", "transient"],
    ["http", 500, "the prompt exceeds the context window of this model", "context_too_long"],
    ["http", 502, "bad gateway", "transient"],
    ["http", 503, "", "transient"],
    ["http", 529, "overloaded_error", "transient"],
    ["timeout", null, "no answer within 90000 ms", "transient"],
    ["network", null, "ECONNREFUSED", "transient"],
    ["cooling", null, "all keys cooling after a rate limit", "transient"],
    ["bad_response", null, "response is not JSON: <html>", "permanent"],
    ["config", null, "api_keys is empty", "permanent"],
    ["aborted", null, "cancelled by the caller", "cancelled"],
  ] as const)("%s %p %p → %s", (kind, status, body, want) => {
    expect(classifyFailure({ kind: kind as ProviderErrorKind, status, body })).toBe(want as FailureClass);
  });
});

describe("coolingReason: which answers rest the key fleet-wide", () => {
  test.each([
    // kind, status, retry-after, body, reason
    ["http", 429, null, "rate limit", "429 rate limited"],
    ["http", 429, "30", '{"error":{"code":"insufficient_quota"}}', "429 rate limited, Retry-After 30"],
    ["http", 529, null, "overloaded_error", "529 overloaded"],
    ["http", 529, "12", "overloaded_error", "529 overloaded, Retry-After 12"],
    ["http", 503, "20", "maintenance", "503, Retry-After 20"],
    ["http", 503, null, "", null],
    ["http", 500, null, "internal", null],
    ["http", 502, " ", "bad gateway", null],
    ["http", 500, "5", "the prompt exceeds the context window of this model", null],
    ["http", 401, "30", "Incorrect API key provided", null],
    ["http", 400, "30", "bad request", null],
    ["timeout", null, null, "no answer", null],
    ["network", null, null, "ECONNREFUSED", null],
    // No request was made: nothing new to rest the key for.
    ["cooling", null, null, "all keys cooling", null],
  ] as const)("%s %p Retry-After %p %p → %p", (kind, status, retry_after, body, want) => {
    expect(coolingReason({ kind: kind as ProviderErrorKind, status, body, retry_after })).toBe(want);
  });
});

describe("worthFallback", () => {
  test.each([
    ["transient", 503, true],
    ["transient", null, true],
    ["permanent", 401, true],
    ["permanent", 403, true],
    ["permanent", 404, true],
    ["permanent", 400, false],
    ["permanent", null, false],
    ["context_too_long", 400, false],
    ["cancelled", null, false],
  ] as const)("%s %p → %p", (cls, status, want) => {
    expect(worthFallback(cls, status)).toBe(want);
  });
});

describe("redactor", () => {
  const r = redactor(["sk-live-0123456789abcdef", "short", "tok_admin_987654321"]);
  test.each([
    ["Incorrect API key provided: sk-live-0123456789abcdef.", "Incorrect API key provided: [redacted]."],
    ["key sk-live-0*********cdef refused", "key [redacted]0*********cdef refused"],
    ["Authorization: Bearer abcdefghijklmnop", "Authorization: Bearer [redacted]"],
    ["token tok_admin_987654321 seen", "token [redacted] seen"],
    ["a short word stays", "a short word stays"],
  ])("%p → %p", (input, want) => {
    expect(r(input)).toBe(want);
  });
});
