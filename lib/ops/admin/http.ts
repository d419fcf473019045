import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomBytes } from 'node:crypto';
import { jsonText } from '../../common/json-text.js';
import { withoutTrailingSlashes } from '../../common/slashes.js';

/**
 * The request as the admin reads it: Node's `IncomingMessage` plus what `@nestjs/platform-express` adds (a parsed
 * `body`, `secure`, `originalUrl`) and what an authentication guard may set (`user`).
 */
export interface AdminRequest extends IncomingMessage {
  /** The body a body parser already read (an object); when absent, the admin reads the body itself (at most 16 KiB). */
  body?: unknown;
  /**
   * The authenticated user, as the guard or an authentication middleware set it: the CSRF token is bound to it (a
   * string or number, or its `id`, `sub`, `username` or `email`).
   */
  user?: unknown;
  /** Whether the request came over HTTPS (Express' `req.secure`): the CSRF cookie is then `Secure`. */
  secure?: boolean;
  /** The URL before Express' routing trimmed the mount path; the admin falls back to `url`. */
  originalUrl?: string;
}

/** The response the admin writes to: Node's `ServerResponse` (Express' response extends it). */
export type AdminResponse = ServerResponse;

/** Largest request body the admin reads itself (when no body parser ran): a CSRF token form is tiny. */
const MAX_BODY_BYTES = 16 * 1024;

/**
 * Security headers of every admin response. The page has no script at all: `default-src 'none'` forbids scripts,
 * and the one inline stylesheet is allowed by a per-response nonce, so injected markup can neither run nor restyle.
 */
export function securityHeaders(styleNonce?: string): Record<string, string> {
  return {
    'Content-Security-Policy': [
      "default-src 'none'",
      `style-src ${styleNonce ? `'nonce-${styleNonce}'` : "'none'"}`,
      "img-src 'self'",
      "form-action 'self'",
      "frame-ancestors 'none'",
      "base-uri 'none'",
    ].join('; '),
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': 'DENY',
    'Referrer-Policy': 'same-origin',
    'Cache-Control': 'no-store',
    'Cross-Origin-Resource-Policy': 'same-origin',
  };
}

/** A fresh nonce for the page's inline stylesheet. */
export function newNonce(): string {
  return randomBytes(16).toString('base64url');
}

/** Writes a complete response (status, security headers, body). */
export function send(
  res: AdminResponse,
  status: number,
  contentType: string,
  body: string,
  headers: Record<string, string> = {},
): void {
  // Already answered: a request cut off by the deadline (`UniqueJobsAdminDeadline`) whose handler ends later.
  if (res.headersSent) return;
  res.statusCode = status;
  for (const [name, value] of Object.entries({ ...securityHeaders(), ...headers })) res.setHeader(name, value);
  res.setHeader('Content-Type', contentType);
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}

/**
 * JSON with `<`, `>` and `&` escaped, so even a mis-sniffed response cannot be read as markup. Indented, but only the
 * first levels ({@link jsonText}): deeply nested job data would otherwise make an answer hundreds of times its size.
 */
export function safeJson(value: unknown): string {
  return jsonText(value, { indent: 2 }).text.replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026');
}

/** Writes a JSON response. */
export function sendJson(res: AdminResponse, status: number, value: unknown): void {
  send(res, status, 'application/json; charset=utf-8', safeJson(value));
}

/** A `303 See Other` to a same-origin path (after a form POST). */
export function redirect(res: AdminResponse, location: string): void {
  if (!location.startsWith('/') || location.startsWith('//')) throw new Error(`refusing to redirect to ${location}`);
  send(res, 303, 'text/plain; charset=utf-8', 'See Other', { Location: location });
}

/** The cookies of a request, parsed from its `Cookie` header (first occurrence of a name wins). */
export function parseCookies(header: string | undefined): Map<string, string> {
  const cookies = new Map<string, string>();
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    const name = part.slice(0, eq).trim();
    let value = part.slice(eq + 1).trim();
    if (value.startsWith('"') && value.endsWith('"') && value.length >= 2) value = value.slice(1, -1);
    if (!cookies.has(name)) cookies.set(name, value);
  }
  return cookies;
}

/**
 * The request's pathname without the last `depth` segments: the admin's mount point as the browser sees it (global
 * prefix included), for links and the cookie path.
 */
export function mountPath(req: AdminRequest, depth: number): string {
  const url = req.originalUrl ?? req.url ?? '/';
  const pathname = withoutTrailingSlashes(url.startsWith('/') ? url.split('?')[0] : absoluteFormPath(url));
  const segments = pathname.split('/');
  return segments.slice(0, Math.max(1, segments.length - depth)).join('/') || '/';
}

/** The path of an absolute-form target (`http://host/admin?x` → `/admin`); `/` when it is not a URL. */
function absoluteFormPath(target: string): string {
  try {
    return new URL(target).pathname;
  } catch {
    return '/';
  }
}

/** One query or form value as a string (the first of repeated values; `undefined` for anything else). */
export function stringParam(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (Array.isArray(value) && typeof value[0] === 'string') return value[0];
  return undefined;
}

/**
 * The request body as an object: what a body parser produced, else read here (urlencoded or JSON, at most 16 KiB).
 * Anything else is an empty object.
 */
export async function bodyOf(req: AdminRequest): Promise<Record<string, unknown>> {
  if (req.body !== undefined) {
    return typeof req.body === 'object' && req.body !== null ? (req.body as Record<string, unknown>) : {};
  }
  if (req.readableEnded) return {};
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new Error('request body too large');
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  const type = String(req.headers['content-type'] ?? '').toLowerCase();
  let parsed: Record<string, unknown> = {};
  if (type.startsWith('application/x-www-form-urlencoded')) {
    parsed = Object.fromEntries(new URLSearchParams(text));
  } else if (type.startsWith('application/json') && text.trim() !== '') {
    const value: unknown = JSON.parse(text);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) parsed = value as Record<string, unknown>;
  }
  req.body = parsed;
  return parsed;
}
