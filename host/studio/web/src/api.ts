// The admin API as Studio calls it: same origin, JSON, and the admin token (when the operator gave one) as a
// bearer kept in the tab's session storage. No cookie carries it, so another site's page cannot make the
// browser send it; the server also refuses writes a browser marks `Sec-Fetch-Site: cross-site`.

const TOKEN_KEY = "flowhost-admin-token";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(ApiError.describe(status, body));
  }

  static describe(status: number, body: unknown): string {
    const error = (body as { error?: unknown } | null)?.error;
    if (typeof error === "string") return error;
    if (error && typeof error === "object" && "message" in error) return String((error as { message: unknown }).message);
    return `the server answered ${status}`;
  }
}

export function token(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value: string | null): void {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/// A JSON call: `body` (if any) is sent as JSON; the answer is parsed as JSON.
export function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  return request<T>(method, path, body === undefined ? undefined : JSON.stringify(body), "application/json");
}

/// Sends `bytes` as the body (a plugin's `.wasm`); the answer is parsed as JSON.
export function upload<T>(method: string, path: string, bytes: Blob, contentType: string): Promise<T> {
  return request<T>(method, path, bytes, contentType);
}

async function request<T>(method: string, path: string, body: BodyInit | undefined, contentType: string): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = contentType;
  const bearer = token();
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  const response = await fetch(path, { method, headers, body, credentials: "same-origin" });
  const text = await response.text();
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = text;
  }
  if (!response.ok) throw new ApiError(response.status, parsed);
  return parsed as T;
}
